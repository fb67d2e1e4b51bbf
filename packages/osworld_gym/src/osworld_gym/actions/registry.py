"""The registry of action sets and the one function that builds them.

>>> make_action_set("uitars", screen_size=(1280, 720)).screen_size
(1280, 720)
>>> make_action_set("nope")
Traceback (most recent call last):
...
ValueError: unknown action set 'nope'; choose one of ['computer_13', 'pyautogui', 'uitars']
"""

from __future__ import annotations

from typing import Any

from osworld_gym.actions.base import ActionSet
from osworld_gym.actions.computer13 import Computer13ActionSet
from osworld_gym.actions.pyautogui import PyAutoGUIActionSet
from osworld_gym.actions.uitars import UITarsActionSet

#: name -> action set class
ACTION_SETS: dict[str, type[ActionSet]] = {
    cls.name: cls for cls in (PyAutoGUIActionSet, Computer13ActionSet, UITarsActionSet)
}


def make_action_set(
    name: str, *, screen_size: tuple[int, int] = (1920, 1080), **kw: Any
) -> ActionSet:
    """Build the action set registered as ``name`` for a ``screen_size`` desktop.

    Extra keyword arguments go to the set's constructor (e.g. ``coordinate_mode`` for ``uitars``).
    """
    cls = ACTION_SETS.get(name)
    if cls is None:
        raise ValueError(f"unknown action set {name!r}; choose one of {sorted(ACTION_SETS)}")
    return cls(screen_size=screen_size, **kw)
