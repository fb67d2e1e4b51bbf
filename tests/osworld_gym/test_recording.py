"""RecordEpisode writes OSWorld's result layout; infra errors never leave a result.txt behind."""

from __future__ import annotations

import datetime as dt
import doctest
import json
import os
import signal

import gymnasium as gym
import numpy as np
import osworld_gym.recording
import pytest
from osworld_gym.recording import RecordEpisode, json_safe, summarize_results
from osworld_gym.support import builtin_task, load_tasks
from osworld_gym.vector import make_vec
from PIL import Image

TASKS = load_tasks([builtin_task(t) for t in ("os-mkdir-001", "os-copy-001", "os-infeasible-001")])


def read_traj(episode_dir):
    return [json.loads(line) for line in (episode_dir / "traj.jsonl").read_text().splitlines()]


def test_the_module_docstring_example_runs():
    result = doctest.testmod(osworld_gym.recording)
    assert result.attempted > 5 and result.failed == 0


def test_layout_and_traj_lines_follow_osworld(tmp_path):
    env = RecordEpisode(
        gym.make("OSWorld-v0", provider="fake", tasks=TASKS, settle=None),
        tmp_path,
        action_space="pyautogui",
        observation_type="screenshot",
        model="m1",
    )
    env.reset(options={"task": "os-copy-001"})
    env.step("pyautogui.click(10, 20)", response="I click the file.")
    env.step("this is not an action")
    *_, info = env.step("DONE")
    env.close()
    ep = tmp_path / "pyautogui" / "screenshot" / "m1" / "os" / "os-copy-001"
    assert env.episode_dir == ep
    lines = read_traj(ep)
    assert [ln["step_num"] for ln in lines] == [1, 2, 3]
    assert set(lines[0]) == {
        "step_num",
        "action_timestamp",
        "action",
        "response",
        "reward",
        "done",
        "info",
        "screenshot_file",
    }
    assert (
        lines[0]["action"] == "pyautogui.click(10, 20)"
        and lines[0]["response"] == "I click the file."
    )
    assert lines[1]["response"] == "" and lines[1]["info"]["action_error"]
    assert [ln["done"] for ln in lines] == [False, False, True]
    assert lines[2]["info"]["task_id"] == "os-copy-001" and lines[2]["info"]["infra_error"] is None
    for ln in lines:
        dt.datetime.strptime(ln["action_timestamp"], "%Y%m%d@%H%M%S%f")
        assert ln["screenshot_file"] == f"step_{ln['step_num']}_{ln['action_timestamp']}.png"
        assert Image.open(ep / ln["screenshot_file"]).size == (1920, 1080)
    assert len(list(ep.glob("step_0_*.png"))) == 1  # the first observation
    assert (ep / "result.txt").read_text() == f"{lines[2]['reward']}\n"
    assert not (ep / "infra_error.txt").exists()


def test_rerunning_a_task_starts_its_directory_afresh(tmp_path):
    env = RecordEpisode(gym.make("OSWorld-v0", provider="fake", tasks=TASKS, settle=None), tmp_path)
    env.reset(options={"task": "os-infeasible-001"})
    env.step("pyautogui.click(1, 1)")
    env.reset(options={"task": "os-infeasible-001"})  # abandoned: nothing left of the first try
    assert not (env.episode_dir / "traj.jsonl").exists()
    env.step("FAIL")
    env.close()
    assert len(read_traj(env.episode_dir)) == 1
    assert (env.episode_dir / "result.txt").read_text() == "1.0\n"


def test_an_infra_error_writes_infra_error_txt_and_no_result(tmp_path):
    env = RecordEpisode(gym.make("OSWorld-v0", provider="fake", tasks=TASKS, settle=None), tmp_path)
    env.reset(options={"task": "os-mkdir-001"})
    (env.episode_dir / "result.txt").write_text("0.0\n")  # e.g. left by an earlier tool
    env.unwrapped.provider.client.close()  # the desktop goes away mid-episode
    _, reward, terminated, truncated, info = env.step("pyautogui.click(1, 1)")
    env.close()
    assert truncated and info["infra_error"]
    assert not (env.episode_dir / "result.txt").exists()
    assert "closed" in (env.episode_dir / "infra_error.txt").read_text()
    assert read_traj(env.episode_dir)[-1]["info"]["infra_error"] == info["infra_error"]
    assert summarize_results(tmp_path) == {"overall": None, "tasks": 0, "domains": {}}


def test_json_safe_keeps_what_json_can_hold():
    info = {
        "a": np.float32(0.5),
        "b": np.arange(3),
        "c": np.zeros((100, 100)),
        "d": object(),
        "e": float("nan"),
        "f": None,
        "g": {"h": (1, "x")},
    }
    assert json_safe(info) == {"a": 0.5, "b": [0, 1, 2], "e": None, "f": None, "g": {"h": [1, "x"]}}
    json.dumps(json_safe(info))


def test_summarize_results_averages_like_show_result(tmp_path):
    root = tmp_path / "pyautogui" / "screenshot" / "m"
    for domain, task, score in [
        ("os", "a", "1.0\n"),
        ("os", "b", "0\n"),
        ("chrome", "c", "0.5\n"),
        ("chrome", "d", None),
        ("chrome", "e", "oops"),
    ]:
        (root / domain / task).mkdir(parents=True)
        if score is not None:
            (root / domain / task / "result.txt").write_text(score)
    summary = summarize_results(tmp_path, model="m")
    assert summary["domains"] == {
        "chrome": {"score": 0.25, "tasks": 2},
        "os": {"score": 0.5, "tasks": 2},
    }
    assert summary["overall"] == pytest.approx(1.5 / 4) and summary["tasks"] == 4


def test_each_sub_env_of_a_vector_env_records_its_own_task(tmp_path):
    out = tmp_path

    def record(env):
        return RecordEpisode(env, out, model="vec")

    envs = make_vec(2, wrappers=[record], provider="fake", tasks=TASKS, settle=None)
    try:
        envs.reset(seed=0)
        envs.step(("DONE", "DONE"))
    finally:
        envs.close()
    summary = summarize_results(out, model="vec")
    assert summary["tasks"] == 2


@pytest.mark.desktop
def test_an_oracle_run_on_a_real_desktop_is_recorded_with_video_and_scores_one(tmp_path):
    env = RecordEpisode(
        gym.make("OSWorld-v0", provider="local", tasks=TASKS),
        tmp_path,
        model="oracle",
        record_video=True,
    )
    try:
        for task_id in ("os-mkdir-001", "os-infeasible-001"):
            task = TASKS[task_id]
            env.reset(options={"task": task_id})
            actions = list(task.oracle)
            if actions[-1] not in ("DONE", "FAIL"):
                actions.append("DONE")
            for n, action in enumerate(actions, 1):
                *_, terminated, truncated, info = env.step(action, response=f"step {n}: {action}")
                assert info["infra_error"] is None and info["action_error"] is None
            assert terminated
            ep = env.episode_dir
            lines = read_traj(ep)
            assert [ln["action"] for ln in lines] == actions
            assert lines[-1]["done"] and lines[-1]["reward"] == 1.0
            assert (ep / "result.txt").read_text() == "1.0\n"
            assert len(list(ep.glob("step_*.png"))) == len(actions) + 1
            if task_id == "os-mkdir-001":  # seconds of screen (a one-step FAIL may have no frame)
                video = (ep / "recording.mp4").read_bytes()
                assert video[4:8] == b"ftyp" and len(video) > 2000

        # a desktop killed mid-episode: infra_error.txt, no result.txt, and the average ignores it
        env.reset(options={"task": "os-copy-001"})
        os.kill(env.unwrapped.provider.pid, signal.SIGKILL)
        *_, truncated, info = env.step("pyautogui.click(5, 5)")
        assert truncated and info["infra_error"]
        assert not (env.episode_dir / "result.txt").exists()
        assert (env.episode_dir / "infra_error.txt").exists()
    finally:
        env.close()
    summary = summarize_results(tmp_path, model="oracle")
    assert summary == {"overall": 1.0, "tasks": 2, "domains": {"os": {"score": 1.0, "tasks": 2}}}
