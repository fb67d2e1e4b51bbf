#!/usr/bin/env bash
# Real GNOME Shell, measured: Debian 12's gnome-shell 43 in X11 mode on Xvfb 1920x1080, in a
# throwaway docker container (nothing is installed on the host), dressed as Ubuntu 22.04 (Yaru
# shell/GTK/icon themes, Dash to Dock fixed on the left, the ubuntu profile's wallpaper).
#
#   sudo benchmarks/try_gnome_shell.sh [OUT_DIR]       (default ./gnome-shell-try)
#   BASE=osworld-gym/debian:bookworm-minbase sudo -E benchmarks/try_gnome_shell.sh
#
# Needs dockerd and apt access to Debian's mirrors from the build. Writes screenshots
# (overview, desktop, terminal), gnome-shell.log, per-process memory and result.txt to OUT_DIR
# and prints the figures: startup to a usable shell, PSS/RSS of every process in the
# container idle and with GNOME Terminal open (Ctrl+Alt+T), idle CPU. The script inside the
# container is benchmarks/gnome_shell/inside.sh; README "Desktop profiles" has what it found.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
OUT=$(realpath -m "${1:-gnome-shell-try}")
BASE=${BASE:-debian:bookworm}
IMAGE=${IMAGE:-osworld-gym-try-gnome:latest}
mkdir -p "$OUT"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$HERE/gnome_shell/inside.sh" "$ctx/inside.sh"
cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gnome-shell gnome-terminal yaru-theme-gtk yaru-theme-icon yaru-theme-gnome-shell \
      gnome-shell-extension-dashtodock webp-pixbuf-loader xvfb xauth dbus dbus-x11 \
      imagemagick x11-utils xdotool procps fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
# Ubuntu's session mode, as Ubuntu ships it in spirit: the Yaru shell theme and the dock
COPY inside.sh /inside.sh
RUN mkdir -p /usr/share/gnome-shell/modes && printf '%s\n' \
      '{"parentMode": "user", "stylesheetName": "Yaru/gnome-shell.css",' \
      ' "enabledExtensions": ["dash-to-dock@micxgx.gmail.com"]}' \
      > /usr/share/gnome-shell/modes/ubuntu.json
DOCKERFILE
t0=$(date +%s)
docker build -q -t "$IMAGE" "$ctx" >/dev/null
echo "image $IMAGE built in $(( $(date +%s) - t0 )) s" \
     "($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1/1e9}'))"

# the ubuntu profile's wallpaper, so both desktops wear the same one
py=("$REPO/.venv/bin/python")
[ -x "${py[0]}" ] || py=(uv run --no-sync python)
( cd "$REPO" && "${py[@]}" -c "
import sys
from PIL import Image
from osworld_gym.guest.profiles.wallpaper import gradient
Image.fromarray(gradient(1920, 1080)).save(sys.argv[1])" "$OUT/wallpaper.png" )

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# SYS_PTRACE: root in the container may read the user's /proc/PID/smaps_rollup (PSS)
docker run --rm --cap-add SYS_PTRACE -v "$OUT:/out" "$IMAGE" /inside.sh
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
