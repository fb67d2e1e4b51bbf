"""One back-off for every client's ``wait_ready`` (GuestClient, OSWorldCompatClient, VNCClient):
the sleeps double from ``first_s`` to ``cap_s``, a 401 is raised at once, and the timeout's
error names what was awaited and the last reason. The clock is a counter, not the wall."""

from __future__ import annotations

import threading
import time

import pytest
from osworld_gym.errors import GuestError
from osworld_gym.protocol import client as protocol_client
from osworld_gym.protocol.client import poll_until_ready


class Clock:
    """A counter for the test's own thread only. ``time`` is one module for the whole process,
    so patching it reaches every thread: another test's thread still polling in the background
    (a full run once recorded six of its ``sleep(0.5)`` here) keeps the real clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.owner = threading.get_ident()
        self.real_monotonic, self.real_sleep = time.monotonic, time.sleep

    def monotonic(self) -> float:
        if threading.get_ident() != self.owner:
            return self.real_monotonic()
        return self.now

    def sleep(self, s: float) -> None:
        if threading.get_ident() != self.owner:
            self.real_sleep(s)
            return
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(protocol_client.time, "monotonic", c.monotonic)
    monkeypatch.setattr(protocol_client.time, "sleep", c.sleep)
    return c


def test_sleeps_double_up_to_the_cap_then_the_error_names_the_last_reason(clock):
    calls = []

    def probe() -> str | None:
        calls.append(1)
        if len(calls) % 2:
            raise GuestError("connection refused")
        return "X is not up"

    with pytest.raises(GuestError, match=r"^guest not ready after 2 s: X is not up") as e:
        poll_until_ready(probe, 2.0, first_s=0.02, cap_s=0.5, what="guest", endpoint="/health")
    assert e.value.endpoint == "/health"
    assert clock.sleeps[:6] == pytest.approx([0.02, 0.04, 0.08, 0.16, 0.32, 0.5])
    assert sum(clock.sleeps) <= 2.0 and len(calls) == len(clock.sleeps) + 1


def test_ready_returns_and_a_wrong_token_is_not_waited_out(clock):
    answers = iter(["booting", "booting", None])
    poll_until_ready(lambda: next(answers), 10, first_s=0.05, cap_s=1.0, what="x", endpoint="e")
    assert clock.sleeps == pytest.approx([0.05, 0.1])

    def unauthorized() -> None:
        raise GuestError("bad token", status=401)

    with pytest.raises(GuestError, match="bad token"):
        poll_until_ready(unauthorized, 10, first_s=0.05, cap_s=1.0, what="x", endpoint="e")
    assert clock.sleeps == pytest.approx([0.05, 0.1])  # no sleep for the 401


def test_another_threads_sleep_is_neither_recorded_nor_counted(clock):
    """What the full run hit: a thread sleeping while the test polls."""
    stop, slept = threading.Event(), threading.Event()

    def background() -> None:
        while not stop.is_set():
            time.sleep(0.01)
            slept.set()

    answers = iter(["booting", "booting", "booting", None])

    def probe() -> str | None:
        assert slept.wait(5), "the background thread never slept"  # a lock wait, not time.sleep
        return next(answers)

    t = threading.Thread(target=background, daemon=True)
    t.start()
    try:
        poll_until_ready(probe, 10, first_s=0.05, cap_s=1.0, what="x", endpoint="e")
    finally:
        stop.set()
        t.join()
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2])
    assert clock.now == pytest.approx(0.35)
