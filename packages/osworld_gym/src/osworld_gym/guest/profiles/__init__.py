"""Desktop profiles: what surrounds the task's apps on the screen.

* ``openbox`` — openbox on a black screen, nothing else: the fastest desktop.
* ``ubuntu`` — a light imitation of OSWorld's Ubuntu 22.04 GNOME image, so that what a model sees
  here looks like what it will see there: a black top bar (Activities, clock, system icons) and a
  left dock of favourite apps (two tint2 panels that reserve their space with struts), Yaru GTK /
  icon themes and Yaru-like window frames, an aubergine wallpaper, GNOME Terminal on Ctrl+Alt+T,
  Nautilus for folders, and GSettings backed by dconf with Ubuntu's defaults (including the
  ``org.gnome.shell`` keys OSWorld's tasks use). Real gnome-shell needs logind and a system bus
  and costs far more per desktop; see the README.

The window manager is openbox in both; :class:`UbuntuSession` adds what the ``ubuntu`` profile
needs around it. Its files live in this package (``ubuntu/``), read-only; the ones that depend on
the screen size are generated into the guest's state directory at start, never into the home
(which a reset restores).
"""

from __future__ import annotations

import logging
import os
import shutil
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from osworld_gym.errors import GuestError, MissingDependencyError

if TYPE_CHECKING:
    from osworld_gym.guest.processes import ProcessRegistry

log = logging.getLogger(__name__)

#: Profile names the guest accepts (``--wm``), fastest first.
PROFILES = ("openbox", "ubuntu")

DATA = Path(__file__).resolve().parent / "ubuntu"

#: program -> Debian package, for the ``ubuntu`` profile.
UBUNTU_PROGRAMS: dict[str, str] = {
    "tint2": "tint2",
    "gnome-terminal": "gnome-terminal",
    "nautilus": "nautilus",
    "dconf": "dconf-cli",
    "glib-compile-schemas": "libglib2.0-bin",
    "gsettings": "libglib2.0-bin",
}
#: Themes the profile uses (directories under /usr/share), with their packages.
UBUNTU_THEMES: dict[str, str] = {"themes/Yaru": "yaru-theme-gtk", "icons/Yaru": "yaru-theme-icon"}

#: Ubuntu Dock's favourites on OSWorld's image, limited to the apps Debian packages here.
FAVOURITES = (
    "google-chrome.desktop",
    "org.gnome.Nautilus.desktop",
    "vlc.desktop",
    "libreoffice-writer.desktop",
    "libreoffice-calc.desktop",
    "libreoffice-impress.desktop",
    "org.gnome.Terminal.desktop",
    "org.xfce.mousepad.desktop",
)

_SYSTEM_DATA = ("/usr/local/share", "/usr/share")
_YARU_ICONS = Path("/usr/share/icons/Yaru/scalable")


def missing_programs() -> dict[str, str]:
    """What the ``ubuntu`` profile needs that is not installed: {program or path: package}."""
    missing = {p: pkg for p, pkg in UBUNTU_PROGRAMS.items() if shutil.which(p) is None}
    missing.update(
        {
            f"/usr/share/{d}": pkg
            for d, pkg in UBUNTU_THEMES.items()
            if not Path("/usr/share", d).is_dir()
        }
    )
    return missing


@dataclass(frozen=True)
class Geometry:
    """Sizes of the top bar and the dock, scaled from Ubuntu 22.04's at 1920x1080."""

    width: int
    height: int

    @property
    def scale(self) -> float:
        return min(1.0, self.height / 1080)

    @property
    def topbar(self) -> int:
        return max(16, round(27 * self.scale))

    @property
    def dock(self) -> int:
        return max(24, round(66 * self.scale))

    @property
    def icon(self) -> int:
        return max(16, round(48 * self.scale))


def _icon(name: str) -> str:
    hits = sorted(_YARU_ICONS.glob(f"*/{name}.svg"))
    return str(hits[0]) if hits else ""


def _application(desktop_id: str, data_dirs: list[str]) -> Path | None:
    for d in data_dirs:
        path = Path(d, "applications", desktop_id)
        if path.is_file():
            return path
    return None


def _readable(root: Path) -> None:
    """Let every user read (not write) ``root``'s tree: the apps run as another uid."""
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _run(argv: list[str], env: dict[str, str], what: str, timeout: float = 10.0) -> None:
    try:
        subprocess.run(
            argv,
            env=env,
            check=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except subprocess.CalledProcessError as e:
        raise GuestError(f"{what} failed: {e.stderr.decode(errors='replace').strip()}") from e
    except subprocess.TimeoutExpired as e:
        raise GuestError(f"{what} did not finish in {timeout:.0f} s") from e


@dataclass
class UbuntuSession:
    """The ``ubuntu`` profile's parts around openbox: settings, wallpaper, top bar and dock.

    Call :meth:`prepare` before the window manager starts (it adds the profile's variables to the
    apps' environment, so everything the guest starts afterwards sees the themes and defaults),
    :meth:`start` after it (panels, wallpaper). A reset stops the panels (:meth:`stop_panels`) and
    starts them again with a fresh window manager and bus.
    """

    display: str
    size: tuple[int, int]
    state_dir: Path
    registry: ProcessRegistry
    #: Where the profile's files go for the desktop's apps to read: the judge's state dir is
    #: closed to the player, so with judge separation a directory the guest owns and the
    #: player may only read (default: ``state_dir/ubuntu``).
    public_dir: Path | None = None
    panels: dict[str, subprocess.Popen] = field(default_factory=dict, init=False)
    bus_link: Path | None = field(default=None, init=False)

    @property
    def dir(self) -> Path:
        return self.public_dir if self.public_dir is not None else self.state_dir / "ubuntu"

    @property
    def data(self) -> Path:
        """The profile's data files, copied where the apps can read them (the package
        checkout itself may be the judge's alone)."""
        return self.dir / "data"

    @property
    def openbox_config(self) -> Path:
        return self.data / "openbox" / "rc.xml"

    # ---- before the WM ----------------------------------------------------------------------
    def prepare(self, env: dict[str, str]) -> None:
        """Generate the size-dependent files and set the profile's variables in ``env``."""
        missing = missing_programs()
        if missing:
            raise MissingDependencyError(
                f"the 'ubuntu' desktop profile needs {', '.join(sorted(missing))}; install with: "
                f"sudo apt-get install -y --no-install-recommends "
                f"{' '.join(sorted(set(missing.values())))}"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        shutil.copytree(DATA, self.data, dirs_exist_ok=True)
        data_dirs = [str(self.data), *_SYSTEM_DATA]
        schemas = self.dir / "schemas"
        schemas.mkdir(exist_ok=True)
        _run(
            ["glib-compile-schemas", "--strict", f"--targetdir={schemas}", str(DATA / "schemas")],
            env,
            "compiling the profile's GSettings schemas",
        )
        dconf_db = self.dir / "dconf-ubuntu"
        _run(
            ["dconf", "compile", str(dconf_db), str(DATA / "dconf")],
            env,
            "compiling the profile's dconf defaults",
        )
        (self.dir / "dconf-profile").write_text(f"user-db:user\nfile-db:{dconf_db}\n")
        env.update(
            XDG_DATA_DIRS=":".join(data_dirs),
            XDG_CONFIG_DIRS=f"{self.data}:/etc/xdg",  # gtk-3.0/settings.ini: Yaru
            XDG_CURRENT_DESKTOP="ubuntu:GNOME",
            XDG_SESSION_DESKTOP="ubuntu",
            DESKTOP_SESSION="ubuntu",
            GNOME_SHELL_SESSION_MODE="ubuntu",
            GSETTINGS_SCHEMA_DIR=str(schemas),
            GSETTINGS_BACKEND="dconf",
            DCONF_PROFILE=str(self.dir / "dconf-profile"),
        )
        self._write_panels(data_dirs)
        _readable(self.dir)
        self._link_bus(env)

    def _link_bus(self, env: dict[str, str]) -> None:
        """OSWorld's tasks hard-code Ubuntu's session bus path
        (``export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'`` before
        ``gsettings``): point that path at this desktop's bus. Only in an empty runtime
        directory, i.e. the sandbox's own; a real login session's is never touched."""
        address = env.get("DBUS_SESSION_BUS_ADDRESS", "")
        runtime = Path(f"/run/user/{os.getuid()}")
        try:
            if (
                not address.startswith("unix:path=")
                or not os.access(runtime, os.W_OK)
                or any(runtime.iterdir())
            ):
                return
            link = runtime / "bus"
            link.symlink_to(address.removeprefix("unix:path=").split(",", 1)[0])
        except OSError as e:
            log.warning("cannot provide Ubuntu's bus path %s/bus: %s", runtime, e)
            return
        self.bus_link = link

    def _write_panels(self, data_dirs: list[str]) -> None:
        g = Geometry(*self.size)
        launchers = "\n".join(
            f"launcher_item_app = {p}"
            for f in FAVOURITES
            if (p := _application(f, data_dirs)) is not None
        )
        values = dict(
            topbar=g.topbar,
            dock=g.dock,
            dock_length=g.height - g.topbar,
            icon=g.icon,
            spacing=max(2, round(10 * g.scale)),
            pad=max(2, round(8 * g.scale)),
            font="DejaVu Sans",
            launchers=launchers,
            icon_network=_icon("network-wired-symbolic"),
            icon_volume=_icon("audio-volume-high-symbolic"),
            icon_power=_icon("system-shutdown-symbolic"),
            icon_grid=_icon("view-app-grid-symbolic"),
        )
        for name in ("topbar", "dock"):
            template = string.Template((DATA / "tint2" / f"{name}.tint2rc").read_text())
            (self.dir / f"{name}.tint2rc").write_text(template.substitute(values))

    # ---- after the WM -----------------------------------------------------------------------
    def start(self, env: dict[str, str], timeout: float = 10.0) -> None:
        """Paint the wallpaper, start the panels and wait until the WM honours their struts."""
        from osworld_gym.guest.profiles import wallpaper  # numpy, PIL: only when painting

        wallpaper.paint(self.display)
        self._update_bus_environment(env)
        for name in ("topbar", "dock"):
            self._start_panel(name, env)
        self._wait_for_workarea(timeout)

    def _start_panel(self, name: str, env: dict[str, str]) -> None:
        log_path = self.state_dir / f"{name}.log"
        with open(log_path, "ab") as out:
            self.panels[name] = self.registry.popen(
                ["tint2", "-c", str(self.dir / f"{name}.tint2rc")],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        log.info("started %s (pid %d)", name, self.panels[name].pid)

    def _update_bus_environment(self, env: dict[str, str]) -> None:
        """Apps the session bus starts (gnome-terminal-server, dconf-service) get the profile's
        variables too, as systemd's user manager does on Ubuntu."""
        if (
            "DBUS_SESSION_BUS_ADDRESS" not in env
            or shutil.which("dbus-update-activation-environment") is None
        ):
            return
        keys = (
            "XDG_DATA_DIRS",
            "XDG_CONFIG_DIRS",
            "XDG_CURRENT_DESKTOP",
            "GSETTINGS_SCHEMA_DIR",
            "GSETTINGS_BACKEND",
            "DCONF_PROFILE",
            "DISPLAY",
            "XDG_SESSION_DESKTOP",
        )
        # as the bus's own user (the player's, under judge separation): the bus admits no other
        try:
            out = self.registry.run(
                ["dbus-update-activation-environment", *keys], env=env, timeout=10.0, judge=False
            )
        except subprocess.TimeoutExpired as e:
            raise GuestError(
                "updating the session bus's activation environment did not finish in 10 s"
            ) from e
        if out.returncode != 0:
            raise GuestError(
                "updating the session bus's activation environment failed: "
                + out.stderr.decode(errors="replace").strip()
            )

    def _wait_for_workarea(self, timeout: float) -> None:
        from Xlib import display as xdisplay

        from osworld_gym.guest.xgrab import make_impervious

        g = Geometry(*self.size)
        d = make_impervious(xdisplay.Display(self.display))
        try:
            atom = d.intern_atom("_NET_WORKAREA")
            deadline = time.monotonic() + timeout
            delay = 0.01
            while True:
                prop = d.screen().root.get_full_property(atom, 0)
                area = list(prop.value[:4]) if prop is not None else []
                if area and area[0] >= g.dock and area[1] >= g.topbar:
                    return
                for name, proc in self.panels.items():
                    if proc.poll() is not None:
                        raise GuestError(
                            f"the {name} panel (tint2) exited with status "
                            f"{proc.returncode}; see {self.state_dir / name}.log"
                        )
                if time.monotonic() > deadline:
                    raise GuestError(
                        f"the top bar and dock did not reserve their space in "
                        f"{timeout:.0f} s (work area {area})"
                    )
                time.sleep(delay)
                delay = min(delay * 1.5, 0.1)
        finally:
            d.close()

    def alive(self) -> bool:
        return bool(self.panels) and all(p.poll() is None for p in self.panels.values())

    def ensure(self, env: dict[str, str]) -> bool:
        """Restart panels that died (the agent may kill them). True if any was restarted."""
        dead = [n for n, p in self.panels.items() if p.poll() is not None]
        for name in dead:
            log.warning("%s panel is not running; restarting it", name)
            self._start_panel(name, env)
        if dead:
            self._wait_for_workarea(10.0)
        return bool(dead)

    def pids(self) -> set[int]:
        return {p.pid for p in self.panels.values() if p.poll() is None}

    def stop_panels(self) -> None:
        """Stop the panels; the next :meth:`start` paints and starts everything again."""
        for proc in self.panels.values():
            self.registry.terminate(proc, timeout=3.0)
        self.panels = {}

    def stop(self) -> None:
        self.stop_panels()
        if self.bus_link is not None:
            self.bus_link.unlink(missing_ok=True)
