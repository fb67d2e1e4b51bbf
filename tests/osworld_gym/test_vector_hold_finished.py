"""VectorSafe's hold-finished mode: lock-step groups of multi-turn episodes on real local desktops.

A GRPO group steps all its desktops together; a desktop whose episode ended must wait, untouched,
for the others, and a desktop that fails (its reset, its worker) must end only its own episode,
as an infrastructure error. These run on real sandboxed Xvfb desktops, in the vector env the
trainer uses (``OSWorldVectorEnv``, one worker process per desktop), and through the trainer's
``DesktopPool``. The fake backend appears once, at the end, for Gymnasium API conformance only.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
from arpo_trainer.desktops import DesktopPool
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from osworld_gym.support import builtin_task
from osworld_gym.tasks import Task
from osworld_gym.vector import OSWorldVectorEnv, VectorSafe, make_safe_env, make_vec

MKDIR, COPY, WRITE = (builtin_task(t) for t in ("os-mkdir-001", "os-copy-001", "os-write-file-001"))

#: real desktops, small screens, short waits: every env is told its task through next_task
LOCAL = {
    "provider": "local",
    "tasks": None,
    "settle": None,
    "screen_size": (640, 360),
    "max_steps": 3,
    "wait_s": 0.2,
}

#: a task whose setup fails on any desktop (its download names an asset that does not exist)
BROKEN = Task.from_dict(
    {
        "id": "broken-setup",
        "instruction": "never starts",
        "snapshot": "os",
        "config": [
            {
                "type": "download",
                "parameters": {
                    "files": [
                        {"url": "builtin-asset://no-such-asset.txt", "path": "/home/user/x.txt"}
                    ]
                },
            }
        ],
        "evaluator": {"func": "infeasible"},
    },
    validate=False,
)


class HangOn(gym.Wrapper):
    """A desktop that stops answering on the action "HANG"."""

    def step(self, action):
        if action == "HANG":
            time.sleep(600)
        return self.env.step(action)


def kill_worker(envs: OSWorldVectorEnv, i: int) -> None:
    """SIGKILL sub-env ``i``'s worker process (as the OOM killer would) and wait for it to die."""
    os.kill(envs.processes[i].pid, signal.SIGKILL)
    envs.processes[i].join(10)
    assert not envs.processes[i].is_alive()


@pytest.mark.desktop
def test_a_finished_desktop_is_held_until_it_is_reset_while_the_others_play_on():
    envs = make_vec(2, hold_finished=True, step_timeout=120, **LOCAL)
    try:
        envs.set_attr("next_task", [MKDIR, COPY])
        obs, info = envs.reset()
        assert info["task_id"].tolist() == ["os-mkdir-001", "os-copy-001"]
        assert info["infra_error"].tolist() == [None, None]

        obs, reward, term, trunc, info = envs.step(("DONE", "WAIT"))
        assert not term.any() and not trunc.any(), "the vector env never sees an episode end"
        assert info["episode_end"].tolist() == [True, False]
        assert info["terminated"].tolist() == [True, False]
        assert info["held"].tolist() == [False, False]
        assert reward[0] == 0.0, "DONE without making the directory: the evaluator scores 0"
        final = obs["screenshot"][0].copy()

        # desktop 0 is held: the terminal shortcut runs nowhere, its frame and step stay put
        obs, reward, term, trunc, info = envs.step(("pyautogui.hotkey('ctrl', 'alt', 't')", "WAIT"))
        assert info["held"].tolist() == [True, False] and reward[0] == 0.0
        assert info["step"].tolist() == [1, 2]
        assert np.array_equal(obs["screenshot"][0], final)

        obs, reward, term, trunc, info = envs.step(("WAIT", "WAIT"))  # max_steps=3: truncates
        assert info["episode_end"].tolist() == [True, True]
        assert info["held"].tolist() == [True, False]
        assert info["truncated"][1] and not info["terminated"][1]

        # reset desktop 0 alone: desktop 1 stays held, desktop 0 starts its next task
        envs.set_attr("next_task", [WRITE, None])
        obs, info = envs.reset(options={"reset_mask": np.array([True, False])})
        assert info["_task_id"].tolist() == [True, False]
        assert info["task_id"][0] == "os-write-file-001"
        obs, reward, term, trunc, info = envs.step(("WAIT", "WAIT"))
        assert info["held"].tolist() == [False, True] and info["step"].tolist() == [1, 3]
        assert info["episode_end"].tolist() == [False, True]
    finally:
        envs.close()


@pytest.mark.desktop
def test_a_failed_reset_and_a_killed_worker_end_only_their_own_episode_as_infra_errors():
    envs = make_vec(2, hold_finished=True, step_timeout=120, setup_retries=0, **LOCAL)
    try:
        envs.set_attr("next_task", [BROKEN, COPY])
        obs, info = envs.reset()
        assert info["task_id"].tolist() == ["broken-setup", "os-copy-001"]
        assert "SetupError" in info["infra_error"][0] and info["infra_error"][1] is None
        assert not obs["screenshot"][0].any() and obs["screenshot"][1].any()

        # VectorSafe's own failed-reset path: the next step ends the episode, unscored
        obs, reward, _, _, info = envs.step(("WAIT", "WAIT"))
        assert info["episode_end"].tolist() == [True, False] and info["truncated"][0]
        assert "reset failed" in info["infra_error"][0] and reward[0] == 0.0
        _, _, _, _, info = envs.step(("WAIT", "WAIT"))
        assert info["held"].tolist() == [True, False] and info["infra_error"][1] is None

        # the OS kills desktop 1's worker mid-episode: that episode ends as an infra error
        kill_worker(envs, 1)
        _, reward, _, trunc, info = envs.step(("WAIT", "WAIT"))
        assert trunc.tolist() == [False, True] and "died" in info["infra_error"][1]
        assert reward[1] == 0.0
        # its replacement was never reset: it holds still, it does not raise
        _, _, _, _, info = envs.step(("WAIT", "WAIT"))
        assert info["held"].tolist() == [True, True]

        # a worker killed between episodes: the next group (set_attr, then reset) still starts
        kill_worker(envs, 0)
        envs.set_attr("next_task", [MKDIR, COPY])
        obs, info = envs.reset()
        assert info["task_id"].tolist() == ["os-mkdir-001", "os-copy-001"]
        assert info["infra_error"].tolist() == [None, None]
        _, _, _, _, info = envs.step(("DONE", "DONE"))
        assert info["episode_end"].tolist() == [True, True]
        assert info["infra_error"].tolist() == [None, None]
    finally:
        envs.close(terminate=True)


@pytest.mark.desktop
def test_a_desktop_that_hangs_past_the_step_timeout_ends_its_episode_and_is_then_held():
    envs = make_vec(2, hold_finished=True, step_timeout=20, wrappers=[HangOn], **LOCAL)
    try:
        envs.set_attr("next_task", [MKDIR, COPY])
        envs.reset()
        _, _, _, trunc, info = envs.step(("HANG", "WAIT"))
        assert trunc.tolist() == [True, False] and "timed out" in info["infra_error"][0]
        assert not info["episode_end"][1]
        _, _, _, trunc, info = envs.step(("WAIT", "WAIT"))
        assert info["held"].tolist() == [True, False] and info["step"][1] == 2
        assert not trunc.any()
    finally:
        envs.close(terminate=True)


@pytest.mark.desktop
def test_the_trainer_pool_runs_held_desktops_and_reports_a_failed_reset():
    with DesktopPool(2, {**LOCAL, "setup_retries": 0}, backend="async", step_timeout=120) as pool:
        assert isinstance(pool.vec, OSWorldVectorEnv)
        frames, infos = pool.reset([MKDIR, BROKEN])
        assert infos[0]["infra_error"] is None and "SetupError" in infos[1]["infra_error"]
        assert frames[0].shape == (360, 640, 3)

        results = pool.step(["DONE", None])
        assert results[1] is None
        assert results[0].done and results[0].terminated and not results[0].truncated
        assert results[0].reward == 0.0 and results[0].info["special"] == "DONE"
        # both held now: whatever the loop sends, nothing runs and nothing is reported
        assert pool.step(["DONE", "DONE"]) == [None, None]

        frames, infos = pool.reset([COPY, MKDIR])
        assert [i["task_id"] for i in infos] == ["os-copy-001", "os-mkdir-001"]
        assert [i["infra_error"] for i in infos] == [None, None]
        results = pool.step(["WAIT", "WAIT"])
        assert [r.done for r in results] == [False, False]


# -- Gymnasium API conformance (fake backend) ------------------------------------------------------


def test_gymnasiums_sync_vector_env_steps_a_held_env_but_refuses_a_finished_one():
    fake = {"provider": "fake", "tasks": None, "settle": None, "screen_size": (64, 48)}

    def group(hold: bool) -> SyncVectorEnv:
        envs = SyncVectorEnv(
            [lambda: make_safe_env(hold_finished=hold, **fake)] * 2,
            autoreset_mode=AutoresetMode.DISABLED,
        )
        envs.set_attr("next_task", [builtin_task("os-infeasible-001"), MKDIR])
        envs.reset()
        return envs

    held = group(hold=True)
    _, reward, _, _, info = held.step(("FAIL", "WAIT"))
    assert reward[0] == 1.0 and info["episode_end"].tolist() == [True, False]
    _, reward, _, _, info = held.step(("FAIL", "WAIT"))
    assert info["held"].tolist() == [True, False] and reward[0] == 0.0
    held.close()

    plain = group(hold=False)  # without the mode, a finished sub-env must be reset first
    _, _, term, _, _ = plain.step(("FAIL", "WAIT"))
    assert term.tolist() == [True, False]
    with pytest.raises(AssertionError):
        plain.step(("FAIL", "WAIT"))
    plain.close()


def test_next_task_yields_to_a_task_named_in_the_reset_options():
    env = VectorSafe(
        gym.make("OSWorld-v0", provider="fake", tasks=None, settle=None, screen_size=(64, 48)),
        hold_finished=True,
    )
    env.next_task = MKDIR
    assert env.reset()[1]["task_id"] == "os-mkdir-001"
    assert env.reset(options={"task": COPY})[1]["task_id"] == "os-copy-001"
    env.close()
