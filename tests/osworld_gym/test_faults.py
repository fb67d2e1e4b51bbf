"""Faults on real desktops: a dead guest is an infrastructure error, a dead task app is the
episode's outcome (scored, listed in ``info["app_exits"]``), and nothing accumulates."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
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
        guests = [
            p
            for p in descendants(provider.pid)
            if "-m osworld_gym.guest" in cmdline(p) and not cmdline(p).startswith("bwrap")
        ]
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


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kill_app(env, name: str, sig: int = signal.SIGKILL) -> int:
    """Signal the desktop's process called ``name`` from outside, as the OOM killer would."""
    pids = [
        p
        for p in descendants(env.unwrapped.provider.pid)
        if comm(p) == name and comm(ppid(p)) != name
    ]  # the app's main process
    assert len(pids) == 1, f"{len(pids)} main {name} processes on the desktop"
    os.kill(pids[0], sig)
    return pids[0]


def ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@pytest.mark.parametrize(
    "task, app",
    [
        (
            "libreoffice_calc-bold-header-001",
            "soffice.bin",
        ),  # opened via its file (the `open` step)
        ("chrome-tabs-001", "chromium"),  # launched as `google-chrome`
    ],
)
def test_a_task_app_killed_mid_episode_is_scored_and_listed_and_reset_recovers(task, app):
    """The agent can ``kill -9`` its own app from a terminal and Linux does not say who sent a
    signal: a dead player-side app is the episode's outcome, never an excluded episode."""
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin", max_steps=5)
    try:
        env.reset(options={"task": task})
        _, _, _, _, info = env.step("pyautogui.moveTo(400, 400)")
        assert info["infra_error"] is None and info["app_exits"] == []
        pid = _kill_app(env, app)
        _, reward, terminated, truncated, info = env.step("pyautogui.moveTo(500, 500)")
        assert info["infra_error"] is None and not (terminated or truncated), info
        assert any("SIGKILL" in e for e in info["app_exits"]), info
        assert not alive({pid})
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None and reward == 0.0, info
        assert any("SIGKILL" in e for e in info["app_exits"])
        # the desktop was not restarted for it: same sandbox, apps back after reset
        sandbox = env.unwrapped.provider.pid
        _, info = env.reset(options={"task": task})
        assert info["infra_error"] is None and env.unwrapped.provider.pid == sandbox
        assert info["app_exits"] == [] and any(comm(p) == app for p in descendants(sandbox))
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None and reward == 0.0
    finally:
        env.close()


def test_a_crash_just_before_the_end_is_seen_before_scoring_and_scored():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin", settle=None)
    try:
        env.reset(options={"task": "text_editor-append-001"})
        pid = _kill_app(env, "mousepad", signal.SIGSEGV)
        deadline = time.monotonic() + 10  # a signal's delivery and exit take their own time
        while alive({pid}):
            assert time.monotonic() < deadline, "mousepad survived SIGSEGV"
            time.sleep(0.01)
        _, reward, terminated, truncated, info = env.step("DONE")  # no screenshot needed to see it
        # on failure, say what the guest knows now: a crash it counted only later was a race
        exits = " ".join(info["app_exits"])
        assert "mousepad" in exits and "SIGSEGV" in exits, (
            f"{info}\nguest now: {env.unwrapped._client.health()}\n"
            f"--- guest log ---\n{env.unwrapped.provider.log_tail()}"
        )
        assert info["infra_error"] is None and terminated and not truncated and reward == 0.0
    finally:
        env.close()


#: A launcher that, like ``oosplash``, reports its app's death as its own exit status 137, but
#: only 0.4 s after the app died (the app's zombie waits that long to be reaped).
SLOW_LAUNCHER = """
import subprocess, sys, time
app = subprocess.Popen(["sleep", "300"])
while open(f"/proc/{app.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
time.sleep(0.4)
app.wait()
sys.exit(137)
"""


def test_an_app_killed_before_a_turn_is_in_that_turns_observation():
    """A turn is often over in under 100 ms, sooner than a killed app below a launcher is gone
    and its launcher has exited: the settled frame waits for what is dying, so its crash count
    already holds the kill instead of a later turn's."""
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        env.reset(options={"task": "os-mkdir-001"})
        client = env.unwrapped._client
        client.launch([sys.executable, "-c", SLOW_LAUNCHER])
        deadline = time.monotonic() + 10
        while not (
            apps := [
                p for p in descendants(env.unwrapped.provider.pid) if cmdline(p) == "sleep 300 "
            ]
        ):
            assert time.monotonic() < deadline, "the launcher's app did not start"
            time.sleep(0.02)
        before = client.crash_count
        os.kill(apps[0], signal.SIGKILL)
        settled = client.settled_screenshot_array(max_s=3.0)
        assert settled is not None
        assert client.crash_count == before + 1, client.health()
        assert "SIGKILL" in client.crashes_after(before)[0]["describe"]
        assert settled[1]["reap_ms"] >= 300  # it did wait for the launcher
    finally:
        env.close()


@pytest.mark.parametrize(
    "task, app, quit_keys",
    [
        ("text_editor-append-001", "mousepad", "pyautogui.hotkey('ctrl', 'q')"),
        ("libreoffice_calc-bold-header-001", "soffice.bin", "pyautogui.hotkey('ctrl', 'q')"),
        ("chrome-tabs-001", "chromium", "pyautogui.hotkey('ctrl', 'shift', 'w')"),
    ],
)
def test_an_app_the_agent_quits_or_a_sigterm_is_not_a_crash(task, app, quit_keys):
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        env.reset(options={"task": task})
        _, _, _, _, info = env.step(quit_keys)
        assert info["infra_error"] is None
        deadline = time.monotonic() + 20  # the app and its helpers exit in their own time
        while any(comm(p) == app for p in descendants(env.unwrapped.provider.pid)):
            assert time.monotonic() < deadline, f"{app} did not quit"
            time.sleep(0.2)
        _, reward, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None and reward == 0.0
        env.reset(options={"task": task})
        _kill_app(env, app, signal.SIGTERM)
        _, _, terminated, _, info = env.step("DONE")
        assert terminated and info["infra_error"] is None
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
    # Compared from the second ten on: the first GTK app (GNOME Terminal on the ubuntu profile)
    # starts the AT-SPI bus by D-Bus activation, which then stays, as on Ubuntu; each ten holds
    # one episode with a terminal, so the two tens are alike.
    assert max(counts[-10:]) <= max(counts[10:20]) + 1, "processes accumulate across episodes"
    assert not alive(seen | {env.unwrapped.provider.pid or 0} - {0})
    assert not state_dir.exists()
