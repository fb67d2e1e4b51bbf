"""Seeded variation: one task definition, many reproducible instances.

A task may declare ``"variables"``; each is drawn from a generator seeded by the task id and a
variation seed, and substituted wherever ``{{name}}`` appears in the instruction, setup steps,
evaluator and oracle. The same id and seed always give the same instance; ``seed=None`` gives
the *default* instance (every variable at its ``default``, else its first choice / lower bound).

Variable specs:

- ``{"choice": [a, b, ...]}``: one of the values;
- ``{"randint": [lo, hi]}``: an integer, both ends included;
- ``{"sample": [[a, b, c, ...], k], "sep": ", "}``: ``k`` distinct values joined by ``sep``.

Any spec may add ``"default"``. Values are substituted as text (``str(value)``); a string
that is exactly ``"{{name}}"`` becomes the value itself, keeping its type (an int stays an int).

>>> d = {"id": "v-1", "instruction": "Make {{n}} copies of {{name}}.txt",
...      "variables": {"n": {"randint": [2, 9]}, "name": {"choice": ["alpha", "beta", "gamma"]}}}
>>> instantiate_dict(d, None)["instruction"]
'Make 2 copies of alpha.txt'
>>> instantiate_dict(d, 7)["instruction"] == instantiate_dict(d, 7)["instruction"]
True
>>> sorted({instantiate_dict(d, s)["instruction"] for s in range(40)})[:2]
['Make 2 copies of alpha.txt', 'Make 2 copies of beta.txt']
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

from osworld_gym.errors import TaskError

_REF = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")


def draw(task_id: str, variables: dict[str, Any], seed: int | None) -> dict[str, Any]:
    """Values for ``variables`` (in declaration order) for this task id and seed."""
    rng = random.Random(f"{task_id}/{seed}")
    out: dict[str, Any] = {}
    for name, spec in variables.items():
        if not isinstance(spec, dict):
            raise TaskError(f"task {task_id!r}: variable {name!r} must be an object, got {spec!r}")
        if seed is None and "default" in spec:
            out[name] = spec["default"]
        elif "choice" in spec:
            values = spec["choice"]
            _need(
                isinstance(values, list) and values,
                task_id,
                name,
                "'choice' must be a non-empty list",
            )
            out[name] = values[0] if seed is None else rng.choice(values)
        elif "randint" in spec:
            bounds = spec["randint"]
            _need(
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(isinstance(b, int) for b in bounds)
                and bounds[0] <= bounds[1],
                task_id,
                name,
                "'randint' must be [lo, hi] integers",
            )
            out[name] = bounds[0] if seed is None else rng.randint(*bounds)
        elif "sample" in spec:
            pool_k = spec["sample"]
            _need(
                isinstance(pool_k, list)
                and len(pool_k) == 2
                and isinstance(pool_k[0], list)
                and isinstance(pool_k[1], int)
                and 0 < pool_k[1] <= len(pool_k[0]),
                task_id,
                name,
                "'sample' must be [[values...], k] with 0 < k <= len(values)",
            )
            pool, k = pool_k
            picked = pool[:k] if seed is None else rng.sample(pool, k)
            out[name] = str(spec.get("sep", ", ")).join(map(str, picked))
        else:
            raise TaskError(
                f"task {task_id!r}: variable {name!r} needs 'choice', 'randint' or 'sample'"
            )
    return out


def substitute_vars(value: Any, values: dict[str, Any], task_id: str = "?") -> Any:
    """Replace ``{{name}}`` in every string inside ``value`` (lists and dicts walked)."""
    if isinstance(value, str):
        whole = _REF.fullmatch(value)
        if whole:
            return _lookup(values, whole.group(1), task_id)
        return _REF.sub(lambda m: str(_lookup(values, m.group(1), task_id)), value)
    if isinstance(value, list):
        return [substitute_vars(v, values, task_id) for v in value]
    if isinstance(value, dict):
        return {k: substitute_vars(v, values, task_id) for k, v in value.items()}
    return value


def instantiate_dict(d: dict[str, Any], seed: int | None) -> dict[str, Any]:
    """The task JSON with its variables drawn for ``seed`` and substituted (``d`` untouched)."""
    variables = d.get("variables")
    if not variables:
        return d
    task_id = str(d.get("id"))
    values = draw(task_id, variables, seed)
    out = {
        k: (v if k == "variables" else substitute_vars(copy.deepcopy(v), values, task_id))
        for k, v in d.items()
    }
    out["variation"] = {"seed": seed, "values": values}
    return out


def _lookup(values: dict[str, Any], name: str, task_id: str) -> Any:
    if name not in values:
        raise TaskError(f"task {task_id!r} uses {{{{{name}}}}} but declares no variable {name!r}")
    return values[name]


def _need(ok: Any, task_id: str, name: str, message: str) -> None:
    if not ok:
        raise TaskError(f"task {task_id!r}: variable {name!r}: {message}")
