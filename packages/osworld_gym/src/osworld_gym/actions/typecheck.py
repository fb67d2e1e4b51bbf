"""Admission of an action object before any parser looks at it.

Under RL the agent is an adversary, and ``env.step`` may be handed anything a wrapper lets
through. An action is admitted only as an exact ``str`` or a plain JSON-like ``dict``; the
check looks at nothing but ``type()`` of each value, so no method of a hostile object
(``__repr__``, ``__eq__``, ``__hash__``, ``__str__``, ``__iter__``) ever runs.
"""

from __future__ import annotations

from typing import Any

_MAX_DEPTH = 16


def action_type_error(action: Any) -> str | None:
    """Why ``action`` is refused by type, or None: an action is an exact ``str``, or a plain
    JSON-like ``dict`` (``computer_13``). Only ``type()`` is used on it, so no method of a
    hostile object (``__repr__``, ``__eq__``, ``__hash__``, ``__str__``) ever runs; text with
    lone surrogates (a broken ``\\ud83d`` escape) cannot be typed or encoded and is refused too.

    >>> action_type_error("DONE") is None, action_type_error({"action_type": "DONE"}) is None
    (True, True)
    >>> action_type_error(b"DONE")
    'an action must be a str (or a dict for computer_13), got bytes'
    """
    if type(action) is str:
        return _surrogate_error(action)
    if type(action) is dict:
        return _plain_json_error(action, 0)
    name = type.__dict__["__name__"].__get__(type(action))
    return f"an action must be a str (or a dict for computer_13), got {name}"


def _surrogate_error(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"the action contains a lone surrogate at position {e.start} (a broken "
            "\\ud83d-style escape?); send the character itself"
        )
    return None


def _plain_json_error(value: Any, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return "the action is nested too deeply"
    kind = type(value)
    if kind is dict:
        for k, v in value.items():  # exact dict: iterating runs no method of the keys
            if type(k) is not str:
                return "an action dict must have string keys"
            problem = _surrogate_error(k) or _plain_json_error(v, depth + 1)
            if problem:
                return problem
        return None
    if kind is list:
        for v in value:
            problem = _plain_json_error(v, depth + 1)
            if problem:
                return problem
        return None
    if kind is str:
        return _surrogate_error(value)
    if kind in (int, float, bool) or value is None:
        return None
    name = type.__dict__["__name__"].__get__(kind)
    return f"an action dict may hold only JSON values, got {name}"
