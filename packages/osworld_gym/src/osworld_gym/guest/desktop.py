"""The desktop the guest supervises: Xvfb, the window manager and a session D-Bus.

The window manager is openbox; the ``ubuntu`` profile adds a top bar, a dock, themes and GNOME
settings around it (:mod:`osworld_gym.guest.profiles`).

With ``--start-x`` the guest starts all three as its own children; without it, it attaches to
an existing display and only watches it. The readiness checks poll the real condition (the
display accepts a connection, the WM owns ``WM_S0``, the bus socket accepts a connection); there
are no fixed sleeps.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from Xlib import display as xdisplay
from Xlib import error as xerror

from osworld_gym.errors import GuestError, MissingDependencyError
from osworld_gym.guest.processes import ProcessRegistry, descendants, die_with_us
from osworld_gym.guest.profiles import PROFILES, UbuntuSession
from osworld_gym.guest.xgrab import GrabControlError, make_impervious

log = logging.getLogger(__name__)

#: Session services (activated through the bus, then adopted by the guest) that a desktop reset
#: leaves running: restarting them costs every next app start time and holds no user state.
SESSION_SERVICES = frozenset({"at-spi-bus-launcher", "at-spi2-registryd"})


def parse_screen(spec: str) -> tuple[int, int, int]:
    """``"1920x1080x24"`` → ``(1920, 1080, 24)``; depth defaults to 24.

    >>> parse_screen("1280x800"), parse_screen("1920x1080x24")
    ((1280, 800, 24), (1920, 1080, 24))
    """
    parts = spec.lower().split("x")
    try:
        w, h = int(parts[0]), int(parts[1])
        depth = int(parts[2]) if len(parts) > 2 else 24
    except (ValueError, IndexError):
        raise ValueError(f"screen must look like 1920x1080x24, got {spec!r}") from None
    if len(parts) > 3 or w < 64 or h < 64 or depth not in (16, 24, 32):
        raise ValueError(f"screen {spec!r} is out of range (min 64x64, depth 16, 24 or 32)")
    return w, h, depth


def display_number(name: str) -> int:
    """``":0"`` / ``":95.0"`` → 0 / 95."""
    try:
        return int(name.split(":", 1)[1].split(".")[0])
    except (IndexError, ValueError):
        raise ValueError(f"display must look like :0, got {name!r}") from None


def can_connect(name: str) -> bool:
    """True if the X server at ``name`` accepts a connection right now."""
    try:
        d = xdisplay.Display(name)
    except (xerror.DisplayError, ConnectionError, OSError):
        return False
    d.close()
    return True


def _wait_for(
    cond,
    timeout: float,
    what: str,
    proc: subprocess.Popen | None = None,
    log_path: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not cond():
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path)
            raise GuestError(
                f"{what} exited with status {proc.returncode} before it was ready"
                + (f": {tail}" if tail else "")
            )
        if time.monotonic() > deadline:
            raise GuestError(f"{what} was not ready after {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)


def _program(pid: int) -> str:
    """Basename of the file a process executes ('' if unreadable). Its executable, not its
    argv[0]: a player process can call itself anything (``exec -a at-spi-bus-launcher``) and
    would then be spared by resets and evaluation holds."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""
    return os.path.basename(exe.removesuffix(" (deleted)"))


def _tail(path: Path | None, n: int = 600) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""


@dataclass
class Desktop:
    """Xvfb + window manager + session bus, owned by the guest process.

    Attributes:
        display: X display name such as ``":0"``.
        screen: requested (width, height, depth); the real size is read from the server.
        wm: the desktop profile, ``"openbox"`` or ``"ubuntu"`` (openbox with Ubuntu's top bar,
            dock, themes and settings), or ``"none"``.
        home: the desktop user's home (the WM reads its config from there).
        state_dir: private directory for logs and the bus socket.
        registry: spawns and reaps every child.
    """

    display: str
    screen: tuple[int, int, int]
    wm: str
    home: Path
    state_dir: Path
    registry: ProcessRegistry
    xvfb: subprocess.Popen | None = field(default=None, init=False)
    wm_proc: subprocess.Popen | None = field(default=None, init=False)
    bus: subprocess.Popen | None = field(default=None, init=False)
    bus_address: str | None = field(default=None, init=False)
    session: UbuntuSession | None = field(default=None, init=False)
    #: one kept, grab-impervious connection for liveness: a new connection is not served while
    #: a player client holds an X server grab, so ``can_connect`` would hang until it ends
    _probe: xdisplay.Display | None = field(default=None, init=False, repr=False)
    _probe_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    #: the X server's own state right after it started (root window properties, keyboard and
    #: modifier mappings), restored at every reset: it outlives the player's processes
    _x_baseline: XBaseline | None = field(default=None, init=False, repr=False)

    # ---- X server ---------------------------------------------------------------------------
    def start_x(self, timeout: float = 15.0) -> None:
        """Start Xvfb on :attr:`display` and wait until it accepts connections."""
        if shutil.which("Xvfb") is None:
            raise MissingDependencyError("Xvfb is not installed; install the 'xvfb' package")
        n = display_number(self.display)
        if Path(f"/tmp/.X11-unix/X{n}").exists() and can_connect(self.display):
            raise GuestError(f"display {self.display} is already in use; pick another --display")
        w, h, depth = self.screen
        log_path = self.state_dir / "xvfb.log"
        argv = [
            *die_with_us(),  # SIGKILL if the guest dies without cleaning up
            "Xvfb",
            self.display,
            "-screen",
            "0",
            f"{w}x{h}x{depth}",
            "-nolisten",
            "tcp",
            "-noreset",
            "-br",
            "+extension",
            "XTEST",
            "+extension",
            "XFIXES",
            "-dpi",
            "96",
        ]
        with open(log_path, "wb") as out:
            # the judge's: the player must not be able to kill the display it is scored on
            self.xvfb = self.registry.popen(argv, stdout=out, stderr=subprocess.STDOUT, judge=True)
        log.info("started Xvfb %s (pid %d)", self.display, self.xvfb.pid)
        _wait_for(
            lambda: can_connect(self.display), timeout, f"Xvfb {self.display}", self.xvfb, log_path
        )
        self.x_alive()  # opens the liveness connection now, before any player client runs
        self._x_baseline = XBaseline.take(self.display)

    def x_alive(self) -> bool:
        """True if the X server answers a round trip (on a connection a grab cannot stall)."""
        if self.xvfb is not None and self.xvfb.poll() is not None:
            self._close_probe()
            return False
        with self._probe_lock:
            try:
                if self._probe is None:
                    self._probe = make_impervious(xdisplay.Display(self.display))
                self._probe.get_input_focus()  # a round trip
                return True
            except (xerror.DisplayError, xerror.XError, ConnectionError, OSError, GrabControlError):
                probe, self._probe = self._probe, None
        if probe is not None:
            try:
                probe.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
        return False

    def _close_probe(self) -> None:
        with self._probe_lock:
            probe, self._probe = self._probe, None
        if probe is not None:
            try:
                probe.close()
            except Exception:  # noqa: BLE001 - the server may be gone
                pass

    # ---- session bus ------------------------------------------------------------------------
    def start_bus(self, env: dict[str, str], timeout: float = 10.0) -> str | None:
        """Start a session ``dbus-daemon`` (for AT-SPI, dconf, ...). None if dbus is missing."""
        if shutil.which("dbus-daemon") is None:
            log.warning("dbus-daemon is not installed: no session bus, /accessibility will be 501")
            return None
        # in the apps' runtime dir: the bus runs as the player (dbus-daemon admits its own uid
        # and root), which cannot enter the judge's state dir
        path = Path(env.get("XDG_RUNTIME_DIR") or self.state_dir) / "bus"
        path.unlink(missing_ok=True)
        address = f"unix:path={path}"
        log_path = self.state_dir / "dbus.log"
        with open(log_path, "wb") as out:
            self.bus = self.registry.popen(
                [
                    # a reset restarts the bus from a request-handler thread, which exits after
                    # every request: there the prefix is empty, and the bus dies with the
                    # sandbox or Desktop.stop()
                    *die_with_us(),
                    "dbus-daemon",
                    "--session",
                    "--nofork",
                    "--nopidfile",
                    f"--address={address}",
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

        def ready() -> bool:
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(str(path))
                except OSError:
                    return False
            return True

        _wait_for(ready, timeout, "dbus-daemon", self.bus, log_path)
        self.bus_address = address
        return address

    # ---- window manager ---------------------------------------------------------------------
    def start_wm(
        self,
        env: dict[str, str],
        marks: list[tuple[str, float]] | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Start the window manager and wait until it manages the screen (owns ``WM_S0``)."""
        if self.wm == "none":
            return
        if self.wm not in PROFILES:
            raise ValueError(
                f"unknown desktop profile {self.wm!r}; use {', '.join(PROFILES)} or none"
            )
        if shutil.which("openbox") is None:
            raise MissingDependencyError("openbox is not installed; install the 'openbox' package")
        argv = ["openbox", "--sm-disable"]
        rc = self.home / ".config" / "openbox" / "rc.xml"
        if self.wm == "ubuntu":
            if self.session is None:  # once: adds the profile's variables to the apps' env
                # with judge separation the apps cannot read the judge's state dir: the
                # profile's files go to a directory of the sandbox's own /run they may read
                public = Path("/run/osworld-profile") if self.registry.player is not None else None
                self.session = UbuntuSession(
                    self.display, self.screen[:2], self.state_dir, self.registry, public_dir=public
                )
                self.session.prepare(env)
            rc = self.session.openbox_config
        if rc.is_file():
            argv += ["--config-file", str(rc)]
        log_path = self.state_dir / "wm.log"
        with open(log_path, "ab") as out:
            self.wm_proc = self.registry.popen(
                argv, env=env, cwd=str(self.home), stdout=out, stderr=subprocess.STDOUT
            )
        log.info("started %s (pid %d)", self.wm, self.wm_proc.pid)
        _wait_for(self.wm_running, timeout, self.wm, self.wm_proc, log_path)
        if marks is not None:
            marks.append(("wm_ms", time.perf_counter()))
        if self.session is not None:
            if self.session.panels:
                self.session.ensure(env)
            else:
                self.session.start(env, timeout)
            if marks is not None:
                marks.append(("panels_ms", time.perf_counter()))

    def wm_running(self) -> bool:
        """True if some window manager owns the ``WM_S0`` selection."""
        try:
            d = xdisplay.Display(self.display)
        except (xerror.DisplayError, ConnectionError, OSError):
            return False
        try:
            make_impervious(d)
            return d.get_selection_owner(d.intern_atom("WM_S0")) != 0
        except (xerror.XError, ConnectionError, OSError):
            return False
        finally:
            d.close()

    def wm_alive(self) -> bool:
        if self.wm == "none":
            return False
        if self.wm_proc is not None:
            return self.wm_proc.poll() is None
        return self.wm_running()

    def ensure_wm(self, env: dict[str, str]) -> bool:
        """Restart the window manager if we own it and it died. Returns True if restarted."""
        if self.wm == "none" or self.xvfb is None and self.wm_proc is None:
            return False
        if self.wm_proc is not None and self.wm_proc.poll() is None:
            return self.session.ensure(env) if self.session is not None else False
        log.warning("window manager is not running; restarting it")
        self.start_wm(env)
        return True

    def restart_session(self, env: dict[str, str]) -> dict[str, float]:
        """A fresh window manager, session bus (and what it activated: AT-SPI, dconf) and
        profile panels, and the X server's state put back as it was after it started.

        They run as the player, so during an episode the agent may ``ptrace`` them, replace
        the bus socket in its runtime dir, load its own openbox config (``--reconfigure``) or
        set root window properties (``AT_SPI_BUS`` pointing at a bus of its own) and
        keyboard mappings; none of that may reach the next episode. The caller has killed
        every process but the X server; this starts the infrastructure again, as at start.
        A desktop the guest attached to (no ``--start-x``) is not the guest's to restart.
        Returns how long each part took (``x_ms``, ``bus_ms``, ``wm_ms``, ``panels_ms``).
        """
        if self.xvfb is None:
            return {}
        marks = [("stop", time.perf_counter())]
        if self.session is not None:
            self.session.stop_panels()
        had_bus = self.bus is not None
        for proc in (self.wm_proc, self.bus):
            self.registry.terminate(proc, timeout=3.0)
        self.wm_proc = self.bus = None
        if self._x_baseline is not None:
            self._x_baseline.restore(self.display)
        marks.append(("x_ms", time.perf_counter()))
        if had_bus:
            self.start_bus(env)
        marks.append(("bus_ms", time.perf_counter()))
        self.start_wm(env, marks)
        return {name: round((t - marks[i][1]) * 1000, 1) for i, (name, t) in enumerate(marks[1:])}

    def infrastructure_pids(self) -> set[int]:
        """Processes a desktop reset must not kill: X, WM, bus, and the accessibility services
        with their private bus (children of the WM are *not* included)."""
        pids = {
            p.pid for p in (self.xvfb, self.wm_proc, self.bus) if p is not None and p.poll() is None
        }
        if self.session is not None:
            pids |= self.session.pids()
        procs = descendants(os.getpid())
        for info in procs:
            if info.pid not in pids and _program(info.pid) in SESSION_SERVICES:
                pids.add(info.pid)
                pids.update(p.pid for p in descendants(info.pid, procs))
            # dbus-daemon's activation babysitter (a fork of the bus, alive while a service it
            # starts has not claimed its name yet) shares the bus's signal pipe: a SIGTERM to
            # it stops the bus itself. Spare it; the service under it is killed, and then the
            # babysitter reports the failed activation and exits on its own.
            elif (
                self.bus is not None
                and info.ppid == self.bus.pid
                and _program(info.pid) == "dbus-daemon"
            ):
                pids.add(info.pid)
        return pids

    def stop(self) -> None:
        """Stop the profile's panels, WM, bus and X server (in that order); reaps them."""
        if self.session is not None:
            self.session.stop()
        self._close_probe()
        for proc in (self.wm_proc, self.bus, self.xvfb):
            self.registry.terminate(proc, timeout=3.0)
        n = display_number(self.display)
        # Xvfb removes these itself on SIGTERM; one that had to be SIGKILLed may not have.
        if self.xvfb is not None and not can_connect(self.display):
            for stale in (Path(f"/tmp/.X{n}-lock"), Path(f"/tmp/.X11-unix/X{n}")):
                stale.unlink(missing_ok=True)


@dataclass
class XBaseline:
    """What the X server held right after it started: root window properties and the keyboard
    and modifier mappings. Any X client (the player's too) can change them, and they outlive
    every process; :meth:`restore` deletes properties set since and puts the mappings back."""

    properties: frozenset[int]
    first_keycode: int
    keysyms: list[list[int]]
    modifiers: list[list[int]]

    @classmethod
    def take(cls, display: str) -> XBaseline:
        d = make_impervious(xdisplay.Display(display))
        try:
            root = d.screen().root
            first, last = d.display.info.min_keycode, d.display.info.max_keycode
            return cls(
                frozenset(root.list_properties()),
                first,
                [list(k) for k in d.get_keyboard_mapping(first, last - first + 1)],
                [list(m) for m in d.get_modifier_mapping()],
            )
        finally:
            d.close()

    def restore(self, display: str) -> None:
        d = make_impervious(xdisplay.Display(display))
        try:
            root = d.screen().root
            for atom in set(root.list_properties()) - self.properties:
                root.delete_property(atom)
            d.change_keyboard_mapping(self.first_keycode, self.keysyms)
            for _ in range(10):  # MappingBusy while a key is down: the guest released them
                if d.set_modifier_mapping(self.modifiers) == 0:
                    break
                time.sleep(0.01)
            d.sync()
        finally:
            d.close()
