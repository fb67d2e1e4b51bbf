"""Task specs of ``arpo-eval run --tasks SPEC`` and training task lists.

``SPEC`` is one of:

* ``builtin``: osworld-gym's built-in suite; ``builtin:DOMAIN[,DOMAIN...]``: some of its domains;
* ``pixels[:SPLIT[:KINDS[:N]]]``: the generated pixel family (``pixels:heldout`` for its held-out
  instances; :mod:`osworld_gym.tasks.pixels`);
* an OSWorld ``evaluation_examples`` directory (``--meta`` picks the meta file, default
  ``test_all.json``) or a meta JSON file ``{"<domain>": ["<id>", ...]}`` next to ``examples/``;
* an **id list file**: ``.txt`` with one task id per line (``#`` comments, blank lines and an
  optional ``<domain>/`` prefix allowed), a JSON list of ids, or a task list written by
  ``arpo-train select-tasks`` (``{"kind": "arpo-task-list", "source", "task_ids"}``). Plain id
  lists are resolved against ``source`` (default ``builtin``);
* anything else :func:`osworld_gym.support.load_tasks` reads (a task JSON file, a directory).

>>> [t.id for t in resolve_task_spec("builtin:os")][:2]
['os-mkdir-001', 'os-rename-001']
>>> import tempfile, pathlib
>>> ids = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
>>> _ = ids.write_text("# two tasks\\nos/os-copy-001\\nos-infeasible-001\\n")
>>> [t.id for t in resolve_task_spec(str(ids))]
['os-copy-001', 'os-infeasible-001']
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from osworld_gym.support import builtin_tasks, load_tasks
from osworld_gym.tasks import Task, TaskSet
from osworld_gym.tasks.pixels import is_family_spec

log = logging.getLogger(__name__)


class TaskSpecError(ValueError):
    """A ``--tasks`` spec or id list that cannot be resolved."""


def read_id_list(path: str | Path) -> tuple[list[str], str | None]:
    """``(ids, source)`` of an id list file (see the module docstring); ``source`` is ``None``
    unless the file names one (an ``arpo-train select-tasks`` list, or a meta JSON)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        doc = json.loads(text)
        if isinstance(doc, list) and all(isinstance(i, str) for i in doc):
            return list(doc), None
        if isinstance(doc, dict) and "task_ids" in doc:
            return [str(i) for i in doc["task_ids"]], doc.get("source")
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
    except (json.JSONDecodeError, OSError):
        return False
    if isinstance(doc, list):
        return all(isinstance(i, str) for i in doc) and bool(doc)
    return isinstance(doc, dict) and "task_ids" in doc


def resolve_task_spec(
    spec: str | Any,
    *,
    meta: str | None = None,
    source: str = "builtin",
    skip_unsupported: bool = False,
    provider: str = "local",
) -> TaskSet:
    """The tasks ``spec`` names, in order (see the module docstring).

    Args:
        spec: the ``--tasks`` value (or a TaskSet / task objects, returned as a TaskSet).
        meta: meta file for an ``evaluation_examples`` directory.
        source: what plain id lists are resolved against.
        skip_unsupported: drop tasks the desktop cannot run (``osworld_gym.support.classifier``).
        provider: the backend ``skip_unsupported`` classifies for.

    Raises:
        TaskSpecError: unknown domain, unknown ids, unreadable list.
    """
    if isinstance(spec, TaskSet):
        return spec
    if not isinstance(spec, str | Path):
        return load_tasks(spec)
    text = str(spec)
    if text == "builtin" or text.startswith("builtin:"):
        domains = [d for d in text.partition(":")[2].split(",") if d] or None
        try:
            return builtin_tasks(domains)
        except Exception as e:  # TaskError: unknown domain
            raise TaskSpecError(f"--tasks {text}: {e}") from e
    path = Path(text)
    if is_family_spec(text) and not path.exists():
        try:
            return load_tasks(text, skip_unsupported=skip_unsupported, provider=provider)
        except Exception as e:  # TaskError: a bad split, kind or count
            raise TaskSpecError(f"--tasks {text}: {e}") from e
    if _is_id_list(path):
        ids, named_source = read_id_list(path)
        base = resolve_task_spec(
            named_source or source, meta=meta, skip_unsupported=skip_unsupported, provider=provider
        )
        missing = [i for i in ids if i not in base]
        if missing:
            raise TaskSpecError(
                f"{path}: {len(missing)} task id(s) not in {named_source or source}: "
                f"{', '.join(missing[:5])}"
            )
        return TaskSet([base[i] for i in dict.fromkeys(ids)])
    if not path.exists():
        raise TaskSpecError(
            f"--tasks {text}: no such file or directory; use 'builtin', "
            "'builtin:DOMAIN', 'pixels[:SPLIT[:KINDS[:N]]]', an id list file or an "
            "evaluation_examples directory"
        )
    return load_tasks(path, meta=meta, skip_unsupported=skip_unsupported, provider=provider)


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
