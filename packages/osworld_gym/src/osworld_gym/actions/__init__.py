"""Action sets: agent output (untrusted text or dicts) to validated primitive actions.

Three syntaxes are supported, each a single source of truth for its prompt text, parser, space
and canonical rendering: ``pyautogui`` (OSWorld's default code actions, read with :mod:`ast`,
never executed), ``computer_13`` (OSWorld's dict actions) and ``uitars`` (UI-TARS
``Thought: ... Action: ...`` text).

>>> s = make_action_set("pyautogui")
>>> s.parse("pyautogui.write('hello\\\\n')").primitives
(TypeText(text='hello\\n'),)
>>> sorted(ACTION_SETS)
['computer_13', 'pyautogui', 'uitars']
"""

from osworld_gym.actions.base import SPECIALS, ActionSet, ActionText, ParsedAction, Special
from osworld_gym.actions.computer13 import ACTION_TYPES, Computer13ActionSet
from osworld_gym.actions.pyautogui import FUNCTIONS as PYAUTOGUI_FUNCTIONS
from osworld_gym.actions.pyautogui import PyAutoGUIActionSet
from osworld_gym.actions.registry import ACTION_SETS, make_action_set
from osworld_gym.actions.uitars import UITARS_ACTIONS, UITarsActionSet, smart_resize

__all__ = [
    "ACTION_SETS",
    "ACTION_TYPES",
    "PYAUTOGUI_FUNCTIONS",
    "SPECIALS",
    "UITARS_ACTIONS",
    "ActionSet",
    "ActionText",
    "Computer13ActionSet",
    "ParsedAction",
    "PyAutoGUIActionSet",
    "Special",
    "UITarsActionSet",
    "make_action_set",
    "smart_resize",
]
