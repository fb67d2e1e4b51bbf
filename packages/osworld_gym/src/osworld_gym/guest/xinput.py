"""Execute primitive actions with XTest (python-xlib), never through a shell or Python code.

Typing any Unicode character works even when the keyboard map has no key for it: like
``xdotool``, we bind the character's keysym to a *spare* keycode (one with no symbols), type it,
and later put the spare keycode back to NoSymbol. Restoring is deferred by
:data:`RESTORE_DELAY_S` because applications look the keycode up when they *process* the key
event, which can be after we send it; restoring at once would turn late-processed characters
into nothing.

A click focuses and raises the window under the pointer, as a user's would. On our openbox
desktop the guest does that itself before the press (:class:`~osworld_gym.guest.windows.
ClickFocus`), so presses need no pause afterwards; with a window manager that grabs clicks
synchronously, each press is followed by :data:`BUTTON_SETTLE_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from Xlib import XK, X
from Xlib import display as xdisplay
from Xlib.ext import xtest

from osworld_gym.errors import ActionError, GuestError
from osworld_gym.guest.windows import ClickFocus, FocusMode
from osworld_gym.guest.xgrab import make_impervious
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

log = logging.getLogger(__name__)

#: Seconds after the last use before spare keycodes are put back to NoSymbol.
RESTORE_DELAY_S = 1.0
#: Flush the request queue after this many typed characters.
TYPE_FLUSH_EVERY = 16
#: Keys after which typing pauses (when a pacer is given) before the keys that follow in the
#: same text or run of presses: Return and Tab end an entry, and an app may act on that from
#: a posted event (GTK3 Calc moved its cell cursor for a Tab after the text typed next had
#: gone into the old cell: ``write('a\\t\\tb')`` left C1 empty and ``b`` in B1).
PACED_KEYSYMS = frozenset({XK.XK_Return, XK.XK_Tab, XK.XK_KP_Enter})


class XInput:
    """Synthetic keyboard and pointer input on one X display. Thread-safe (one lock)."""

    def __init__(self, display_name: str):
        self._d = xdisplay.Display(display_name)
        if not self._d.has_extension("XTEST"):
            raise GuestError(f"X server {display_name} lacks the XTEST extension")
        make_impervious(self._d)  # a player's XGrabServer cannot stall input
        screen = self._d.screen()
        self.width, self.height = screen.width_in_pixels, screen.height_in_pixels
        self._lock = threading.RLock()
        self._min_kc = self._d.display.info.min_keycode
        self._max_kc = self._d.display.info.max_keycode
        self._keymap: dict[int, tuple[int, int]] = {}  # keysym -> (keycode, level 0/1)
        self._spare: list[int] = []  # keycodes with no symbols (or bound by us)
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare keycode, LRU order
        self._restore_timer: threading.Timer | None = None
        self._last_released: int | None = None  # keycode of the last key release sent
        self._keysyms_per_keycode = 1
        self._focus = ClickFocus(self._d)
        self._focus_mode: FocusMode | None = None  # looked up at the first click of a run
        self._pace: Callable[[], None] | None = None  # the run's pacer, see run()
        self._load_keymap()

    # ---- public -----------------------------------------------------------------------------
    def run(
        self,
        prims: Iterable[Primitive],
        pace: Callable[[], None] | None = None,
        pace_last: bool = False,
    ) -> None:
        """Execute validated primitives in order. :class:`Wait` is the host's job and rejected.

        ``pace`` is called between two primitives, once the first has reached the X server
        (and after the last too with ``pace_last``): it returns when the desktop has reacted,
        as pyautogui pauses after each call. Keys sent sooner can reach an app before what the
        previous call set off has run (see :data:`~osworld_gym.protocol.input.PACE_MAX_S`).
        Inside a text or a run of presses it is called after each of :data:`PACED_KEYSYMS`
        that more keys follow: a burst of keys has no gaps for an app's posted work, where
        pyautogui's key-by-key round trips leave some."""
        with self._lock:
            if self._restore_timer is not None:
                self._restore_timer.cancel()
                self._restore_timer = None
            self._focus_mode = None
            self._pace = pace
            self._load_keymap()
            try:
                todo = list(prims)
                for i, p in enumerate(todo, 1):
                    self._do(p)
                    if pace is not None and (i < len(todo) or pace_last):
                        self._d.sync()
                        pace()
            finally:
                self._pace = None
                self._d.sync()
                if self._bound:
                    self._restore_timer = threading.Timer(RESTORE_DELAY_S, self.restore_keymap)
                    self._restore_timer.daemon = True
                    self._restore_timer.start()

    def pointer(self) -> tuple[int, int]:
        with self._lock:
            reply = self._d.screen().root.query_pointer()
            return reply.root_x, reply.root_y

    def release_all(self) -> None:
        """Release every pressed key and button (a reset must not inherit a held Shift)."""
        with self._lock:
            keys = self._d.query_keymap()  # 32 bytes, one bit per keycode
            for kc in range(self._min_kc, self._max_kc + 1):
                if keys[kc // 8] & (1 << (kc % 8)):
                    xtest.fake_input(self._d, X.KeyRelease, kc)
            mask = self._d.screen().root.query_pointer().mask
            for button, bit in ((1, X.Button1Mask), (2, X.Button2Mask), (3, X.Button3Mask)):
                if mask & bit:
                    xtest.fake_input(self._d, X.ButtonRelease, button)
            self._d.sync()
        self.restore_keymap()

    def restore_keymap(self) -> None:
        """Put every spare keycode we bound back to NoSymbol."""
        with self._lock:
            if not self._bound:
                return
            per = self._keysyms_per_keycode
            for kc in self._bound.values():
                self._d.change_keyboard_mapping(kc, [(X.NoSymbol,) * per])
            self._d.sync()
            log.debug("restored %d spare keycodes", len(self._bound))
            self._bound.clear()

    def close(self) -> None:
        with self._lock:
            if self._restore_timer is not None:
                self._restore_timer.cancel()
            try:
                self.restore_keymap()
            finally:
                self._d.close()

    # ---- dispatch ---------------------------------------------------------------------------
    def _do(self, p: Primitive) -> None:
        match p:
            case MoveTo(x, y):
                self._move(x, y)
            case Click(x, y, button, clicks):
                if x is not None:
                    self._move(x, y)
                for i in range(clicks):
                    if i:
                        time.sleep(CLICK_GAP_S)
                    self._button(X_BUTTONS[button], True)
                    self._button(X_BUTTONS[button], False)
            case MouseDown(button, x, y) | MouseUp(button, x, y):
                if x is not None:
                    self._move(x, y)
                self._button(X_BUTTONS[button], isinstance(p, MouseDown))
            case DragTo(x, y, button):
                self._drag(x, y, X_BUTTONS[button])
            case Scroll(dy, dx, x, y):
                if x is not None:
                    self._move(x, y)
                for btn, n in ((4 if dy > 0 else 5, abs(dy)), (7 if dx > 0 else 6, abs(dx))):
                    for _ in range(n):
                        self._button(btn, True)
                        self._button(btn, False)
            case KeyDown(key):
                self._key(key_keysym(key), True)
            case KeyUp(key):
                self._key(key_keysym(key), False)
            case Press(key, presses):
                ks = key_keysym(key)
                for i in range(presses):
                    if i:
                        self._pace_after(ks)
                    self._key(ks, True)
                    self._key(ks, False)
            case Hotkey(keys):
                syms = [key_keysym(k) for k in keys]
                for ks in syms:
                    self._key(ks, True)
                for ks in reversed(syms):
                    self._key(ks, False)
            case TypeText(text):
                self._type(text)
            case Wait():
                raise ActionError(
                    "wait is executed by the host; send the actions around it "
                    "separately (GuestClient.run_actions does this)"
                )
            case _:
                raise ActionError(f"not a primitive action: {p!r}")

    # ---- pointer ----------------------------------------------------------------------------
    def _clamp(self, x: int, y: int) -> tuple[int, int]:
        return min(max(int(x), 0), self.width - 1), min(max(int(y), 0), self.height - 1)

    def _move(self, x: int, y: int) -> None:
        x, y = self._clamp(x, y)
        xtest.fake_input(self._d, X.MotionNotify, x=x, y=y)
        self._d.sync()

    def _button(self, button: int, down: bool) -> None:
        wheel = button > 3
        if down and not wheel:
            if self._focus_mode is None:
                self._focus_mode = self._focus.mode()
            if self._focus_mode is FocusMode.GUEST:
                self._focus.before_press()  # focus moves first, as with the WM's binding
        xtest.fake_input(self._d, X.ButtonPress if down else X.ButtonRelease, button)
        self._d.sync()
        if down and wheel:
            time.sleep(WHEEL_SETTLE_S)
        elif down and self._focus_mode is FocusMode.WM:
            # The window manager's synchronous button grab freezes the pointer until it has
            # handled the press; events sent meanwhile reach the application late and out of
            # place. Only a press starts such a grab, so only a press waits.
            time.sleep(BUTTON_SETTLE_S)

    def _drag(self, x: int, y: int, button: int) -> None:
        x, y = self._clamp(x, y)
        reply = self._d.screen().root.query_pointer()
        x0, y0 = reply.root_x, reply.root_y
        self._button(button, True)
        self._d.sync()
        for i in range(1, DRAG_STEPS + 1):
            time.sleep(DRAG_STEP_S)
            xtest.fake_input(
                self._d,
                X.MotionNotify,
                x=round(x0 + (x - x0) * i / DRAG_STEPS),
                y=round(y0 + (y - y0) * i / DRAG_STEPS),
            )
            self._d.sync()
        time.sleep(DRAG_STEP_S)
        self._button(button, False)

    # ---- keyboard ---------------------------------------------------------------------------
    def _load_keymap(self) -> None:
        count = self._max_kc - self._min_kc + 1
        rows = self._d.get_keyboard_mapping(self._min_kc, count)
        self._keysyms_per_keycode = len(rows[0]) if rows else 1
        keymap: dict[int, tuple[int, int]] = {}
        spare: list[int] = []
        bound_codes = set(self._bound.values())
        for i, row in enumerate(rows):
            kc = self._min_kc + i
            if kc in bound_codes or all(ks == X.NoSymbol for ks in row):
                spare.append(kc)
            for level, ks in enumerate(row[:2]):
                if ks != X.NoSymbol and (ks not in keymap or keymap[ks][1] > level):
                    keymap[ks] = (kc, level)
        for ks, kc in self._bound.items():
            keymap[ks] = (kc, 0)
        self._keymap, self._spare = keymap, spare

    def _bind(self, keysyms: list[int]) -> None:
        """Make every keysym in ``keysyms`` typeable, binding spare keycodes (LRU eviction)."""
        missing = [ks for ks in dict.fromkeys(keysyms) if ks not in self._keymap]
        for ks in keysyms:
            if ks in self._bound:
                self._bound.move_to_end(ks)
        if not missing:
            return
        needed = set(keysyms)
        free = [kc for kc in self._spare if kc not in self._bound.values()]
        assignments: list[tuple[int, int]] = []
        evicted = False
        for ks in missing:
            if free:
                assignments.append((ks, free.pop(0)))
                continue
            victim = next((v for v in self._bound if v not in needed), None)
            if victim is None:
                raise GuestError("no spare keycode left to type this text; split it up")
            assignments.append((ks, self._bound.pop(victim)))
            self._keymap.pop(victim, None)
            evicted = True
        if evicted:  # let applications process keys typed with the old bindings first
            self._d.sync()
            time.sleep(0.05)
        per = self._keysyms_per_keycode
        for ks, kc in assignments:
            self._d.change_keyboard_mapping(kc, [(ks,) * per])
            self._bound[ks] = kc
            self._keymap[ks] = (kc, 0)
        self._d.sync()

    def _key(self, ks: int, down: bool) -> None:
        if ks not in self._keymap:
            self._bind([ks])
        kc, level = self._keymap[ks]
        shift = self._keymap.get(XK.XK_Shift_L, (None, 0))[0] if level == 1 else None
        kind = X.KeyPress if down else X.KeyRelease
        if down and kc == self._last_released:
            # A release and a press of the same key with the same server timestamp look like
            # auto-repeat to some toolkits (LibreOffice's X11 backend drops the press: "hello"
            # became "helo"). Let the clock tick, as xdotool's typing delay does.
            self._d.sync()
            time.sleep(REPEAT_GAP_S)
        if shift is not None and down:
            xtest.fake_input(self._d, X.KeyPress, shift)
        xtest.fake_input(self._d, kind, kc)
        if shift is not None and not down:
            xtest.fake_input(self._d, X.KeyRelease, shift)
        self._last_released = None if down else kc

    def _pace_after(self, ks: int) -> None:
        """Before the next key: let the app react to ``ks`` if it is one of PACED_KEYSYMS."""
        if self._pace is not None and ks in PACED_KEYSYMS:
            self._d.sync()
            self._pace()

    def _type(self, text: str) -> None:
        syms = [char_keysym(ch) for ch in text.replace("\r\n", "\n")]
        capacity = max(1, len(self._spare))
        start = 0
        prev: int | None = None
        while start < len(syms):
            # The longest run whose unmapped keysyms fit in the spare keycodes at once.
            end, new = start, set()
            while end < len(syms):
                ks = syms[end]
                if (ks not in self._keymap or ks in self._bound) and ks not in new:
                    if len(new) == capacity:
                        break
                    new.add(ks)
                end += 1
            chunk = syms[start:end]
            self._bind(chunk)
            for i, ks in enumerate(chunk, 1):
                if prev is not None:
                    self._pace_after(prev)
                prev = ks
                self._key(ks, True)
                self._key(ks, False)
                if i % TYPE_FLUSH_EVERY == 0:
                    self._d.sync()
            self._d.sync()
            start = end
