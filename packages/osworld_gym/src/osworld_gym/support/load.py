"""Load the tasks a backend can run: :func:`load_tasks`, :func:`builtin_tasks`.

Every task is validated (setup steps, getters, metrics) and classified for the provider
(:func:`osworld_gym.support.classifier.classify`) before any episode starts. By default the tasks
that cannot run are left out and reported: ``TaskSet.unsupported`` maps each one's id to the
reason (a user pointing the trainer at OSWorld's folder gets the list of what runs, not one
exception). ``strict=True`` raises at the first such task instead.

>>> ts = load_tasks([{"id": "b", "instruction": "x", "evaluator": {"func": "infeasible"}},
...                  {"id": "a", "instruction": "y", "domain": "os",
...                   "evaluator": {"func": "infeasible"}}])
>>> [t.id for t in ts], ts.domains()
(['b', 'a'], ['os', 'unknown'])
>>> ts.for_seed(0).id, ts.for_seed(1).id, ts.for_seed(2).id
('a', 'b', 'a')
>>> builtin_task("os-mkdir-001").instruction
'Create a new folder named "projects" on the Desktop (~/Desktop/projects).'
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from functools import cache

from osworld_gym.errors import TaskError
from osworld_gym.support.classifier import Capabilities, capabilities, classify
from osworld_gym.tasks.builtin import BUILTIN_DIR
from osworld_gym.tasks.loader import TaskSet, TaskSpec, collect, describe
from osworld_gym.tasks.task import Task

logger = logging.getLogger(__name__)


def load_tasks(
    spec: TaskSpec,
    *,
    meta: str | os.PathLike[str] | None = None,
    domains: str | Iterable[str] | None = None,
    strict: bool = False,
    skip_unsupported: bool | None = None,
    provider: str | Capabilities = "local",
) -> TaskSet:
    """Load and validate tasks from ``spec`` (the forms :func:`osworld_gym.tasks.loader.collect`
    reads).

    Args:
        spec: what to load.
        meta: for an ``evaluation_examples`` directory, the meta file to use (a path, or a name
            inside that directory such as ``"test_small.json"``).
        domains: keep only tasks of these domain(s).
        strict: raise at the first task that is invalid or that
            :func:`.classify` finds unsupported on ``provider``
            (it needs VS Code, GNOME, a live website, an app that is not installed, ...)
            instead of leaving it out and reporting it in ``TaskSet.unsupported``.
        skip_unsupported: the older spelling: ``True`` is the default, ``False`` is
            ``strict=True``.
        provider: the backend tasks are classified for (``"local"``: this machine).

    Raises:
        TaskError: a file is missing or not JSON, a task is malformed or unsupported, a
            requested domain does not exist, or nothing was loaded. The message names the file
            and the task.
    """
    if skip_unsupported is not None:
        strict = not skip_unsupported
    wanted = None if domains is None else ({domains} if isinstance(domains, str) else set(domains))
    items = list(collect(spec, meta, wanted))
    caps = capabilities(provider)
    tasks: list[Task] = []
    unsupported: dict[str, str] = {}
    first_error: TaskError | None = None
    for item, domain, origin in items:
        if isinstance(item, Task):
            task = item
        else:
            try:
                task = Task.from_dict(item, domain, origin=origin)
            except TaskError as exc:
                if strict:
                    raise
                first_error = first_error or exc
                key = str(item.get("id", origin)) if isinstance(item, dict) else str(origin)
                support = classify(item, caps) if isinstance(item, dict) else None
                # the classifier's reason is the shorter, actionable one ("unknown metric: x")
                unsupported[key] = (
                    str(support.reason)
                    if support is not None and not support.supported
                    else f"invalid task: {exc}"
                )
                continue
        if wanted is not None and task.domain not in wanted:
            continue
        support = classify(task, caps)
        if not support.supported:
            if strict:
                where = provider if isinstance(provider, str) else caps.source or "this desktop"
                raise TaskError(f"task {task.id!r} cannot run on {where}: {support.reason}")
            unsupported[task.id] = str(support.reason)
            continue
        tasks.append(task)
    if unsupported:
        logger.warning(
            "left out %d of %d tasks this desktop cannot run (TaskSet.unsupported "
            "says why; `osworld-gym tasks coverage` groups them)",
            len(unsupported),
            len(unsupported) + len(tasks),
        )
        for task_id, reason in unsupported.items():
            logger.info("left out task %s: %s", task_id, reason)
    if not tasks:
        what = f" in domain(s) {sorted(wanted)}" if wanted else ""
        why = "".join(f"\n  {k}: {v}" for k, v in list(unsupported.items())[:10])
        raise TaskError(
            f"no tasks loaded from {describe(spec)}{what}"
            + (f"; none can run here:{why}" if why else "")
            + (f"\nfirst invalid task: {first_error}" if first_error else "")
        )
    logger.info("loaded %d tasks from %s", len(tasks), describe(spec))
    return TaskSet(tasks, unsupported)


def builtin_tasks(domains: str | list[str] | None = None) -> TaskSet:
    """All built-in tasks (:mod:`osworld_gym.tasks.builtin`) this machine runs (optionally only
    some domains), loaded and validated once."""
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
