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
synchronously, each press is followed by its :class:`~osworld_gym.protocol.events.Settle`.

Which events an action becomes, and the pauses between them, is decided once for XTest and VNC
in :mod:`osworld_gym.protocol.events`; this module sends them (binding keysyms to spare keycodes
and focusing before a press are how XTest sends them).
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
from osworld_gym.protocol.events import (
    Button,
    Event,
    InputEvents,
    Key,
    Move,
    Pace,
    Settle,
    Sleep,
)
from osworld_gym.protocol.primitives import DragTo, Primitive, Wait

log = logging.getLogger(__name__)

#: Seconds after the last use before spare keycodes are put back to NoSymbol.
RESTORE_DELAY_S = 1.0
#: Flush the request queue after this many typed characters (key presses and releases: twice).
TYPE_FLUSH_EVERY = 16


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
        self._sent_keys = 0  # key events sent, for flushing the queue now and then
        self._keysyms_per_keycode = 1
        self._focus = ClickFocus(self._d)
        self._focus_mode: FocusMode | None = None  # looked up at the first click of a run
        self._pace: Callable[[], None] | None = None  # the run's pacer, see run()
        # Primitives to events (pacing rules, pointer, last key released) across runs.
        self._events = InputEvents((self.width, self.height))
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
        Inside a text or a run of presses it is called at each :class:`~osworld_gym.protocol.
        events.Pace` (after a Return or Tab that more keys follow): a burst of keys has no gaps
        for an app's posted work, where pyautogui's key-by-key round trips leave some."""
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

    # ---- executing events -------------------------------------------------------------------
    def _do(self, p: Primitive) -> None:
        """Expand ``p`` into input events (:mod:`osworld_gym.protocol.events`) and send them."""
        if isinstance(p, Wait):
            raise ActionError(
                "wait is executed by the host; send the actions around it "
                "separately (GuestClient.run_actions does this)"
            )
        if isinstance(p, DragTo):  # a drag starts where the pointer really is
            reply = self._d.screen().root.query_pointer()
            self._events.pointer.x, self._events.pointer.y = reply.root_x, reply.root_y
        events = self._events.expand(p)
        start = 0
        while start < len(events):
            end = self._bind_run(events, start)
            for ev in events[start:end]:
                self._send(ev)
            self._d.sync()
            start = end

    def _send(self, ev: Event) -> None:
        match ev:
            case Key(ks, down):
                self._key(ks, down)
            case Move(x, y):
                xtest.fake_input(self._d, X.MotionNotify, x=x, y=y)
                self._d.sync()
            case Button(button, down):
                self._button(button, down)
            case Sleep(seconds):
                self._d.sync()
                time.sleep(seconds)
            case Settle(seconds):
                # Only a window manager that grabs clicks synchronously needs it; with ours the
                # guest focused the window before the press (ClickFocus).
                if self._focus_mode is FocusMode.WM:
                    time.sleep(seconds)
            case Pace():
                if self._pace is not None:
                    self._d.sync()
                    self._pace()

    def _button(self, button: int, down: bool) -> None:
        if down and button <= 3:
            if self._focus_mode is None:
                self._focus_mode = self._focus.mode()
            if self._focus_mode is FocusMode.GUEST:
                self._focus.before_press()  # focus moves first, as with the WM's binding
        xtest.fake_input(self._d, X.ButtonPress if down else X.ButtonRelease, button)
        self._d.sync()

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
        if shift is not None and down:
            xtest.fake_input(self._d, X.KeyPress, shift)
        xtest.fake_input(self._d, X.KeyPress if down else X.KeyRelease, kc)
        if shift is not None and not down:
            xtest.fake_input(self._d, X.KeyRelease, shift)
        self._sent_keys += 1
        if self._sent_keys % (2 * TYPE_FLUSH_EVERY) == 0:
            self._d.sync()

    def _bind_run(self, events: list[Event], start: int) -> int:
        """Bind the keysyms of the longest run of ``events`` from ``start`` whose keysyms
        without a key fit in the spare keycodes at once; return where the run ends."""
        capacity = max(1, len(self._spare))
        end, new, syms = start, set[int](), list[int]()
        while end < len(events):
            ev = events[end]
            if isinstance(ev, Key):
                ks = ev.keysym
                if (ks not in self._keymap or ks in self._bound) and ks not in new:
                    if len(new) == capacity:
                        break
                    new.add(ks)
                syms.append(ks)
            end += 1
        if syms:
            self._bind(syms)
        return end
