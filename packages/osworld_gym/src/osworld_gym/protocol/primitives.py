"""Primitive input actions: the only thing that ever reaches a desktop from an agent.

Every action set (``pyautogui``, ``computer_13``, ``uitars``) compiles agent output into a list
of these records. Our guest server executes them through XTest; for OSWorld's own guest server
they are rendered as canonical pyautogui code (:func:`to_pyautogui_code`). No agent-produced
source text is ever executed anywhere.

Records are plain frozen dataclasses with a JSON form (:func:`to_dict` / :func:`from_dict`).
:func:`from_dict` validates everything, because the guest server receives these from the
network.

>>> p = Click(x=10, y=20, button="right")
>>> to_dict(p)
{'type': 'click', 'x': 10, 'y': 20, 'button': 'right', 'clicks': 1}
>>> from_dict(to_dict(p)) == p
True
>>> to_pyautogui_code([p, TypeText("hi")])
"pyautogui.click(x=10, y=20, button='right', clicks=1)\\npyautogui.write('hi')"
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, TypeVar, overload

from osworld_gym.errors import ActionError
from osworld_gym.protocol.keys import canonical_key

Button = Literal["left", "right", "middle"]
BUTTON_NAMES: tuple[str, ...] = ("left", "right", "middle")

#: Upper bounds that keep a single action cheap and bounded on the guest.
MAX_TEXT_CHARS = 4096
MAX_CLICKS = 3
MAX_PRESSES = 50
MAX_SCROLL = 100
MAX_WAIT_S = 30.0
MAX_COORD = 16384
MAX_HOTKEY_KEYS = 6


@dataclass(frozen=True)
class MoveTo:
    """Move the pointer to ``(x, y)`` in screen pixels."""

    x: int
    y: int


@dataclass(frozen=True)
class Click:
    """Click ``clicks`` times with ``button`` at ``(x, y)`` if given, else where the pointer is."""

    x: int | None = None
    y: int | None = None
    button: str = "left"
    clicks: int = 1


@dataclass(frozen=True)
class MouseDown:
    button: str = "left"
    x: int | None = None
    y: int | None = None


@dataclass(frozen=True)
class MouseUp:
    button: str = "left"
    x: int | None = None
    y: int | None = None


@dataclass(frozen=True)
class DragTo:
    """Press ``button`` at the current pointer position, move to ``(x, y)``, release."""

    x: int
    y: int
    button: str = "left"


@dataclass(frozen=True)
class Scroll:
    """Scroll ``dy`` wheel clicks (positive: up, as pyautogui) and ``dx`` (positive: right)."""

    dy: int = 0
    dx: int = 0
    x: int | None = None
    y: int | None = None


@dataclass(frozen=True)
class KeyDown:
    key: str


@dataclass(frozen=True)
class KeyUp:
    key: str


@dataclass(frozen=True)
class Press:
    """Press and release ``key`` ``presses`` times."""

    key: str
    presses: int = 1


@dataclass(frozen=True)
class Hotkey:
    """Press ``keys`` in order, release them in reverse (``ctrl+shift+t``)."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class TypeText:
    """Type ``text`` exactly, any Unicode, without interpreting it as key names."""

    text: str


@dataclass(frozen=True)
class Wait:
    """Sleep; executed by the host, never sent to the guest."""

    seconds: float


Primitive = (
    MoveTo
    | Click
    | MouseDown
    | MouseUp
    | DragTo
    | Scroll
    | KeyDown
    | KeyUp
    | Press
    | Hotkey
    | TypeText
    | Wait
)

#: One primitive type at a time, so that :func:`validate` returns the type it was given
#: (``validate(MoveTo(...)).x`` is an ``int``, not an attribute of a twelve-way union).
P = TypeVar(
    "P",
    MoveTo,
    Click,
    MouseDown,
    MouseUp,
    DragTo,
    Scroll,
    KeyDown,
    KeyUp,
    Press,
    Hotkey,
    TypeText,
    Wait,
)

_BY_NAME: dict[str, type] = {
    "move_to": MoveTo,
    "click": Click,
    "mouse_down": MouseDown,
    "mouse_up": MouseUp,
    "drag_to": DragTo,
    "scroll": Scroll,
    "key_down": KeyDown,
    "key_up": KeyUp,
    "press": Press,
    "hotkey": Hotkey,
    "type_text": TypeText,
    "wait": Wait,
}
_NAME_OF: dict[type, str] = {cls: name for name, cls in _BY_NAME.items()}


def to_dict(p: Primitive) -> dict[str, Any]:
    """JSON-ready form: ``{"type": "click", ...fields}``."""
    d = asdict(p)
    if isinstance(p, Hotkey):
        d["keys"] = list(p.keys)
    return {"type": _NAME_OF[type(p)], **d}


def _int(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ActionError(f"{name} must be a number, got {type(v).__name__}")
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ActionError(f"{name} must be finite, got {v}")
        v = round(v)
    if not lo <= v <= hi:
        raise ActionError(f"{name}={v} is out of range [{lo}, {hi}]")
    return int(v)


def _opt_coord(name: str, v: Any) -> int | None:
    return None if v is None else _int(name, v, -MAX_COORD, MAX_COORD)


def _button(v: Any) -> str:
    if v not in BUTTON_NAMES:
        raise ActionError(f"button must be one of {BUTTON_NAMES}, got {v!r}")
    return v


# Each case below rebuilds the class it matched, so the result has the argument's type: the first
# overload says so for a caller holding one concrete type, the second serves one holding the union.
@overload
def validate(p: P) -> P: ...
@overload
def validate(p: Primitive) -> Primitive: ...
def validate(p: Primitive) -> Primitive:
    """Return ``p`` with numbers normalised; raise :class:`ActionError` if anything is off."""
    match p:
        case MoveTo(x, y):
            return MoveTo(_int("x", x, -MAX_COORD, MAX_COORD), _int("y", y, -MAX_COORD, MAX_COORD))
        case Click(x, y, button, clicks):
            if (x is None) != (y is None):
                raise ActionError("click needs both x and y, or neither")
            return Click(
                _opt_coord("x", x),
                _opt_coord("y", y),
                _button(button),
                _int("clicks", clicks, 1, MAX_CLICKS),
            )
        case MouseDown(button, x, y) | MouseUp(button, x, y):
            if (x is None) != (y is None):
                raise ActionError("mouse_down/mouse_up need both x and y, or neither")
            return type(p)(_button(button), _opt_coord("x", x), _opt_coord("y", y))
        case DragTo(x, y, button):
            return DragTo(
                _int("x", x, -MAX_COORD, MAX_COORD),
                _int("y", y, -MAX_COORD, MAX_COORD),
                _button(button),
            )
        case Scroll(dy, dx, x, y):
            if (x is None) != (y is None):
                raise ActionError("scroll needs both x and y, or neither")
            return Scroll(
                _int("dy", dy, -MAX_SCROLL, MAX_SCROLL),
                _int("dx", dx, -MAX_SCROLL, MAX_SCROLL),
                _opt_coord("x", x),
                _opt_coord("y", y),
            )
        case KeyDown(key) | KeyUp(key):
            return type(p)(canonical_key(key))
        case Press(key, presses):
            return Press(canonical_key(key), _int("presses", presses, 1, MAX_PRESSES))
        case Hotkey(keys):
            if isinstance(keys, str) or not isinstance(keys, (tuple, list)) or not keys:
                raise ActionError("hotkey needs a non-empty list of key names")
            if len(keys) > MAX_HOTKEY_KEYS:
                raise ActionError(f"hotkey takes at most {MAX_HOTKEY_KEYS} keys, got {len(keys)}")
            return Hotkey(tuple(canonical_key(k) for k in keys))
        case TypeText(text):
            if not isinstance(text, str):
                raise ActionError(f"text must be a string, got {type(text).__name__}")
            if len(text) > MAX_TEXT_CHARS:
                raise ActionError(f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
            if any(ord(c) < 32 and c not in "\n\t" for c in text):
                raise ActionError("text may contain \\n and \\t but no other control characters")
            if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
                raise ActionError(
                    "text contains a lone surrogate (a '\\ud83d\\ude00'-style "
                    "escape of UTF-16 halves); write the character itself, e.g. "
                    "'\\U0001f600'"
                )
            return p
        case Wait(seconds):
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not math.isfinite(seconds)
            ):
                raise ActionError(f"wait seconds must be a finite number, got {seconds!r}")
            if not 0 <= seconds <= MAX_WAIT_S:
                raise ActionError(f"wait seconds={seconds} is out of range [0, {MAX_WAIT_S}]")
            return Wait(float(seconds))
    raise ActionError(f"not a primitive action: {p!r}")


def from_dict(d: Any) -> Primitive:
    """Build and validate a primitive from its JSON form; :class:`ActionError` on anything odd."""
    if not isinstance(d, dict):
        raise ActionError(f"a primitive action must be a JSON object, got {type(d).__name__}")
    kind = d.get("type")
    cls = _BY_NAME.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ActionError(f"unknown primitive type {kind!r}; known: {sorted(_BY_NAME)}")
    allowed = {f.name for f in fields(cls)}
    extra = set(d) - allowed - {"type"}
    if extra:
        raise ActionError(f"{kind} does not take {sorted(extra)}; it takes {sorted(allowed)}")
    kwargs = {k: v for k, v in d.items() if k != "type"}
    if cls is Hotkey and isinstance(kwargs.get("keys"), list):
        kwargs["keys"] = tuple(kwargs["keys"])
    try:
        return validate(cls(**kwargs))
    except TypeError as e:
        raise ActionError(f"{kind}: {e}") from None


def to_pyautogui_code(prims: list[Primitive]) -> str:
    """Render primitives as canonical pyautogui code for OSWorld's own guest server.

    Only our validated records are rendered, and every string goes through ``repr``, so the
    output contains no agent-controlled code.
    """
    lines: list[str] = []
    for p in map(validate, prims):
        match p:
            case MoveTo(x, y):
                lines.append(f"pyautogui.moveTo({x}, {y})")
            case Click(x, y, button, clicks):
                at = f"x={x}, y={y}, " if x is not None else ""
                lines.append(f"pyautogui.click({at}button={button!r}, clicks={clicks})")
            case MouseDown(button, x, y) | MouseUp(button, x, y):
                fn = "mouseDown" if isinstance(p, MouseDown) else "mouseUp"
                at = f"x={x}, y={y}, " if x is not None else ""
                lines.append(f"pyautogui.{fn}({at}button={button!r})")
            case DragTo(x, y, button):
                lines.append(f"pyautogui.dragTo({x}, {y}, duration=0.5, button={button!r})")
            case Scroll(dy, dx, x, y):
                at = f", x={x}, y={y}" if x is not None else ""
                if dy:
                    lines.append(f"pyautogui.scroll({dy}{at})")
                if dx:
                    lines.append(f"pyautogui.hscroll({dx}{at})")
            case KeyDown(key):
                lines.append(f"pyautogui.keyDown({key!r})")
            case KeyUp(key):
                lines.append(f"pyautogui.keyUp({key!r})")
            case Press(key, presses):
                lines.append(f"pyautogui.press({key!r}, presses={presses})")
            case Hotkey(keys):
                lines.append(f"pyautogui.hotkey({', '.join(map(repr, keys))})")
            case TypeText(text):
                lines.append(f"pyautogui.write({text!r})")
            case Wait(seconds):
                lines.append(f"time.sleep({seconds})")
    return "\n".join(lines)
