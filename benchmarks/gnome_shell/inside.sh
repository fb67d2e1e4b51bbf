#!/bin/bash
# Runs as root inside benchmarks/try_gnome_shell.sh's container: Xvfb, a system bus, then GNOME
# Shell (X11 mode, Ubuntu-like session mode) as `user` in its own session bus; measures it.
set -u
OUT=${OUT:-/out}
mkdir -p "$OUT"
now() { date +%s.%N; }
# gnome-shell 43 asks logind over the system bus whenever /run/systemd/seats exists (systemd's
# tmpfiles made it while installing) and stops at "Could not connect" without it: with the
# directory gone it uses its own LoginManagerDummy (no logind, no screen lock).
rm -rf /run/systemd/seats
# Its panel (power, network, ...) builds D-Bus proxies on the system bus, which must exist; a
# bare bus will do, the services behind the names (UPower, NetworkManager, ...) stay absent.
mkdir -p /run/dbus && dbus-daemon --system --fork
id user >/dev/null 2>&1 || useradd -m -u 1000 -s /bin/bash user
install -d -m 700 -o user -g user /run/user/1000
cat > /home/user/session.sh <<'SESSION'
echo "$DBUS_SESSION_BUS_ADDRESS" > /run/user/1000/bus-address
s() { gsettings set "$@" || echo "gsettings set $* failed" >&2; }
s org.gnome.desktop.interface gtk-theme Yaru
s org.gnome.desktop.interface icon-theme Yaru
s org.gnome.desktop.interface cursor-theme Yaru
s org.gnome.desktop.interface clock-format 24h
s org.gnome.desktop.interface enable-animations false
s org.gnome.desktop.wm.preferences button-layout ':minimize,maximize,close'
s org.gnome.desktop.background picture-uri file:///out/wallpaper.png
s org.gnome.desktop.background picture-options zoom
s org.gnome.desktop.notifications show-banners false
s org.gnome.shell favorite-apps "['org.gnome.Terminal.desktop']"
d=org.gnome.shell.extensions.dash-to-dock
s $d dock-position LEFT; s $d dock-fixed true; s $d extend-height true
s $d dash-max-icon-size 48; s $d disable-overview-on-startup true; s $d show-trash false
s $d show-mounts false
exec gnome-shell --x11 --replace --mode=ubuntu
SESSION
chown user /home/user/session.sh
t0=$(now)
Xvfb :1 -screen 0 1920x1080x24 -nolisten tcp >"$OUT/xvfb.log" 2>&1 &
for _ in $(seq 200); do xdpyinfo -display :1 >/dev/null 2>&1 && break; sleep 0.05; done
t_x=$(now)
ENV="DISPLAY=:1 XDG_RUNTIME_DIR=/run/user/1000 XDG_SESSION_TYPE=x11 XDG_CURRENT_DESKTOP=GNOME \
  LANG=C.UTF-8 GDK_BACKEND=x11"
su user -c "cd ~ && exec env $ENV dbus-run-session -- bash /home/user/session.sh" \
  >"$OUT/gnome-shell.log" 2>&1 &
as_user() {
  su user -c "env $ENV DBUS_SESSION_BUS_ADDRESS=\$(cat /run/user/1000/bus-address 2>/dev/null) $*"
}
shell_prop() {
  as_user gdbus call --session --dest org.gnome.Shell --object-path /org/gnome/Shell \
    --method org.freedesktop.DBus.Properties.Get org.gnome.Shell "$1" 2>/dev/null
}
ready=no
for _ in $(seq 600); do
  shell_prop OverviewActive >/dev/null && { ready=yes; break; }
  sleep 0.1
done
t_shell=$(now)
# "usable": the startup animation is over when the shell's log says it started
for _ in $(seq 300); do
  grep -q "GNOME Shell started" "$OUT/gnome-shell.log" && break
  sleep 0.1
done
t_started=$(now)
sleep 3
import -display :1 -window root "$OUT/gnome-desktop.png"
overview_at_start=$(shell_prop OverviewActive | tr -d '()<>, ')

pss() {  # PSS and RSS (MiB) summed over every process but this script and its tools
  local p=0 r=0 pid comm a b
  for f in /proc/[0-9]*/smaps_rollup; do
    pid=${f#/proc/}; pid=${pid%%/*}
    comm=$(cat /proc/$pid/comm 2>/dev/null) || continue
    case $comm in inside.sh|su|sleep|cat|awk|date|seq|ps) continue;; esac
    read -r a b < <(awk '/^Pss:/{p=$2} /^Rss:/{r=$2} END{print p+0, r+0}' "$f" 2>/dev/null)
    p=$((p + ${a:-0})); r=$((r + ${b:-0}))
  done
  echo "$((p / 1024)) $((r / 1024))"
}
cpu_ticks() { cat /proc/[0-9]*/stat 2>/dev/null | awk '{s += $14 + $15} END {print s}'; }
sleep 2
read -r idle_pss idle_rss < <(pss)
ps -eo pid,rss,comm --sort=-rss > "$OUT/processes-idle.txt"
c0=$(cpu_ticks); sleep 10; c1=$(cpu_ticks)
idle_cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" \
  'BEGIN{printf "%.1f", (b-a)/hz/10*100}')

# Ctrl+Alt+T is gnome-settings-daemon's (gsd-media-keys), which this bare session lacks (started
# alone, it took 76 MiB RSS, registered its accelerators with the shell and still opened nothing on
# an XTest Ctrl+Alt+T): the terminal is launched directly
t_term0=$(now); term=no
as_user gnome-terminal >/dev/null 2>&1 &
for _ in $(seq 300); do
  as_user xdotool search --onlyvisible --class erminal >/dev/null 2>&1 && { term=yes; break; }
  sleep 0.1
done
t_term=$(now)
sleep 3
as_user xdotool type --delay 50 "'ls /'"; as_user xdotool key Return; sleep 1
import -display :1 -window root "$OUT/gnome-terminal.png"
read -r term_pss term_rss < <(pss)
ps -eo pid,rss,comm --sort=-rss > "$OUT/processes-terminal.txt"
as_user xdotool key super; sleep 2
import -display :1 -window root "$OUT/gnome-overview.png"

awk -v t0="$t0" -v tx="$t_x" -v ts="$t_shell" -v tst="$t_started" -v a="$t_term0" \
  -v b="$t_term" -v ready="$ready" -v term="$term" -v ov="$overview_at_start" \
  -v ip="$idle_pss" -v ir="$idle_rss" -v tp="$term_pss" -v tr="$term_rss" -v cpu="$idle_cpu" \
  'BEGIN { printf "shell_answers_dbus=%s\nxvfb_s=%.2f\nshell_dbus_s=%.2f\nshell_started_s=%.2f\n",
           ready, tx - t0, ts - t0, tst - t0;
           printf "overview_active_after_start=%s\n", ov;
           printf "terminal_mapped=%s\nterminal_map_s=%.2f\n", term, b - a;
           printf "idle_pss_mib=%d\nidle_rss_mib=%d\nterminal_pss_mib=%d\nterminal_rss_mib=%d\n",
           ip, ir, tp, tr;
           printf "idle_cpu_percent_of_one_core=%s\n", cpu }' | tee "$OUT/result.txt"
