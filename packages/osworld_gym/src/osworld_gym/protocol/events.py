"""Primitive actions as input events: the one place that decides which pointer, button and key
events an action becomes, and the pauses between them.

Two executors play these events: the guest's XTest input (:mod:`osworld_gym.guest.xinput`) and
the VNC provider's RFB client (:mod:`osworld_gym.providers.vnc`). What differs between them is
how an event is sent, not which events are sent:

* :class:`Settle` follows every button press. It is the pause a window manager that grabs
  clicks synchronously needs (:data:`~.input.BUTTON_SETTLE_S`); XTest waits it only when it
  finds such a window manager, VNC always (it cannot see the desktop's window manager).
* :class:`Pace` marks where a typed Return or Tab is followed by more keys of the same action:
  an executor that can see when the desktop has reacted (our guest's settle signal) waits
  there; VNC cannot and sends on.
* Keys with no key on the keyboard map are the executor's business (XTest binds spare
  keycodes; a VNC server maps keysyms itself).

>>> ex = InputEvents((100, 100))
>>> ex.expand(Click(5, 500))  # doctest: +NORMALIZE_WHITESPACE
[Move(x=5, y=99), Button(button=1, down=True), Settle(seconds=0.025),
 Button(button=1, down=False)]
>>> [type(e).__name__ for e in ex.expand(TypeText("oo"))]
['Key', 'Key', 'Sleep', 'Key', 'Key']
"""

from __future__ import annotations

from dataclasses import dataclass

from osworld_gym.errors import ActionError
from osworld_gym.protocol.input import (
    BUTTON_SETTLE_S,
    CLICK_GAP_S,
    DRAG_STEP_S,
    DRAG_STEPS,
    REPEAT_GAP_S,
    WHEEL_SETTLE_S,
    X_BUTTONS,
    char_keysym,
    key_keysym,
)
from osworld_gym.protocol.primitives import (
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
    Wait,
)

#: Keysyms after which typing is paced (:class:`Pace`) when more keys of the same action
#: follow: Return, Tab and keypad Enter end an entry, and an app may act on that from a posted
#: event (GTK3 Calc moved its cell cursor for a Tab after the text typed next had gone into the
#: old cell: ``write('a\\t\\tb')`` left C1 empty and ``b`` in B1).
PACED_KEYSYMS = frozenset({0xFF0D, 0xFF09, 0xFF8D})

#: X button numbers of the wheel: up, down, left, right.
WHEEL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}


@dataclass(frozen=True, slots=True)
class Move:
    """Put the pointer at ``(x, y)`` (already inside the screen)."""

    x: int
    y: int


@dataclass(frozen=True, slots=True)
class Button:
    """Press or release X pointer button ``button`` (1-3 buttons, 4-7 the wheel)."""

    button: int
    down: bool


@dataclass(frozen=True, slots=True)
class Key:
    """Press or release the key that types X keysym ``keysym``."""

    keysym: int
    down: bool


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` (after sending everything before)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Settle:
    """After a button press: wait ``seconds`` where the window manager may grab the press
    synchronously (it freezes the pointer until it has handled it; events sent meanwhile
    reach the application late and out of place). Only a press starts such a grab."""

    seconds: float = BUTTON_SETTLE_S


@dataclass(frozen=True, slots=True)
class Pace:
    """More keys of this action follow a Return or Tab: let the desktop react first, where
    the executor can see when it has."""


Event = Move | Button | Key | Sleep | Settle | Pace


@dataclass(slots=True)
class Pointer:
    """Where the pointer is and which buttons are held (a bit per X button, ``1 << (b - 1)``),
    as far as the events sent so far tell."""

    x: int = 0
    y: int = 0
    mask: int = 0


class InputEvents:
    """Expands primitives into :data:`Event` s for a screen of ``size`` (coordinates clamped
    into it), tracking the pointer and the last key released across calls.

    The pacing rules, for every executor:

    * a multi-click waits :data:`~.input.CLICK_GAP_S` between its clicks;
    * every button press is followed by a :class:`Settle`;
    * a wheel notch waits :data:`~.input.WHEEL_SETTLE_S` after its press (keeps notches in order);
    * a drag presses, moves in :data:`~.input.DRAG_STEPS` steps of :data:`~.input.DRAG_STEP_S`
      along ``round(x0 + (x - x0) * i / DRAG_STEPS)`` (the target clamped first, so every step
      is on the screen and the last is exactly the target), waits one step more and releases;
    * a key pressed again right after its release waits :data:`~.input.REPEAT_GAP_S` first:
      a release and a press of the same key with one server timestamp look like auto-repeat to
      some toolkits (LibreOffice's X11 backend drops the press: "hello" became "helo");
    * ``\\r\\n`` in typed text is one Return; :class:`Wait` becomes a :class:`Sleep`.
    """

    def __init__(self, size: tuple[int, int], pointer: Pointer | None = None):
        w, h = size
        if w < 1 or h < 1:
            raise ValueError(f"screen size must be positive, got {size!r}")
        self.size = (int(w), int(h))
        self.pointer = pointer if pointer is not None else Pointer()
        self._last_released: int | None = None
        self._out: list[Event] = []

    def clamp(self, x: int, y: int) -> tuple[int, int]:
        w, h = self.size
        return min(max(int(x), 0), w - 1), min(max(int(y), 0), h - 1)

    def expand(self, p: Primitive) -> list[Event]:
        """The events of one validated primitive, in order."""
        self._out = out = []
        match p:
            case MoveTo(x, y):
                self._move(x, y)
            case Click(x, y, button, clicks):
                self._move(x, y)
                for i in range(clicks):
                    if i:
                        out.append(Sleep(CLICK_GAP_S))
                    self._button(X_BUTTONS[button], True)
                    self._button(X_BUTTONS[button], False)
            case MouseDown(button, x, y) | MouseUp(button, x, y):
                self._move(x, y)
                self._button(X_BUTTONS[button], isinstance(p, MouseDown))
            case DragTo(x, y, button):
                self._drag(x, y, X_BUTTONS[button])
            case Scroll(dy, dx, x, y):
                self._move(x, y)
                for amount, pos, neg in ((dy, "up", "down"), (dx, "right", "left")):
                    notch = WHEEL_BUTTONS[pos if amount > 0 else neg]
                    for _ in range(abs(amount)):
                        self._button(notch, True)
                        self._button(notch, False)
            case KeyDown(key):
                self._key(key_keysym(key), True)
            case KeyUp(key):
                self._key(key_keysym(key), False)
            case Press(key, presses):
                self._keys([key_keysym(key)] * presses)
            case Hotkey(keys):
                syms = [key_keysym(k) for k in keys]
                for ks in syms:
                    self._key(ks, True)
                for ks in reversed(syms):
                    self._key(ks, False)
            case TypeText(text):
                self._keys([char_keysym(ch) for ch in text.replace("\r\n", "\n")])
            case Wait(seconds):
                out.append(Sleep(seconds))
            case _:
                raise ActionError(f"not a primitive action: {p!r}")
        return out

    # ---- the rules ------------------------------------------------------------------------
    def _move(self, x: int | None, y: int | None) -> None:
        if x is None or y is None:
            return
        ptr = self.pointer
        ptr.x, ptr.y = self.clamp(x, y)
        self._out.append(Move(ptr.x, ptr.y))

    def _button(self, button: int, down: bool) -> None:
        bit = 1 << (button - 1)
        ptr = self.pointer
        ptr.mask = ptr.mask | bit if down else ptr.mask & ~bit
        self._out.append(Button(button, down))
        if down:
            self._out.append(Sleep(WHEEL_SETTLE_S) if button > 3 else Settle())

    def _drag(self, x: int, y: int, button: int) -> None:
        x, y = self.clamp(x, y)
        ptr = self.pointer
        x0, y0 = ptr.x, ptr.y
        self._button(button, True)
        for i in range(1, DRAG_STEPS + 1):
            self._out.append(Sleep(DRAG_STEP_S))
            ptr.x = round(x0 + (x - x0) * i / DRAG_STEPS)
            ptr.y = round(y0 + (y - y0) * i / DRAG_STEPS)
            self._out.append(Move(ptr.x, ptr.y))
        self._out.append(Sleep(DRAG_STEP_S))
        self._button(button, False)

    def _key(self, ks: int, down: bool) -> None:
        if down and ks == self._last_released:
            self._out.append(Sleep(REPEAT_GAP_S))
        self._out.append(Key(ks, down))
        self._last_released = None if down else ks

    def _keys(self, syms: list[int]) -> None:
        """Type keysyms one after another, pacing after a Return or Tab that more follow."""
        for i, ks in enumerate(syms):
            if i and syms[i - 1] in PACED_KEYSYMS:
                self._out.append(Pace())
            self._key(ks, True)
            self._key(ks, False)
