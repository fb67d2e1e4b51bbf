"""Which OSWorld options a metric honours, declared next to the metric.

OSWorld metrics take their options as keyword arguments. Some of ours honour only part of
OSWorld's options; silently ignoring one that asks for an extra check would turn a failure into
a pass. A metric therefore declares what it honours with :func:`honours`, on the metric itself
(a metric without the decorator honours exactly the keywords of its signature); ``check=``
adds the metric's own test of option *values* (``compare_table``: its rule types). At run time
:func:`check_options` rejects an *active* (truthy) option the metric does not know, and task
classification (:mod:`osworld_gym.support.classifier`) asks :func:`option_problems` to mark such
tasks unsupported before any episode, whatever the metric.

>>> @honours("ignore_case")
... def same(a, b, **options):
...     check_options("same", options, same.honoured_options)
...     return float(a == b)
>>> unhonoured_options(same, {"ignore_case": True, "fancy": True, "off": False})
['fancy']
>>> option_problems("same", same, {"fancy": 1})
['unsupported metric option: same(fancy)']
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


#: A metric's own check of its option values: the reasons it cannot honour them (none: fine).
OptionCheck = Callable[[Mapping[str, Any]], list[str]]


def honours(*names: str, check: OptionCheck | None = None) -> Callable[[F], F]:
    """Decorator: record the option names ``fn`` honours as ``fn.honoured_options``, and
    ``check`` (reasons its option values cannot be honoured) as ``fn.option_check``."""

    def mark(fn: F) -> F:
        fn.honoured_options = frozenset(names)  # type: ignore[attr-defined]
        fn.option_check = check  # type: ignore[attr-defined]
        return fn

    return mark


def option_problems(name: str, fn: Callable[..., Any], options: Mapping[str, Any]) -> list[str]:
    """Why metric ``name`` (``fn``) cannot honour ``options``, as task classification words it:
    the metric's own ``check`` first, then ``unsupported metric option: name(a, b)`` for the
    options it does not honour (:func:`unhonoured_options`)."""
    check: OptionCheck | None = getattr(fn, "option_check", None)
    out = list(check(options)) if check is not None else []
    bad = unhonoured_options(fn, options)
    if bad:
        out.append(f"unsupported metric option: {name}({', '.join(bad)})")
    return out


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
