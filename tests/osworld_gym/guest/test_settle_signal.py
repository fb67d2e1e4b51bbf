"""The guest's settle signal on a real Xvfb with real X clients (no sandbox, no mocks).

A small X client (a subprocess of this test, so one of the "desktop processes" the signal
watches) paints its window white when clicked -- after computing for a while, after running a
child process, or continuously. The signal must not say "settled" before the paint: the checks
look at the pixels captured right after the wait, never at how long it took.
``test_settle_stale.py`` runs the same check over real apps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.desktop]
if shutil.which("Xvfb") is None:
    pytest.skip("Xvfb is not installed", allow_module_level=True)

from osworld_gym.guest.screen import Screen  # noqa: E402
from osworld_gym.guest.settle_signal import ProcessActivity, SettleSignal  # noqa: E402
from osworld_gym.guest.wakeups import next_wakeup  # noqa: E402
from osworld_gym.guest.xinput import XInput  # noqa: E402
from osworld_gym.protocol.primitives import Click  # noqa: E402

CLIENT = r"""
import subprocess, sys, time
from Xlib import X, display
d = display.Display(sys.argv[1]); s = d.screen()
win = s.root.create_window(0, 0, 400, 300, 0, s.root_depth, background_pixel=s.black_pixel,
                           event_mask=X.ButtonPressMask)
win.map(); d.sync()
white = win.create_gc(foreground=s.white_pixel)
grey = win.create_gc(foreground=0x808080)
mode = sys.argv[2]
print("ready", flush=True)
if mode == "launch-slices":  # starts as LibreOffice does: a paint, a job in 10 ms slices, a paint
    win.fill_rectangle(grey, 0, 0, 400, 300); d.flush()
    import select
    for _ in range(30):
        select.select([], [], [], 0.01)
    win.fill_rectangle(white, 0, 0, 400, 300); d.flush()
elif mode == "launch-timer":  # paints at once, then sleeps on a start-up timer that draws nothing
    win.fill_rectangle(white, 0, 0, 400, 300); d.flush()
    import select; select.select([], [], [], 0.25)
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
while True:
    ev = d.next_event()
    if ev.type != X.ButtonPress:
        continue
    if mode == "compute":
        burn(0.4)
    elif mode == "timer":  # draw at once, then once more from a timer (LibreOffice's way)
        win.fill_rectangle(grey, 0, 0, 400, 300); d.flush()
        import select; select.select([], [], [], 0.25)
    elif mode == "timer-busy":  # the same, while a thread of its own computes meanwhile
        win.fill_rectangle(grey, 0, 0, 400, 300); d.flush()
        import select, threading
        threading.Thread(target=lambda: (time.sleep(0.1), burn(0.03))).start()
        select.select([], [], [], 0.25)
    elif mode == "slices":  # paint, then work from a 10 ms timer, drawing at the end (LibreOffice)
        win.fill_rectangle(grey, 0, 0, 400, 300); d.flush()
        import select
        for _ in range(30):
            select.select([], [], [], 0.01)
    elif mode == "child":
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.4: pass"], check=True)
    if mode == "forever":
        i = 0
        while True:
            win.fill_rectangle(white if i % 2 else grey, 0, 0, 400, 300); d.flush()
            i += 1; time.sleep(0.02)
    win.fill_rectangle(white, 0, 0, 400, 300)
    d.flush()
"""


def free_display(start: int = 140) -> int:
    for n in range(start, start + 200):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    raise RuntimeError("no free X display number")


XVFB: dict[str, int] = {}  # display -> its X server's pid


@pytest.fixture(scope="module")
def display(tmp_path_factory) -> Iterator[str]:
    if not os.environ.get("XAUTHORITY"):  # python-xlib wants the file to exist
        auth = tmp_path_factory.mktemp("x") / "Xauthority"
        auth.touch()
        os.environ["XAUTHORITY"] = str(auth)
    name = f":{free_display()}"
    xvfb = subprocess.Popen(
        ["Xvfb", name, "-screen", "0", "640x480x24", "-nolisten", "tcp"], stderr=subprocess.DEVNULL
    )
    sock = Path(f"/tmp/.X11-unix/X{name[1:]}")
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
        time.sleep(0.05)
    XVFB[name] = xvfb.pid
    try:
        yield name
    finally:
        xvfb.terminate()
        xvfb.wait(10)


@pytest.fixture(scope="module")
def parts(display) -> Iterator[tuple[SettleSignal, XInput, Screen]]:
    # as the guest does: the X server's timers are not the input's doing
    signal = SettleSignal(
        display, timerless=lambda: {XVFB[display]}, server=lambda: {XVFB[display]}
    )
    xinput, screen = XInput(display), Screen(display)
    try:
        yield signal, xinput, screen
    finally:
        signal.close()
        xinput.close()
        screen.close()


def start_client(display: str, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT, display, mode],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, DISPLAY=display),
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # python-xlib may print a warning about X authority first
        if line.strip() == "ready":
            return proc
    raise AssertionError(f"the test client did not start (exit {proc.wait(10)})")


def click_and_wait(parts, max_s: float = 10.0) -> tuple[dict[str, float], np.ndarray]:
    signal, xinput, screen = parts
    signal.mark_input()
    xinput.run([Click(200, 150)])
    facts = signal.wait(max_s)
    return facts, np.asarray(screen.capture(cursor=False).image)


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(10)


@pytest.mark.parametrize("mode", ["compute", "child", "timer", "timer-busy"])
def test_the_wait_lasts_until_the_app_has_drawn_its_answer(display, parts, mode):
    """The app computes 0.4 s of CPU (itself, or in a child it waits for) before it paints, or
    paints grey and then white from a 0.25 s timer (while another of its threads computes for a
    moment, which once ended the wait for the timer: activity restarted the quiet period from
    before the timer was due): however loaded the machine, the frame taken after the wait shows
    the final paint."""
    client = start_client(display, mode)
    try:
        signal, _, screen = parts
        signal.mark_input()
        signal.wait(5.0)  # the new window's first paint is done
        assert np.asarray(screen.capture(cursor=False).image)[150, 200].tolist() == [0, 0, 0]
        facts, frame = click_and_wait(parts)
        assert frame[150, 200].tolist() == [255, 255, 255], (facts, signal.last_why)
        assert facts["screen_changed"] == 1.0 and facts["settle_capped"] == 0.0
        if mode.startswith(
            "timer"
        ):  # the app ran on the input and armed the timer: it was waited for
            assert facts["settle_timers"] >= 1 and "timer+" in signal.last_why
    finally:
        stop(client)


def first_paint_done(signal: SettleSignal) -> None:
    signal.mark_input()
    signal.wait(5.0)


def test_a_timer_armed_before_the_input_is_not_waited_for(display, parts):
    """A clock-like process went to sleep on a 0.3 s timeout just before the click and did not
    run since: its timer is its own (a clock, a caret), not the click's doing. The app that
    answered the click drew, so the old rule waited for any timer due soon (on ubuntu: the
    panel's, the X server's)."""
    clock = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import select, sys\n"
            "print('go', flush=True); sys.stdin.readline()\n"
            "select.select([], [], [], 0.3); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    client = start_client(display, "plain")
    try:
        signal, xinput, screen = parts
        first_paint_done(signal)
        assert clock.stdin is not None and clock.stdout is not None
        assert clock.stdout.readline().strip() == "go"
        clock.stdin.write("\n")
        clock.stdin.flush()
        deadline = time.monotonic() + 30
        while abs((next_wakeup(clock.pid) or 0) - 0.3) > 1e-6:  # asleep on it, before the input
            assert clock.poll() is None and time.monotonic() < deadline
            time.sleep(0.002)
        facts, frame = click_and_wait(parts)
        assert frame[150, 200].tolist() == [255, 255, 255]
        assert facts["settle_timers"] == 0.0 and "timer" not in signal.last_why, signal.last_why
    finally:
        stop(client)
        stop(clock)


def test_timers_of_the_x_server_and_the_panels_are_not_waited_for(display):
    """Processes named ``timerless`` (the X server, the profile's panels) draw from timers only
    their own things: an app so named that paints grey, then white from a 0.25 s timer, gets
    its grey frame, and the trace says no timer was waited for.

    The grey frame is asserted only when the click, the wait and the capture took under 0.25 s
    together: on a loaded machine they have taken longer, and the white frame was then on
    screen although no timer was waited for (the trace's assertion holds either way)."""
    client = start_client(display, "timer")
    signal = SettleSignal(display, timerless=lambda: {client.pid, XVFB[display]})
    xinput, screen = XInput(display), Screen(display)
    try:
        first_paint_done(signal)
        t0 = time.monotonic()
        facts, frame = click_and_wait((signal, xinput, screen))
        before_the_timer = time.monotonic() - t0 < 0.25
        assert facts["screen_changed"] == 1.0
        assert facts["settle_timers"] == 0.0 and "timer" not in signal.last_why, signal.last_why
        if before_the_timer:  # what the rule gives up, knowingly
            assert frame[150, 200].tolist() == [128, 128, 128]
    finally:
        stop(client)
        signal.close()
        xinput.close()
        screen.close()


def test_a_job_in_slices_at_a_few_percent_cpu_is_waited_for(display, parts):
    """After its first paint the app wakes every 10 ms for 0.3 s, hardly running, then paints
    its answer: LibreOffice's first edit does so (toolbar, modified flag, word count). A rule
    that took low CPU for an idle loop returned the first paint."""
    client = start_client(display, "slices")
    try:
        signal = parts[0]
        first_paint_done(signal)
        facts, frame = click_and_wait(parts)
        assert frame[150, 200].tolist() == [255, 255, 255], (facts, signal.last_why)
        assert "chunk+" in signal.last_why and facts["settle_capped"] == 0.0
    finally:
        stop(client)


def launch_and_wait(parts, display: str, mode: str):
    """The action starts the app: the wait begins before its process exists."""
    signal, _, screen = parts
    signal.mark_input()
    client = start_client(display, mode)
    facts = signal.wait(10.0)
    return client, facts, np.asarray(screen.capture(cursor=False).image)


def test_a_launched_apps_start_up_timers_are_not_followed(display, parts):
    """A new app that has painted and sleeps on a 0.25 s timer is starting up (GTK apps arm
    such timers one after another, drawing nothing the frame needs): no timer is waited for."""
    client, facts, frame = launch_and_wait(parts, display, "launch-timer")
    try:
        assert frame[150, 200].tolist() == [255, 255, 255]
        assert facts["settle_launch"] == 1.0 and facts["settle_capped"] == 0.0
        assert facts["settle_timers"] == 0.0 and "timer" not in parts[0].last_why, parts[0].last_why
    finally:
        stop(client)


def test_a_launched_apps_job_in_slices_is_waited_for(display, parts):
    """LibreOffice, once its window is up, lays out its ruler and status bar in 10 ms slices
    and draws them at the end: the frame after a launch shows that last paint."""
    client, facts, frame = launch_and_wait(parts, display, "launch-slices")
    try:
        assert frame[150, 200].tolist() == [255, 255, 255], (facts, parts[0].last_why)
        assert "chunk+" in parts[0].last_why and facts["settle_capped"] == 0.0
    finally:
        stop(client)


def test_an_action_that_changes_nothing_settles_without_reaching_the_cap(display, parts):
    signal, xinput, _ = parts
    signal.mark_input()
    xinput.run([Click(600, 450)])  # the bare root window: nobody listens
    facts = signal.wait(30.0)
    assert facts["settle_capped"] == 0.0 and facts["screen_changed"] == 0.0


def test_a_screen_that_never_stops_changing_is_waited_for_until_the_cap(display, parts):
    client = start_client(display, "forever")
    try:
        facts, _ = click_and_wait(parts, max_s=1.0)
        assert facts["settle_capped"] == 1.0
    finally:
        stop(client)


def test_process_activity_sees_new_children_and_their_cpu_time_after_they_exit():
    procs = ProcessActivity()
    before = procs.sample()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in procs.sample().pids
    finally:
        stop(child)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    shell = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{burn}'; sleep 30"])
    try:
        deadline = time.monotonic() + 30
        while procs.sample().ticks - before.ticks < 20:  # 0.2 s of the child's, in the shell's
            assert time.monotonic() < deadline, "the exited child's CPU time was not counted"
            time.sleep(0.05)
    finally:
        stop(shell)


def test_the_recorders_subtree_can_be_left_out():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid not in ProcessActivity(exclude=lambda: {child.pid}).sample().pids
    finally:
        stop(child)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import select; select.select([], [], [], 123)", 123.0),
        ("import select; select.poll().poll(45000)", 45.0),
        ("import sys; sys.stdin.read()", None),  # no timeout: not a timer
    ],
)
def test_next_wakeup_reads_the_timeout_a_sleeping_event_loop_waits_with(code, expected):
    child = subprocess.Popen(
        [sys.executable, "-c", f"print('go', flush=True); {code}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "go"
        deadline = time.monotonic() + 30
        while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "S":
            assert time.monotonic() < deadline, "the child never went to sleep"
            time.sleep(0.02)
        time.sleep(0.1)  # asleep in the call itself, not on the way to it
        got = next_wakeup(child.pid)
        if expected is None:
            assert got is None
        else:
            assert got is not None and expected - 0.5 < got <= expected
    finally:
        stop(child)


def test_the_trace_shows_a_process_name_the_player_chose_as_harmless_text():
    """The player names its processes: a newline in one must not reach the ``X-Settle-Why``
    header, nor the trace's own separators its parsing."""
    from osworld_gym.guest.settle_signal import _comm

    code = (
        "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'a\\r\\nX-Bad: [1],@', 0, 0, 0); "
        "print('go', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "go"
        raw = Path(f"/proc/{child.pid}/comm").read_bytes()
        assert b"\n" in raw.rstrip(b"\n")  # the name really holds a newline
        name = _comm(child.pid)
        assert name == "a??X-Bad:??1???", name
    finally:
        stop(child)
