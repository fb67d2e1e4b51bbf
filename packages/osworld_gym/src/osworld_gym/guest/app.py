"""The guest application: configuration, the components it owns, desktop reset and health.

:class:`GuestApp` wires the desktop (:mod:`~osworld_gym.guest.desktop`), the process registry,
screen capture, XTest input, window helpers, recording and accessibility together; the HTTP
endpoints in :mod:`~osworld_gym.guest.osworld_api` and :mod:`~osworld_gym.guest.extension_api`
are thin shells over it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from osworld_gym.errors import GuestError
from osworld_gym.guest import homedir
from osworld_gym.guest.a11y import Accessibility
from osworld_gym.guest.desktop import Desktop, parse_screen
from osworld_gym.guest.judging import Freezer, SetupRoots, trusted_pids
from osworld_gym.guest.processes import PlayerIdentity, ProcessRegistry
from osworld_gym.guest.recording import Recorder
from osworld_gym.guest.screen import Screen
from osworld_gym.guest.settle_signal import DamageUnavailable, InputMark, SettleSignal
from osworld_gym.guest.windows import Windows
from osworld_gym.guest.xinput import XInput

log = logging.getLogger(__name__)


@dataclass
class GuestConfig:
    """Everything the guest is started with (the CLI flags of ``python -m osworld_gym.guest``)."""

    #: Unix socket path to listen on (preferred); else ``host``/``port`` on loopback.
    uds: str | None = None
    #: ``(uid, gid)`` the unix socket is handed to once bound (a judge running as root whose
    #: client, the host's user, is another uid); ``None``: the guest's own.
    uds_owner: tuple[int, int] | None = None
    host: str | None = None
    port: int | None = None
    #: File holding the bearer token (written by the host before start).
    token_file: str | None = None
    #: X display to use (or to start with ``start_x``).
    display: str = ":0"
    #: ``WxHxDEPTH`` for Xvfb.
    screen: str = "1920x1080x24"
    #: Start Xvfb, a session bus and the window manager as children.
    start_x: bool = False
    #: ``openbox`` or ``none``.
    wm: str = "openbox"
    #: The desktop user's home (cwd and ``$HOME`` of everything the guest starts).
    home: str = "/home/user"
    #: Template copied into ``home``; the packaged skeleton by default.
    home_template: str | None = None
    #: The desktop's temp directory (``$TMPDIR`` of children); ``None`` keeps the inherited one.
    tmp_dir: str | None = None
    #: Let a desktop reset empty ``tmp_dir`` (or /tmp). Only inside a sandbox with a private /tmp!
    clean_tmp: bool = False
    #: Private directory for logs, the bus socket and recordings (a fresh temp dir by default).
    state_dir: str | None = None
    #: Exit when the parent process dies (tests, launchers without a sandbox).
    exit_with_parent: bool = False
    #: The player's uid/gid: the guest (namespace root) drops to them for every app and
    #: everything the agent can start. ``None``: one identity (no judge/player separation).
    player_uid: int | None = None
    player_gid: int | None = None
    #: The player's ``$XDG_RUNTIME_DIR`` (bus socket); default: a dir in ``state_dir``.
    runtime_dir: str | None = None
    #: ``cgroup.procs`` files a player process joins before it drops privileges.
    player_cgroups: tuple[str, ...] = ()
    #: Per-process fallbacks where there is no cgroup: RLIMIT_AS bytes, RLIMIT_NPROC.
    player_max_memory: int | None = None
    player_max_procs: int | None = None
    #: The player's freezer cgroup dir (and its cgroup version); ``None``: SIGSTOP fallback.
    player_freezer: str | None = None
    player_freezer_version: int = 2

    @property
    def template(self) -> Path:
        return Path(self.home_template) if self.home_template else homedir.SKEL

    def player(self) -> PlayerIdentity | None:
        if self.player_uid is None:
            return None
        prefix: list[str] = []
        if not self.player_cgroups and (self.player_max_memory or self.player_max_procs):
            prefix = ["prlimit"]
            if self.player_max_memory:
                prefix.append(f"--as={self.player_max_memory}")
            if self.player_max_procs:
                prefix.append(f"--nproc={self.player_max_procs}")
            prefix.append("--")
        gid = self.player_gid if self.player_gid is not None else self.player_uid
        return PlayerIdentity(self.player_uid, gid, tuple(self.player_cgroups), tuple(prefix))


#: Seconds after a task step's start that the judge waits at most for what it set off to
#: finish (:meth:`GuestApp.finish_task_steps`).
STEPS_FINISH_S = 5.0
#: LibreOffice's widget toolkit on every desktop (``SAL_USE_VCLPLUGIN``): GTK3, as on OSWorld's
#: Ubuntu image (Debian's ``libreoffice-gtk3``); its icon theme is set in the home template's
#: LibreOffice profile (``skel/.config/libreoffice``).
LIBREOFFICE_VCL_PLUGIN = "gtk3"
#: ``$PATH`` of evaluation and setup commands when the guest has none.
COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Variables a command environment keeps from the guest's (none of them the player's doing).
_KEPT = (
    "DISPLAY",
    "LANG",
    "LC_ALL",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_SESSION_TYPE",
    "QT_ACCESSIBILITY",
    "GTK_A11Y",
    "SAL_USE_VCLPLUGIN",
    "TMPDIR",
    # the desktop profile's session (guest/profiles): gsettings in a task's command must
    # read the same dconf database and schemas as the desktop's apps
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "XDG_CURRENT_DESKTOP",
    "XDG_SESSION_DESKTOP",
    "DESKTOP_SESSION",
    "GNOME_SHELL_SESSION_MODE",
    "GSETTINGS_SCHEMA_DIR",
    "GSETTINGS_BACKEND",
    "DCONF_PROFILE",
)


@dataclass
class GuestApp:
    config: GuestConfig
    registry: ProcessRegistry = field(init=False)
    desktop: Desktop = field(init=False)
    screen: Screen = field(init=False)
    xinput: XInput = field(init=False)
    windows: Windows = field(init=False)
    recorder: Recorder = field(init=False)
    a11y: Accessibility = field(init=False)
    #: Tells when the desktop has finished reacting to input; None without XDamage.
    settle: SettleSignal | None = field(init=False, default=None)
    env: dict[str, str] = field(init=False)
    player: PlayerIdentity | None = field(init=False, default=None)
    #: What setup launched (the roots of the judge's trust) and the player's freezer cgroup.
    setup_roots: SetupRoots = field(default_factory=SetupRoots, init=False)
    freezer: Freezer | None = field(init=False, default=None)
    home: Path = field(init=False)
    state_dir: Path = field(init=False)
    #: When the last task step (a ``/setup/*`` request) began, if no agent input and no judge
    #: read came after it: see :meth:`finish_task_steps`.
    _steps_mark: InputMark | None = field(default=None, init=False)
    _reset_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _own_state_dir: bool = field(default=False, init=False)

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Prepare home, start (or attach to) the desktop and open the X connections."""
        cfg = self.config
        self.player = cfg.player()
        if self.player is not None and os.geteuid() != 0:
            raise GuestError(
                f"--player-uid needs a guest running as (namespace) root, not uid {os.geteuid()}"
            )
        if self.player is not None and cfg.player_freezer:
            self.freezer = Freezer(cfg.player_freezer, cfg.player_freezer_version)
        self.home = Path(os.path.abspath(cfg.home))
        homedir.prepare_home(self.home, cfg.template)
        self._hand_home_over()
        self._own_state_dir = cfg.state_dir is None
        self.state_dir = Path(cfg.state_dir or tempfile.mkdtemp(prefix="osworld-guest-"))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        judge_runtime = self.state_dir / "runtime"
        judge_runtime.mkdir(mode=0o700, exist_ok=True)
        runtime = Path(cfg.runtime_dir) if cfg.runtime_dir else judge_runtime
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            DISPLAY=cfg.display,
            HOME=str(self.home),
            PWD=str(self.home),
            XDG_RUNTIME_DIR=str(runtime),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            QT_ACCESSIBILITY="1",
            GTK_A11Y="atspi",
            # LibreOffice draws with GTK3, as on OSWorld's Ubuntu image, chosen here rather
            # than by what happens to be installed (without libreoffice-gtk3 it picks its X11
            # "gen" widgets; with it, by the desktop it guesses). See docs/fidelity.md.
            SAL_USE_VCLPLUGIN=LIBREOFFICE_VCL_PLUGIN,
        )
        env.pop("NO_AT_BRIDGE", None)
        if self.player is not None:  # the player's runtime dir and (empty) X authority file
            os.chown(runtime, self.player.uid, self.player.gid)
            xauth = runtime / "Xauthority"
            xauth.touch()
            os.chown(xauth, self.player.uid, self.player.gid)
            env["XAUTHORITY"] = str(xauth)
        if cfg.tmp_dir:
            Path(cfg.tmp_dir).mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = os.path.abspath(cfg.tmp_dir)
        self.env = env
        self.registry = ProcessRegistry(env=env, cwd=str(self.home), player=self.player)
        self.registry.start_reaper()
        self.desktop = Desktop(
            cfg.display, parse_screen(cfg.screen), cfg.wm, self.home, self.state_dir, self.registry
        )
        if cfg.start_x:
            self.desktop.start_x()
            if (bus := self.desktop.start_bus(env)) is not None:
                env["DBUS_SESSION_BUS_ADDRESS"] = bus
            self.desktop.start_wm(env)
        self.screen = Screen(cfg.display)
        self.xinput = XInput(cfg.display)
        self.windows = Windows(self.registry, cfg.display)
        self.recorder = Recorder(
            self.registry, cfg.display, (self.screen.width, self.screen.height), self.state_dir
        )
        self.a11y = Accessibility(self.registry, env)
        try:
            self.settle = SettleSignal(
                cfg.display,
                exclude=self._not_the_desktop,
                timerless=self._timerless,
                server=self._x_server,
            )
        except DamageUnavailable as e:
            log.warning("%s: the host will poll screenshots to see the screen settle", e)
        log.info(
            "guest ready on display %s (%dx%d), home %s",
            cfg.display,
            self.screen.width,
            self.screen.height,
            self.home,
        )

    def _x_server(self) -> set[int]:
        return {self.desktop.xvfb.pid} if self.desktop.xvfb is not None else set()

    def _timerless(self) -> set[int]:
        """The X server and the profile's panels: their timers never show an input's effect."""
        d = self.desktop
        return self._x_server() | (d.session.pids() if d.session is not None else set())

    def _not_the_desktop(self) -> set[int]:
        """Processes whose CPU use is ours, not the desktop's reaction to input."""
        pid = self.recorder.pid
        return set() if pid is None else {pid}

    def stop(self) -> None:
        """Stop recordings, kill every descendant, then WM, bus and X; reap everything.

        Safe after a partial :meth:`start`.
        """
        for name, method in (
            ("recorder", "abort"),
            ("xinput", "close"),
            ("screen", "close"),
            ("windows", "disconnect"),
            ("settle", "close"),
        ):
            part = getattr(self, name, None)
            if part is None:
                continue
            try:
                getattr(part, method)()
            except Exception:
                log.debug("shutdown: %s.%s failed", name, method, exc_info=True)
        registry = getattr(self, "registry", None)
        if registry is None:
            return
        desktop = getattr(self, "desktop", None)
        if desktop is not None:
            registry.kill_tree(keep=desktop.infrastructure_pids())
            desktop.stop()
        registry.kill_tree()
        registry.stop_reaper()
        if self._own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # ---- identities -------------------------------------------------------------------------
    def _hand_home_over(self) -> None:
        """Make the home the player's (the judge populated it)."""
        if self.player is not None:
            homedir.chown_tree(self.home, self.player.uid, self.player.gid)

    def trusted_pids(self) -> set[int]:
        """Processes the judge trusts now (see :func:`~osworld_gym.guest.judging.trusted_pids`)."""
        return trusted_pids(self.desktop.infrastructure_pids(), self.setup_roots.pids())

    def command_env(self) -> dict[str, str]:
        """The environment of a setup or evaluation command: the guest's own ``PATH`` (set by
        whoever started the guest, never by the player: with shims first), home as ``HOME``,
        no ``PYTHON*`` variable of anyone's but ours: no user site, no cwd on ``sys.path``
        (``python3 -I`` semantics also for Pythons inside shell commands), and the desktop
        user's runtime dir and X authority (commands run as the desktop user)."""
        base = self.env
        env = {k: base[k] for k in _KEPT if k in base}
        env.update(
            PATH=base.get("PATH") or COMMAND_PATH,
            HOME=str(self.home),
            USER=base.get("USER", "user"),
            LOGNAME=base.get("LOGNAME", "user"),
            SHELL=base.get("SHELL", "/bin/bash"),
            PYTHONNOUSERSITE="1",
            PYTHONSAFEPATH="1",
            PYTHONDONTWRITEBYTECODE="1",
            XDG_RUNTIME_DIR=base["XDG_RUNTIME_DIR"],
        )
        if base.get("XAUTHORITY"):
            env["XAUTHORITY"] = base["XAUTHORITY"]
        return env

    # ---- what task steps set off ------------------------------------------------------------
    def note_task_step(self) -> None:
        """A task step (config or postconfig) is about to act on the desktop."""
        if self.settle is not None:
            self._steps_mark = self.settle.mark()

    def forget_task_steps(self) -> None:
        """The agent acts (or the desktop is reset): what earlier steps set off is its
        desktop's past, not a step's."""
        self._steps_mark = None

    def finish_task_steps(self, max_s: float = STEPS_FINISH_S) -> dict[str, float] | None:
        """Before the judge reads the desktop (and holds the player still), let what the task's
        last steps set off finish, as it would on OSWorld's VM, where nothing is frozen: the
        shell of a terminal that ``killall gnome-terminal-server`` ended writes
        ``~/.bash_history`` on its SIGHUP (a few ms after ``killall`` returns, long after the
        hold would have frozen it), an app saves after a postconfig Ctrl+S. The wait is the
        settle signal's (CPU, runnable threads, drawing, new processes), from the start of the
        last step with no agent input after it, at most ``max_s`` after that start; once per
        such step. It runs before the hold, which is unchanged: the agent's processes ran
        during the steps anyway, and are frozen as before when the judge reads. None when
        there is nothing to finish."""
        mark, self._steps_mark = self._steps_mark, None
        if mark is None or self.settle is None:
            return None
        facts = self.settle.wait(max_s, since=mark)
        log.info(
            "waited %.0f ms for what the task's steps set off to finish%s: %s",
            facts["settle_ms"],
            " (capped)" if facts["settle_capped"] else "",
            self.settle.last_why,
        )
        return facts

    # ---- operations -------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """A guest path with ``~`` and ``$VARS`` expanded; relative to the home directory."""
        if path == "~" or path.startswith("~/"):
            path = str(self.home) + path[1:]
        p = Path(os.path.expandvars(os.path.expanduser(path)))
        return p if p.is_absolute() else self.home / p

    def protected_paths(self) -> list[Path | str | None]:
        """Paths a reset must never delete (the server's own files)."""
        cfg = self.config
        return [cfg.uds, cfg.token_file, self.state_dir]

    def reset(self, restore_home: bool = True) -> dict:
        """Kill all apps, restore home from the template, clean the temp and runtime dirs, and
        start the desktop's infrastructure afresh (window manager, session bus and what it
        activated, panels; the X server's root properties and key mappings put back): it runs
        as the player, so whatever the agent did to it (``ptrace``, a relay on the bus socket,
        its own openbox config) ends with the episode. An attached desktop (no
        ``--start-x``) keeps its infrastructure; only a dead WM is restarted."""
        with self._reset_lock:
            t0 = time.perf_counter()
            self.forget_task_steps()
            self.recorder.abort()
            xvfb = self.desktop.xvfb
            own = xvfb is not None
            # Not the kept processes' subtrees: apps the WM started (Ctrl+Alt+T) must die too.
            keep = {xvfb.pid} if xvfb is not None else self.desktop.infrastructure_pids()
            killed = self.registry.kill_tree(keep=keep, keep_subtrees=False)
            self.setup_roots.clear()
            t_kill = time.perf_counter()
            if restore_home:
                homedir.restore_home(self.home, self.config.template, self.protected_paths())
                self._hand_home_over()
            t_home = time.perf_counter()
            if self.config.clean_tmp:
                homedir.clean_tmp(
                    Path(self.config.tmp_dir or tempfile.gettempdir()), self.protected_paths()
                )
            session: dict[str, float] = {}
            if own:
                self._clean_runtime_dir()
                session = self.desktop.restart_session(self.env)
                wm_restarted = True
            else:
                wm_restarted = self.desktop.ensure_wm(self.env)
            t_session = time.perf_counter()
            self.xinput.release_all()
            ms = (time.perf_counter() - t0) * 1000
            log.info(
                "desktop reset: killed %d processes in %.0f ms, total %.0f ms",
                killed,
                (t_kill - t0) * 1000,
                ms,
            )
            return {
                "status": "success",
                "killed": killed,
                "ms": round(ms, 1),
                "timings": {
                    "kill_ms": round((t_kill - t0) * 1000, 1),
                    "home_ms": round((t_home - t_kill) * 1000, 1),
                    "session_ms": round((t_session - t_home) * 1000, 1),
                    **session,
                },
                "wm_restarted": wm_restarted,
            }

    def _clean_runtime_dir(self) -> None:
        """Empty the apps' runtime dir (the bus socket's home, the player's to write) but for
        the X authority file: a relay the agent bound at the bus path, AT-SPI's bus and dconf's
        state go with the episode."""
        runtime = Path(self.env["XDG_RUNTIME_DIR"])
        keep = {Path(self.env["XAUTHORITY"]).name} if self.env.get("XAUTHORITY") else set()
        try:
            entries = list(runtime.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.name in keep:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    def health(self) -> dict:
        """Liveness of X and the WM, and the app crashes so far (reaped first, waiting for
        processes that are still dying, so a crash that has happened is counted)."""
        self.registry.reap_dying()
        return {
            "status": "ok",
            "display": self.config.display,
            # judge and player apart: the agent's processes run as another uid
            "separated": self.player is not None,
            "screen": [self.screen.width, self.screen.height],
            "pid": os.getpid(),
            "x_alive": self.desktop.x_alive(),
            "wm_alive": self.desktop.wm_alive(),
            "recording": self.recorder.recording,
            "crashes": self.registry.crash_count,
            "recent_crashes": [
                dataclasses.asdict(c) | {"describe": c.describe()} for c in self.registry.crashes
            ],
        }
