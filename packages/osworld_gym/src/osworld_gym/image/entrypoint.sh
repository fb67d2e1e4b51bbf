#!/bin/sh
# PID 1 of an osworld-gym desktop container (copied into the image by `osworld-gym image build`).
#
# The host bind-mounts its private run directory at /run/osworld. It holds `token` (the guest's
# bearer token) and, unless the owner watchdog is off, `owner.lock`, on which the owning Python
# process holds an exclusive flock for as long as it lives.
#
# 1. Judge and player apart (README "Threat model"): the guest server (the judge) runs as root,
#    with its state in /run/osworld-judge (0700); it starts Xvfb as root and every app and
#    command of the desktop user `user` (uid 1000) with `setpriv` (no capabilities, no_new_privs),
#    so the player cannot signal, trace or read the guest. The run directory stays the host
#    user's (0700: the player cannot enter it, read the token or replace the socket); the guest
#    hands its socket to that uid. `user` has no sudo: `sudo` is our shim (guest/shims/sudo),
#    which runs the command as `user`, as in the local sandbox. When the host user *is* uid 1000
#    (the player's uid) there is no second identity to give the judge: the guest then runs as
#    `user` and reports `separated: false` in its health.
# 2. The guest server listens on /run/osworld/guest.sock and supervises Xvfb, openbox and the
#    apps. Its log goes to /run/osworld/guest.log (readable on the host).
# 3. The watchdog blocks on owner.lock. When the owner dies, however it dies, the kernel drops
#    its lock; the watchdog wakes and stops the guest, and Docker removes the exited container.
# 4. SIGTERM/SIGINT/SIGHUP (docker stop) are forwarded to the guest, which shuts down cleanly.
#
# Cgroups: Docker mounts the cgroup tree read-only, so on a root host the provider makes the
# desktop's cgroups (memory/pids with a judge reserve, the player's freezer) and binds their
# files below /run/osworld-judge/cgroup; elsewhere there are none, evaluation holds the player
# with SIGSTOP (weaker) and docker's --memory covers the container as a whole.
set -eu
run=/run/osworld
[ -d "$run" ] && [ -f "$run/token" ] || { echo "no $run/token: the host must mount its run dir" >&2; exit 2; }
exec >>"$run/guest.log" 2>&1

# the desktop's cgroups, when the host made them (a root host; see providers/docker.py): this
# script, and so the guest, Xvfb and what the guest starts before it moves a process to the
# player's, joins the judge's; the player's and its freezer stay out of the player's reach
cg=/run/osworld-judge/cgroup
if [ -d "$cg" ]; then
  chmod 0700 /run/osworld-judge
  for f in "$cg"/judge-*.procs; do [ -e "$f" ] && echo $$ > "$f"; done
fi

uid=$(stat -c %u "$run")
gid=$(stat -c %g "$run")
player=$(id -u user)
if [ "$uid" != "$player" ]; then
  chmod 0700 "$run"
  install -d -m 0700 -o root -g root /run/osworld-judge
  install -d -m 0755 /run/user
  env HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash \
    /opt/osworld-gym/bin/python -m osworld_gym.guest --uds "$run/guest.sock" \
    --token-file "$run/token" --uds-owner "$uid:$gid" --start-x --display :0 \
    --home /home/user --clean-tmp --state-dir /run/osworld-judge \
    --player-uid "$player" --player-gid "$(id -g user)" --runtime-dir "/run/user/$player" "$@" &
else
  echo "entrypoint: the host user has the player's uid $player: judge and player NOT separated"
  setpriv --reuid=user --regid=user --init-groups -- \
    env HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash \
    /opt/osworld-gym/bin/python -m osworld_gym.guest --uds "$run/guest.sock" \
    --token-file "$run/token" --start-x --display :0 --home /home/user --clean-tmp "$@" &
fi
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
