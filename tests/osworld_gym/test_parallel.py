"""The PettingZoo group view: G desktops on one task instance, agents finishing independently."""

from __future__ import annotations

import doctest
import time
from pathlib import Path

import osworld_gym.parallel
import pytest
from osworld_gym.errors import GuestError
from osworld_gym.parallel import OSWorldGroupEnv
from osworld_gym.support import builtin_task, load_tasks
from pettingzoo.test import parallel_api_test

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


def test_the_module_docstring_example_runs():
    result = doctest.testmod(osworld_gym.parallel)
    assert result.attempted > 5 and result.failed == 0


def test_parallel_api_test_passes_on_the_fake_backend():
    group = OSWorldGroupEnv(group_size=3, **FAKE)
    try:
        parallel_api_test(group, num_cycles=10)
    finally:
        group.close()


def test_every_agent_gets_the_same_task_instance():
    group = OSWorldGroupEnv(group_size=4, **FAKE)
    try:
        obs, infos = group.reset(seed=9)
        want = TASKS.for_seed(9)
        assert {i["task_id"] for i in infos.values()} == {want.id}
        assert {o["instruction"] for o in obs.values()} == {want.instruction}
        # a named task with a variation goes to every desktop unchanged
        obs, infos = group.reset(options={"task": "os-copy-001", "variation": 5})
        assert {i["task_id"] for i in infos.values()} == {"os-copy-001"}
        assert group.task.id == "os-copy-001"
        # no seed, no task: one random draw for the whole group
        for _ in range(3):
            _, infos = group.reset()
            assert len({i["task_id"] for i in infos.values()}) == 1
    finally:
        group.close()


def test_agents_step_in_parallel_threads():
    group = OSWorldGroupEnv(group_size=4, **FAKE, wait_s=1.0)
    try:
        group.reset(seed=0)
        t0 = time.monotonic()
        group.step({a: "WAIT" for a in group.agents})  # each WAIT sleeps 1 s on its own desktop
        assert time.monotonic() - t0 < 2.5
    finally:
        group.close()


def test_actions_must_name_exactly_the_live_agents():
    group = OSWorldGroupEnv(group_size=2, **FAKE)
    try:
        group.reset(seed=0)
        with pytest.raises(ValueError, match="no action for live agents"):
            group.step({"desktop_0": "WAIT"})
        group.step({"desktop_0": "DONE", "desktop_1": "pyautogui.click(1, 1)"})
        with pytest.raises(ValueError, match="not live"):
            group.step({"desktop_0": "WAIT", "desktop_1": "WAIT"})
        with pytest.raises(KeyError):
            group.action_space("nobody")
    finally:
        group.close()


def test_a_desktop_that_fails_to_reset_truncates_only_its_agent_with_an_infra_error():
    group = OSWorldGroupEnv(group_size=3, **FAKE)
    broken = group.env("desktop_1").unwrapped.provider

    def dead_start():
        raise GuestError("connection refused", endpoint="/health")

    try:
        broken.start = dead_start
        broken.restart = dead_start
        obs, infos = group.reset(seed=2)
        assert "connection refused" in infos["desktop_1"]["infra_error"]
        assert infos["desktop_0"]["infra_error"] is None
        assert (obs["desktop_1"]["screenshot"] == 0).all()
        obs, rewards, terms, truncs, infos = group.step(
            {a: "pyautogui.click(1, 1)" for a in group.agents}
        )
        assert truncs == {"desktop_0": False, "desktop_1": True, "desktop_2": False}
        assert rewards["desktop_1"] == 0.0 and infos["desktop_1"]["infra_error"]
        assert group.agents == ["desktop_0", "desktop_2"]
    finally:
        group.close()


@pytest.mark.desktop
def test_parallel_api_test_passes_on_two_local_desktops_and_close_stops_them():
    group = OSWorldGroupEnv(group_size=2, provider="local", tasks=TASKS, max_steps=6)
    try:
        parallel_api_test(group, num_cycles=10)
        obs, infos = group.reset(options={"task": "os-mkdir-001"})
        assert {i["task_id"] for i in infos.values()} == {"os-mkdir-001"}
        homes = [group.env(a).unwrapped.provider.state_dir / "home" for a in group.possible_agents]
        pids = [group.env(a).unwrapped.provider.pid for a in group.possible_agents]
        assert len(set(homes)) == 2 and all(pids)
        # the oracle on one desktop, a wrong answer on the other: rewards differ per agent
        oracle = TASKS["os-mkdir-001"].oracle
        for action in oracle:
            group.step({"desktop_0": action, "desktop_1": "pyautogui.moveTo(50, 50)"})
        assert (homes[0] / "Desktop" / "projects").is_dir()
        assert not (homes[1] / "Desktop" / "projects").exists()
        obs, rewards, terms, truncs, infos = group.step({"desktop_0": "DONE", "desktop_1": "DONE"})
        assert rewards == {"desktop_0": 1.0, "desktop_1": 0.0}
        assert all(i["infra_error"] is None for i in infos.values()) and group.agents == []
    finally:
        group.close()
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        )
