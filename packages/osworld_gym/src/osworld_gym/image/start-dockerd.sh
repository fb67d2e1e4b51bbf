#!/usr/bin/env bash
# Make sure a Docker daemon answers, starting Debian's dockerd if none does; for CI and machines
# without systemd. Idempotent; starting needs root. Waits for the socket (no fixed sleeps).
#
#   bash start-dockerd.sh            # exit 0 once `docker info` works
set -euo pipefail
log=${DOCKERD_LOG:-/var/log/osworld-gym-dockerd.log}
timeout_s=${DOCKERD_TIMEOUT:-60}

ready() { docker info >/dev/null 2>&1; }

ready && exit 0
command -v dockerd >/dev/null || { echo "start-dockerd: dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "start-dockerd: the daemon is not running and starting it needs root" >&2; exit 1; }

if [ -d /run/systemd/system ] && systemctl start docker 2>/dev/null; then
  :
elif [ ! -S /var/run/docker.sock ] || ! ready; then
  # a socket left by a dead daemon would make dockerd refuse to start
  pgrep -x dockerd >/dev/null || rm -f /var/run/docker.sock /var/run/docker.pid
  pgrep -x dockerd >/dev/null || setsid nohup dockerd >"$log" 2>&1 < /dev/null &
fi

deadline=$((SECONDS + timeout_s))
until ready; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "start-dockerd: no Docker daemon after ${timeout_s} s; log:" >&2
    tail -n 30 "$log" >&2 2>/dev/null || true
    exit 1
  fi
  sleep 0.2
done
