#!/usr/bin/env bash
# Install everything osworld-gym and its tests need on a Debian 12 machine; idempotent.
# Sourced by scripts/test.sh and scripts/demo.sh (and thus by .ci/run).
set -euo pipefail

APT_PACKAGES=(
  # the local desktop: X server, window manager, sandbox, window control, recording
  xvfb openbox bubblewrap wmctrl x11-utils xdotool xclip ffmpeg
  # opening a file with its default app (MIME type, default-app lookup)
  xdg-utils file
  # apps the built-in tasks use
  xterm mousepad libreoffice-calc libreoffice-writer libreoffice-impress chromium vlc
  # accessibility tree (AT-SPI) for /accessibility
  at-spi2-core python3-pyatspi dbus-x11
  # fonts so screenshots have glyphs; process tools the tests use
  fonts-dejavu-core procps psmisc
  # the "ubuntu" desktop profile (OSWorld's Ubuntu 22.04 look): top bar and dock, Yaru themes,
  # GNOME Terminal (Ctrl+Alt+T, OSWorld's /terminal), Nautilus (tasks launch it), dconf for
  # gsettings. Side effects: x-terminal-emulator becomes gnome-terminal (nothing here uses it;
  # Ctrl+Alt+T is bound explicitly) and folders open in Nautilus; text stays in mousepad.
  tint2 yaru-theme-gtk yaru-theme-icon gnome-terminal nautilus dconf-cli
  # to bootstrap uv where it is missing
  python3 python3-venv
  # docker provider (daemon, offline base image) and the VNC test server
  docker.io debootstrap x11vnc
)

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

if ! command -v uv >/dev/null 2>&1; then
  echo "install.sh: installing uv from PyPI into ~/.local/uv-venv" >&2
  python3 -m venv "$HOME/.local/uv-venv"
  "$HOME/.local/uv-venv/bin/pip" install -q uv
  export PATH="$HOME/.local/uv-venv/bin:$PATH"
fi

uv sync --frozen --quiet
