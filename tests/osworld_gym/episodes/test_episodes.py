"""osworld_gym.episodes on real local desktops: what the loop scores, how it classifies an
unscored episode (desktop, agent or task), and the pool that ``tasks check`` and arpo-eval share."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from osworld_gym.episodes import (
    FailAgent,
    NoopAgent,
    ReplayOracleAgent,
    ScriptAgent,
    make_osworld_env,
    run_episode,
    run_pool,
)
from osworld_gym.episodes.agents import replay_script
from osworld_gym.episodes.check import CheckResult, check_task, check_tasks, format_table
from osworld_gym.errors import InfraError
from osworld_gym.support import builtin_task
from PIL import Image
from proc_tree import descendants

TASK = builtin_task("os-mkdir-001")
INFEASIBLE = builtin_task("os-infeasible-001")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture(scope="module")
def env():
    env = make_osworld_env(provider="local", tasks="builtin")
    yield env
    env.close()


@pytest.mark.desktop
def test_the_oracle_scores_one_doing_nothing_zero_and_fail_the_infeasible_task(env):
    result = run_episode(env, ReplayOracleAgent(), TASK)
    assert result.scored and result.score == 1.0 and result.error is None
    assert result.actions == replay_script(TASK) and result.steps == len(result.actions)
    result = run_episode(env, NoopAgent(), TASK)
    assert (result.score, result.steps, result.actions) == (0.0, 1, ["DONE"])
    assert run_episode(env, FailAgent(), INFEASIBLE).score == 1.0


class _BreaksAtTurnTwo:
    """Moves the pointer once, then its backend fails."""

    def reset(self, task):
        self.turn = 0

    def act(self, obs, info):
        self.turn += 1
        if self.turn == 2:
            raise ConnectionError("model server unreachable")
        return "pyautogui.moveTo(5, 5)"


class _CannotStart:
    def reset(self, task):
        raise ValueError("no prompt for this task")

    def act(self, obs, info):  # pragma: no cover - never reached
        return "DONE"


@pytest.mark.desktop
def test_an_agent_failure_is_an_agent_error_never_a_score_nor_an_infra_error(env):
    result = run_episode(env, _BreaksAtTurnTwo(), TASK)
    assert result.score is None and result.infra_error is None and result.task_error is None
    assert result.agent_error == (
        "agent failed at turn 2: ConnectionError: model server unreachable"
    )
    assert isinstance(result.exception, ConnectionError) and result.steps == 1

    result = run_episode(env, _CannotStart(), TASK)
    assert (result.score, result.infra_error, result.steps) == (None, None, 0)
    assert result.agent_error == "agent reset failed: ValueError: no prompt for this task"

    # a script that runs out before the env ends the episode is the agent's failure too
    result = run_episode(env, ScriptAgent(["pyautogui.moveTo(5, 5)"]), TASK)
    assert result.score is None and result.infra_error is None
    assert result.agent_error.endswith("the episode did not end after the last action")


@pytest.mark.desktop
def test_a_rejected_action_ends_the_episode_only_when_asked(env):
    script = ["pyautogui.click(", "DONE"]
    strict = run_episode(env, ScriptAgent(script), TASK, stop_on_action_error=True)
    assert strict.score is None and strict.infra_error is None and strict.steps == 1
    assert strict.agent_error.startswith("action 1 rejected: 'pyautogui.click(': ")
    lenient = run_episode(env, ScriptAgent(script), TASK)  # OSWorld: a wasted turn
    assert (lenient.score, lenient.steps, lenient.error) == (0.0, 2, None)


@pytest.mark.desktop
def test_an_unknown_task_is_a_task_error(env):
    result = run_episode(env, NoopAgent(), TASK, reset_options={"task": "no-such-task"})
    assert result.score is None and result.agent_error is None and result.infra_error is None
    assert result.task_error.startswith("reset failed: KeyError: ") and "no-such-task" in (
        result.task_error
    )


class _KillsTheGuest:
    """Kills the desktop's guest server (the test's fault injection), then clicks."""

    def __init__(self, env):
        self.env = env

    def reset(self, task):
        pass

    def act(self, obs, info):
        provider = self.env.unwrapped.provider
        guests = [
            p
            for p in descendants(provider.pid)
            if "-m osworld_gym.guest" in cmdline(p) and not cmdline(p).startswith("bwrap")
        ]
        assert len(guests) == 1
        os.kill(guests[0], signal.SIGKILL)
        return "pyautogui.click(10, 10)"


@pytest.mark.desktop
def test_a_dead_desktop_is_an_infra_error_never_a_score_and_the_next_episode_plays(env):
    result = run_episode(env, _KillsTheGuest(env), TASK)
    assert result.score is None and result.agent_error is None and result.steps == 1
    assert result.infra_error and "GuestError" in result.infra_error
    assert run_episode(env, NoopAgent(), TASK).score == 0.0


@pytest.mark.desktop
def test_the_pool_plays_every_job_around_a_desktop_that_fails_and_a_job_that_crashes():
    builds: list[str] = []
    lock = threading.Lock()

    def make_env():
        with lock:
            builds.append(threading.current_thread().name)
            first = len(builds) == 1
        if first:
            raise InfraError("this desktop could not start")
        return make_osworld_env(provider="local", tasks="builtin")

    jobs = [
        (TASK, NoopAgent, 0.0),
        ("crash", None, None),
        (INFEASIBLE, FailAgent, 1.0),
        (TASK, ReplayOracleAgent, 1.0),
    ]
    scores: dict[int, float | None] = {}
    crashed = []

    def play(env, job, queue):
        task, agent, _ = job
        if task == "crash":
            raise RuntimeError("harness bug")
        scores[jobs.index(job)] = run_episode(env, agent(), task).score

    run = run_pool(
        jobs,
        play,
        make_env=make_env,
        num_envs=2,
        name="t",
        on_crash=lambda job, exc, queue: crashed.append((job[0], str(exc))),
    )
    assert run.left == [] and [str(e) for e in run.env_errors] == ["this desktop could not start"]
    assert crashed == [("crash", "harness bug")]
    assert scores == {i: want for i, (_, _, want) in enumerate(jobs) if want is not None}
    # two workers started; after the crash the surviving worker built a fresh desktop
    assert len(builds) == 3 and len(set(builds)) == 2


def test_jobs_no_desktop_could_take_come_back_with_why():
    def make_env():
        raise InfraError("no display")

    run = run_pool(
        range(5),
        lambda env, job, queue: None,
        make_env=make_env,
        num_envs=3,
        on_crash=lambda job, exc, queue: None,
    )
    assert run.left == [0, 1, 2, 3, 4] and [str(e) for e in run.env_errors] == ["no display"] * 3


def test_tasks_check_reports_a_desktop_that_never_started_per_task():
    def make_env(tasks):
        raise InfraError("no display")

    results = check_tasks([TASK, INFEASIBLE], num_envs=2, make_env=make_env)
    assert [(r.task_id, r.error) for r in results] == [
        (TASK.id, "desktop failed: no display"),
        (INFEASIBLE.id, "desktop failed: no display"),
    ]
    assert not any(r.ok for r in results)


@pytest.mark.desktop
def test_tasks_check_proves_two_tasks_on_two_desktops():
    results = check_tasks([TASK, INFEASIBLE], num_envs=2)
    assert [r.task_id for r in results] == [TASK.id, INFEASIBLE.id]
    assert all(r.ok for r in results), [r.error for r in results]
    assert results[0].steps == len(replay_script(TASK))


@pytest.mark.desktop
def test_a_wrong_oracle_is_replayed_as_often_as_asked_and_still_fails(env, tmp_path):
    # the terminal makes the wrong folder: a real miss, on a real desktop, every time
    wrong = dataclasses.replace(
        TASK,
        oracle=[a.replace("projects", "project") for a in TASK.oracle or []],
    )
    assert wrong.oracle != TASK.oracle
    res = check_task(env, wrong, retries=2, keep_failures=tmp_path)
    assert res.oracle_tries == [0.0, 0.0, 0.0] and res.oracle_score == 0.0 and not res.ok
    assert "oracle tries: 0, 0, 0" in format_table([res])
    # each miss left the screen before every action, at half size, and the actions
    script = replay_script(wrong)
    assert res.details["kept"] == [str(tmp_path / f"{TASK.id}-v--try{k}") for k in (1, 2, 3)]
    for kept in map(Path, res.details["kept"]):
        assert sorted(p.name for p in kept.glob("*.png")) == [
            f"{i:02d}.png" for i in range(len(script))
        ]
        assert (kept / "actions.txt").read_text().splitlines() == [
            f"{i:02d} {a}" for i, a in enumerate(script)
        ]
        with Image.open(kept / "00.png") as first:
            assert first.size == (
                env.unwrapped.screen_size[0] // 2,
                env.unwrapped.screen_size[1] // 2,
            )
    # the last screen shows the wrong folder's terminal: it differs from the first (the desktop)
    with (
        Image.open(Path(res.details["kept"][0]) / f"{len(script) - 1:02d}.png") as last,
        Image.open(Path(res.details["kept"][0]) / "00.png") as first,
    ):
        assert np.asarray(last).tobytes() != np.asarray(first).tobytes()
    # a right oracle is played once, however many retries are allowed, and keeps nothing
    right = tmp_path / "right"
    res = check_task(env, TASK, retries=2, keep_failures=right)
    assert res.oracle_tries == [1.0] and res.ok and "tries" not in format_table([res])
    assert not right.exists() and "kept" not in res.details
    with pytest.raises(ValueError, match="0 or more"):
        check_task(env, TASK, retries=-1)


def test_the_table_counts_a_task_that_passed_on_a_replayed_oracle():
    flaky = CheckResult(TASK.id, "os", None, oracle_score=1.0, noop_score=0.0)
    flaky.oracle_tries = [0.0, 1.0]
    table = format_table([flaky, CheckResult(INFEASIBLE.id, "os", None, error="boom")])
    assert "ok (oracle tries: 0, 1)" in table
    assert table.splitlines()[-1] == "tasks: 1 ok (1 of them after a replayed oracle), 1 failing"


@pytest.mark.parametrize("bad", ["-1", "two"])
def test_tasks_check_refuses_a_retry_count_that_is_not_a_whole_number_from_0(bad, capsys):
    from osworld_gym.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["tasks", "check", TASK.id, "--retries", bad])
    assert exc.value.code == 2
    assert "--retries" in capsys.readouterr().err


def test_tasks_check_passes_its_folder_for_misses_on_and_names_what_was_kept(
    monkeypatch, capsys, tmp_path
):
    import osworld_gym.episodes.check as check
    from osworld_gym.cli import main

    seen = {}

    def fake_check_tasks(tasks, **kwargs):
        seen.update(kwargs)
        miss = CheckResult(TASK.id, "os", None, oracle_score=0.0, noop_score=0.0)
        miss.details["kept"] = [str(tmp_path / f"{TASK.id}-v--try1")]
        return [miss]

    monkeypatch.setattr(check, "check_tasks", fake_check_tasks)
    assert main(["tasks", "check", TASK.id, "--keep-failures", str(tmp_path)]) == 1
    assert seen["keep_failures"] == tmp_path
    assert f"kept: {tmp_path / TASK.id}-v--try1" in capsys.readouterr().out
