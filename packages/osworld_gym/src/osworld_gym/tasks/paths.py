"""Guest paths: relative paths in task JSON are relative to the guest user's home.

OSWorld's guest server runs with ``/home/user`` as its working directory, so task files write
``"path": "setup.sh"`` and mean ``/home/user/setup.sh``. We resolve such paths on the host so the
meaning does not depend on the guest server's working directory.

>>> guest_path("setup.sh")
'/home/user/setup.sh'
>>> guest_path("~/Desktop/a.txt"), guest_path("/tmp/x")
('/home/user/Desktop/a.txt', '/tmp/x')
"""

from __future__ import annotations

import posixpath

#: Home directory of the desktop user in every image osworld-gym supports.
GUEST_HOME = "/home/user"


def guest_path(path: str, home: str = GUEST_HOME) -> str:
    """Make ``path`` absolute on the guest: expand ``~`` and anchor relative paths at ``home``.

    >>> guest_path("~"), guest_path("docs/../a.txt", home="/home/alice")
    ('/home/user', '/home/alice/a.txt')
    """
    if path == "~":
        return home
    if path.startswith("~/"):
        path = posixpath.join(home, path[2:])
    elif not path.startswith("/"):
        path = posixpath.join(home, path)
    return posixpath.normpath(path)
