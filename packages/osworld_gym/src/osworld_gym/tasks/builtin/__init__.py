"""Tasks that ship with osworld-gym: OSWorld's format, no downloads, each with its own proof.

They use OSWorld's layout (``test_all.json`` + ``examples/<domain>/<id>.json``). Every file a
task needs is generated offline (``builtin-asset://`` URLs, see :mod:`osworld_gym.tasks.assets`),
many tasks vary with a seed (``"variables"``), and each carries an ``oracle``: pyautogui actions
that solve it through the GUI (``["FAIL"]`` for infeasible ones). ``osworld-gym tasks check``
and the test suite replay every oracle (score 1) and a no-op (score 0) on real desktops.

>>> tasks = builtin_tasks()
>>> len(tasks) >= 100 and len(tasks.domains()) >= 8
True
>>> builtin_task("os-mkdir-001").instruction
'Create a new folder named "projects" on the Desktop (~/Desktop/projects).'
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from osworld_gym.tasks.loader import TaskSet, load_tasks
from osworld_gym.tasks.task import Task

#: Directory holding the built-in task files (usable with :func:`load_tasks` directly).
BUILTIN_DIR = Path(__file__).resolve().parent


def builtin_tasks(domains: str | list[str] | None = None) -> TaskSet:
    """All built-in tasks (optionally only some domains), loaded and validated once."""
    tasks = _all_builtin()
    return tasks if domains is None else tasks.filter(domains)


@cache
def _all_builtin() -> TaskSet:
    return load_tasks(BUILTIN_DIR)


def builtin_task(task_id: str) -> Task:
    """One built-in task by id.

    Raises:
        KeyError: no built-in task has that id.
    """
    return builtin_tasks()[task_id]
