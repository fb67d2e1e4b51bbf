"""OSWorldEnv on the real local desktop: Gymnasium conformance, isolation, reset, cleanup."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from gymnasium.utils.env_checker import check_env
from osworld_gym.errors import MissingDependencyError
from osworld_gym.providers import local as local_mod
from proc_tree import alive, descendants

pytestmark = pytest.mark.desktop


def test_check_env_passes_on_the_local_desktop():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin", max_steps=3)
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_observation_is_the_real_screen_and_steps_return_five_values(local_env):
    obs, info = local_env.reset(options={"task": "os-mkdir-001"})
    assert obs["screenshot"].shape == (1080, 1920, 3)
    assert obs["instruction"] == local_env.unwrapped.task.instruction
    assert info["task_id"] == "os-mkdir-001" and info["domain"] == "os"
    before = obs["screenshot"]
    obs, reward, terminated, truncated, info = local_env.step(
        "pyautogui.hotkey('ctrl', 'alt', 't')"
    )
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["action_error"] is None and info["infra_error"] is None
    if (obs["screenshot"] != before).any(axis=-1).mean() < 0.01:  # xterm slow to map under load
        obs, *_ = local_env.step("WAIT")
    # an xterm window appeared: a large part of the screen changed
    assert (obs["screenshot"] != before).any(axis=-1).mean() > 0.01
    assert info["timings"]["screenshot_capture_ms"] > 0


def test_unparsable_action_executes_nothing_and_reports_why(local_env):
    local_env.reset(options={"task": "os-mkdir-001"})
    obs, reward, terminated, truncated, info = local_env.step(
        "import os; os.system('mkdir ~/Desktop/projects')"
    )
    assert "import" in info["action_error"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    home = local_env.unwrapped.provider.state_dir / "home"
    assert not (home / "Desktop" / "projects").exists()


def test_truncation_at_max_steps_is_scored_the_osworld_way():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin", max_steps=2)
    try:
        env.reset(options={"task": "os-mkdir-001"})
        home = env.unwrapped.provider.state_dir / "home"
        (home / "Desktop" / "projects").mkdir(parents=True)  # the goal state, however reached
        _, r, term, trunc, _ = env.step("WAIT")
        assert (r, term, trunc) == (0.0, False, False)
        _, r, term, trunc, info = env.step("pyautogui.moveTo(10, 10)")
        assert (r, term, trunc) == (1.0, False, True) and info["infra_error"] is None
        with pytest.raises(gym.error.ResetNeeded):
            env.unwrapped.step("WAIT")
    finally:
        env.close()


def test_reset_restores_home_and_kills_task_apps_quickly(local_env):
    local_env.reset(options={"task": "os-mkdir-001"})
    provider = local_env.unwrapped.provider
    local_env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    local_env.step("pyautogui.write('touch ~/leftover.txt\\n')")
    home = provider.state_dir / "home"
    assert (home / "leftover.txt").exists()
    terminals = ("xterm", "gnome-terminal-server")  # Ctrl+Alt+T's on openbox / ubuntu profiles
    before = {
        p
        for p in descendants(provider.pid)
        if any(t in Path(f"/proc/{p}/cmdline").read_text() for t in terminals)
    }
    assert before, "the terminal the agent opened should be running"
    t0 = time.monotonic()
    provider.reset_state()
    elapsed = time.monotonic() - t0
    print(f"desktop reset took {1000 * elapsed:.0f} ms")
    assert not (home / "leftover.txt").exists()
    assert not alive(before)
    assert provider.running


def test_two_desktops_have_separate_networks_and_can_use_the_same_port():
    envs = [gym.make("OSWorld-v0", provider="local", tasks="builtin") for _ in range(2)]
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    host_port = host.getsockname()[1]
    listen = [
        "python3",
        "-c",
        "import socket,time; s=socket.socket(); s.bind(('127.0.0.1', 9222)); "
        "s.listen(); time.sleep(30)",
    ]
    probe = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo open || echo closed"
    try:
        clients = []
        for env in envs:
            env.reset(options={"task": "os-mkdir-001"})
            client = env.unwrapped.provider.start()
            client.launch(listen)
            clients.append(client)
        for client in clients:
            for _ in range(50):
                out = client.execute(["bash", "-c", probe.format(port=9222)])["output"]
                if "open" in out:
                    break
                time.sleep(0.1)
            assert out.strip() == "open", "each desktop binds its own 127.0.0.1:9222"
            out = client.execute(["bash", "-c", probe.format(port=host_port) + " 2>/dev/null"])
            assert out["output"].strip() == "closed", "the host's loopback is not reachable"
    finally:
        host.close()
        for env in envs:
            env.close()


def test_close_leaves_no_process_behind():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    env.reset(options={"task": "os-mkdir-001"})
    env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    provider = env.unwrapped.provider
    pids = descendants(provider.pid) | {provider.pid}
    state_dir = provider.state_dir
    assert len(pids) >= 5, pids  # bwrap (x2), guest, Xvfb, openbox, xterm, bash
    env.close()
    assert not alive(pids)
    assert not state_dir.exists()


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_interpreter_exit_leaves_no_process_behind(tmp_path, how):
    script = textwrap.dedent(f"""
        import json, os, signal, sys, time
        import gymnasium as gym, osworld_gym
        env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
        env.reset(options={{"task": "os-mkdir-001"}})
        env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
        p = env.unwrapped.provider
        print(json.dumps({{"pid": p.pid, "dir": str(p.state_dir)}}), flush=True)
        sys.stdin.readline()  # the test has listed the desktop's processes
        if {how!r} == "sigkill":
            time.sleep(60)   # killed by the test
        # "exit": fall off the end without close(); the exit handlers must clean up
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    facts = json.loads(proc.stdout.readline())
    pids = descendants(facts["pid"]) | {facts["pid"]}
    assert len(pids) >= 5
    proc.stdin.write("go\n")
    proc.stdin.flush()
    if how == "sigkill":
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 5
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids)
    if how == "exit":
        assert not Path(facts["dir"]).exists()


def test_missing_system_programs_get_one_error_naming_the_apt_command(monkeypatch):
    real_which = local_mod.shutil.which
    monkeypatch.setattr(
        local_mod.shutil,
        "which",
        lambda prog, *a, **kw: None if prog in ("Xvfb", "bwrap") else real_which(prog, *a, **kw),
    )
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    with pytest.raises(MissingDependencyError, match="apt-get install -y bubblewrap xvfb"):
        env.reset(options={"task": "os-mkdir-001"})
    env.close()


def test_a_dead_desktop_is_an_infra_error_not_a_score_and_reset_recovers():
    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        env.reset(options={"task": "os-mkdir-001"})
        provider = env.unwrapped.provider
        xvfb = [
            p
            for p in descendants(provider.pid)
            if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"Xvfb")
        ]
        assert len(xvfb) == 1
        os.kill(xvfb[0], signal.SIGKILL)
        _, reward, terminated, truncated, info = env.step("DONE")
        assert info["infra_error"], "a dead X server must be reported as an infrastructure error"
        assert truncated and not terminated
        obs, info = env.reset(options={"task": "os-mkdir-001"})
        assert info["infra_error"] is None and obs["screenshot"].shape == (1080, 1920, 3)
    finally:
        env.close()


def test_no_sandbox_mode_is_an_explicit_warned_opt_in(caplog):
    env = gym.make(
        "OSWorld-v0", provider="local", tasks="builtin", provider_kwargs={"sandbox": False}
    )
    try:
        with caplog.at_level("WARNING"):
            obs, _ = env.reset(options={"task": "os-mkdir-001"})
        assert "sandbox=False" in caplog.text
        assert obs["screenshot"].shape == (1080, 1920, 3)
    finally:
        env.close()


def test_a_desktop_outlives_the_thread_that_started_it():
    import threading

    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        t = threading.Thread(target=lambda: env.reset(options={"task": "os-mkdir-001"}))
        t.start()
        t.join()
        time.sleep(0.5)  # were the desktop tied to that thread, it would be dying now
        assert env.unwrapped.provider.running
        _, _, _, _, info = env.step("pyautogui.moveTo(5, 5)")
        assert info["infra_error"] is None
    finally:
        env.close()


def test_a_forked_child_can_start_its_own_desktop():
    """Vector env workers are forked from a process whose spawner thread they do not inherit."""
    import multiprocessing as mp

    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    env.reset(options={"task": "os-mkdir-001"})  # the parent's spawner thread is running now
    env.close()
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child() -> None:
        e = gym.make("OSWorld-v0", provider="local", tasks="builtin")
        try:
            obs, _ = e.reset(options={"task": "os-mkdir-001"})
            q.put(obs["screenshot"].shape)
        finally:
            e.close()

    p = ctx.Process(target=child)
    p.start()
    p.join(timeout=120)
    if p.is_alive():
        p.kill()
    assert p.exitcode == 0 and q.get(timeout=5) == (1080, 1920, 3)
