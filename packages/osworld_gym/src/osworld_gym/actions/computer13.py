"""The ``computer_13`` action set: OSWorld's structured dict actions.

An action is ``{"action_type": "CLICK", "parameters": {...}}`` or the same with the parameters
as top-level keys, as a dict or as a JSON string of one (a Markdown code fence around the JSON is
stripped). The accepted parameter combinations are OSWorld's (``desktop_env/actions.py`` and
``PythonController.execute_action``), with one tightening: parameter names outside an action
type's combinations are rejected instead of silently ignored. Coordinates must lie on the screen
(``0 <= x <= width``, ``0 <= y <= height``), as OSWorld documents.

:meth:`Computer13ActionSet.space` is a :class:`gymnasium.spaces.Dict` holding one field per
parameter plus ``action_type`` as an index into :data:`ACTION_TYPES`; a sample of it is a valid
action whose irrelevant fields are ignored (:func:`from_space_sample` shows the conversion,
:meth:`~Computer13ActionSet.parse` applies it to any dict whose ``action_type`` is an integer).

>>> s = Computer13ActionSet()
>>> s.parse({"action_type": "CLICK", "parameters": {"x": 10, "y": 20, "num_clicks": 2}}).primitives
(Click(x=10, y=20, button='left', clicks=2),)
>>> s.parse('{"action_type": "HOTKEY", "keys": ["ctrl", "s"]}').primitives
(Hotkey(keys=('ctrl', 's')),)
>>> s.parse({"action_type": "DONE"}).special
'DONE'
>>> s.parse({"action_type": "CLICK", "parameters": {"x": 10}})
Traceback (most recent call last):
...
osworld_gym.errors.ActionError: CLICK takes no parameters, or (button, x, y), or ...; got (x)
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from osworld_gym.actions.base import (
    SPECIALS,
    ActionSet,
    ParsedAction,
    Special,
    as_text,
    finish,
    special_of,
)
from osworld_gym.actions.restricted import strip_code_fence
from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import KEY_NAMES, canonical_key
from osworld_gym.protocol.primitives import (
    BUTTON_NAMES,
    MAX_HOTKEY_KEYS,
    MAX_SCROLL,
    MAX_TEXT_CHARS,
    Click,
    DragTo,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    Press,
    Primitive,
    Scroll,
    TypeText,
    validate,
)
from osworld_gym.spaces import UnicodeText

log = logging.getLogger(__name__)

#: Longest JSON text accepted (4096 typed characters can take ~6x that once escaped).
MAX_JSON_CHARS = 65_536
_KEY_LIST: tuple[str, ...] = tuple(sorted(KEY_NAMES))

#: What each parameter means (shown by :meth:`Computer13ActionSet.describe`).
PARAMETERS: dict[str, str] = {
    "x": "number, 0 <= x <= screen width",
    "y": "number, 0 <= y <= screen height",
    "button": "'left', 'right' or 'middle'",
    "num_clicks": "1, 2 or 3",
    "dx": f"int, horizontal scroll clicks (positive = right), |dx| <= {MAX_SCROLL}",
    "dy": f"int, vertical scroll clicks (positive = up), |dy| <= {MAX_SCROLL}",
    "text": f"string, typed exactly (at most {MAX_TEXT_CHARS} characters)",
    "key": "key name from pyautogui's KEYBOARD_KEYS, e.g. 'enter', 'a', 'f5'",
    "keys": f"list of 1 to {MAX_HOTKEY_KEYS} key names, pressed together",
}

Build = Callable[["Computer13ActionSet", dict[str, Any]], "list[Primitive] | Special"]


@dataclass(frozen=True)
class ActionType:
    """One ``action_type``: the parameter combinations it accepts and how it becomes primitives."""

    name: str
    combos: tuple[tuple[str, ...], ...]
    summary: str
    build: Build


def _click(button: str | None, clicks: int | None) -> Build:
    def build(s: Computer13ActionSet, p: dict[str, Any]) -> list[Primitive]:
        x, y = s.xy(p) if "x" in p else (None, None)
        b = p.get("button", "left") if button is None else button
        if b not in BUTTON_NAMES:
            raise ActionError(f"button must be one of {BUTTON_NAMES}, got {b!r}")
        n = p.get("num_clicks", 1) if clicks is None else clicks
        if isinstance(n, bool) or n not in (1, 2, 3) or not isinstance(n, int):
            raise ActionError(f"num_clicks must be 1, 2 or 3, got {n!r}")
        return [Click(x, y, b, n)]

    return build


def _updown(cls: type[MouseDown | MouseUp]) -> Build:
    return lambda s, p: [cls(p.get("button", "left"))]


def _scroll(s: Computer13ActionSet, p: dict[str, Any]) -> list[Primitive]:
    for k in ("dx", "dy"):
        if k in p and (isinstance(p[k], bool) or not isinstance(p[k], int)):
            raise ActionError(f"SCROLL {k} must be an int, got {p[k]!r}")
    return [Scroll(dy=p.get("dy", 0), dx=p.get("dx", 0))]


def _hotkey(s: Computer13ActionSet, p: dict[str, Any]) -> list[Primitive]:
    keys = p["keys"]
    if not isinstance(keys, (list, tuple)):
        raise ActionError(f"HOTKEY keys must be a list of key names, got {type(keys).__name__}")
    return [Hotkey(tuple(keys))]


def _key(cls: type[Press | KeyDown | KeyUp]) -> Build:
    def build(s: Computer13ActionSet, p: dict[str, Any]) -> list[Primitive]:
        return [cls(canonical_key(p["key"]))]

    return build


def _typing(s: Computer13ActionSet, p: dict[str, Any]) -> list[Primitive]:
    if not isinstance(p["text"], str):
        raise ActionError(f"TYPING text must be a string, got {type(p['text']).__name__}")
    return [TypeText(p["text"])]


_NONE: tuple[str, ...] = ()
_TYPES = [
    ActionType(
        "MOVE_TO", (("x", "y"),), "move the pointer to (x, y)", lambda s, p: [MoveTo(*s.xy(p))]
    ),
    ActionType(
        "CLICK",
        (
            _NONE,
            ("button", "x", "y"),
            ("button", "x", "y", "num_clicks"),
            ("button",),
            ("button", "num_clicks"),
            ("x", "y"),
            ("x", "y", "num_clicks"),
        ),
        "click (at x, y if given, else where the pointer is)",
        _click(None, None),
    ),
    ActionType("MOUSE_DOWN", (_NONE, ("button",)), "press a mouse button", _updown(MouseDown)),
    ActionType("MOUSE_UP", (_NONE, ("button",)), "release a mouse button", _updown(MouseUp)),
    ActionType("RIGHT_CLICK", (_NONE, ("x", "y")), "right-click", _click("right", 1)),
    ActionType(
        "DOUBLE_CLICK", (_NONE, ("x", "y")), "double-click with the left button", _click("left", 2)
    ),
    ActionType(
        "DRAG_TO",
        (("x", "y"),),
        "drag from the pointer to (x, y) with the left button held",
        lambda s, p: [DragTo(*s.xy(p))],
    ),
    ActionType("SCROLL", (("dx", "dy"), ("dx",), ("dy",)), "scroll the wheel", _scroll),
    ActionType("TYPING", (("text",),), "type text", _typing),
    ActionType("PRESS", (("key",),), "press and release a key", _key(Press)),
    ActionType("KEY_DOWN", (("key",),), "hold a key down", _key(KeyDown)),
    ActionType("KEY_UP", (("key",),), "release a held key", _key(KeyUp)),
    ActionType("HOTKEY", (("keys",),), "press keys together", _hotkey),
    ActionType("WAIT", (_NONE,), "wait for the screen to change", lambda s, p: "WAIT"),
    ActionType("FAIL", (_NONE,), "give up: the task cannot be done", lambda s, p: "FAIL"),
    ActionType("DONE", (_NONE,), "the task is complete", lambda s, p: "DONE"),
]
#: The table the parser, :meth:`Computer13ActionSet.describe` and the space all read.
TYPES: dict[str, ActionType] = {t.name: t for t in _TYPES}
#: ``action_type`` names in OSWorld's order (the space's ``action_type`` indexes this).
ACTION_TYPES: tuple[str, ...] = tuple(TYPES)
_SPACE_FIELDS: dict[str, tuple[str, ...]] = {t.name: max(t.combos, key=len) for t in _TYPES}


def _combo_text(combo: tuple[str, ...]) -> str:
    return f"({', '.join(combo)})" if combo else "no parameters"


def _plain(v: Any) -> Any:
    """numpy scalars/arrays (from ``space().sample()``) as plain Python values."""
    if isinstance(v, np.generic):
        return v.item()
    if type(v) is np.ndarray:
        if v.size > _MAX_ITEMS:
            raise ActionError(f"an array parameter may hold at most {_MAX_ITEMS} items")
        return v.tolist()
    return v


_MAX_ITEMS = 64
_SCALARS = (str, int, float, bool, type(None))


def _data(v: Any, depth: int = 0) -> Any:
    """A copy of ``v`` made only of exact JSON types (dict/list/str/int/float/bool/None).

    Anything else, including subclasses of those types, is refused, so no agent-supplied object
    ever runs code (``__eq__``, ``__getitem__`` ...) inside the parser. Containers may nest two
    deep (action -> parameters -> keys).
    """
    v = _plain(v)
    t = type(v)
    if t in _SCALARS:
        return v
    if t in (list, tuple, dict):
        if depth >= 3:
            raise ActionError(
                "the action is nested too deeply; parameters hold only numbers, strings "
                "and a list of key names"
            )
        if len(v) > _MAX_ITEMS:
            raise ActionError(f"a list or object in the action may hold at most {_MAX_ITEMS} items")
        if t is dict:
            if not all(type(k) is str for k in v):
                raise ActionError("object keys must be strings")
            return {k: _data(x, depth + 1) for k, x in v.items()}
        return [_data(x, depth + 1) for x in v]
    raise ActionError(
        f"a {t.__name__} is not JSON data; actions hold only objects, lists, strings, "
        "numbers, booleans and null"
    )


def from_space_sample(sample: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a sample of :meth:`Computer13ActionSet.space` into an OSWorld action dict.

    Only the fields the chosen action type uses are kept; ``keys`` entries equal to the number of
    key names mean "no key" (so a hotkey has 1 to 6 keys).

    >>> space = Computer13ActionSet().space()
    >>> _ = space.seed(0)
    >>> d = from_space_sample(space.sample())
    >>> sorted(d) == ["action_type", "parameters"] and d["action_type"] in ACTION_TYPES
    True
    """
    index = _plain(sample["action_type"])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(ACTION_TYPES):
        raise ActionError(f"action_type index must be in [0, {len(ACTION_TYPES)}), got {index!r}")
    name = ACTION_TYPES[index]
    params: dict[str, Any] = {}
    for f in _SPACE_FIELDS[name]:
        if f not in sample:
            raise ActionError(f"space sample lacks the field {f!r}")
        v = _plain(sample[f])
        if f == "button":
            v = BUTTON_NAMES[v] if isinstance(v, int) and 0 <= v < len(BUTTON_NAMES) else v
        elif f == "key":
            v = _KEY_LIST[v] if isinstance(v, int) and 0 <= v < len(_KEY_LIST) else v
        elif f == "keys" and isinstance(v, list):
            v = [
                _KEY_LIST[i] if isinstance(i, int) and 0 <= i < len(_KEY_LIST) else i
                for i in v
                if i != len(_KEY_LIST)
            ]
        params[f] = v
    return {"action_type": name, "parameters": params}


def _loads(text: str) -> Any:
    if len(text) > MAX_JSON_CHARS:
        raise ActionError(
            f"the action is {len(text)} characters long; the limit is {MAX_JSON_CHARS}"
        )

    def small_int(s: str) -> int:
        if len(s.lstrip("-")) > 12:
            raise ActionError(f"the number {s[:20]}... is too large")
        return int(s)

    try:
        return json.loads(text, parse_int=small_int)
    except ActionError:
        raise
    except json.JSONDecodeError as e:
        raise ActionError(
            f"the action is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
            'write e.g. {"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}'
        ) from None
    except (RecursionError, MemoryError):
        raise ActionError("the action's JSON is nested too deeply") from None
    except (ValueError, OverflowError, UnicodeError) as e:
        raise ActionError(f"the action's JSON could not be read: {str(e)[:200]}") from None


class Computer13ActionSet(ActionSet):
    """OSWorld's ``computer_13`` dict actions (see the module docstring)."""

    name = "computer_13"

    def names(self) -> tuple[str, ...]:
        return ACTION_TYPES

    def xy(self, p: dict[str, Any]) -> tuple[int, int]:
        """Validated on-screen coordinates from parameters ``x`` and ``y``."""
        out = []
        for k, hi in zip(("x", "y"), self.screen_size, strict=True):
            v = p[k]
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or (isinstance(v, float) and not math.isfinite(v))
            ):
                raise ActionError(f"{k} must be a finite number, got {repr(v)[:30]}")
            if not 0 <= v <= hi:
                raise ActionError(
                    f"{k}={repr(v)[:30]} is off the "
                    f"{self.screen_size[0]}x{self.screen_size[1]} screen "
                    f"(0 <= {k} <= {hi})"
                )
            out.append(round(v))
        return out[0], out[1]

    def describe(self) -> str:
        w, h = self.screen_size
        lines = [
            (
                'Act by answering with one JSON object: {"action_type": TYPE, '
                '"parameters": {...}}. '
                f"The screen is {w}x{h} pixels; (0, 0) is the top-left corner. Action types:"
            ),
        ]
        for t in _TYPES:
            combos = " or ".join(_combo_text(c) for c in t.combos)
            lines.append(f"- {t.name}: {t.summary}; parameters: {combos}")
        lines.append("Parameters:")
        lines += [f"- {k}: {v}" for k, v in PARAMETERS.items()]
        lines.append(
            'Example: {"action_type": "CLICK", "parameters": {"button": "left", "x": '
            '640, "y": 360}}'
        )
        return "\n".join(lines)

    def parse(self, action: str | dict) -> ParsedAction:
        raw = action
        if isinstance(action, str):
            action = as_text(action)
            if len(action) > MAX_JSON_CHARS:
                raise ActionError(
                    f"the action is {len(action)} characters long; the limit is {MAX_JSON_CHARS}"
                )
            text = strip_code_fence(action)
            if (special := special_of(text)) is not None:
                return ParsedAction((), special, raw)
            action = _loads(text)
            if isinstance(action, str) and action in SPECIALS:
                return ParsedAction((), action, raw)  # type: ignore[arg-type]
        if type(action) is OrderedDict:
            action = dict(action.items())
        if type(action) is not dict:
            raise ActionError(
                f"a computer_13 action must be a JSON object (a plain dict), "
                f"got {type(action).__name__}"
            )
        # a fresh name: the parameter's declared type (str | dict) would hide what _data returns
        obj: dict[str, Any] = _data(action)
        if "action_type" not in obj:
            raise ActionError('the action has no "action_type"; one of ' + ", ".join(ACTION_TYPES))
        kind = _plain(obj["action_type"])
        if isinstance(kind, int) and not isinstance(kind, bool):
            obj = from_space_sample(obj)
            kind = obj["action_type"]
        if not isinstance(kind, str) or kind not in TYPES:
            shown = repr(kind)[:60]
            raise ActionError(f"unknown action_type {shown}; use one of {', '.join(ACTION_TYPES)}")
        if "parameters" in obj:
            extra = sorted(set(obj) - {"action_type", "parameters"})
            if extra:
                raise ActionError(
                    f'put every parameter inside "parameters"; unexpected keys {extra[:8]}'
                )
            params = obj["parameters"]
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise ActionError('"parameters" must be a JSON object')
        else:
            params = {k: v for k, v in obj.items() if k != "action_type"}
        t = TYPES[kind]
        got = tuple(sorted(params))
        if not any(got == tuple(sorted(c)) for c in t.combos):
            combos = ", or ".join(_combo_text(c) for c in t.combos)
            raise ActionError(f"{kind} takes {combos}; got {_combo_text(tuple(params))[:200]}")
        result = t.build(self, params)
        if isinstance(result, str):
            return ParsedAction((), result, raw)  # type: ignore[arg-type]
        return finish(result, raw=raw)

    def render(self, parsed: ParsedAction) -> dict[str, Any]:
        if parsed.special is not None:
            if parsed.primitives:
                raise ActionError(
                    "a computer_13 action is either a primitive or WAIT/DONE/FAIL, not both"
                )
            return {"action_type": parsed.special, "parameters": {}}
        if len(parsed.primitives) != 1:
            raise ActionError(
                f"a computer_13 action holds exactly one primitive, got {len(parsed.primitives)}"
            )
        p = validate(parsed.primitives[0])
        match p:
            case MoveTo(x, y):
                return _action("MOVE_TO", x=x, y=y)
            case Click(None, None, button, clicks):
                return _action("CLICK", button=button, num_clicks=clicks)
            case Click(x, y, button, clicks):
                return _action("CLICK", button=button, x=x, y=y, num_clicks=clicks)
            case MouseDown(button, None, None):
                return _action("MOUSE_DOWN", button=button)
            case MouseUp(button, None, None):
                return _action("MOUSE_UP", button=button)
            case DragTo(x, y, "left"):
                return _action("DRAG_TO", x=x, y=y)
            case Scroll(dy, dx, None, None):
                return _action(
                    "SCROLL", **({"dx": dx} if dx else {}), **({"dy": dy} if dy or not dx else {})
                )
            case TypeText(text):
                return _action("TYPING", text=text)
            case Press(key, 1):
                return _action("PRESS", key=key)
            case KeyDown(key):
                return _action("KEY_DOWN", key=key)
            case KeyUp(key):
                return _action("KEY_UP", key=key)
            case Hotkey(keys):
                return _action("HOTKEY", keys=list(keys))
        raise ActionError(f"computer_13 cannot express {p!r}")

    def space(self) -> gymnasium.spaces.Space:
        w, h = self.screen_size
        k = len(_KEY_LIST)
        return spaces.Dict(
            {
                "action_type": spaces.Discrete(len(ACTION_TYPES)),
                "x": spaces.Discrete(w + 1),
                "y": spaces.Discrete(h + 1),
                "button": spaces.Discrete(len(BUTTON_NAMES)),
                "num_clicks": spaces.Discrete(3, start=1),
                "dx": spaces.Discrete(2 * MAX_SCROLL + 1, start=-MAX_SCROLL),
                "dy": spaces.Discrete(2 * MAX_SCROLL + 1, start=-MAX_SCROLL),
                "text": UnicodeText(MAX_TEXT_CHARS, min_length=0),
                "key": spaces.Discrete(k),
                "keys": spaces.MultiDiscrete([k] + [k + 1] * (MAX_HOTKEY_KEYS - 1)),
            }
        )


def _action(kind: str, **params: Any) -> dict[str, Any]:
    return {"action_type": kind, "parameters": params}
