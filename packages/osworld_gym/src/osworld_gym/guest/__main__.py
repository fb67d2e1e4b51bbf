"""Entry point: ``python -m osworld_gym.guest``.

Example (inside a desktop sandbox)::

    python -m osworld_gym.guest --uds /run/guest.sock --token-file /run/guest.token \\
        --start-x --display :0 --screen 1920x1080x24 --home /home/user --clean-tmp

The process is the desktop's supervisor: it starts Xvfb, a session bus and openbox (with
``--start-x``), adopts every orphaned descendant (child subreaper) and, on SIGTERM/SIGINT, kills
all of them and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from osworld_gym.errors import OSWorldGymError
from osworld_gym.guest import extension_api, osworld_api
from osworld_gym.guest.app import GuestApp, GuestConfig
from osworld_gym.guest.processes import become_subreaper, exit_with_parent
from osworld_gym.guest.profiles import PROFILES
from osworld_gym.guest.screen import keep_frame_buffers
from osworld_gym.guest.server import Router, make_server

log = logging.getLogger("osworld_gym.guest")

TOKEN_ENV = "OSWORLD_GYM_GUEST_TOKEN"


def parse_args(argv: list[str] | None = None) -> GuestConfig:
    p = argparse.ArgumentParser(
        prog="python -m osworld_gym.guest",
        description="osworld-gym guest server (runs inside the desktop)",
    )
    where = p.add_argument_group("listening (one of)")
    where.add_argument("--uds", help="unix socket path to listen on (preferred)")
    where.add_argument("--host", help="loopback address to listen on: 127.0.0.1, localhost, ::1")
    where.add_argument("--port", type=int, help="TCP port (with --host)")
    where.add_argument(
        "--uds-owner",
        metavar="UID:GID",
        help="hand the unix socket to this uid:gid once bound (the host's user "
        "when the guest runs as root)",
    )
    p.add_argument("--token-file", help=f"file with the bearer token (else ${TOKEN_ENV})")
    p.add_argument("--display", default=":0", help="X display (default :0)")
    p.add_argument("--screen", default="1920x1080x24", help="Xvfb screen WxHxDEPTH")
    p.add_argument(
        "--start-x",
        action="store_true",
        help="start Xvfb, a session D-Bus and the window manager as children",
    )
    p.add_argument(
        "--wm",
        choices=(*PROFILES, "none"),
        default="openbox",
        help="desktop profile: openbox (bare, fastest), ubuntu (OSWorld's Ubuntu "
        "22.04 look: top bar, dock, Yaru, GNOME Terminal, dconf), none",
    )
    p.add_argument("--home", default="/home/user", help="the desktop user's home directory")
    p.add_argument(
        "--home-template", help="directory copied into --home (default: the packaged skeleton)"
    )
    p.add_argument("--tmp-dir", help="the desktop's temp directory ($TMPDIR of apps)")
    p.add_argument(
        "--clean-tmp",
        action="store_true",
        help="let a reset empty the temp directory (X11 sockets kept). Only in a "
        "sandbox with a private /tmp: on a shared machine this deletes others' files",
    )
    p.add_argument("--state-dir", help="private directory for logs, bus socket, recordings")
    p.add_argument(
        "--exit-with-parent", action="store_true", help="exit when the parent process dies"
    )
    ident = p.add_argument_group("judge and player (the guest must run as namespace root)")
    ident.add_argument(
        "--player-uid",
        type=int,
        help="run apps and everything the agent can "
        "start as this uid (the guest, X and evaluation stay the judge's)",
    )
    ident.add_argument("--player-gid", type=int, help="the player's gid (default: its uid)")
    ident.add_argument("--runtime-dir", help="the player's XDG_RUNTIME_DIR (session bus)")
    ident.add_argument(
        "--player-cgroup",
        action="append",
        default=[],
        metavar="PROCS",
        help="cgroup.procs file every player process joins (repeatable)",
    )
    ident.add_argument(
        "--player-freezer",
        metavar="DIR",
        help="the player's freezer cgroup (with a 'held' child): evaluation "
        "commands freeze what the agent started there",
    )
    ident.add_argument(
        "--player-freezer-version",
        type=int,
        choices=(1, 2),
        default=2,
        help="cgroup version of --player-freezer",
    )
    ident.add_argument(
        "--player-max-memory",
        type=int,
        metavar="BYTES",
        help="RLIMIT_AS of player processes (where there is no cgroup)",
    )
    ident.add_argument(
        "--player-max-procs",
        type=int,
        metavar="N",
        help="RLIMIT_NPROC of the player uid (where there is no cgroup)",
    )
    p.add_argument("--log-level", default=os.environ.get("OSWORLD_GYM_LOG_LEVEL", "INFO"))
    a = p.parse_args(argv)
    if (a.uds is None) == (a.host is None):
        p.error("give exactly one of --uds PATH or --host 127.0.0.1 --port N")
    if a.host is not None and a.port is None:
        p.error("--host needs --port")
    if a.player_uid is None and (a.player_gid is not None or a.player_cgroup):
        p.error("--player-gid and --player-cgroup need --player-uid")
    uds_owner = None
    if a.uds_owner is not None:
        m = re.fullmatch(r"(\d+):(\d+)", a.uds_owner)
        if m is None or a.uds is None:
            p.error(f"--uds-owner needs --uds and the form UID:GID, got {a.uds_owner!r}")
        uds_owner = (int(m.group(1)), int(m.group(2)))
    logging.basicConfig(
        level=a.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return GuestConfig(
        uds=a.uds,
        uds_owner=uds_owner,
        host=a.host,
        port=a.port,
        token_file=a.token_file,
        display=a.display,
        screen=a.screen,
        start_x=a.start_x,
        wm=a.wm,
        home=a.home,
        home_template=a.home_template,
        tmp_dir=a.tmp_dir,
        clean_tmp=a.clean_tmp,
        state_dir=a.state_dir,
        exit_with_parent=a.exit_with_parent,
        player_uid=a.player_uid,
        player_gid=a.player_gid,
        runtime_dir=a.runtime_dir,
        player_cgroups=tuple(a.player_cgroup),
        player_max_memory=a.player_max_memory,
        player_max_procs=a.player_max_procs,
        player_freezer=a.player_freezer,
        player_freezer_version=a.player_freezer_version,
    )


def read_token(cfg: GuestConfig) -> str:
    if cfg.token_file:
        token = Path(cfg.token_file).read_text().strip()
        if not token:
            raise ValueError(f"token file {cfg.token_file} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ValueError(f"no token: pass --token-file PATH or set ${TOKEN_ENV}")
    return token


def ensure_xauthority(private_dir: str | None) -> None:
    """python-xlib (ours, and pyautogui's in task commands) refuses to connect to a display when
    the Xauthority file is missing, even though Xvfb needs no cookie. Point ``XAUTHORITY`` at an
    empty file when there is none; the desktop's apps inherit it. The file goes next to the
    token (never in the home or /tmp, which a reset wipes)."""
    path = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
    if os.path.exists(path):
        return
    fd, empty = tempfile.mkstemp(prefix="xauthority-", dir=private_dir)
    os.close(fd)
    os.environ["XAUTHORITY"] = empty


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.exit_with_parent:
        exit_with_parent(signal.SIGTERM)
    become_subreaper()
    keep_frame_buffers()
    ensure_xauthority(os.path.dirname(os.path.abspath(cfg.token_file)) if cfg.token_file else None)
    try:
        token = read_token(cfg)
    except (OSError, ValueError) as e:
        log.error("%s", e)
        return 2
    # Signal handlers only set a flag or write to a pipe: anything taking a lock could deadlock
    # against the interrupted main thread. A stop requested during start-up is honoured after it.
    stop_signal: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: stop_signal.append(signum))
    app = GuestApp(cfg)
    try:
        app.start()
        signal.signal(signal.SIGCHLD, lambda *_: app.registry.wake())
        router = Router(token)
        osworld_api.register(router, app)
        extension_api.register(router, app)
        server = make_server(router, uds=cfg.uds, host=cfg.host, port=cfg.port)
        if cfg.uds and cfg.uds_owner is not None:
            os.chown(cfg.uds, *cfg.uds_owner)
    except (OSError, ValueError, OSWorldGymError) as e:
        log.error("guest failed to start: %s", e)
        app.stop()
        return 1
    except Exception:  # e.g. Xlib cannot open the display: still clean up what was started
        log.exception("guest failed to start")
        app.stop()
        return 1

    serving = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="guest-http", daemon=True
    )
    serving.start()
    log.info("serving on %s", cfg.uds or f"{cfg.host}:{cfg.port}")
    try:
        while not stop_signal and serving.is_alive():
            time.sleep(0.1)
        log.info("signal %s: shutting down", stop_signal[0] if stop_signal else "-")
        server.shutdown()
    finally:
        server.server_close()
        if cfg.uds:
            Path(cfg.uds).unlink(missing_ok=True)
        app.stop()
    log.info("guest stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
