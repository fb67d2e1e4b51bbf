"""Tasks that ship with osworld-gym, for a desktop with xterm and mousepad only.

They use OSWorld's layout (``test_all.json`` + ``examples/<domain>/<id>.json``) and format, and
each carries an ``oracle``: pyautogui actions that solve it through the GUI (``["FAIL"]`` for the
infeasible one). Domains: ``os`` (files and the terminal; Ctrl+Alt+T opens xterm) and
``text_editor`` (mousepad).

>>> tasks = builtin_tasks()
>>> tasks.domains()
['os', 'text_editor']
>>> builtin_task("os-mkdir-001").instruction
'Create a new folder named "projects" on the Desktop (~/Desktop/projects).'
"""

from __future__ import annotations

from pathlib import Path

from osworld_gym.tasks.loader import TaskSet, load_tasks
from osworld_gym.tasks.task import Task

#: Directory holding the built-in task files (usable with :func:`load_tasks` directly).
BUILTIN_DIR = Path(__file__).resolve().parent


def builtin_tasks(domains: str | list[str] | None = None) -> TaskSet:
    """All built-in tasks (optionally only some domains), freshly loaded and validated."""
    return load_tasks(BUILTIN_DIR, domains=domains)


def builtin_task(task_id: str) -> Task:
    """One built-in task by id.

    Raises:
        KeyError: no built-in task has that id.
    """
    return builtin_tasks()[task_id]
