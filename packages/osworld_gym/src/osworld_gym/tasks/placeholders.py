"""Placeholders in task JSON: ``{CLIENT_PASSWORD}`` and the screen-size family.

OSWorld task commands may contain exactly these five names in braces; they are replaced before a
step runs. Every other brace (shell ``${VAR}``, Python dict literals, ``{}`` in ``find -exec``)
is left alone.

>>> values = placeholder_values(client_password="pw", screen_size=(1920, 1080))
>>> substitute("echo {CLIENT_PASSWORD} | sudo -S true", values)
'echo pw | sudo -S true'
>>> substitute(["click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF})", {"n": "{X}"}], values)
['click(960, 540)', {'n': '{X}'}]
"""

from __future__ import annotations

import re
from typing import Any

#: The only names that are substituted.
PLACEHOLDER_NAMES: tuple[str, ...] = (
    "CLIENT_PASSWORD",
    "SCREEN_WIDTH",
    "SCREEN_HEIGHT",
    "SCREEN_WIDTH_HALF",
    "SCREEN_HEIGHT_HALF",
)

_PATTERN = re.compile(r"\{(" + "|".join(PLACEHOLDER_NAMES) + r")\}")


def placeholder_values(
    *, client_password: str = "password", screen_size: tuple[int, int] = (1920, 1080)
) -> dict[str, str]:
    """The replacement text for every placeholder name.

    Halves are rounded down, like OSWorld's ``width // 2``.

    >>> placeholder_values(screen_size=(1025, 769))["SCREEN_WIDTH_HALF"]
    '512'
    """
    width, height = screen_size
    return {
        "CLIENT_PASSWORD": client_password,
        "SCREEN_WIDTH": str(width),
        "SCREEN_HEIGHT": str(height),
        "SCREEN_WIDTH_HALF": str(width // 2),
        "SCREEN_HEIGHT_HALF": str(height // 2),
    }


def substitute(value: Any, values: dict[str, str]) -> Any:
    """Return ``value`` with placeholders replaced in every string it contains.

    Strings, lists, tuples and dict *values* are walked recursively (dict keys are kept);
    other objects are returned unchanged. The input is not modified.

    >>> substitute({"seconds": 2, "cmd": "${HOME}/{SCREEN_WIDTH}"}, {"SCREEN_WIDTH": "800"})
    {'seconds': 2, 'cmd': '${HOME}/800'}
    """
    if isinstance(value, str):
        return _PATTERN.sub(lambda m: values.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    if isinstance(value, tuple):
        return tuple(substitute(v, values) for v in value)
    if isinstance(value, dict):
        return {k: substitute(v, values) for k, v in value.items()}
    return value
