"""Which guest paths ``/file`` and ``/setup/upload`` may touch, and how a file is handed out.

OSWorld's getters ask for absolute paths in the desktop user's home (``/home/user/x.xlsx``)
and setup steps write there or to ``/tmp``; nothing legitimate needs more. So:

* the *requested* path (``~`` expanded, relative to home, ``..`` folded) must lie in the home
  directory or ``/tmp``; anything else is refused with **403** -- that is the task's (or the
  caller's) request, not the agent's doing;
* the *file found there* must resolve (symlinks followed) inside those roots, be a regular file,
  be readable and be at most :data:`MAX_FILE_BYTES`: what the agent left at a result path is
  its own work, so a directory, a fifo, a ``chmod 000`` file, a symlink out of the desktop or a
  2 GiB sparse file is answered **422** (413 when too large) with the reason, which the host
  scores 0 instead of calling it an infrastructure error.

The file is opened (``O_NONBLOCK``, so a fifo cannot hang the request) and checked with
``fstat`` on that descriptor *before* any status line is sent, so a 200 always comes with the
file that was checked.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path
from typing import BinaryIO

#: Largest file ``/file`` hands out; a bigger one is the agent's doing (the host caps lower).
MAX_FILE_BYTES = 1 << 30
#: Roots besides the desktop user's home that guest file transfers may use.
EXTRA_ROOTS = ("/tmp",)

#: status of a refused file the agent could have caused (the host scores those 0)
UNUSABLE = 422
TOO_LARGE = 413
OUTSIDE = 403


class FileRefused(Exception):
    """The path may not be served or written; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def allowed_roots(home: Path | str) -> tuple[str, ...]:
    return (posixpath.normpath(str(home)), *EXTRA_ROOTS)


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def requested_path(raw: str, home: Path | str) -> Path:
    """``raw`` as an absolute path inside the allowed roots (lexically), else 403.

    >>> str(requested_path("~/Desktop/a.txt", "/home/user"))
    '/home/user/Desktop/a.txt'
    >>> requested_path("/home/user/../../etc/shadow", "/home/user")
    Traceback (most recent call last):
    ...
    osworld_gym.guest.files.FileRefused: /etc/shadow is outside the desktop user's home and /tmp
    """
    if "\x00" in raw:
        raise FileRefused(400, "path contains a NUL byte")
    home = str(home)
    if raw == "~" or raw.startswith("~/"):
        raw = home + raw[1:]
    elif not raw.startswith("/"):
        raw = posixpath.join(home, raw)
    path = posixpath.normpath(raw)
    if not _within(path, allowed_roots(home)):
        raise FileRefused(OUTSIDE, f"{path} is outside the desktop user's home and /tmp")
    return Path(path)


def open_for_reading(path: Path, home: Path | str,
                     max_bytes: int = MAX_FILE_BYTES) -> tuple[BinaryIO, int]:
    """Open ``path`` (already checked by :func:`requested_path`) as ``(file, size)``.

    Raises:
        FileRefused: 404 if nothing is there, 422/413 if what is there is not a readable
            regular file within the roots and the size cap.
    """
    real = os.path.realpath(path)
    if not os.path.lexists(path):
        raise FileRefused(404, f"file not found: {path}")
    if not _within(real, allowed_roots(os.path.realpath(home))) and \
            not _within(real, allowed_roots(home)):
        raise FileRefused(UNUSABLE, f"{path} resolves to {real}, outside the desktop user's "
                                    "home and /tmp")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileRefused(UNUSABLE, f"{path} is a dangling symlink") from None
    except IsADirectoryError:
        raise FileRefused(UNUSABLE, f"{path} is a directory, not a file") from None
    except OSError as e:
        raise FileRefused(UNUSABLE, f"{path} cannot be opened: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused(UNUSABLE, f"{path} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(UNUSABLE, f"{path} is not a regular file (mode {st.st_mode:o})")
        if st.st_size > max_bytes:
            raise FileRefused(TOO_LARGE, f"{path} is {st.st_size} bytes, over the "
                                         f"{max_bytes} byte limit")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def upload_target(raw: str, home: Path | str) -> Path:
    """Where ``/setup/upload`` may write ``raw``: inside the roots, its parent too once
    symlinks are followed (403 otherwise), and not a directory (400)."""
    path = requested_path(raw, home)
    parent = os.path.realpath(path.parent)
    if not (_within(parent, allowed_roots(os.path.realpath(home))) or
            _within(parent, allowed_roots(home))):
        raise FileRefused(OUTSIDE, f"{path.parent} resolves to {parent}, outside the desktop "
                                   "user's home and /tmp")
    if path.is_dir():
        raise FileRefused(400, f"{path} is a directory")
    return path
