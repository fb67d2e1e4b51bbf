"""Task sets for training: the dataset rows TRL iterates over.

``tasks`` (``arpo-train --tasks``) is resolved by :func:`osworld_gym.support.resolve_tasks`, the
one resolver every CLI uses (``builtin[:DOMAIN,...]``, ``pixels:...``, OSWorld folders, id lists,
task lists written by ``arpo-train select-tasks``). Tasks the desktops cannot run are skipped
with a logged reason: a training set is whatever of the suite runs (``--dry_run`` counts them).

>>> ts = resolve_tasks("builtin", ["os-mkdir-001"])
>>> [t.id for t in ts]
['os-mkdir-001']
>>> task_dataset(ts)[0]["task_id"]
'os-mkdir-001'
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from datasets import Dataset
from osworld_gym.support import (
    TASK_LIST_KIND,
    Capabilities,
    write_task_list,
)
from osworld_gym.support import resolve_tasks as _resolve_tasks
from osworld_gym.tasks import TaskSet

log = logging.getLogger(__name__)

__all__ = ["TASK_LIST_KIND", "resolve_tasks", "task_dataset", "write_task_list"]


def resolve_tasks(
    spec: Any, task_ids: Iterable[str] | None = None, *, provider: str | Capabilities = "local"
) -> TaskSet:
    """The training tasks of ``spec``, only ``task_ids`` when given (in that order); tasks
    ``provider``'s desktops cannot run are left out.

    Raises:
        osworld_gym.support.TaskSpecError: see :func:`osworld_gym.support.resolve_tasks`.
    """
    return _resolve_tasks(spec, task_ids, unsupported="skip", provider=provider)


def task_dataset(tasks: TaskSet, task_ids: Iterable[str] | None = None) -> Dataset:
    """One row per task: a conversational ``prompt`` (the instruction; the trainer builds the real
    multi-turn prompt itself) and the ``task_id``."""
    ids = set(task_ids) if task_ids is not None else None
    rows = [
        {"prompt": [{"role": "user", "content": t.instruction}], "task_id": t.id}
        for t in tasks
        if ids is None or t.id in ids
    ]
    if not rows:
        raise ValueError("no task rows to train on")
    return Dataset.from_list(rows)
