"""``osworld-gym doctor``: does this machine have everything the desktop and its tasks run?

What is checked is derived, not listed by hand:

* the programs the local desktop itself runs (:data:`DESKTOP_PROGRAMS`);
* every program the built-in tasks start, read from their JSON by
  :func:`osworld_gym.support.programs.task_programs` (setup steps, postconfig, command getters);
* for every file type the tasks ``open``, that the desktop resolves a default application the
  way ``xdg-open`` does (the file's MIME type from its name, then ``mimeapps.list``) and that
  the application's program is installed. An empty ``notes.txt`` needs the MIME database and a
  name-based lookup (``mimetype``): ``file`` alone calls it ``inode/x-empty`` and nothing opens it.

:data:`PACKAGES` says which Debian package provides each program. A program without an entry is
itself a failure, so a task that starts using a new program fails ``doctor`` and the test suite
(``tests/osworld_gym/support/test_install.py`` also checks that ``scripts/install.sh`` installs
every package named
here) instead of failing its setup on a fresh machine.

``root`` points the checks at another root file system (a ``debootstrap`` chroot): each probe
then runs through ``chroot``. That is how the test suite proves a fresh-machine install.

>>> PACKAGES["socat"], PACKAGES["Xvfb"]
('socat', 'xvfb')
>>> program_requirement("google-chrome")      # a shim of ours: needs Chromium behind it
'chromium'
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from osworld_gym.guest.profiles import UBUNTU_PROGRAMS, UBUNTU_THEMES
from osworld_gym.image.recipe import THUNDERBIRD_PREFS, THUNDERBIRD_PREFS_FILE
from osworld_gym.support.packages import DESKTOP_PATH, PACKAGES
from osworld_gym.support.programs import opened_suffixes, task_programs

#: The skeleton home every desktop starts from (its ``.config/mimeapps.list`` sets defaults).
SKELETON = Path(__file__).resolve().parent / "guest" / "skel"

#: Programs the local desktop runs whatever the task: X server, window manager, session bus,
#: window and file-type tools of the guest, the sandbox, and apps the guest tests drive.
DESKTOP_PROGRAMS: tuple[str, ...] = (
    "bwrap",
    "Xvfb",
    "openbox",
    "dbus-daemon",
    "wmctrl",
    "setpriv",
    "xdg-open",
    "xdg-mime",
    "file",
    "mimetype",
    "xterm",
    "ffmpeg",
)

#: What the ``ubuntu`` desktop profile runs on top of the desktop's own programs.
PROFILE_PROGRAMS: tuple[str, ...] = tuple(UBUNTU_PROGRAMS)

#: Our shims (``guest/shims``) stand in for programs Debian does not ship; each needs another.
SHIMS: dict[str, str] = {
    "google-chrome": "chromium",
    "google-chrome-stable": "chromium",
    "sudo": "bash",
}


@dataclass
class Check:
    """One requirement and whether this machine meets it."""

    what: str
    ok: bool
    detail: str = ""
    package: str | None = None  # what to apt-get install when it fails


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def missing_packages(self) -> list[str]:
        return sorted({c.package for c in self.checks if not c.ok and c.package})

    def format(self) -> str:
        lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.what:<34} {c.detail}" for c in self.checks]
        failed = [c for c in self.checks if not c.ok]
        if failed:
            lines.append(f"\n{len(failed)} of {len(self.checks)} checks failed.")
            if pkgs := self.missing_packages:
                lines.append(
                    f"Install with: sudo apt-get install -y {' '.join(pkgs)}"
                    "   (or run scripts/install.sh)"
                )
        else:
            lines.append(f"\nall {len(self.checks)} checks passed")
        return "\n".join(lines)


def program_requirement(program: str) -> str:
    """The program that must be installed for ``program`` to run (itself, or a shim's target)."""
    return SHIMS.get(program, program)


class _Probe:
    """Runs a command on this machine or, with ``root``, inside that root file system."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        path: str = DESKTOP_PATH,
        timeout: float = 30.0,
    ):
        self.root = Path(root) if root is not None else None
        self.path = path
        self.timeout = timeout

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
        full = ["chroot", str(self.root), *argv] if self.root is not None else list(argv)
        base = {"PATH": self.path, "LC_ALL": "C.UTF-8"}
        try:
            out = subprocess.run(
                full,
                env={**base, **(env or {})},
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return 127, str(e)
        return out.returncode, out.stdout.decode("utf-8", "replace").strip()

    def which(self, program: str) -> str | None:
        rc, out = self.run(["/bin/sh", "-c", 'command -v "$1"', "sh", program])
        return out.splitlines()[0] if rc == 0 and out else None

    def host_path(self, path: str) -> Path:
        """Where ``path`` (inside the probed system) is on this machine."""
        return self.root / path.lstrip("/") if self.root is not None else Path(path)


def builtin_task_json() -> list[dict]:
    """The raw JSON of every built-in task (no variables filled: program names never vary)."""
    examples = Path(__file__).resolve().parent / "tasks" / "builtin" / "examples"
    return [json.loads(p.read_text()) for p in sorted(examples.glob("*/*.json"))]


def required_programs(tasks: Iterable[dict] | None = None) -> dict[str, set[str]]:
    """``{program: {who needs it}}``: the desktop's own programs and every task's."""
    need: dict[str, set[str]] = {p: {"desktop"} for p in DESKTOP_PROGRAMS}
    need.update({p: {"ubuntu profile"} for p in PROFILE_PROGRAMS})
    for raw in builtin_task_json() if tasks is None else tasks:
        for program in task_programs(raw):
            need.setdefault(program_requirement(program), set()).add(str(raw.get("id", "?")))
    return need


def opened_file_types(tasks: Iterable[dict] | None = None) -> set[str]:
    """File suffixes opened with their default app: the tasks' ``open`` steps, ``.txt`` (the
    text files tasks and tests open in the desktop's editor) and ``.pdf`` (OSWorld's tasks open
    PDFs in the document viewer; with GIMP installed and no default they open in its import
    dialog)."""
    out = {".txt", ".pdf"}
    for raw in builtin_task_json() if tasks is None else tasks:
        out |= opened_suffixes(raw)
    return out


def check_programs(probe: _Probe, need: dict[str, set[str]]) -> list[Check]:
    checks = []
    for program in sorted(need, key=str.lower):
        package = PACKAGES.get(program)
        users = sorted(need[program])
        who = users[0] if len(users) == 1 else f"{users[0]} and {len(users) - 1} more"
        if package is None:
            checks.append(
                Check(
                    program,
                    False,
                    f"no Debian package known for it (used by {who}); "
                    "add it to osworld_gym.doctor.PACKAGES and scripts/install.sh",
                )
            )
            continue
        where = probe.which(program)
        checks.append(
            Check(
                program,
                where is not None,
                where if where else f"MISSING (package {package}; used by {who})",
                package,
            )
        )
    return checks


def _desktop_exec(probe: _Probe, desktop_id: str) -> str | None:
    """The program of desktop entry ``desktop_id``'s ``Exec`` line, if the entry exists."""
    for base in ("/usr/local/share/applications", "/usr/share/applications"):
        path = probe.host_path(f"{base}/{desktop_id}")
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("Exec="):
                    words = line[5:].split()
                    return words[0] if words else None
    return None


def check_default_apps(probe: _Probe, suffixes: Iterable[str]) -> list[Check]:
    """Each suffix gets a MIME type from its name and a default app whose program exists, in a
    home made from the desktop's skeleton (whose ``mimeapps.list`` sets the defaults)."""
    tmp_root = probe.host_path("/tmp")
    tmp_root.mkdir(parents=True, exist_ok=True)
    checks = []
    with tempfile.TemporaryDirectory(prefix="osworld-doctor-", dir=tmp_root) as host_home:
        inside = "/tmp/" + Path(host_home).name if probe.root is not None else host_home
        config = Path(host_home) / ".config"
        config.mkdir()
        shutil.copy(SKELETON / ".config" / "mimeapps.list", config / "mimeapps.list")
        env = {
            "HOME": inside,
            "XDG_CONFIG_HOME": f"{inside}/.config",
            "XDG_DATA_DIRS": "/usr/local/share:/usr/share",
        }
        for suffix in sorted(suffixes):
            what = f"open *{suffix}"
            (Path(host_home) / f"probe{suffix}").write_bytes(b"")
            rc, mime = probe.run(["xdg-mime", "query", "filetype", f"{inside}/probe{suffix}"], env)
            if (
                rc != 0
                or not mime
                or mime.startswith("inode/")
                or mime == "application/octet-stream"
            ):
                checks.append(
                    Check(
                        what,
                        False,
                        f"no MIME type from the file name (got "
                        f"{mime or 'nothing'}): the name-based lookup needs "
                        "shared-mime-info and mimetype",
                        "libfile-mimeinfo-perl",
                    )
                )
                continue
            rc, desktop_id = probe.run(["xdg-mime", "query", "default", mime], env)
            if rc != 0 or not desktop_id:
                checks.append(Check(what, False, f"{mime}: no default application"))
                continue
            program = _desktop_exec(probe, desktop_id.splitlines()[0])
            found = program is not None and probe.which(program) is not None
            checks.append(
                Check(
                    what,
                    found,
                    f"{mime} -> {desktop_id} ({program or 'no entry'})"
                    + ("" if found else ": its program is not installed"),
                    PACKAGES.get(program or ""),
                )
            )
    return checks


def check_task_python(probe: _Probe) -> Check:
    """The python task-author commands get (:mod:`osworld_gym.guest.task_python`) exists and
    has what OSWorld's steps import. Made by ``scripts/install.sh`` (not ``--system-only``)."""
    from osworld_gym.guest import task_python

    python = task_python.interpreter()
    fix = f"MISSING: run scripts/install.sh (it makes {task_python.DEFAULT_VENV})"
    if python is None:
        return Check("python (task commands)", False, fix)
    code = (
        "import importlib.util as u, sys; "
        "m = [m for m in ('pyautogui', 'tkinter', 'PIL', 'numpy') if not u.find_spec(m)]; "
        "print(' '.join(m)); sys.exit(1 if m else 0)"
    )
    rc, out = probe.run([str(python), "-c", code])
    return Check(
        "python (task commands)",
        rc == 0,
        str(python) if rc == 0 else f"{python} lacks {out or 'modules'}: {fix}",
        "python3-tk" if "tkinter" in out else None,
    )


#: Files that make the apps look as on OSWorld's Ubuntu image (no program runs them, so no task
#: names them): LibreOffice's GTK3 widgets, which the desktop selects (``SAL_USE_VCLPLUGIN``,
#: ``guest/app.py``), and its Elementary icons (the home template's LibreOffice profile).
APP_LOOK_FILES: dict[str, str] = {
    "/usr/lib/libreoffice/program/libvclplug_gtk3lo.so": "libreoffice-gtk3",
    "/usr/share/libreoffice/share/config/images_elementary.zip": "libreoffice-style-elementary",
}


def check_app_looks(probe: _Probe) -> list[Check]:
    """LibreOffice's GTK3 plugin and icon theme are installed (see :data:`APP_LOOK_FILES`), and
    Thunderbird's system preferences are ``scripts/install.sh``'s (no donation tab)."""
    checks = [
        Check(f"look {Path(path).name}", probe.host_path(path).is_file(), path, package)
        for path, package in APP_LOOK_FILES.items()
    ]
    prefs = probe.host_path(THUNDERBIRD_PREFS_FILE)
    try:
        ok = THUNDERBIRD_PREFS in prefs.read_text()
    except OSError:
        ok = False
    detail = THUNDERBIRD_PREFS_FILE if ok else f"{THUNDERBIRD_PREFS_FILE}: run scripts/install.sh"
    checks.append(Check("thunderbird preferences", ok, detail, None))
    return checks


def check_themes(probe: _Probe) -> list[Check]:
    """The ``ubuntu`` profile's themes are installed (directories under /usr/share)."""
    return [
        Check(f"theme {d}", probe.host_path(f"/usr/share/{d}").is_dir(), f"/usr/share/{d}", package)
        for d, package in UBUNTU_THEMES.items()
    ]


def diagnose(
    root: str | os.PathLike[str] | None = None, tasks: Iterable[dict] | None = None
) -> Report:
    """Run every check on this machine (or the root file system at ``root``)."""
    probe = _Probe(root)
    task_list = list(tasks) if tasks is not None else builtin_task_json()
    report = Report()
    report.checks += check_programs(probe, required_programs(task_list))
    report.checks += check_themes(probe)
    report.checks += check_app_looks(probe)
    report.checks += check_default_apps(probe, opened_file_types(task_list))
    if root is None:  # the task python comes from install.sh's Python part, not --system-only
        report.checks.append(check_task_python(probe))
    return report
