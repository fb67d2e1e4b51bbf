"""Check an ``evaluator`` object and normalise it into one record per metric.

OSWorld accepts a single metric (``func`` a string, ``result``/``expected``/``options`` objects)
or several (``func`` a list and the others parallel lists, entries of ``expected``/``options``
may be ``null``) combined by ``conj`` (``"and"``, the default, or ``"or"``). :func:`plan` turns
both shapes into an :class:`EvaluatorPlan`; :func:`validate_evaluator` is the same check for
task loading, so a task naming an unknown getter or metric is rejected before any episode.

>>> p = plan({"func": ["exact_match", "check_include_exclude"], "conj": "or",
...           "result": [{"type": "vm_command_line", "command": "ls"},
...                      {"type": "vm_command_line", "command": "pwd"}],
...           "expected": [{"type": "rule", "rules": {"expected": "a\\n"}}, None],
...           "options": [{}, None]})
>>> p.conj, [m.func for m in p.metrics], p.metrics[1].expected
('or', ['exact_match', 'check_include_exclude'], None)
>>> validate_evaluator({"func": "exact_match", "result": {"type": "vm_magic"}})
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
osworld_gym.errors.TaskError: evaluator.result has unknown getter type 'vm_magic' (supported: ...)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osworld_gym.errors import TaskError
from osworld_gym.tasks.evaluator_registry import getter_names, has_getter, has_metric, metric_names
from osworld_gym.tasks.setup import validate_steps

#: Config keys the built-in getters cannot work without.
GETTER_REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "vm_file": ("path", "dest"),
    "cloud_file": ("path", "dest"),
    "cache_file": ("path",),
    "vm_command_line": ("command",),
    "vm_command_error": ("command",),
    "rule": ("rules",),
    "list_directory": ("path",),
    "rule_relativeTime": ("rules",),
    "vlc_config": ("dest",),
    "vlc_playing_info": ("dest",),
    "gimp_config_file": ("file_name", "dest"),
    "audio_in_slide": ("ppt_file_path", "slide_index", "dest"),
    "background_image_in_slide": ("ppt_file_path", "slide_index", "dest"),
}


@dataclass(frozen=True)
class MetricSpec:
    """One metric of an evaluator: its name, getter configs and keyword options."""

    func: str
    result: dict[str, Any] | None
    expected: dict[str, Any] | None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluatorPlan:
    """An evaluator, checked: ``infeasible`` or a list of metrics joined by ``conj``."""

    metrics: list[MetricSpec]
    conj: str = "and"
    postconfig: list[dict[str, Any]] = field(default_factory=list)
    infeasible: bool = False


def validate_evaluator(evaluator: Any, *, task_id: str | None = None) -> None:
    """Raise :class:`TaskError` if ``evaluator`` is malformed or names an unknown getter/metric.

    Also checks the ``postconfig`` steps (:func:`osworld_gym.tasks.setup.validate_steps`).
    """
    plan(evaluator, task_id=task_id)


def plan(evaluator: Any, *, task_id: str | None = None) -> EvaluatorPlan:
    """Validate ``evaluator`` and return its normalised form.

    Raises:
        TaskError: naming the task, the field and the problem.
    """
    who = f"task {task_id!r}: " if task_id else ""
    if not isinstance(evaluator, dict):
        raise TaskError(f"{who}'evaluator' must be an object, got {type(evaluator).__name__}")
    func = evaluator.get("func")
    if isinstance(func, str):
        funcs, single = [func], True
    elif isinstance(func, list) and func and all(isinstance(f, str) for f in func):
        funcs, single = list(func), False
    else:
        raise TaskError(f"{who}evaluator.func must be a metric name or a non-empty list of names")
    for name in funcs:
        if not has_metric(name):
            raise TaskError(
                f"{who}evaluator.func names unknown metric {name!r} "
                f"(supported: {', '.join(metric_names())})"
            )
    conj = evaluator.get("conj", "and")
    if conj not in ("and", "or"):
        raise TaskError(f"{who}evaluator.conj must be 'and' or 'or', got {conj!r}")
    postconfig = evaluator.get("postconfig") or []
    validate_steps(postconfig, phase="evaluator.postconfig", task_id=task_id)

    if single and funcs[0] == "infeasible":
        return EvaluatorPlan(metrics=[], conj=conj, postconfig=postconfig, infeasible=True)
    if "infeasible" in funcs:
        raise TaskError(f"{who}'infeasible' must be the only metric of an evaluator")

    n = len(funcs)
    results = _per_metric(evaluator.get("result"), "result", n, single, True, who)
    expecteds = _per_metric(evaluator.get("expected"), "expected", n, single, False, who)
    options = _options(evaluator.get("options"), n, single, who)
    metrics = [
        MetricSpec(func=f, result=r, expected=e, options=o)
        for f, r, e, o in zip(funcs, results, expecteds, options, strict=True)
    ]
    return EvaluatorPlan(metrics=metrics, conj=conj, postconfig=postconfig)


def _per_metric(
    value: Any, name: str, n: int, single: bool, required: bool, who: str
) -> list[dict[str, Any] | None]:
    if value is None or value == {} or value == []:
        if required:
            raise TaskError(f"{who}evaluator.{name} is required")
        return [None] * n
    if single:
        if not isinstance(value, dict):
            raise TaskError(f"{who}evaluator.{name} must be an object when func is a single name")
        _check_getter(value, f"evaluator.{name}", who)
        return [value]
    if not isinstance(value, list) or len(value) != n:
        raise TaskError(
            f"{who}evaluator.{name} must be a list with one entry per metric ({n}) "
            "when func is a list"
        )
    out: list[dict[str, Any] | None] = []
    for i, entry in enumerate(value):
        if not entry:
            if required:
                raise TaskError(f"{who}evaluator.{name}[{i}] is required")
            out.append(None)
            continue
        if not isinstance(entry, dict):
            raise TaskError(f"{who}evaluator.{name}[{i}] must be an object or null")
        _check_getter(entry, f"evaluator.{name}[{i}]", who)
        out.append(entry)
    return out


def _check_getter(config: dict[str, Any], where: str, who: str) -> None:
    kind = config.get("type")
    if not isinstance(kind, str):
        raise TaskError(f"{who}{where} needs a string 'type' naming a getter")
    if not has_getter(kind):
        raise TaskError(
            f"{who}{where} has unknown getter type {kind!r} "
            f"(supported: {', '.join(getter_names())})"
        )
    for key in GETTER_REQUIRED_KEYS.get(kind, ()):
        if key not in config:
            raise TaskError(f"{who}{where} ({kind}) is missing {key!r}")


def _options(value: Any, n: int, single: bool, who: str) -> list[dict[str, Any]]:
    if value is None:
        return [{} for _ in range(n)]
    if single:
        if not isinstance(value, dict):
            raise TaskError(f"{who}evaluator.options must be an object when func is a single name")
        return [value]
    if isinstance(value, dict) and not value:
        return [{} for _ in range(n)]
    if not isinstance(value, list) or len(value) != n:
        raise TaskError(f"{who}evaluator.options must be a list with one entry per metric ({n})")
    out = []
    for i, entry in enumerate(value):
        if entry is not None and not isinstance(entry, dict):
            raise TaskError(f"{who}evaluator.options[{i}] must be an object or null")
        out.append(entry or {})
    return out
