"""Many desktops on one machine: the make_vec recipe, its per-sub-env failure handling, cleanup.

The plumbing tests use the fake provider (milliseconds per step); the recipe itself is then
proven on four real local desktops.
"""

from __future__ import annotations

import doctest
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import osworld_gym.vector
import pytest
from osworld_gym.errors import GuestError
from osworld_gym.support import builtin_task, load_tasks
from osworld_gym.vector import VectorSafe, make_vec
from proc_tree import alive, descendants

#: built-in tasks whose setup runs on the fake provider too (the suite grows; tests pin these)
TASKS = load_tasks(
    [
        builtin_task(t)
        for t in (
            "os-chmod-001",
            "os-copy-001",
            "os-infeasible-001",
            "os-mkdir-001",
            "os-rename-001",
            "os-write-file-001",
        )
    ]
)
FAKE = {"provider": "fake", "tasks": TASKS, "max_steps": 3, "settle": None}


class HangOn(gym.Wrapper):
    """A sub-env that blocks on the action "HANG" or a reset with seed 99 (a desktop that stopped
    answering)."""

    def reset(self, *, seed=None, options=None):
        if seed == 99:
            time.sleep(600)
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if action == "HANG":
            time.sleep(600)
        return self.env.step(action)


class BreakResetOf(gym.Wrapper):
    """A sub-env whose desktop fails to reset for one task (as a dead VM would)."""

    def reset(self, *, seed=None, options=None):
        if (options or {}).get("task") == "os-mkdir-001":
            raise GuestError("the desktop did not answer", endpoint="/health")
        return self.env.reset(seed=seed, options=options)


def test_the_module_docstring_recipe_runs():
    result = doctest.testmod(osworld_gym.vector, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0


@pytest.mark.filterwarnings("ignore:.*(Worker|Traceback|exception):UserWarning")
def test_make_vec_disables_autoreset_and_keeps_finished_sub_envs_put():
    envs = make_vec(2, **FAKE)
    try:
        assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
        assert not any(p.daemon for p in envs.processes)
        obs, info = envs.reset(seed=4)
        assert list(info["task_id"]) == [TASKS.for_seed(4).id, TASKS.for_seed(5).id]
        assert obs["instruction"][0] == TASKS.for_seed(4).instruction  # not shared-memory filler
        envs.reset(options={"task": "os-infeasible-001"})
        obs, reward, term, trunc, info = envs.step(("FAIL", "pyautogui.click(3, 3)"))
        assert term.tolist() == [True, False]
        assert reward[0] == 1.0, "FAIL solves the infeasible task os-infeasible-001"
        with pytest.raises(
            Exception, match="reset"
        ):  # no autoreset: a finished sub-env stays finished
            envs.step(("WAIT", "pyautogui.click(3, 3)"))
    finally:
        envs.close(terminate=True)


def test_gymnasiums_own_make_vec_works_with_the_documented_kwargs():
    envs = gym.make_vec(
        "OSWorld-v0",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={
            "daemon": False,
            "shared_memory": False,
            "autoreset_mode": gym.vector.AutoresetMode.DISABLED,
        },
        wrappers=[VectorSafe],
        **FAKE,
    )
    try:
        obs, info = envs.reset(seed=1)
        assert info["task_id"].tolist() == [TASKS.for_seed(1).id, TASKS.for_seed(2).id]
        assert list(obs["instruction"]) == [
            TASKS.for_seed(1).instruction,
            TASKS.for_seed(2).instruction,
        ]
        obs, reward, term, trunc, info = envs.step(("DONE", "pyautogui.click(1, 1)"))
        assert term.tolist() == [True, False]
        obs, info = envs.reset(seed=5, options={"reset_mask": term})
        assert (
            info["_task_id"].tolist() == [True, False]
            and info["task_id"][0] == TASKS.for_seed(5).id
        )
        envs.step_async(("pyautogui.click(1, 1)",) * 2)
        obs, reward, term, trunc, info = envs.step_wait(timeout=30)
        assert info["step"].tolist() == [1, 2]
    finally:
        envs.close()


def test_a_step_that_overruns_its_timeout_is_an_infra_error_of_that_sub_env_only():
    envs = make_vec(2, step_timeout=3.0, wrappers=[HangOn], **FAKE)
    try:
        envs.reset(seed=0)
        hung_pid = envs.processes[1].pid
        t0 = time.monotonic()
        obs, reward, term, trunc, info = envs.step(("pyautogui.click(1, 1)", "HANG"))
        assert time.monotonic() - t0 < 15
        assert trunc.tolist() == [False, True] and reward[1] == 0.0
        assert info["infra_error"][0] is None and "timed out" in info["infra_error"][1]
        assert envs.processes[1].pid != hung_pid and envs.processes[1].is_alive()
        assert (
            not Path(f"/proc/{hung_pid}").exists()
            or b"Z" in Path(f"/proc/{hung_pid}/stat").read_bytes()
        )
        # the replaced sub-env comes back with a reset; the other one kept its episode
        obs, info = envs.reset(seed=7, options={"reset_mask": np.array([False, True])})
        assert info["task_id"][1] == TASKS.for_seed(8).id
        obs, reward, term, trunc, info = envs.step(
            ("pyautogui.click(2, 2)", "pyautogui.click(2, 2)")
        )
        assert info["infra_error"].tolist() == [None, None] and info["step"].tolist() == [2, 1]
    finally:
        envs.close(terminate=True)


def test_a_reset_that_overruns_its_timeout_truncates_that_sub_env_at_the_next_step():
    envs = make_vec(2, reset_timeout=3.0, wrappers=[HangOn], **FAKE)
    try:
        slow = envs.processes[0].pid
        obs, info = envs.reset(seed=99)  # sub-env 0 (seed 99) hangs, sub-env 1 (seed 100) is fine
        assert "timed out" in info["infra_error"][0] and info["infra_error"][1] is None
        assert info["task_id"][1] == TASKS.for_seed(100).id
        assert envs.processes[0].pid != slow
        assert obs["instruction"][0] == "" and (obs["screenshot"][0] == 0).all()
        obs, reward, term, trunc, info = envs.step(
            ("pyautogui.click(1, 1)", "pyautogui.click(1, 1)")
        )
        assert trunc.tolist() == [True, False] and "timed out" in info["infra_error"][0]
        assert info["infra_error"][1] is None and info["step"][1] == 1
        obs, info = envs.reset(seed=3)
        assert info["infra_error"].tolist() == [None, None]
    finally:
        envs.close(terminate=True)


def test_a_worker_killed_by_the_os_is_an_infra_error_and_is_replaced():
    envs = make_vec(2, **FAKE)
    try:
        envs.reset(seed=0)
        victim = envs.processes[0]
        os.kill(victim.pid, signal.SIGKILL)  # e.g. the OOM killer
        victim.join(10)
        obs, reward, term, trunc, info = envs.step(("pyautogui.click(1, 1)",) * 2)
        assert trunc.tolist() == [True, False] and "worker died" in info["infra_error"][0]
        assert envs.processes[0].is_alive()
        obs, info = envs.reset(seed=0)
        assert info["infra_error"].tolist() == [None, None]
    finally:
        envs.close(terminate=True)


@pytest.mark.parametrize("call", ["reset", "step", "set_attr"])
def test_a_closed_env_refuses_calls_and_starts_no_worker(call):
    """Its workers are gone, as a dead one's is, but a closed env must not replace them: nothing
    would ever stop the new worker (it used to start one, which then failed to unpickle the
    env's queue once the env was collected)."""
    import multiprocessing

    envs = make_vec(1, **FAKE)
    envs.reset(seed=0)
    envs.close(terminate=True)
    before = {p.pid for p in multiprocessing.active_children()}
    calls = {
        "reset": lambda: envs.reset(seed=0),
        "step": lambda: envs.step(("pyautogui.click(1, 1)",)),
        "set_attr": lambda: envs.set_attr("next_task", [None]),
    }
    with pytest.raises(gym.error.ClosedEnvironmentError):
        calls[call]()
    assert {p.pid for p in multiprocessing.active_children()} <= before


def test_a_desktop_that_fails_to_reset_reports_infra_error_and_the_batch_goes_on():
    envs = make_vec(2, wrappers=[BreakResetOf], **FAKE)
    try:
        obs, info = envs.reset(options={"task": "os-mkdir-001"})
        assert all("the desktop did not answer" in e for e in info["infra_error"])
        assert info["task_id"].tolist() == ["os-mkdir-001"] * 2
        obs, reward, term, trunc, info = envs.step(("DONE", "DONE"))
        assert trunc.all() and not term.any() and (reward == 0.0).all()
        assert all("reset failed" in e for e in info["infra_error"])
        obs, info = envs.reset(options={"task": "os-copy-001"})
        assert info["infra_error"].tolist() == [None, None]
    finally:
        envs.close(terminate=True)


def test_vector_safe_batches_variation_as_an_integer():
    env = VectorSafe(gym.make("OSWorld-v0", **FAKE))
    _, info = env.reset(options={"task": "os-copy-001"})
    assert info["variation"] == -1
    env.close()


def test_forgetting_close_does_not_hang_interpreter_exit():
    script = textwrap.dedent("""
        from osworld_gym.testing import FAKE_TASK
        from osworld_gym.vector import make_vec
        envs = make_vec(2, provider="fake", tasks=[FAKE_TASK], settle=None)
        envs.reset(seed=0)
        print("ok", flush=True)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


# -- real desktops ---------------------------------------------------------------------------------


@pytest.mark.desktop
def test_four_local_desktops_run_distinct_tasks_reset_partially_and_close_cleanly():
    from conftest import sandbox_processes

    before = {pid for pid, _ in sandbox_processes()}
    envs = make_vec(4, provider="local", tasks=TASKS, max_steps=5, step_timeout=120)
    try:
        obs, info = envs.reset(seed=8)
        tasks = TASKS
        assert info["task_id"].tolist() == [tasks.for_seed(8 + i).id for i in range(4)]
        assert len(set(info["task_id"])) == 4 and info["infra_error"].tolist() == [None] * 4
        assert obs["screenshot"].shape == (4, 1080, 1920, 3)
        assert list(obs["instruction"]) == [tasks.for_seed(8 + i).instruction for i in range(4)]

        workers = {p.pid for p in envs.processes}
        ours = {pid for pid, _ in sandbox_processes() if pid not in before} & descendants(workers)
        assert len(ours) >= 4 * 4, "bwrap, guest, Xvfb and openbox for each of the 4 desktops"

        actions = (
            "DONE",
            "pyautogui.hotkey('ctrl', 'alt', 't')",
            "pyautogui.click(300, 200)",
            "this is not an action",
        )
        obs, reward, term, trunc, info = envs.step(actions)
        assert term.tolist() == [True, False, False, False] and not trunc.any()
        assert info["action_error"][3] and info["action_error"][:3].tolist() == [None] * 3
        assert info["infra_error"].tolist() == [None] * 4

        # reset only the finished sub-env; the others keep their episodes and step counters
        done = term | trunc
        obs, info = envs.reset(seed=0, options={"reset_mask": done})
        assert info["_task_id"].tolist() == [True, False, False, False]
        assert info["task_id"][0] == tasks.for_seed(0).id
        obs, reward, term, trunc, info = envs.step(("WAIT",) * 4)
        assert info["step"].tolist() == [1, 2, 2, 2]
        ours |= {pid for pid, _ in sandbox_processes() if pid not in before} & descendants(workers)
    finally:
        envs.close()
    deadline = time.monotonic() + 10
    while alive(ours | workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(ours | workers), [
        (p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in alive(ours | workers)
    ]
