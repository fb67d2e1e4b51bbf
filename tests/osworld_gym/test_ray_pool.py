"""The Ray pool: env actors on a (local) Ray cluster behind the Gymnasium VectorEnv interface."""

from __future__ import annotations

import doctest
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # see cluster()
ray = pytest.importorskip("ray")

import osworld_gym.ray_pool  # noqa: E402
from osworld_gym.ray_pool import RayVectorEnv  # noqa: E402
from osworld_gym.support import builtin_task, load_tasks  # noqa: E402
from osworld_gym.tasks import Task  # noqa: E402

TASKS = load_tasks(
    [builtin_task(t) for t in ("os-chmod-001", "os-copy-001", "os-infeasible-001", "os-mkdir-001")]
)
FAKE = {"provider": "fake", "tasks": TASKS, "max_steps": 3, "settle": None}
# the test cluster: 2 CPUs and 2 desktop slots; fake actors reserve no CPU so tests can overlap
FAKE_ACTOR = {"num_cpus": 0, "resources": {"osworld_desktop": 0.5}}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    # under `uv run`, Ray would copy the repo and build a fresh venv (GBs) for its workers; they
    # share this interpreter's environment instead (the constant is read at import time)
    from ray._private import ray_constants

    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    ray.init(
        num_cpus=2,
        resources={"osworld_desktop": 2},
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024**2,
    )
    try:
        yield
    finally:
        ray.shutdown()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_dead(pids, timeout=15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_the_module_docstring_example_runs():
    result = doctest.testmod(osworld_gym.ray_pool)
    assert result.attempted >= 3 and result.failed == 0


def test_seeds_pick_distinct_tasks_and_reset_mask_resets_only_finished_sub_envs():
    envs = RayVectorEnv(2, **FAKE_ACTOR, **FAKE)
    try:
        assert envs.metadata["autoreset_mode"].value == "Disabled"
        obs, info = envs.reset(seed=2)
        assert info["task_id"].tolist() == [TASKS.for_seed(2).id, TASKS.for_seed(3).id]
        assert list(obs["instruction"]) == [
            TASKS.for_seed(2).instruction,
            TASKS.for_seed(3).instruction,
        ]
        assert obs["screenshot"].shape == (2, 1080, 1920, 3) and obs["screenshot"].flags.writeable
        obs, reward, term, trunc, info = envs.step(("DONE", "pyautogui.click(5, 5)"))
        assert term.tolist() == [True, False] and info["infra_error"].tolist() == [None, None]
        obs, info = envs.reset(seed=0, options={"reset_mask": np.array([True, False])})
        assert (
            info["_task_id"].tolist() == [True, False]
            and info["task_id"][0] == TASKS.for_seed(0).id
        )
        obs, reward, term, trunc, info = envs.step(("pyautogui.click(1, 1)",) * 2)
        assert info["step"].tolist() == [1, 2]
        assert envs.call("max_steps") == (3, 3)
    finally:
        envs.close()


def test_png_transport_delivers_the_same_frames_as_arrays_and_auto_picks_arrays_locally():
    frames = {}
    for transport in ("auto", "png"):
        envs = RayVectorEnv(1, transport=transport, **FAKE_ACTOR, **FAKE)
        try:
            assert envs.placement[0]["transport"] == ("array" if transport == "auto" else "png")
            envs.reset(seed=0)
            obs, *_ = envs.step(("pyautogui.click(640, 360)",))
            frames[transport] = obs["screenshot"]
        finally:
            envs.close()
    assert frames["auto"].dtype == frames["png"].dtype == np.uint8
    assert np.array_equal(frames["auto"], frames["png"])


def test_a_dead_actor_is_an_infra_error_not_a_crash_and_is_replaced():
    envs = RayVectorEnv(2, **FAKE_ACTOR, **FAKE)
    try:
        envs.reset(seed=0)
        victim = envs.placement[1]["pid"]
        os.kill(victim, signal.SIGKILL)  # the node lost the actor's process
        obs, reward, term, trunc, info = envs.step(("pyautogui.click(1, 1)",) * 2)
        assert trunc.tolist() == [False, True] and reward[1] == 0.0
        assert info["infra_error"][0] is None and "worker died" in info["infra_error"][1]
        obs, info = envs.reset(seed=0)  # the replacement actor takes the next episode
        assert info["infra_error"].tolist() == [None, None]
        assert info["task_id"].tolist() == [TASKS.for_seed(0).id, TASKS.for_seed(1).id]
    finally:
        envs.close()


def test_a_step_past_step_timeout_is_an_infra_error_and_the_actor_is_replaced():
    envs = RayVectorEnv(2, step_timeout=3.0, wait_s=60.0, **FAKE_ACTOR, **FAKE)
    try:
        envs.reset(seed=0)
        t0 = time.monotonic()
        obs, reward, term, trunc, info = envs.step(("pyautogui.click(1, 1)", "WAIT"))
        assert time.monotonic() - t0 < 20
        assert trunc.tolist() == [False, True] and "timed out" in info["infra_error"][1]
        obs, info = envs.reset(seed=1)
        assert info["infra_error"].tolist() == [None, None]
    finally:
        envs.close()


def test_a_cluster_without_the_resources_gets_a_clear_error():
    with pytest.raises(TimeoutError, match="osworld_desktop"):
        RayVectorEnv(1, resources={"gpu_desktop": 1}, num_cpus=0, start_timeout=3, **FAKE)


@pytest.mark.desktop
def test_two_local_desktops_as_actors_survive_a_dead_actor_and_close_kills_everything():
    envs = RayVectorEnv(
        2,
        resources={"osworld_desktop": 1},
        num_cpus=0,
        provider="local",
        tasks=TASKS,
        max_steps=4,
        step_timeout=120,
    )
    pids = [p["pid"] for p in envs.placement]
    try:
        obs, info = envs.reset(seed=1)
        assert info["task_id"].tolist() == [TASKS.for_seed(1).id, TASKS.for_seed(2).id]
        assert info["infra_error"].tolist() == [None, None]
        assert obs["screenshot"].shape == (2, 1080, 1920, 3) and obs["screenshot"].any()
        desktops = ray.get([a.desktop_pid.remote() for a in envs.actors])
        assert all(desktops) and len(set(desktops)) == 2
        pids += desktops
        obs, reward, term, trunc, info = envs.step(("pyautogui.hotkey('ctrl', 'alt', 't')", "DONE"))
        assert info["infra_error"].tolist() == [None, None] and term.tolist() == [False, True]

        # a node loses actor 0: its desktop dies with it, and the pool reports it and goes on
        os.kill(envs.placement[0]["pid"], signal.SIGKILL)
        assert _wait_dead([desktops[0]]) == []
        obs, info = envs.reset(seed=1, options={"reset_mask": np.array([True, False])})
        assert "worker died" in info["infra_error"][0] and info["_infra_error"].tolist() == [
            True,
            False,
        ]
        obs, info = envs.reset(seed=1)
        assert info["infra_error"].tolist() == [None, None]
        pids += [p["pid"] for p in ray.get([a.ready.remote() for a in envs.actors])]
        pids += ray.get([a.desktop_pid.remote() for a in envs.actors])
    finally:
        envs.close()
    assert _wait_dead(pids) == []


def _task(id_: str, config: list) -> Task:
    return Task.from_dict(
        {"id": id_, "instruction": "x", "snapshot": "os", "config": config,
         "evaluator": {"func": "infeasible"}},
        validate=False,
    )  # fmt: skip


#: a reset that overruns any short deadline (its setup sleeps a minute)
SLEEPY = _task("sleepy-setup", [{"type": "sleep", "parameters": {"seconds": 60}}])
#: a reset that fails with an InfraError (SetupError: the asset does not exist)
BROKEN = _task("broken-setup", [{"type": "download", "parameters": {"files": [
    {"url": "builtin-asset://no-such-asset.txt", "path": "/home/user/x.txt"}]}}])  # fmt: skip


def _info_of(infos: dict, i: int) -> dict:
    """Sub-env ``i``'s info out of a vector env's batched info (``key`` + ``_key`` masks)."""
    out = {}
    for key, value in infos.items():
        if key.startswith("_") or not infos.get(f"_{key}", np.ones(i + 1, bool))[i]:
            continue
        v = _info_of(value, i) if isinstance(value, dict) else value[i]
        out[key] = v.item() if isinstance(v, np.generic) else v
    return out


def _failures_reported(envs, worker_pid) -> list:
    """The same four failures, each of one sub-env, and what the vector env reported for it:
    (reward, terminated, truncated, screen not blank, info) of that sub-env at every call."""
    seen = []

    def record(i, obs, reward=None, terminated=None, truncated=None, info=None):
        if info is None:  # a reset
            info, reward = reward, None
        seen.append(
            (
                None if reward is None else float(reward[i]),
                None if terminated is None else bool(terminated[i]),
                None if truncated is None else bool(truncated[i]),
                bool(obs["screenshot"][i].any()),
                _info_of(info, i),
            )
        )

    click = "pyautogui.click(1, 1)"
    envs.set_attr("next_task", [None, None])
    envs.reset(seed=0)
    record(1, *envs.step((click, "WAIT")))  # 1. a step past step_timeout
    envs.set_attr("next_task", [SLEEPY, None])
    record(0, *envs.reset(seed=0))  # 2. a reset past reset_timeout ...
    record(0, *envs.step((click, click)))  # ... ends its episode at the next step
    envs.set_attr("next_task", [BROKEN, None])
    record(0, *envs.reset(seed=0))  # 3. a reset that raised an InfraError ...
    record(0, *envs.step((click, click)))  # ... the same
    envs.set_attr("next_task", [None, None])
    envs.reset(seed=0)
    pid = worker_pid(envs, 0)
    os.kill(pid, signal.SIGKILL)  # 4. a worker killed between two steps
    assert _wait_dead([pid]) == []
    record(0, *envs.step((click, click)))
    return seen


def test_the_ray_pool_reports_each_failure_as_the_process_pool_does():
    from osworld_gym.vector import make_vec

    deadlines = {"step_timeout": 3.0, "reset_timeout": 3.0, "wait_s": 60.0, "setup_retries": 0}
    processes = make_vec(2, **deadlines, **FAKE)
    try:
        by_processes = _failures_reported(processes, lambda envs, i: envs.processes[i].pid)
    finally:
        processes.close(terminate=True)
    actors = RayVectorEnv(2, **deadlines, **FAKE_ACTOR, **FAKE)
    try:
        by_actors = _failures_reported(
            actors, lambda envs, i: ray.get(envs.actors[i].ready.remote())["pid"]
        )
    finally:
        actors.close()
    assert by_actors == by_processes
    errors = [info["infra_error"] for *_, info in by_processes]
    assert errors == [
        "step timed out after 3 s; the sub-env's worker was replaced",
        "reset timed out after 3 s; the sub-env's worker was replaced",
        "reset timed out after 3 s; the sub-env's worker was replaced",
        *[errors[3]] * 2,
        "the sub-env's worker died (killed, or crashed); it was replaced",
    ]
    assert errors[3].startswith("reset failed: SetupError: task 'broken-setup'")
    # a failed reset answers a blank screen, and the next step ends the episode (truncated,
    # 0.0, step 1); a failed step keeps the last screen
    assert [(r, te, tr, screen, info["step"]) for r, te, tr, screen, info in by_processes] == [
        (0.0, False, True, True, 0),
        (None, None, None, False, 0),
        (0.0, False, True, False, 1),
        (None, None, None, False, 0),
        (0.0, False, True, False, 1),
        (0.0, False, True, True, 0),
    ]
