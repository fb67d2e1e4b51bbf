"""One resolver for task specs: what ``--tasks SPEC`` means in every CLI.

``osworld-gym tasks``, ``arpo-train --tasks`` and ``arpo-eval run --tasks`` (and
``gym.make(..., tasks=...)``) all go through :func:`resolve_tasks`. ``SPEC`` is one of:

* ``builtin``: osworld-gym's built-in suite; ``builtin:DOMAIN[,DOMAIN...]``: some of its domains;
* ``pixels[:SPLIT[:KINDS[:N]]]``: the generated pixel family (:mod:`osworld_gym.tasks.pixels`);
* an OSWorld ``evaluation_examples`` directory (``meta`` picks the meta file, default
  ``test_all.json``), a meta JSON file ``{"<domain>": ["<id>", ...]}`` next to ``examples/``, a
  task JSON file or a directory of them (:func:`osworld_gym.support.load_tasks`);
* an **id list file**: ``.txt`` with one task id per line (``#`` comments, blank lines and an
  optional ``<domain>/`` prefix allowed), a JSON list of ids, or a task list
  (``{"kind": "arpo-task-list", "source", "task_ids"}``, written by :func:`write_task_list`, e.g.
  by ``arpo-train select-tasks``; the ``kind`` is optional). Ids are looked up in the list's
  ``source``, else in the ``source`` argument (default ``builtin``);
* a :class:`~osworld_gym.tasks.TaskSet` or a list of tasks / task dicts (Python callers).

Tasks the provider cannot run are left out and reported (``unsupported="skip"``, the trainer's
and the environment's policy) or refused (``"raise"``, ``arpo-eval``'s unless
``--skip-unsupported``). A spec that cannot be resolved raises :class:`TaskSpecError` naming it.

>>> [t.id for t in resolve_tasks("builtin:os")][:2]
['os-mkdir-001', 'os-rename-001']
>>> import tempfile, pathlib
>>> ids = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
>>> _ = ids.write_text("# two tasks\\nos/os-copy-001\\nos-infeasible-001\\n")
>>> [t.id for t in resolve_tasks(str(ids))]
['os-copy-001', 'os-infeasible-001']
>>> resolve_tasks("builtin:nope")
Traceback (most recent call last):
...
osworld_gym.support.specs.TaskSpecError: --tasks builtin:nope: no task in domain(s) ['nope']; ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from osworld_gym.errors import TaskError
from osworld_gym.providers.capabilities import Capabilities
from osworld_gym.support.load import builtin_tasks, load_tasks
from osworld_gym.tasks.builtin import BUILTIN_DIR
from osworld_gym.tasks.loader import TaskSet
from osworld_gym.tasks.pixels import is_family_spec

#: The ``kind`` of a task list file (:func:`write_task_list`).
TASK_LIST_KIND = "arpo-task-list"

#: The forms a ``--tasks`` value may take, for error messages.
SPEC_FORMS = (
    "'builtin', 'builtin:DOMAIN[,DOMAIN]', 'pixels[:SPLIT[:KINDS[:N]]]', an id list file "
    "(.txt, JSON list, task list), a task JSON file or directory, or an evaluation_examples "
    "directory / meta file"
)


class TaskSpecError(TaskError):
    """A ``--tasks`` spec, id list or task id selection that cannot be resolved (also a
    :class:`ValueError`, through :class:`~osworld_gym.errors.TaskError`)."""


def resolve_tasks(
    spec: Any,
    task_ids: Iterable[str] | None = None,
    *,
    meta: str | os.PathLike[str] | None = None,
    source: str = "builtin",
    domains: str | Iterable[str] | None = None,
    unsupported: Literal["skip", "raise"] = "skip",
    provider: str | Capabilities = "local",
) -> TaskSet:
    """The tasks ``spec`` names, in order (see the module docstring).

    Args:
        spec: the ``--tasks`` value, a TaskSet, or a list of tasks / task dicts.
        task_ids: keep only these tasks, in this order.
        meta: the meta file of an ``evaluation_examples`` directory.
        source: what plain id lists (with no ``source`` of their own) are resolved against.
        domains: keep only tasks of these domain(s).
        unsupported: ``"skip"`` leaves out the tasks ``provider`` cannot run (reported in
            ``TaskSet.unsupported``), ``"raise"`` refuses the spec at the first one.
        provider: the backend tasks are classified for (a name, or its capabilities).

    Raises:
        TaskSpecError: the spec names nothing that exists, an unknown domain or task id, an
            unreadable id list, an unsupported task under ``"raise"``, or no task at all. The
            message starts with the spec.
    """
    if unsupported not in ("skip", "raise"):
        raise ValueError(f"unsupported must be 'skip' or 'raise', not {unsupported!r}")
    label = spec if isinstance(spec, str | Path) else type(spec).__name__
    try:
        tasks = _resolve(spec, meta, source, unsupported == "raise", provider)
        if domains is not None:
            tasks = tasks.filter(domains)
        if task_ids is not None:
            ids = list(task_ids)
            missing = [i for i in ids if i not in tasks]
            if missing:
                where = provider if isinstance(provider, str) else provider.source or "the desktops"
                raise TaskSpecError(
                    f"{len(missing)} task id(s) not found (or unsupported on {where}): "
                    f"{', '.join(missing[:10])}"
                )
            tasks = TaskSet([tasks[i] for i in dict.fromkeys(ids)])
    except TaskError as e:
        text = str(e)
        prefix = f"--tasks {label}"
        raise TaskSpecError(text if text.startswith(prefix) else f"{prefix}: {text}") from e
    if len(tasks) == 0:
        raise TaskSpecError(f"--tasks {label}: no tasks")
    return tasks


def _resolve(
    spec: Any,
    meta: str | os.PathLike[str] | None,
    source: str,
    strict: bool,
    provider: str | Capabilities,
) -> TaskSet:
    if isinstance(spec, TaskSet):
        return spec
    if not isinstance(spec, str | Path):
        return load_tasks(spec, strict=strict, provider=provider)
    text = str(spec)
    if text == "builtin" or text.startswith("builtin:"):
        wanted = [d for d in text.partition(":")[2].split(",") if d] or None
        if provider == "local":
            return builtin_tasks(wanted)
        # the built-in suite is whatever of it runs on these desktops, whatever the policy
        return load_tasks(BUILTIN_DIR, domains=wanted, provider=provider)
    path = Path(text)
    if is_family_spec(text) and not path.exists():
        return load_tasks(text, strict=strict, provider=provider)
    if _is_id_list(path):
        ids, named_source = read_id_list(path)
        base = _resolve(named_source or source, meta, source, strict, provider)
        missing = [i for i in ids if i not in base]
        if missing:
            raise TaskSpecError(
                f"--tasks {text}: {len(missing)} task id(s) not in {named_source or source}: "
                f"{', '.join(missing[:5])}"
            )
        return TaskSet([base[i] for i in dict.fromkeys(ids)])
    if not path.exists():
        raise TaskSpecError(f"--tasks {text}: no such file or directory; use {SPEC_FORMS}")
    return load_tasks(path, meta=meta, strict=strict, provider=provider)


def read_id_list(path: str | os.PathLike[str]) -> tuple[list[str], str | None]:
    """``(ids, source)`` of an id list file (see the module docstring); ``source`` is ``None``
    unless the file names one (a task list).

    Raises:
        TaskSpecError: a JSON file that is none of the id list forms.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise TaskSpecError(f"{path}: not JSON: {e}") from e
        if isinstance(doc, list) and all(isinstance(i, str) for i in doc):
            return list(doc), None
        if isinstance(doc, dict) and "task_ids" in doc:
            src = doc.get("source")
            return [str(i) for i in doc["task_ids"]], None if src is None else str(src)
        if isinstance(doc, dict) and all(isinstance(v, list) for v in doc.values()):
            return [str(i) for ids in doc.values() for i in ids], None  # OSWorld meta file
        raise TaskSpecError(
            f"{path}: expected a JSON list of task ids, a task list with "
            "'task_ids', or an OSWorld meta file {domain: [ids]}"
        )
    ids = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.append(line.rsplit("/", 1)[-1])
    return ids, None


def _is_id_list(path: Path) -> bool:
    if not path.is_file():
        return False
    if path.suffix == ".txt":
        return True
    if path.suffix != ".json":
        return False
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError, UnicodeDecodeError):
        return False
    if isinstance(doc, list):
        return all(isinstance(i, str) for i in doc) and bool(doc)
    return isinstance(doc, dict) and ("task_ids" in doc or doc.get("kind") == TASK_LIST_KIND)


def write_task_list(
    path: str | os.PathLike[str], source: str, task_ids: list[str], **extra: Any
) -> Path:
    """Write a task list that :func:`resolve_tasks` (and every ``--tasks``) reads back."""
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
