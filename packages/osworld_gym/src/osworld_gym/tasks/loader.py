"""Read tasks from JSON files, directories, OSWorld's ``evaluation_examples``, or Python objects.

:func:`collect` accepts:

* ``"builtin"``: the tasks shipped with osworld-gym (:mod:`osworld_gym.tasks.builtin`);
* ``"pixels[:SPLIT[:KINDS[:N]]]"``: the generated pixel family (:mod:`osworld_gym.tasks.pixels`);
* a :class:`Task`, a task ``dict``, or a list of them;
* a path to a task JSON file (one object, or a list of objects);
* a path to an OSWorld meta file (``{"<domain>": ["<id>", ...]}``, e.g. ``test_all.json``): the
  tasks are read from ``examples/<domain>/<id>.json`` next to it;
* an OSWorld ``evaluation_examples`` directory (it has an ``examples/`` folder): the tasks listed
  in ``meta`` (default ``test_all.json`` when present, else every file under ``examples/``);
* any other directory: every ``*.json`` file below it, each a task or a list of tasks.

It yields each task object with the domain and file it came from, unchecked; :class:`TaskSet`
holds a loaded set. :func:`osworld_gym.support.load_tasks` validates what this reads and leaves
out the tasks the provider cannot run (classifying is a floor above the task format).

>>> [(item["id"], domain) for item, domain, _ in collect({"id": "a", "instruction": "x",
...                                                      "evaluator": {"func": "infeasible"}})]
[('a', None)]
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from osworld_gym.errors import TaskError
from osworld_gym.tasks.pixels import family_tasks, is_family_spec
from osworld_gym.tasks.task import Task

logger = logging.getLogger(__name__)

DEFAULT_META = "test_all.json"

#: ``collect(BUILTIN)`` reads the tasks shipped with osworld-gym.
BUILTIN = "builtin"
_BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"

TaskSpec = Task | dict[str, Any] | Sequence[Task | dict[str, Any]] | str | os.PathLike[str]


class TaskSet(Sequence[Task]):
    """An ordered, id-indexed collection of tasks.

    Iteration and integer indexing follow the order the tasks were given in. :meth:`for_seed`
    instead uses the *canonical* order, tasks sorted by ``(domain, id)``, so that the
    seed -> task mapping depends only on which tasks are in the set, not on how they were listed:
    ``for_seed(seed) == sorted_tasks[seed % len(self)]``. A vector env whose sub-env ``i`` resets
    with seed ``base + i`` therefore spreads over consecutive tasks, and the same seeds always
    give the same tasks.

    Raises:
        TaskError: on duplicate ids or an empty set.
    """

    def __init__(self, tasks: Iterable[Task], unsupported: dict[str, str] | None = None):
        self._tasks = list(tasks)
        #: Tasks left out at load time: id -> why (see :func:`osworld_gym.support.load_tasks`).
        self.unsupported: dict[str, str] = dict(unsupported or {})
        if not self._tasks:
            raise TaskError("a task set needs at least one task")
        self._by_id: dict[str, Task] = {}
        for t in self._tasks:
            if t.id in self._by_id:
                raise TaskError(f"duplicate task id {t.id!r}")
            self._by_id[t.id] = t
        self._canonical = sorted(self._tasks, key=lambda t: (t.domain, t.id))

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._by_id
        return item in self._tasks

    @overload
    def __getitem__(self, key: int | str) -> Task: ...
    @overload
    def __getitem__(self, key: slice) -> TaskSet: ...

    def __getitem__(self, key: int | str | slice) -> Task | TaskSet:
        """A task by id (``str``) or position (``int``); a slice gives a new :class:`TaskSet`.

        Raises:
            KeyError: unknown id (the message lists a few known ones).
            IndexError: position out of range.
        """
        if isinstance(key, str):
            try:
                return self._by_id[key]
            except KeyError:
                sample = ", ".join(list(self._by_id)[:5])
                raise KeyError(f"no task with id {key!r} (e.g. {sample})") from None
        if isinstance(key, slice):
            return TaskSet(self._tasks[key])
        return self._tasks[key]

    def __repr__(self) -> str:
        return f"TaskSet({len(self)} tasks, domains={self.domains()})"

    def ids(self) -> list[str]:
        """Task ids in order."""
        return [t.id for t in self._tasks]

    def domains(self) -> list[str]:
        """The sorted distinct domains."""
        return sorted({t.domain for t in self._tasks})

    def for_seed(self, seed: int) -> Task:
        """The task for ``seed``: ``sorted(tasks, key=(domain, id))[seed % len(self)]``."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        return self._canonical[seed % len(self._canonical)]

    def filter(self, domains: str | Iterable[str]) -> TaskSet:
        """The tasks of the given domain(s).

        Raises:
            TaskError: none of the tasks is in those domains.
        """
        wanted = {domains} if isinstance(domains, str) else set(domains)
        kept = [t for t in self._tasks if t.domain in wanted]
        if not kept:
            raise TaskError(
                f"no task in domain(s) {sorted(wanted)}; available: {', '.join(self.domains())}"
            )
        return TaskSet(kept)


_Item = tuple[Task | dict[str, Any], str | None, str | None]  # (task, domain, origin)


def collect(spec: Any, meta: Any = None, wanted: set[str] | None = None) -> Iterator[_Item]:
    """Yield ``(task object or Task, domain or None, origin file or None)`` for each task
    ``spec`` names (see the module docstring); ``meta``: the meta file of an
    ``evaluation_examples`` directory; ``wanted``: domains to read from a meta file.

    Raises:
        TaskError: a file is missing or not JSON, a domain is not in the meta file.
    """
    if isinstance(spec, Task | dict):
        yield spec, None, None
        return
    if spec == BUILTIN and not Path(spec).exists():
        yield from _collect_path(_BUILTIN_DIR, meta, wanted)
        return
    if is_family_spec(spec) and not Path(spec).exists():
        try:
            family = family_tasks(spec)
        except ValueError as e:
            raise TaskError(str(e)) from e
        for item in family:
            yield item, item["domain"], None
        return
    if isinstance(spec, str | os.PathLike):
        yield from _collect_path(Path(spec), meta, wanted)
        return
    if isinstance(spec, Sequence):
        for item in spec:
            if not isinstance(item, Task | dict):
                raise TaskError(f"expected task objects in the list, got {type(item).__name__}")
            yield item, None, None
        return
    raise TaskError(f"cannot load tasks from a {type(spec).__name__}")


def _collect_path(path: Path, meta: Any, wanted: set[str] | None) -> Iterator[_Item]:
    if path.is_dir():
        if (path / "examples").is_dir():
            meta_path = _meta_path(path, meta)
            if meta_path is not None:
                yield from _collect_meta(meta_path, path / "examples", wanted)
            else:
                for file in sorted((path / "examples").glob("*/*.json")):
                    yield from _items_in_file(file, domain=file.parent.name)
            return
        files = sorted(path.rglob("*.json"))
        if not files:
            raise TaskError(f"no .json task files in directory {path}")
        for file in files:
            data = _read_json(file)
            if _is_meta(data):
                logger.debug("skipping meta file %s in a plain task directory", file)
                continue
            yield from _items_in_file(file, data=data)
        return
    if not path.is_file():
        raise TaskError(f"task file or directory {path} does not exist")
    data = _read_json(path)
    if _is_meta(data):
        yield from _collect_meta(path, path.parent / "examples", wanted, data)
    else:
        yield from _items_in_file(path, data=data)


def _meta_path(directory: Path, meta: Any) -> Path | None:
    if meta is None:
        default = directory / DEFAULT_META
        return default if default.is_file() else None
    candidate = Path(meta)
    if not candidate.is_absolute() and not candidate.exists():
        candidate = directory / candidate
    if not candidate.is_file():
        raise TaskError(f"meta file {meta} not found (looked in {directory})")
    return candidate


def _collect_meta(
    meta_path: Path, examples: Path, wanted: set[str] | None, data: Any = None
) -> Iterator[_Item]:
    data = _read_json(meta_path) if data is None else data
    if not _is_meta(data):
        raise TaskError(f"{meta_path} is not a meta file of the form {{domain: [task ids]}}")
    if wanted is not None:
        unknown = wanted - data.keys()
        if unknown:
            raise TaskError(
                f"domain(s) {sorted(unknown)} not in {meta_path}; available: "
                f"{', '.join(sorted(data))}"
            )
    for domain, ids in data.items():
        if wanted is not None and domain not in wanted:
            continue
        for task_id in ids:
            file = examples / domain / f"{task_id}.json"
            if not file.is_file():
                raise TaskError(f"{meta_path} lists task {task_id!r} but {file} does not exist")
            yield from _items_in_file(file, domain=domain)


def _items_in_file(file: Path, domain: str | None = None, data: Any = None) -> Iterator[_Item]:
    data = _read_json(file) if data is None else data
    if isinstance(data, dict):
        yield data, domain, str(file)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield item, domain, f"{file}[{i}]"
    else:
        raise TaskError(f"{file} must hold a task object or a list of them")


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskError(f"{file} is not valid JSON: {exc}") from exc
    except OSError as exc:
        raise TaskError(f"cannot read {file}: {exc}") from exc


def _is_meta(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(data)
        and "id" not in data
        and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
            for k, v in data.items()
        )
    )


def describe(spec: Any) -> str:
    """A short description of ``spec`` for messages."""
    if isinstance(spec, str | os.PathLike):
        return str(spec)
    if isinstance(spec, Task | dict):
        return "1 task object"
    return f"{len(spec)} task objects" if isinstance(spec, Sequence) else type(spec).__name__
