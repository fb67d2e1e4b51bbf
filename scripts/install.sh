#!/usr/bin/env bash
# Install everything osworld-gym and its tests need on a Debian 12 machine; idempotent.
# Sourced by scripts/test.sh and scripts/demo.sh (and thus by .ci/run).
#
#   bash scripts/install.sh                 apt packages, uv, the locked Python environment
#   bash scripts/install.sh --system-only   apt packages only (what tests/osworld_gym/support/test_install.py runs
#                                           in a fresh debootstrap chroot to prove this list)
#
# The list below must cover every program `osworld-gym doctor` checks: the desktop's own and
# every program a built-in task runs, derived from the task JSON (osworld_gym/doctor.py maps
# each program to its package; tests/osworld_gym/support/test_install.py fails when a package here is missing).
set -euo pipefail

APT_PACKAGES=(
  # the local desktop: X server, window manager, session bus, sandbox, window control, recording
  xvfb openbox dbus dbus-daemon bubblewrap util-linux wmctrl x11-utils xdotool xclip ffmpeg
  # opening a file with its default app: xdg-open/xdg-mime, and the MIME type from the file's
  # name (shared-mime-info + mimetype), without which an empty notes.txt is "inode/x-empty"
  # and opens in nothing; `file` for content sniffing
  xdg-utils shared-mime-info libfile-mimeinfo-perl file
  # apps the built-in tasks use; socat forwards Chromium's debugging port for the chrome tasks
  xterm mousepad libreoffice-common libreoffice-calc libreoffice-writer libreoffice-impress
  chromium vlc socat
  # LibreOffice as on OSWorld's Ubuntu image: GTK3 widgets (the desktop selects them with
  # SAL_USE_VCLPLUGIN=gtk3) and the Elementary icons LibreOffice picks on GNOME
  libreoffice-gtk3 libreoffice-style-elementary
  # apps whole OSWorld domains run: GIMP (gimp), Thunderbird (thunderbird), and Ubuntu's PDF
  # viewer (evince: tasks open PDFs; without it they open in GIMP's import dialog)
  gimp thunderbird evince
  # command-line tools the tasks' setup steps and checks run
  bash coreutils diffutils findutils grep sed mawk gzip tar procps psmisc debianutils
  git curl openssh-client jq zip unzip ca-certificates
  # accessibility tree (AT-SPI) for /accessibility
  at-spi2-core python3-pyatspi dbus-x11
  # fonts: the docker image's set (image/recipe.py), so pages and dialogs lay out the same on
  # both desktops (oracles click at pixel positions)
  fonts-dejavu-core fonts-dejavu-extra fonts-liberation2 fonts-droid-fallback fonts-noto-mono
  # the "ubuntu" desktop profile (OSWorld's Ubuntu 22.04 look): top bar and dock, Yaru themes,
  # GNOME Terminal (Ctrl+Alt+T, OSWorld's /terminal), Nautilus (tasks launch it), dconf for
  # gsettings. Side effects: x-terminal-emulator becomes gnome-terminal (nothing here uses it;
  # Ctrl+Alt+T is bound explicitly) and folders open in Nautilus; text stays in mousepad.
  tint2 yaru-theme-gtk yaru-theme-icon gnome-terminal nautilus dconf-cli libglib2.0-bin
  # tasks' own `python3 -c ...` steps, and bootstrapping uv where it is missing; tkinter for
  # the task python's pyautogui (its mouseinfo import fails without it; see below)
  python3 python3-venv python3-tk
  # docker provider (daemon, offline base image) and the VNC test server
  docker.io debootstrap x11vnc
)

system_only=0
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced (a sourcing script's args are its own)
  for arg in "$@"; do
    case "$arg" in
      --system-only) system_only=1 ;;
      *) echo "install.sh: unknown argument $arg (expected --system-only)" >&2; exit 2 ;;
    esac
  done
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install.sh: apt-get install ${missing[*]}" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Thunderbird as on OSWorld's image (Thunderbird 115, before in-app notifications): no donation
# tab a few seconds after start (Thunderbird 153 opens one from its bundled notifications, which
# offline shows "Server Not Found" and moves the folder list down). Debian's Thunderbird reads
# /etc/thunderbird/pref/*.js for every profile; the docker image writes the same
# (osworld_gym/image/recipe.py THUNDERBIRD_PREFS, checked equal by the tests).
tb_prefs='pref("mail.inappnotifications.enabled", false);'
if [ "$(cat /etc/thunderbird/pref/osworld-gym.js 2>/dev/null)" != "$tb_prefs" ]; then
  as_root mkdir -p /etc/thunderbird/pref
  echo "$tb_prefs" | as_root tee /etc/thunderbird/pref/osworld-gym.js >/dev/null
fi

if [ "$system_only" = 1 ]; then
  exit 0
fi

if ! command -v uv >/dev/null 2>&1; then
  echo "install.sh: installing uv from PyPI into ~/.local/uv-venv" >&2
  python3 -m venv "$HOME/.local/uv-venv"
  "$HOME/.local/uv-venv/bin/pip" install -q uv
  export PATH="$HOME/.local/uv-venv/bin:$PATH"
fi

uv sync --frozen --quiet
# venvs made before python3-xlib was overridden away: removing it deleted the `Xlib` files it
# shared with python-xlib, so put python-xlib back whole
if ! uv run --frozen --no-sync python -c "import Xlib.display, Xlib.ext.xfixes" 2>/dev/null; then
  uv sync --frozen --quiet --reinstall-package python-xlib
fi

# The task-author Python inside the desktop (osworld_gym/guest/task_python.py): OSWorld's setup
# and evaluator steps run `python -c "import pyautogui; ..."` (Ctrl+S before scoring, ...), and
# Debian packages no pyautogui. A venv outside /home and /tmp (every sandbox sees it) with the
# pinned requirements; judge-side task commands get it as `python`, agents never do.
task_python=/opt/osworld-gym-task-python
task_reqs=packages/osworld_gym/src/osworld_gym/guest/task_python_requirements.txt
if ! cmp -s "$task_reqs" "$task_python/requirements.txt" 2>/dev/null; then
  echo "install.sh: creating the task python in $task_python" >&2
  uv_bin="$(command -v uv)"
  as_root "$uv_bin" venv --quiet --allow-existing --python /usr/bin/python3 "$task_python"
  as_root "$uv_bin" pip install --quiet --python "$task_python/bin/python" -r "$task_reqs"
  # an Xauthority entry for no display: python-xlib then prints no warning on stdout
  xauth_tmp="$(mktemp)"
  uv run --frozen python -c 'import sys; from pathlib import Path; from osworld_gym.guest.task_python import write_xauthority; write_xauthority(Path(sys.argv[1]))' "$xauth_tmp"
  as_root install -m 0644 "$xauth_tmp" "$task_python/Xauthority"
  rm -f "$xauth_tmp"
  as_root cp "$task_reqs" "$task_python/requirements.txt"
fi
