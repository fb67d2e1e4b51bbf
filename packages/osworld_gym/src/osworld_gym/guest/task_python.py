"""The ``python`` that task-author commands run inside the desktop (judge side only).

OSWorld's task JSON runs Python in the desktop as trusted task content: 99 official tasks have
setup, postconfig or evaluator steps such as ``["python", "-c", "import pyautogui; ...
pyautogui.hotkey('ctrl', 's')"]`` (save before scoring). OSWorld's VM image has a ``python``
with pyautogui on its PATH; Debian has neither ``python`` nor a pyautogui package. So the guest
gives *task commands* (``/execute`` and ``/setup/execute``, which only the host-side setup
runner and evaluator getters call) a PATH whose first directory holds ``python`` and
``python3`` of an interpreter that has pyautogui (its venv's ``bin``):

1. ``$OSWORLD_GYM_TASK_PYTHON`` (the docker image points it at its guest venv), else
2. :data:`DEFAULT_VENV` ``/bin/python``, the venv ``scripts/install.sh`` creates from
   :data:`REQUIREMENTS_FILE` (outside ``/home`` and ``/tmp``; a sandbox that shows only some
   host directories must bind it read-only).

Agent actions never reach this: they are parsed into primitives and injected through XTest,
never executed as code, and apps the agent uses keep the desktop's ordinary PATH.

Without such an interpreter, task commands run with the ordinary PATH (``python`` is then
"not found", which the classifier reports as ``needs programs not on the desktop``).

>>> env = command_env({"PATH": "/usr/bin:/bin"}, Path("/opt/osworld-gym-task-python/bin"))
>>> env["PATH"]
'/opt/osworld-gym-task-python/bin:/usr/bin:/bin'
"""

from __future__ import annotations

import logging
import os
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

#: Environment variable naming the task interpreter explicitly.
ENV_VAR = "OSWORLD_GYM_TASK_PYTHON"
#: Where ``scripts/install.sh`` creates the task interpreter's venv.
DEFAULT_VENV = Path("/opt/osworld-gym-task-python")
#: The pinned packages the task interpreter has (one per line, ``#`` comments).
REQUIREMENTS_FILE = Path(__file__).with_name("task_python_requirements.txt")
#: The names task commands call it by.
NAMES = ("python", "python3")


def requirements() -> list[str]:
    """The pinned requirements of the task interpreter."""
    lines = REQUIREMENTS_FILE.read_text().splitlines()
    return [s for line in lines if (s := line.split("#", 1)[0].strip())]


def interpreter(env: Mapping[str, str] | None = None) -> Path | None:
    """The task interpreter on this machine, or ``None`` when there is none."""
    if named := (os.environ if env is None else env).get(ENV_VAR):
        path = Path(named)
        if os.access(path, os.X_OK):
            return path
        log.warning("%s=%s is not an executable; task commands get no python", ENV_VAR, named)
        return None
    default = DEFAULT_VENV / "bin" / "python"
    return default if os.access(default, os.X_OK) else None


def write_bin_dir(directory: Path, python: Path) -> Path:
    """Write ``python`` and ``python3`` wrappers for ``python`` into ``directory``.

    Wrappers, not symlinks: a venv's interpreter finds its ``pyvenv.cfg`` (and so its packages)
    from the path it was started by, which for a symlink elsewhere is the wrong directory.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        script = directory / name
        script.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def write_xauthority(path: Path) -> Path:
    """An Xauthority file with one entry that matches no display.

    Xvfb needs no cookie, and the guest's empty Xauthority file lets python-xlib connect, but
    pyautogui's python-xlib then prints "Xlib.xauth: warning, no xauthority details available"
    on *stdout* at every import, which would end up in a task command's output. One entry for a
    display that does not exist silences it and still connects without a cookie.
    """

    def field(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    entry = (
        struct.pack(">H", 256)
        + field(b"osworld-gym-no-such-host")
        + field(b"65535")
        + field(b"MIT-MAGIC-COOKIE-1")
        + field(bytes(16))
    )
    path.write_bytes(entry)
    return path


def command_env(env: dict[str, str], bin_dir: Path | None) -> dict[str, str]:
    """``env`` with ``bin_dir`` first on ``PATH`` and the quiet Xauthority file next to it (in
    the venv, made by install.sh; ``env`` itself when there is no bin dir)."""
    if bin_dir is None:
        return env
    path = env.get("PATH", os.defpath)
    out = {**env, "PATH": f"{bin_dir}{os.pathsep}{path}" if path else str(bin_dir)}
    for xauth in (bin_dir / "Xauthority", bin_dir.parent / "Xauthority"):
        if xauth.is_file() and os.access(xauth, os.R_OK):
            out["XAUTHORITY"] = str(xauth)
            break
    return out


class TaskPython:
    """The guest's task-command environment, decided once per guest.

    ``PATH`` gets the interpreter's own directory first (a venv's ``bin`` has ``python`` and
    ``python3``; started from there the venv finds its packages), so nothing needs writing in
    the guest's private state dir: under a judge/player split task commands may run as the
    desktop user, who can read the read-only venv but not the judge's files.
    """

    def __init__(self, state_dir: Path, env: dict[str, str]):
        python = interpreter(env)
        self.bin_dir: Path | None = None
        if python is not None and all((python.parent / n).exists() for n in NAMES):
            self.bin_dir = python.parent
        elif python is not None:  # a lone interpreter: wrappers named python/python3
            self.bin_dir = write_bin_dir(state_dir / "task-python", python)
            write_xauthority(self.bin_dir / "Xauthority")
        if python:
            log.info("task commands get python -> %s", python)
        else:
            log.warning(
                "no task python (run scripts/install.sh, or set %s): task steps that "
                "run `python -c ...` will fail",
                ENV_VAR,
            )

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment for a task-author command."""
        return command_env(base, self.bin_dir)
