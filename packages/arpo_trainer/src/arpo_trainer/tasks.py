"""Task sets for training: where they come from, and the dataset rows TRL iterates over.

``tasks`` may be ``"builtin"``, anything :func:`osworld_gym.support.load_tasks` reads, or a task
list written by ``arpo-train select-tasks`` (a JSON object with ``"source"`` and ``"task_ids"``),
which resolves to its source restricted to the listed ids.

>>> ts = resolve_tasks("builtin", ["os-mkdir-001"])
>>> [t.id for t in ts]
['os-mkdir-001']
>>> task_dataset(ts)[0]["task_id"]
'os-mkdir-001'
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from datasets import Dataset
from osworld_gym.support import Capabilities, builtin_tasks, load_tasks
from osworld_gym.tasks import TaskSet
from osworld_gym.tasks.builtin import BUILTIN_DIR

log = logging.getLogger(__name__)

TASK_LIST_KIND = "arpo-task-list"


def resolve_tasks(
    spec: Any, task_ids: Iterable[str] | None = None, *, provider: str | Capabilities = "local"
) -> TaskSet:
    """Load a task set (see the module docstring), keeping only ``task_ids`` when given (in that
    order).

    Tasks that ``provider``'s desktops (a provider name in its default configuration, or the
    :class:`~osworld_gym.support.Capabilities` of the desktops configured) cannot run (an app
    that is not installed, a metric not implemented, a live website...) are skipped with a
    logged reason instead of aborting the load: a training set is whatever of the official suite
    runs (``arpo-train --dry_run`` counts them)."""
    if isinstance(spec, TaskSet):
        tasks = spec
    elif spec == "builtin" and provider == "local":
        tasks = builtin_tasks()
    elif spec == "builtin":  # the built-in suite, classified for these desktops
        tasks = load_tasks(BUILTIN_DIR, skip_unsupported=True, provider=provider)
    elif isinstance(spec, (str, Path)) and _is_task_list(Path(spec)):
        doc = json.loads(Path(spec).read_text())
        tasks = resolve_tasks(doc["source"], doc["task_ids"], provider=provider)
    else:
        tasks = load_tasks(spec, skip_unsupported=True, provider=provider)
    if task_ids is not None:
        ids = list(task_ids)
        missing = [t for t in ids if t not in tasks]
        if missing:
            where = provider if isinstance(provider, str) else provider.source or "the desktops"
            raise KeyError(
                f"tasks not found (or unsupported on {where}) in {spec!r}: {', '.join(missing)}"
            )
        tasks = TaskSet([tasks[t] for t in ids])
    if len(tasks) == 0:
        raise ValueError(f"no tasks in {spec!r}")
    return tasks


def _is_task_list(path: Path) -> bool:
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == TASK_LIST_KIND


def write_task_list(path: str | Path, source: str, task_ids: list[str], **extra: Any) -> Path:
    """Write a task list that :func:`resolve_tasks` (and ``--tasks``) reads back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"kind": TASK_LIST_KIND, "source": str(source), "task_ids": list(task_ids), **extra},
            indent=2,
        )
        + "\n"
    )
    return path


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
