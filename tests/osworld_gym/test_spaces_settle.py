"""Observation spaces and screen-settle detection (pure functions, no desktop)."""

from __future__ import annotations

import itertools
import time

import numpy as np
from osworld_gym.settle import SettleConfig, changed_fraction, wait_until_settled
from osworld_gym.spaces import UnicodeText


def test_unicode_text_accepts_any_encodable_string_within_bounds():
    space = UnicodeText(max_length=10)
    assert space.contains("")
    assert space.contains("日本語 ✓ 🙂")
    assert not space.contains("\ud800")  # lone surrogate: not encodable
    assert not space.contains("x" * 11)
    assert not space.contains(42)
    rng_samples = [space.sample() for _ in range(50)]
    assert all(space.contains(s) for s in rng_samples)


def test_caret_blink_does_not_count_as_motion():
    a = np.zeros((1080, 1920, 3), np.uint8)
    b = a.copy()
    b[500:516, 900:902] = 255  # a text caret
    assert changed_fraction(a, b, stride=4) < SettleConfig().threshold


def test_settle_waits_for_an_animation_to_end_and_returns_its_last_frame():
    frames = [np.full((40, 40, 3), i, np.uint8) for i in range(5)]
    it = itertools.chain(frames, itertools.repeat(frames[-1]))
    cfg = SettleConfig(min_s=0.0, quiet_s=0.05, max_s=2.0, poll_s=0.01)
    frame, facts = wait_until_settled(lambda: next(it), cfg, previous=frames[0])
    assert (frame == frames[-1]).all()
    assert facts["settle_frames"] >= 5
    assert facts["screen_changed"] == 1.0 and facts["settle_capped"] == 0.0


def test_settle_gives_up_at_the_cap_on_a_screen_that_never_stops():
    counter = itertools.count()
    cfg = SettleConfig(min_s=0.0, quiet_s=0.2, max_s=0.1, poll_s=0.01)
    _, facts = wait_until_settled(lambda: np.full((8, 8, 3), next(counter) % 256, np.uint8), cfg)
    assert facts["settle_capped"] == 1.0


def test_settle_waits_for_a_late_window_when_nothing_changed_yet():
    blank = np.zeros((40, 40, 3), np.uint8)
    window = np.full((40, 40, 3), 200, np.uint8)
    start = None

    def capture():
        nonlocal start
        start = start or time.monotonic()
        return window if time.monotonic() - start > 0.3 else blank

    cfg = SettleConfig(min_s=0.0, quiet_s=0.1, first_change_s=1.0, max_s=3.0, poll_s=0.02)
    frame, facts = wait_until_settled(capture, cfg, previous=blank)
    assert (frame == window).all() and facts["screen_changed"] == 1.0
