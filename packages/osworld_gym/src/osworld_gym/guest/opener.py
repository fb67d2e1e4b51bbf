"""Open a file with its default application, as ``xdg-open`` would, but as our own child.

``xdg-open`` finds the default application the same way (``xdg-mime``, ``mimeapps.list``, the
desktop entry's ``Exec`` line) and then runs it in a shell function that waits for it and exits
4 whatever happened to it. The guest needs the application's own exit status (a crash of the
task app is an infrastructure failure, see :mod:`~osworld_gym.guest.processes`), so it resolves
the command itself and starts it directly. When the lookup fails (no ``xdg-mime``, no default
for the type, an ``Exec`` line it cannot read) the caller falls back to ``xdg-open``.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from osworld_gym.guest.processes import ProcessRegistry

#: Field codes of the Desktop Entry spec that take the file (the rest are dropped).
_FILE_CODES = {"%f", "%F", "%u", "%U"}
_DROPPED_CODES = {"%i", "%c", "%k", "%d", "%D", "%n", "%N", "%v", "%m"}


def _query(
    registry: ProcessRegistry, args: list[str], env: dict[str, str], timeout: float = 10.0
) -> str | None:
    # through the registry: its reaper would otherwise take the exit status of a child it did
    # not spawn, and a failed query would read as success
    try:
        out = registry.run(["xdg-mime", "query", *args], env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.decode("utf-8", "replace").strip()
    return value if out.returncode == 0 and value else None


def _applications_dirs(env: dict[str, str]) -> list[Path]:
    home = Path(env.get("HOME", "~")).expanduser()
    data_home = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    data_dirs = (env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    return [data_home / "applications", *(Path(d) / "applications" for d in data_dirs if d)]


def find_desktop_file(desktop_id: str, env: dict[str, str]) -> Path | None:
    """The file of a desktop entry id (``org.xfce.mousepad.desktop``), per the XDG search path;
    ``foo-bar.desktop`` may also live at ``foo/bar.desktop``."""
    candidates = [desktop_id]
    if "-" in desktop_id:
        candidates.append(desktop_id.replace("-", "/", 1))
    for base in _applications_dirs(env):
        for name in candidates:
            if (path := base / name).is_file():
                return path
    return None


def exec_argv(desktop_file: Path, target: str) -> list[str] | None:
    """The command line of ``desktop_file``'s ``Exec`` with ``target`` in place of its file
    field code (appended when it has none). None if the entry has no usable ``Exec``."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read(desktop_file, encoding="utf-8")
        line = parser.get("Desktop Entry", "Exec")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    argv: list[str] = []
    placed = False
    for word in words:
        if word in _FILE_CODES:
            if not placed:
                argv.append(target)
                placed = True
        elif word in _DROPPED_CODES:
            continue
        else:
            argv.append(word.replace("%%", "%"))
    if not argv or shutil.which(argv[0]) is None:
        return None
    if not placed:
        argv.append(target)
    return argv


def default_command(path: Path, env: dict[str, str], registry: ProcessRegistry) -> list[str] | None:
    """The command ``xdg-open path`` would run, or None when it cannot be worked out here.
    ``xdg-mime`` runs as a child of ``registry``."""
    if shutil.which("xdg-mime", path=env.get("PATH")) is None:
        return None
    mime = _query(registry, ["filetype", str(path)], env)
    if mime is None:
        return None
    desktop_id = _query(registry, ["default", mime.split(";")[0].strip()], env)
    if desktop_id is None:
        return None
    desktop_file = find_desktop_file(desktop_id.splitlines()[0].strip(), env)
    if desktop_file is None:
        return None
    return exec_argv(desktop_file, os.fspath(path))
