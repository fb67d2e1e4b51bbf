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

from osworld_gym.guest import homedir
from osworld_gym.guest.a11y import Accessibility
from osworld_gym.guest.desktop import Desktop, parse_screen
from osworld_gym.guest.processes import ProcessRegistry
from osworld_gym.guest.recording import Recorder
from osworld_gym.guest.screen import Screen
from osworld_gym.guest.windows import Windows
from osworld_gym.guest.xinput import XInput

log = logging.getLogger(__name__)


@dataclass
class GuestConfig:
    """Everything the guest is started with (the CLI flags of ``python -m osworld_gym.guest``)."""

    #: Unix socket path to listen on (preferred); else ``host``/``port`` on loopback.
    uds: str | None = None
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

    @property
    def template(self) -> Path:
        return Path(self.home_template) if self.home_template else homedir.SKEL


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
    env: dict[str, str] = field(init=False)
    home: Path = field(init=False)
    state_dir: Path = field(init=False)
    _reset_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _own_state_dir: bool = field(default=False, init=False)

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Prepare home, start (or attach to) the desktop and open the X connections."""
        cfg = self.config
        self.home = Path(os.path.abspath(cfg.home))
        homedir.prepare_home(self.home, cfg.template)
        self._own_state_dir = cfg.state_dir is None
        self.state_dir = Path(cfg.state_dir or tempfile.mkdtemp(prefix="osworld-guest-"))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        runtime = self.state_dir / "runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        env = dict(os.environ)
        env.update(DISPLAY=cfg.display, HOME=str(self.home), PWD=str(self.home),
                   XDG_RUNTIME_DIR=str(runtime), XDG_CONFIG_HOME=str(self.home / ".config"),
                   QT_ACCESSIBILITY="1", GTK_A11Y="atspi")
        env.pop("NO_AT_BRIDGE", None)
        if cfg.tmp_dir:
            Path(cfg.tmp_dir).mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = os.path.abspath(cfg.tmp_dir)
        self.env = env
        self.registry = ProcessRegistry(env=env, cwd=str(self.home))
        self.registry.start_reaper()
        self.desktop = Desktop(cfg.display, parse_screen(cfg.screen), cfg.wm, self.home,
                               self.state_dir, self.registry)
        if cfg.start_x:
            self.desktop.start_x()
            if (bus := self.desktop.start_bus(env)) is not None:
                env["DBUS_SESSION_BUS_ADDRESS"] = bus
            self.desktop.start_wm(env)
        self.screen = Screen(cfg.display)
        self.xinput = XInput(cfg.display)
        self.windows = Windows(self.registry, cfg.display)
        self.recorder = Recorder(self.registry, cfg.display, (self.screen.width,
                                                               self.screen.height), self.state_dir)
        self.a11y = Accessibility(self.registry, env)
        log.info("guest ready on display %s (%dx%d), home %s", cfg.display, self.screen.width,
                 self.screen.height, self.home)

    def stop(self) -> None:
        """Stop recordings, kill every descendant, then WM, bus and X; reap everything.

        Safe after a partial :meth:`start`.
        """
        for name, method in (("recorder", "abort"), ("xinput", "close"), ("screen", "close"),
                             ("windows", "disconnect")):
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
        """Kill all apps, restore home from the template, clean the temp dir, revive the WM."""
        with self._reset_lock:
            t0 = time.perf_counter()
            self.recorder.abort()
            # Not the kept processes' subtrees: apps the WM started (Ctrl+Alt+T) must die too.
            killed = self.registry.kill_tree(keep=self.desktop.infrastructure_pids(),
                                             keep_subtrees=False)
            t_kill = time.perf_counter()
            if restore_home:
                homedir.restore_home(self.home, self.config.template, self.protected_paths())
            t_home = time.perf_counter()
            if self.config.clean_tmp:
                homedir.clean_tmp(Path(self.config.tmp_dir or tempfile.gettempdir()),
                                  self.protected_paths())
            wm_restarted = self.desktop.ensure_wm(self.env)
            self.xinput.release_all()
            ms = (time.perf_counter() - t0) * 1000
            log.info("desktop reset: killed %d processes in %.0f ms, total %.0f ms", killed,
                     (t_kill - t0) * 1000, ms)
            return {"status": "success", "killed": killed, "ms": round(ms, 1),
                    "timings": {"kill_ms": round((t_kill - t0) * 1000, 1),
                                "home_ms": round((t_home - t_kill) * 1000, 1)},
                    "wm_restarted": wm_restarted}

    def health(self) -> dict:
        """Liveness of X and the WM, and the app crashes so far (reaped first, waiting for
        processes that are still dying, so a crash that has happened is counted)."""
        self.registry.reap_dying()
        return {"status": "ok", "display": self.config.display,
                "screen": [self.screen.width, self.screen.height], "pid": os.getpid(),
                "x_alive": self.desktop.x_alive(), "wm_alive": self.desktop.wm_alive(),
                "recording": self.recorder.recording,
                "crashes": self.registry.crash_count,
                "recent_crashes": [dataclasses.asdict(c) | {"describe": c.describe()}
                                   for c in self.registry.crashes]}
