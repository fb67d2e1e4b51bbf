"""Which OSWorld options a metric honours, declared next to the metric.

OSWorld metrics take their options as keyword arguments. Some of ours honour only part of
OSWorld's options; silently ignoring one that asks for an extra check would turn a failure into
a pass. A metric therefore declares what it honours with :func:`honours`; at run time
:func:`check_options` rejects an *active* (truthy) option it does not know, and task
classification (:mod:`osworld_gym.support.classifier`) uses :func:`unhonoured_options` to mark such
tasks unsupported before any episode.

>>> @honours("ignore_case")
... def same(a, b, **options):
...     check_options("same", options, same.honoured_options)
...     return float(a == b)
>>> unhonoured_options(same, {"ignore_case": True, "fancy": True, "off": False})
['fancy']
>>> same("a", "a", fancy=True)
Traceback (most recent call last):
...
NotImplementedError: same: option 'fancy' is not implemented in osworld-gym (honoured: ignore_case)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def honours(*names: str) -> Callable[[F], F]:
    """Decorator: record the option names ``fn`` honours as ``fn.honoured_options``."""

    def mark(fn: F) -> F:
        fn.honoured_options = frozenset(names)  # type: ignore[attr-defined]
        return fn

    return mark


def honoured_options(fn: Callable[..., Any]) -> frozenset[str] | None:
    """Options ``fn`` honours; ``None`` means "whatever its signature accepts"."""
    declared = getattr(fn, "honoured_options", None)
    if declared is not None:
        return frozenset(declared)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY)


def unhonoured_options(fn: Callable[..., Any], options: Mapping[str, Any]) -> list[str]:
    """Names of ``options`` that ``fn`` would not honour (sorted).

    For a metric declared with :func:`honours`, only truthy unknown options count (see
    :func:`check_options`); for a plain function, every keyword its signature lacks (Python
    would reject it).
    """
    known = honoured_options(fn)
    if known is None:
        return []
    declared = getattr(fn, "honoured_options", None) is not None
    return sorted(k for k, v in options.items() if k not in known and (v or not declared))


def check_options(name: str, options: Mapping[str, Any], known: Iterable[str]) -> None:
    """Raise ``NotImplementedError`` for a truthy option not in ``known`` (falsy ones: no-op).

    An option set to ``false``/``0``/``null`` disables a check we do not run anyway, so it is
    harmless; a truthy one asks for something we cannot do, and scoring without it would lie.
    """
    known = frozenset(known)
    bad = sorted(k for k, v in options.items() if k not in known and v)
    if bad:
        listed = ", ".join(sorted(known)) or "none"
        raise NotImplementedError(
            f"{name}: option {bad[0]!r} is not implemented in osworld-gym (honoured: {listed})"
        )
