"""Task specs of ``arpo-eval run --tasks SPEC`` and training task lists.

``SPEC`` is resolved by :func:`osworld_gym.support.resolve_tasks`, the one resolver every CLI
uses (its docstring lists the forms: ``builtin[:DOMAIN,...]``, ``pixels[:SPLIT[:KINDS[:N]]]``,
OSWorld folders and meta files, id lists, task lists). ``arpo-eval`` refuses a spec with tasks
the desktop cannot run unless ``--skip-unsupported`` is given.

>>> [t.id for t in resolve_task_spec("builtin:os")][:2]
['os-mkdir-001', 'os-rename-001']
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from osworld_gym.support import TaskSpecError, read_id_list, resolve_tasks
from osworld_gym.tasks import Task, TaskSet

log = logging.getLogger(__name__)

__all__ = ["TaskSpecError", "read_id_list", "resolve_task_spec", "task_entry", "training_ids"]


def resolve_task_spec(
    spec: str | Any,
    *,
    meta: str | None = None,
    source: str = "builtin",
    skip_unsupported: bool = False,
    provider: str = "local",
) -> TaskSet:
    """The tasks ``spec`` names, in order, refusing those ``provider`` cannot run unless
    ``skip_unsupported`` (:func:`osworld_gym.support.resolve_tasks` does the work).

    Raises:
        TaskSpecError: unknown domain, unknown ids, unreadable list, unsupported task.
    """
    return resolve_tasks(
        spec,
        meta=meta,
        source=source,
        unsupported="skip" if skip_unsupported else "raise",
        provider=provider,
    )


def task_entry(task: Task) -> dict[str, Any]:
    """What the run manifest keeps about a task."""
    return {
        "id": task.id,
        "domain": task.domain,
        "infeasible": bool(task.is_infeasible),
        "instruction": task.instruction,
    }


def training_ids(path: str | Path) -> set[str]:
    """Task ids of a training task list (any id list format above)."""
    path = Path(path)
    if not path.is_file():
        raise TaskSpecError(f"training task list {path} does not exist")
    return set(read_id_list(path)[0])
