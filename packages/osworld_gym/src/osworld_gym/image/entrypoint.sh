#!/bin/sh
# PID 1 of an osworld-gym desktop container (copied into the image by `osworld-gym image build`).
#
# The host bind-mounts its private run directory at /run/osworld. It holds `token` (the guest's
# bearer token) and, unless the owner watchdog is off, `owner.lock`, on which the owning Python
# process holds an exclusive flock for as long as it lives.
#
# 1. The desktop user `user` takes the uid/gid owning the run directory, so that the host user
#    can connect to the guest's 0600 unix socket; a root-owned run directory is given to `user`.
# 2. The guest server starts as `user`, listening on /run/osworld/guest.sock, and supervises
#    Xvfb, openbox and the apps. Its log goes to /run/osworld/guest.log (readable on the host).
# 3. The watchdog blocks on owner.lock. When the owner dies, however it dies, the kernel drops
#    its lock; the watchdog wakes and stops the guest, and Docker removes the exited container.
# 4. SIGTERM/SIGINT/SIGHUP (docker stop) are forwarded to the guest, which shuts down cleanly.
#
# Not yet here (issue 17; the local provider has it, see providers/sandbox.py): judge/player
# separation. In this image the guest, Xvfb and the apps are all `user`, who also has a real
# sudo with a known password, so an agent in a docker desktop can signal the guest, read
# /run/osworld/token and forge answers. Doing it needs: the guest started as root with
# `--player-uid 1000 --runtime-dir /run/user/1000`, `user` removed from sudo (the sudo shim of
# guest/shims instead), /run/osworld root-owned 0700 with the host connecting as root, and a
# cgroup/`--memory`/`--pids-limit` for the container (docker's own flags cover the limits).
set -eu
run=/run/osworld
[ -d "$run" ] && [ -f "$run/token" ] || { echo "no $run/token: the host must mount its run dir" >&2; exit 2; }
exec >>"$run/guest.log" 2>&1

uid=$(stat -c %u "$run")
gid=$(stat -c %g "$run")
if [ "$uid" = 0 ]; then
  chown user:user "$run" "$run/token"
elif [ "$uid" != "$(id -u user)" ]; then
  groupmod -o -g "$gid" user
  usermod -o -u "$uid" user
  chown user:user /home/user
fi

setpriv --reuid=user --regid=user --init-groups -- \
  env HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash \
  /opt/osworld-gym/bin/python -m osworld_gym.guest --uds "$run/guest.sock" \
  --token-file "$run/token" --start-x --display :0 --home /home/user --clean-tmp "$@" &
guest=$!

trap 'kill -TERM "$guest" 2>/dev/null || true' TERM INT HUP
if [ -e "$run/owner.lock" ]; then
  ( flock "$run/owner.lock" true && echo "entrypoint: the owning process is gone; stopping" \
    && kill -TERM "$guest" 2>/dev/null ) &
fi

status=0
while kill -0 "$guest" 2>/dev/null; do
  wait "$guest" || status=$?
done
exit "$status"
