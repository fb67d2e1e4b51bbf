"""What a desktop offers tasks: :class:`Capabilities`, declared by each provider class.

Every provider class answers :meth:`Provider.capabilities
<osworld_gym.providers.base.Provider.capabilities>`: by default OSWorld's own image (network,
Google, VS Code, GNOME and every app); the local sandbox (and the fake desktop, which stands in
for it) probe this machine with :func:`local_capabilities`. Task classification
(:func:`osworld_gym.support.classify`) reads them to say which tasks a backend can run.

>>> OSWORLD_IMAGE.network, OSWORLD_IMAGE.apps is None
(True, True)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from osworld_gym.guest import task_python
from osworld_gym.guest.profiles import missing_programs as profile_missing

#: PATH inside the desktop (the sandbox's, less our shims directory).
DESKTOP_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Desktop profiles (see osworld_gym.guest.profiles); the env var picks one when none is given.
PROFILES = ("openbox", "ubuntu")
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
    """

    network: bool
    google: bool
    vscode: bool
    gnome: bool
    apps: frozenset[str] | None = None
    path: str | None = None
    gsettings: bool = False


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
    )


#: OSWorld's own image: what a provider offers unless it says otherwise.
OSWORLD_IMAGE = Capabilities(network=True, google=True, vscode=True, gnome=True)
