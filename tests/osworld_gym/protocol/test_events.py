"""Primitives to input events, decided once (``protocol.events``) for both executors: the
guest's XTest input and the VNC provider's RFB events send the same events for the same
primitives. The XTest side runs on a real Xvfb (the events are recorded as XInput sends them,
and the pointer's real position is checked)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from osworld_gym.errors import ActionError
from osworld_gym.protocol.events import (
    PACED_KEYSYMS,
    Button,
    Event,
    InputEvents,
    Key,
    Move,
    Pace,
    Pointer,
    Settle,
    Sleep,
)
from osworld_gym.protocol.input import (
    BUTTON_SETTLE_S,
    CALL_PAUSE_S,
    CLICK_GAP_S,
    DRAG_STEP_S,
    DRAG_STEPS,
    REPEAT_GAP_S,
    WHEEL_SETTLE_S,
    char_keysym,
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
from osworld_gym.providers.vnc import rfb_events
from tcp_guest import free_display

SIZE = (640, 480)

#: Every primitive kind, with the cases the rules are about: repeated letters, Return inside
#: text, a drag up and left (rounding), coordinates off the screen (clamping).
CORPUS: list[Primitive] = [
    MoveTo(100, 100),
    Click(200, 150, "left", 2),
    Click(None, None, "right", 1),
    MouseDown("left", 300, 300),
    MouseUp("left", 305, 301),
    DragTo(7, 3, "left"),
    DragTo(5000, -20, "middle"),
    Scroll(dy=-2, dx=1, x=50, y=60),
    TypeText("hello\nbook\tx"),
    Press("enter", 3),
    Press("a", 2),
    Hotkey(("ctrl", "shift", "t")),
    KeyDown("shift"),
    KeyUp("shift"),
]


def expand_all(prims: list[Primitive], ptr: Pointer | None = None) -> list[Event]:
    ex = InputEvents(SIZE, ptr)
    return [ev for p in prims for ev in ex.expand(p)]


def keys(events: list[Event]) -> list[tuple[int, bool]]:
    return [(e.keysym, e.down) for e in events if isinstance(e, Key)]


def test_a_click_presses_settles_and_releases_and_multi_clicks_wait_between():
    assert expand_all([Click(10, 20, "left", 2)]) == [
        Move(10, 20),
        Button(1, True),
        Settle(BUTTON_SETTLE_S),
        Button(1, False),
        Sleep(CLICK_GAP_S),
        Button(1, True),
        Settle(BUTTON_SETTLE_S),
        Button(1, False),
    ]
    # a release never settles: only a press starts a window manager's synchronous grab
    assert expand_all([MouseUp("right", 1, 1)]) == [Move(1, 1), Button(3, False)]


def test_coordinates_are_clamped_into_the_screen():
    assert expand_all([MoveTo(-5, 10_000)]) == [Move(0, 479)]
    assert expand_all([Click(640, 480)])[0] == Move(639, 479)


@pytest.mark.parametrize(("start", "target"), [((100, 100), (7, 3)), ((0, 0), (639, 479))])
def test_a_drag_rounds_its_path_and_ends_exactly_on_the_target(start, target):
    events = expand_all([MoveTo(*start), DragTo(*target)])[1:]
    moves = [e for e in events if isinstance(e, Move)]
    (x0, y0), (x, y) = start, target
    assert moves == [
        Move(round(x0 + (x - x0) * i / DRAG_STEPS), round(y0 + (y - y0) * i / DRAG_STEPS))
        for i in range(1, DRAG_STEPS + 1)
    ]
    assert moves[-1] == Move(x, y)
    assert events[:2] == [Button(1, True), Settle()]
    assert events[-2:] == [Sleep(DRAG_STEP_S), Button(1, False)]
    assert sum(e.seconds for e in events if isinstance(e, Sleep)) == pytest.approx(
        (DRAG_STEPS + 1) * DRAG_STEP_S
    )


def test_a_drag_off_the_screen_stops_at_its_edge():
    moves = [e for e in expand_all([MoveTo(10, 10), DragTo(5000, -20)]) if isinstance(e, Move)]
    assert moves[-1] == Move(639, 0)
    assert all(0 <= m.x < 640 and 0 <= m.y < 480 for m in moves)


def test_each_wheel_notch_waits_after_its_press():
    assert expand_all([Scroll(dy=-1, dx=1)]) == [
        Button(5, True),
        Sleep(WHEEL_SETTLE_S),
        Button(5, False),
        Button(7, True),
        Sleep(WHEEL_SETTLE_S),
        Button(7, False),
    ]


def test_a_key_pressed_again_right_after_its_release_waits_a_clock_tick():
    events = expand_all([TypeText("hello")])
    gaps = [i for i, e in enumerate(events) if isinstance(e, Sleep)]
    assert [events[i] for i in gaps] == [Sleep(REPEAT_GAP_S)]
    assert events[gaps[0] + 1] == Key(ord("l"), True)  # before the second l only
    assert not any(isinstance(e, Sleep) for e in expand_all([TypeText("helo")]))
    # across primitives too: the same key typed by two calls in a row
    assert Sleep(REPEAT_GAP_S) in expand_all([Press("a"), TypeText("a")])
    assert Sleep(REPEAT_GAP_S) in expand_all([Press("a", 2)])


def test_typing_paces_after_return_or_tab_only_when_more_keys_follow():
    events = expand_all([TypeText("a\tb\r\nc\n")])
    assert keys(events)[::2] == [(char_keysym(c), True) for c in "a\tb\nc\n"]  # \r\n: one Return
    paces = [i for i, e in enumerate(events) if isinstance(e, Pace)]
    assert len(paces) == 2  # after the Tab and the first Return, not after the last Return
    for i in paces:
        assert events[i - 1].keysym in PACED_KEYSYMS  # type: ignore[union-attr]
    assert sum(isinstance(e, Pace) for e in expand_all([Press("enter", 3)])) == 2


def test_a_hotkey_presses_in_order_and_releases_in_reverse():
    assert keys(expand_all([Hotkey(("ctrl", "c"))])) == [
        (0xFFE3, True),
        (ord("c"), True),
        (ord("c"), False),
        (0xFFE3, False),
    ]


def test_wait_is_a_sleep_and_anything_else_is_refused():
    assert expand_all([Wait(0.5)]) == [Sleep(0.5)]
    with pytest.raises(ActionError, match="not a primitive"):
        InputEvents(SIZE).expand("click")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        InputEvents((0, 10))


def rfb_of(events: list[Event], ptr: Pointer) -> list[tuple]:
    """What an RFB client sends for ``events``: a pointer event carries the position and the
    buttons held; both pauses are sleeps (VNC cannot see the window manager); Pace is nothing."""
    out: list[tuple] = []
    for e in events:
        match e:
            case Move(x, y):
                ptr.x, ptr.y = x, y
                out.append(("pointer", x, y, ptr.mask))
            case Button(b, down):
                ptr.mask = ptr.mask | 1 << (b - 1) if down else ptr.mask & ~(1 << (b - 1))
                out.append(("pointer", ptr.x, ptr.y, ptr.mask))
            case Key(ks, down):
                out.append(("key", ks, down))
            case Sleep(s) | Settle(s):
                out.append(("sleep", s))
    return out


def test_vnc_sends_the_events_of_the_expansion_with_pyautogui_pauses_between_calls():
    for p in CORPUS:
        assert rfb_events([p], Pointer(1, 1), SIZE) == rfb_of(
            expand_all([p], Pointer(1, 1)), Pointer(1, 1)
        )
    got = rfb_events(CORPUS, Pointer(), SIZE)
    calls = [i for i, ev in enumerate(got) if ev == ("sleep", CALL_PAUSE_S)]
    assert len(calls) >= len(CORPUS) - 1
    without = [ev for ev in got if ev != ("sleep", CALL_PAUSE_S)]
    assert without == rfb_of(expand_all(CORPUS), Pointer())


# ---- XTest, on a real X server ------------------------------------------------------------
@pytest.fixture(scope="module")
def display(tmp_path_factory) -> Iterator[str]:
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    if not os.environ.get("XAUTHORITY"):  # python-xlib wants the file to exist
        auth = tmp_path_factory.mktemp("x") / "Xauthority"
        auth.touch()
        os.environ["XAUTHORITY"] = str(auth)
    display = free_display(170)
    xvfb = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", "640x480x24", "-nolisten", "tcp"],
        stderr=subprocess.DEVNULL,
    )
    sock = Path(f"/tmp/.X11-unix/X{display[1:]}")
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
        time.sleep(0.05)
    try:
        yield display
    finally:
        xvfb.terminate()
        xvfb.wait(10)


@pytest.mark.desktop
def test_xtest_sends_the_events_of_the_expansion(display, monkeypatch):
    from osworld_gym.guest.xinput import XInput

    xi = XInput(display)
    sent: list[Event] = []
    send = xi._send
    monkeypatch.setattr(xi, "_send", lambda ev: (sent.append(ev), send(ev))[1])
    try:
        xi.run([MoveTo(100, 100), *CORPUS[1:]])
        assert sent == expand_all([MoveTo(100, 100), *CORPUS[1:]])
        xi.run([MoveTo(100, 100), DragTo(7, 3)])
        assert xi.pointer() == (7, 3)  # the rounded path ends on the target
        with pytest.raises(ActionError, match="executed by the host"):
            xi.run([Wait(0.1)])
    finally:
        xi.release_all()
        xi.close()
