"""What goes into our desktop image, layer by layer: the one source of truth for its Dockerfile.

The layers, cheapest to change last, so that a rebuild after a code change only redoes the
last one:

1. the base: a ``debootstrap --variant=minbase`` Debian rootfs imported into Docker (offline
   friendly), or any Debian bookworm image such as ``debian:bookworm-slim``;
2. the desktop system, after the security and updates archives are added and the base is
   upgraded: Xvfb, openbox, D-Bus, window tools, Python, real ``sudo``, CLI tools, fonts;
3. the apps of the chosen set (:data:`APPS`);
4. the desktop user ``user`` (uid 1000, home ``/home/user``; no sudo rights: ``sudo`` is the
   guest's shim, which runs the command as ``user``, as in the local sandbox);
5. the guest's Python dependencies, installed by pip from wheels downloaded on the host, and
   the task python (:data:`TASK_PYTHON`, the same pinned venv as the local sandbox's);
6. osworld-gym itself, from a wheel built from this source tree;
7. the manifest (:mod:`osworld_gym.providers.manifest`): what the image offers tasks, probed
   inside it, read back by the docker provider and by task classification;
8. the entrypoint (:file:`entrypoint.sh`): the guest as root (the judge) with the apps as
   ``user`` (the player), owner watchdog.

>>> "xterm" in APPS["minimal"] and "chromium" in APPS["full"]
True
>>> "FROM ${BASE}" in render_dockerfile("minimal")
True
"""

from __future__ import annotations

from pathlib import Path

from osworld_gym import __version__

#: Where the manifest goes and how its probe learns the app set (plain strings here: the image
#: floor sits below the providers, whose :mod:`~osworld_gym.providers.manifest` reads them).
MANIFEST_PATH = "/etc/osworld-gym/manifest.json"
APP_SET_ENV = "OSWORLD_GYM_APP_SET"

#: Image repository of the desktop images; the tag is ``<version>-<apps>``.
REPOSITORY = "osworld-gym"
#: Tag of the base image imported from our debootstrap tarball.
BASE_TAG = "osworld-gym/debian:bookworm-minbase"
#: Where the image keeps osworld-gym's virtual environment.
VENV = "/opt/osworld-gym"
#: An empty X authority file: python-xlib refuses to connect when it finds none at all.
XAUTHORITY = f"{VENV}/Xauthority"
#: The task-author Python (``osworld_gym.guest.task_python``'s default venv, where
#: ``scripts/install.sh`` puts it on the local sandbox): pyautogui for OSWorld's task steps.
TASK_PYTHON = "/opt/osworld-gym-task-python"
#: Labels every image and container of ours carries (cleanup only ever touches these).
LABEL_IMAGE = "osworld-gym.image"
LABEL_APPS = "osworld-gym.apps"
LABEL_VERSION = "osworld-gym.version"
LABEL_INPUTS = "osworld-gym.inputs"

#: The desktop itself, whatever the apps (Debian bookworm package names).
SYSTEM_PACKAGES: tuple[str, ...] = (
    # X server, window manager, session bus, window and input tools the guest calls
    "xvfb",
    "openbox",
    "dbus",
    "dbus-daemon",
    "wmctrl",
    "x11-utils",
    "xdotool",
    "xdg-utils",
    # a file's MIME type from its name (an empty notes.txt is otherwise "inode/x-empty", which
    # no app opens)
    "shared-mime-info",
    "libfile-mimeinfo-perl",
    # the guest's Python (a venv with pip from ensurepip), and tasks' `python3 -c ...`;
    # tkinter for the task python's pyautogui (guest/task_python.py)
    "python3",
    "python3-venv",
    "python3-tk",
    # what tasks expect of a desktop: real sudo, process tools, certificates, curl, and `file`,
    # through which xdg-open finds a file's MIME type (and so the app that opens it)
    "sudo",
    "procps",
    "psmisc",
    "ca-certificates",
    "curl",
    "file",
    # command-line tools the os and terminal tasks use
    "git",
    "unzip",
    "zip",
    "bc",
    "openssh-client",
    "xz-utils",
    "bzip2",
    "sqlite3",
    "jq",
    # fonts: the same as the local desktop's, so that pages and dialogs lay out the same way
    # (oracles click at pixel positions)
    "fonts-dejavu-core",
    "fonts-dejavu-extra",
    "fonts-liberation2",
    "fonts-droid-fallback",
    "fonts-noto-mono",
    # the "ubuntu" desktop profile (``--wm ubuntu``, the default): panels, themes, GNOME
    # Terminal and Nautilus, GSettings over dconf
    "tint2",
    "yaru-theme-gtk",
    "yaru-theme-icon",
    "gnome-terminal",
    "nautilus",
    "dconf-cli",
    "libglib2.0-bin",
)

#: App sets: ``minimal`` runs the os and text-editor tasks; ``full`` the office, browser and
#: media tasks too (and the accessibility tree and screen recording).
APPS: dict[str, tuple[str, ...]] = {
    "minimal": ("xterm", "mousepad"),
    "full": (
        "xterm",
        "mousepad",
        "libreoffice-common",
        "libreoffice-calc",
        "libreoffice-writer",
        "libreoffice-impress",
        # LibreOffice as on OSWorld's Ubuntu image: GTK3 widgets (the guest selects them) and
        # the Elementary icons LibreOffice picks on GNOME
        "libreoffice-gtk3",
        "libreoffice-style-elementary",
        "chromium",
        "vlc",
        "ffmpeg",
        "socat",
        "xclip",
        "at-spi2-core",
        "python3-pyatspi",
        # whole OSWorld domains (GIMP, Thunderbird) and Ubuntu's PDF viewer
        "gimp",
        "thunderbird",
        "evince",
    ),
}


#: Thunderbird's system-wide preferences (Debian reads ``/etc/thunderbird/pref/*.js`` for every
#: profile), as ``scripts/install.sh`` writes them: no in-app notifications, which Thunderbird
#: 153 uses to open a donation tab a few seconds after start (OSWorld's Thunderbird 115 had
#: none; offline the tab says "Server Not Found" and moves the folder list down).
THUNDERBIRD_PREFS = 'pref("mail.inappnotifications.enabled", false);'
THUNDERBIRD_PREFS_FILE = "/etc/thunderbird/pref/osworld-gym.js"


def default_tag(apps: str = "minimal") -> str:
    """The tag ``osworld-gym image build --apps APPS`` gives its image by default.

    >>> default_tag("full").endswith("-full")
    True
    """
    if apps not in APPS:
        raise ValueError(f"unknown app set {apps!r}; choose one of {sorted(APPS)}")
    return f"{REPOSITORY}:{__version__}-{apps}"


def entrypoint_script() -> str:
    return Path(__file__).with_name("entrypoint.sh").read_text()


def _apt(packages: tuple[str, ...]) -> str:
    return (
        "RUN apt-get update \\\n"
        " && apt-get install -y --no-install-recommends \\\n      " + " ".join(packages) + " \\\n"
        " && rm -rf /var/lib/apt/lists/*"
    )


def render_dockerfile(apps: str) -> str:
    """The Dockerfile for app set ``apps``; the build context holds ``wheels/deps/`` (the
    dependency wheels and ``requirements.txt``), ``wheels/osworld_gym-*.whl`` and
    ``entrypoint.sh``."""
    if apps not in APPS:
        raise ValueError(f"unknown app set {apps!r}; choose one of {sorted(APPS)}")
    return f"""\
# Generated by osworld_gym.image.recipe for `osworld-gym image build`; do not edit.
ARG BASE={BASE_TAG}
FROM ${{BASE}}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8

# security and point-release updates (a debootstrap base knows only the release itself; its
# security archive is taken to be the mirror's sibling debian-security)
RUN if ! grep -rqs -- '-security' /etc/apt/sources.list /etc/apt/sources.list.d/; then \\
      mirror=$(awk '/^deb /{{print $2; exit}}' /etc/apt/sources.list) \\
      && suite=$(awk '/^deb /{{print $3; exit}}' /etc/apt/sources.list) \\
      && echo "deb $mirror $suite-updates main" >> /etc/apt/sources.list \\
      && echo "deb ${{mirror%/debian}}/debian-security $suite-security main" \\
         >> /etc/apt/sources.list; \\
    fi

# the desktop system, with the base brought up to date
RUN apt-get update && apt-get -y upgrade && rm -rf /var/lib/apt/lists/*
{_apt(SYSTEM_PACKAGES)}

# apps: {apps}
{_apt(APPS[apps])}

# Thunderbird's preferences for every profile (none where it is not installed)
RUN if [ -d /etc/thunderbird ]; then \\
      echo '{THUNDERBIRD_PREFS}' > {THUNDERBIRD_PREFS_FILE}; fi

# the desktop user (the player): no sudo group; `sudo` is the guest's shim (below), which runs
# the command as the user, as in the local sandbox (password kept for OSWorld's tasks' `sudo -S`)
RUN groupadd -g 1000 user \\
 && useradd -u 1000 -g user -M -d /home/user -s /bin/bash user \\
 && echo 'user:password' | chpasswd \\
 && install -d -o user -g user -m 0755 /home/user \\
 && install -d -m 0755 /run/osworld

# the guest's dependencies (wheels downloaded on the host: no index is needed here)
COPY wheels/deps /tmp/wheels/deps
RUN python3 -m venv {VENV} \\
 && {VENV}/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels/deps \\
      -r /tmp/wheels/deps/requirements.txt \\
 && rm -rf /tmp/wheels && touch {XAUTHORITY}

# the task python: what OSWorld's setup/postconfig/evaluator commands import (pyautogui), pinned
# as on the local sandbox (guest/task_python_requirements.txt); the guest puts it first on the
# PATH of task commands only
COPY wheels/task /tmp/wheels/task
RUN python3 -m venv {TASK_PYTHON} \\
 && {TASK_PYTHON}/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels/task \\
      -r /tmp/wheels/task/requirements.txt \\
 && cp /tmp/wheels/task/requirements.txt {TASK_PYTHON}/requirements.txt \\
 && rm -rf /tmp/wheels && touch {TASK_PYTHON}/Xauthority

# osworld-gym itself; google-chrome names Chromium as in our local sandbox
COPY wheels/*.whl /tmp/wheels/
RUN {VENV}/bin/pip install --no-cache-dir --no-index --no-deps /tmp/wheels/*.whl \\
 && rm -rf /tmp/wheels \\
 && pkg="$({VENV}/bin/python -c \\
      'import osworld_gym as m, os; print(os.path.dirname(m.__file__))')" \\
 && shims="$pkg/guest/shims" \\
 && chmod 0755 "$shims"/google-chrome* "$shims"/sudo "$shims"/libexec/* \\
 && ln -sf "$shims/sudo" /usr/local/bin/sudo \\
 && ln -sf "$shims/google-chrome" /usr/local/bin/google-chrome \\
 && ln -sf "$shims/google-chrome-stable" /usr/local/bin/google-chrome-stable

# what this image offers tasks (apps, programs, desktop profiles), probed here where they are
# installed; the docker provider reads it back without starting the image
RUN {APP_SET_ENV}={apps} {VENV}/bin/python -m osworld_gym.providers.manifest {MANIFEST_PATH}

COPY entrypoint.sh /usr/local/bin/osworld-gym-entrypoint
RUN chmod 0755 /usr/local/bin/osworld-gym-entrypoint
ENV XAUTHORITY={XAUTHORITY}
ENTRYPOINT ["/usr/local/bin/osworld-gym-entrypoint"]
CMD ["--screen", "1920x1080x24"]
LABEL {LABEL_IMAGE}=desktop {LABEL_APPS}={apps} {LABEL_VERSION}={__version__}
"""
