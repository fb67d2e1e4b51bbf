"""Faults on real desktops: a dead guest is an infrastructure error, and nothing accumulates."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import gymnasium as gym
import pytest
from proc_tree import alive, descendants

pytestmark = pytest.mark.desktop


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_killing_the_guest_server_mid_episode_is_an_infra_error_and_reset_recovers():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        env.reset(options={"task": "os-mkdir-001"})
        provider = env.unwrapped.provider
        guests = [p for p in descendants(provider.pid)
                  if "-m osworld_gym.guest" in cmdline(p) and not cmdline(p).startswith("bwrap")]
        assert len(guests) == 1
        os.kill(guests[0], signal.SIGKILL)
        _, reward, terminated, truncated, info = env.step("pyautogui.click(10, 10)")
        assert info["infra_error"] and "GuestError" in info["infra_error"]
        assert truncated and not terminated and reward == 0.0
        obs, info = env.reset(options={"task": "os-mkdir-001"})
        assert info["infra_error"] is None and obs["screenshot"].shape == (1080, 1920, 3)
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None and reward == 0.0
    finally:
        env.close()


def test_a_hundred_episodes_leave_nothing_behind():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin", settle=None)
    seen: set[int] = set()
    counts = []
    try:
        for i in range(100):
            env.reset(options={"task": "os-mkdir-001" if i % 2 else "os-copy-001"})
            if i % 10 == 0:
                env.step("pyautogui.hotkey('ctrl', 'alt', 't')")  # an extra app, killed by reset
            env.step("DONE")
            tree = descendants(env.unwrapped.provider.pid)
            seen |= tree
            counts.append(len(tree))
        state_dir = env.unwrapped.provider.state_dir
    finally:
        env.close()
    print(f"desktop processes per episode: first {counts[:3]}, last {counts[-3:]}")
    assert max(counts[-10:]) <= max(counts[:10]) + 1, "processes accumulate across episodes"
    assert not alive(seen | {env.unwrapped.provider.pid or 0} - {0})
    assert not state_dir.exists()
