"""Which Debian package ships each program the desktop or a task runs, and the desktop's PATH.

Data shared by task classification (:mod:`osworld_gym.support.classifier`: the install line
of a reason) and ``osworld-gym doctor`` (:mod:`osworld_gym.doctor`), which checks it.

>>> PACKAGES["socat"], PACKAGES["Xvfb"]
('socat', 'xvfb')
"""

from __future__ import annotations

from osworld_gym.guest.profiles import UBUNTU_PROGRAMS

#: PATH inside the desktop (the sandbox's, less our shims directory).
DESKTOP_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Program -> the Debian 12 package that ships it. Every program the desktop or a task runs must
#: be here, ``scripts/install.sh`` must name every package, and ``dpkg -S`` must agree (tests).
PACKAGES: dict[str, str] = {
    # the desktop
    "bwrap": "bubblewrap",
    "Xvfb": "xvfb",
    "openbox": "openbox",
    "dbus-daemon": "dbus-daemon",
    "wmctrl": "wmctrl",
    "setpriv": "util-linux",
    "xdg-open": "xdg-utils",
    "xdg-mime": "xdg-utils",
    "file": "file",
    "mimetype": "libfile-mimeinfo-perl",
    # apps
    "xterm": "xterm",
    "mousepad": "mousepad",
    "libreoffice": "libreoffice-common",
    "soffice": "libreoffice-common",
    "chromium": "chromium",
    "vlc": "vlc",
    "ffmpeg": "ffmpeg",
    "socat": "socat",
    "python3": "python3",
    "gimp": "gimp",
    "thunderbird": "thunderbird",
    "nautilus": "nautilus",
    "evince": "evince",
    # command-line tools tasks use in setup steps and checks
    "bash": "bash",
    "sh": "dash",
    "awk": "mawk",
    "cat": "coreutils",
    "chmod": "coreutils",
    "cmp": "diffutils",
    "diff": "diffutils",
    "cp": "coreutils",
    "curl": "curl",
    "cut": "coreutils",
    "find": "findutils",
    "xargs": "findutils",
    "git": "git",
    "grep": "grep",
    "gzip": "gzip",
    "head": "coreutils",
    "ls": "coreutils",
    "mkdir": "coreutils",
    "mktemp": "coreutils",
    "mv": "coreutils",
    "pgrep": "procps",
    "pkill": "procps",
    "ps": "procps",
    "readlink": "coreutils",
    "rm": "coreutils",
    "sed": "sed",
    "seq": "coreutils",
    "sha256sum": "coreutils",
    "sleep": "coreutils",
    "sort": "coreutils",
    "ssh": "openssh-client",
    "stat": "coreutils",
    "tail": "coreutils",
    "tar": "tar",
    "touch": "coreutils",
    "tr": "coreutils",
    "uniq": "coreutils",
    "wc": "coreutils",
    "timeout": "coreutils",
    "env": "coreutils",
    "unzip": "unzip",
    "zip": "zip",
    "jq": "jq",
    "which": "debianutils",
    "killall": "psmisc",
    # the "ubuntu" desktop profile
    **UBUNTU_PROGRAMS,
}
