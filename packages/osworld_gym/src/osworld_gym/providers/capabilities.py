"""What a desktop offers tasks: :class:`Capabilities`, from the desktops really configured.

Every provider answers :meth:`Provider.config_capabilities
<osworld_gym.providers.base.Provider.config_capabilities>` for its configuration: the local
sandbox (and the fake desktop, which stands in for it) probe this machine with
:func:`local_capabilities`; the docker provider reads the manifest our image build wrote into the
image (:mod:`.manifest`), or, only with ``vm_path``, OSWorld's own VM image (:data:`OSWORLD_IMAGE`:
network, Google, VS Code, GNOME and every app); a remote guest is what its URL serves (OSWorld's VM
for ``osworld_compat``). Task classification (:func:`osworld_gym.support.classify`) reads them to
say which tasks a backend can run.

>>> OSWORLD_IMAGE.network, OSWORLD_IMAGE.apps is None
(True, True)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from osworld_gym.guest import task_python
from osworld_gym.guest.profiles import PROFILES as PROFILES  # re-exported: one definition
from osworld_gym.guest.profiles import missing_programs as profile_missing

#: PATH inside the desktop (the sandbox's, less our shims directory).
DESKTOP_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The env var that picks a desktop profile (:data:`PROFILES`, defined by the guest that
#: implements them) when none is given.
PROFILE_ENV = "OSWORLD_GYM_PROFILE"
#: The profile when neither ``profile=`` nor the env var names one: OSWorld's look.
DEFAULT_PROFILE = "ubuntu"


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers tasks.

    Attributes:
        network: the desktop can reach websites.
        google: Google Drive / login steps can run (credentials configured).
        vscode: VS Code is installed.
        gnome: a GNOME session with ``gsettings`` is running (GNOME Shell: wallpaper too).
        apps: installed apps among :data:`APP_KEYS`, or ``None`` for "all".
        path: the desktop's ``PATH`` for launched programs (``None``: do not check).
        gsettings: ``gsettings``/``dconf`` work on a session bus without GNOME Shell (the local
            ``ubuntu`` profile); implied by ``gnome``.
        programs: the programs on the desktop's ``PATH`` when they were listed elsewhere (an
            image's manifest); ``None``: look them up on ``path`` on this machine.
        source: where these capabilities come from, for reports ("this machine", "image X").
    """

    network: bool
    google: bool
    vscode: bool
    gnome: bool
    apps: frozenset[str] | None = None
    path: str | None = None
    gsettings: bool = False
    programs: frozenset[str] | None = None
    source: str = ""


#: App keys :func:`classify` knows, with the programs that provide them.
APP_KEYS: dict[str, tuple[str, ...]] = {
    "chromium": ("chromium", "chromium-browser"),
    "libreoffice": ("libreoffice", "soffice"),
    "libreoffice_calc": ("libreoffice", "soffice"),
    "libreoffice_writer": ("libreoffice", "soffice"),
    "libreoffice_impress": ("libreoffice", "soffice"),
    "gimp": ("gimp",),
    "vlc": ("vlc",),
    "thunderbird": ("thunderbird",),
}
_LO_REGISTRY = Path("/usr/lib/libreoffice/share/registry")
_SHIMS = Path(__file__).resolve().parent.parent / "guest" / "shims"


def _installed(key: str, path: str | None) -> bool:
    if not any(shutil.which(p, path=path) for p in APP_KEYS[key]):
        return False
    if key.startswith("libreoffice_") and _LO_REGISTRY.is_dir():
        module = key.removeprefix("libreoffice_")  # calc.xcd / writer.xcd / impress.xcd
        return (_LO_REGISTRY / f"{module}.xcd").is_file()
    return True


def desktop_path() -> str:
    """The PATH the local desktop gives task commands: the task python's directory (when
    installed), our shims, then the system directories (the host's own PATH does not count)."""
    python = task_python.interpreter()
    parts = [str(python.parent)] if python is not None else []
    return os.pathsep.join([*parts, str(_SHIMS), DESKTOP_PATH])


def local_capabilities(profile: str | None = None) -> Capabilities:
    """This machine as the local sandbox sees it: no network, Google or GNOME Shell; VS Code
    and the apps where installed; ``gsettings``/``dconf`` on the ``ubuntu`` desktop profile
    (``profile``, else ``$OSWORLD_GYM_PROFILE``, else the default) when its programs are."""
    path = desktop_path()
    apps = frozenset(k for k in APP_KEYS if _installed(k, path))
    vscode = shutil.which("code", path=path) is not None
    profile = profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    gsettings = profile == "ubuntu" and not profile_missing()
    return Capabilities(
        network=False,
        google=False,
        vscode=vscode,
        gnome=False,
        apps=apps,
        path=path,
        gsettings=gsettings,
        source=f"this machine (local sandbox), profile {profile}",
    )


def common_capabilities(each: list[Capabilities]) -> Capabilities:
    """What every one of several desktops offers (a run whose tasks may land on any of them).

    >>> a = Capabilities(True, False, True, False, apps=frozenset({"gimp", "vlc"}), source="a")
    >>> b = Capabilities(False, False, True, False, apps=frozenset({"vlc"}), source="b")
    >>> c = common_capabilities([a, b])
    >>> c.network, c.vscode, c.apps, c.source
    (False, True, frozenset({'vlc'}), 'a; b')
    """
    if not each:
        raise ValueError("no desktops to combine")
    if len({c for c in each}) == 1:
        return each[0]

    def common(sets: list[frozenset[str] | None]) -> frozenset[str] | None:
        known = [s for s in sets if s is not None]
        return frozenset.intersection(*known) if known else None

    paths = {c.path for c in each}
    return Capabilities(
        network=all(c.network for c in each),
        google=all(c.google for c in each),
        vscode=all(c.vscode for c in each),
        gnome=all(c.gnome for c in each),
        apps=common([c.apps for c in each]),
        path=paths.pop() if len(paths) == 1 else None,
        gsettings=all(c.gsettings or c.gnome for c in each),
        programs=common([c.programs for c in each]),
        source="; ".join(dict.fromkeys(c.source for c in each)),
    )


#: OSWorld's own VM image (docker with ``vm_path``, OSWorld VMs reached by URL): everything.
OSWORLD_IMAGE = Capabilities(
    network=True, google=True, vscode=True, gnome=True, source="OSWorld's VM image"
)
