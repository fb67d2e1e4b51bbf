"""Stale frames: the observation ``env.step`` returns is the screen the desktop settles on.

A corpus of real actions on the sandboxed desktop (terminal typing and launches, a file opened
from the terminal, mousepad typing, its file dialog and menus; the benchmark's corpus,
``benchmarks/bench_turn_latency.py``) is run with the guest's settle signal. After each
observation the test waits 2 s and captures again: at most one difference over the corpus may
be anything but a blinking caret. Nothing here asserts a time.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.desktop]

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_turn_latency.py"
_spec = importlib.util.spec_from_file_location("bench_turn_latency", _BENCH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclasses look their module up
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def desktop():
    from osworld_gym.providers.local import LocalProvider

    provider = LocalProvider(profile="openbox")
    client = provider.start()
    try:
        yield client
    finally:
        provider.stop()


def test_observations_after_the_settle_signal_match_the_screen_two_seconds_later(desktop):
    corpus = [s for s in bench.scenarios() if s.name in ("xterm", "mousepad")]
    records = bench.run(desktop, corpus, ["signal"], ignore_top=0)
    assert len(records) == sum(len(s.steps) for s in corpus)
    stale = [(r.scenario, r.kind, r.extra) for r in records if r.stale == "changed"]
    assert len(stale) <= 1, f"observations returned before the screen settled: {stale}"


def test_env_step_takes_its_observation_from_the_settle_signal(local_env):
    local_env.reset(options={"task": "os-mkdir-001"})
    _, _, _, _, info = local_env.step("pyautogui.moveTo(300, 200)")
    assert info["timings"]["settle_signal"] == 1.0
    assert info["timings"]["settle_capped"] == 0.0
    obs, _, _, _, info = local_env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    frame = obs["screenshot"].copy()
    time.sleep(2.0)
    client = local_env.unwrapped._client
    assert info["timings"]["settle_signal"] == 1.0
    assert bench.compare_later(frame, client.screenshot_array()).explained
