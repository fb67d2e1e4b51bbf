"""Task selection: k baseline rollouts per task, keep the tasks solved at least once; and the Agent
protocol."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import osworld_gym  # noqa: F401 - registers OSWorld-v0
from arpo_trainer.agent import Agent, OracleAgent, PolicyAgent, run_episode
from arpo_trainer.chat import TurnEncoder
from arpo_trainer.cli import main
from arpo_trainer.desktops import DesktopPool
from arpo_trainer.generation import ScriptedPolicy, TransformersPolicy, turn_generation_config
from arpo_trainer.rollout import Collector
from arpo_trainer.selection import choose_tasks, evaluate_tasks, success_table
from arpo_trainer.tasks import resolve_tasks
from arpo_trainer.tiny import build_tiny_vlm
from osworld_gym.actions import make_action_set
from osworld_gym.support import builtin_task

FAKE = {
    "provider": "fake",
    "settle": None,
    "screen_size": (640, 360),
    "action_set": "uitars",
    "max_steps": 2,
}


def test_a_baseline_that_always_gives_up_solves_only_the_infeasible_task():
    vlm = build_tiny_vlm()
    encoder = TurnEncoder(vlm.processor, "{instruction}")
    give_up = "Action: call_user()"
    tasks = [builtin_task("os-infeasible-001"), builtin_task("os-mkdir-001")]
    with DesktopPool(3, FAKE, backend="sync") as pool:
        collector = Collector(
            pool, encoder, make_action_set("uitars", screen_size=(640, 360)), max_turns=2
        )
        policy = ScriptedPolicy(encoder, [[give_up]] * 3, fallback=give_up)
        stats = evaluate_tasks(tasks, collector, policy, k=2)
    assert [(s.task_id, s.successes, s.attempts) for s in stats] == [
        ("os-infeasible-001", 2, 2),
        ("os-mkdir-001", 0, 2),
    ]
    assert choose_tasks(stats) == ["os-infeasible-001"]
    assert choose_tasks(stats, exclude_infeasible=True) == []
    assert choose_tasks(stats, uncertain_only=True) == []  # always solved: no learning signal
    assert "| os-mkdir-001 | os | no | 0 | 2 | 0.00 | 0 | no |" in success_table(
        stats, ["os-infeasible-001"]
    )


def test_select_tasks_command_writes_a_task_list_that_training_reads_back(tmp_path, capsys):
    out = tmp_path / "selected.json"
    code = main(
        [
            "select-tasks",
            "--output_dir",
            str(tmp_path),
            "--provider",
            "fake",
            "--settle",
            "false",
            "--vector_env",
            "sync",
            "--task_ids",
            "os-infeasible-001",
            "os-mkdir-001",
            "--k",
            "2",
            "--selection_desktops",
            "2",
            "--max_turns",
            "2",
            "--max_turn_tokens",
            "6",
            "--use_cpu",
            "true",
            "--screen_width",
            "640",
            "--screen_height",
            "360",
            "--selection_output",
            str(out),
            "--report_to",
            "none",
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["source"] == "builtin" and doc["k"] == 2
    stats = json.loads(out.with_name("selected_stats.json").read_text())
    assert [s["task_id"] for s in stats] == ["os-infeasible-001", "os-mkdir-001"]
    assert all(s["attempts"] == 2 for s in stats)
    assert "| task | domain |" in out.with_suffix(".md").read_text()
    assert "selected" in capsys.readouterr().out
    if doc["task_ids"]:  # a random tiny model rarely solves anything; when it does, the list loads
        assert [t.id for t in resolve_tasks(str(out))] == doc["task_ids"]


def test_policy_and_oracle_agents_play_whole_episodes():
    env = gym.make("OSWorld-v0", tasks=None, **FAKE)
    task = builtin_task("os-infeasible-001")
    oracle = OracleAgent(make_action_set("uitars", screen_size=(640, 360)))
    assert isinstance(oracle, Agent)
    assert run_episode(env, oracle, task).score == 1.0

    vlm = build_tiny_vlm()
    encoder = TurnEncoder(vlm.processor, "{instruction}")
    policy = TransformersPolicy(
        vlm.model, encoder, turn_generation_config(encoder, max_new_tokens=6)
    )
    agent = PolicyAgent(policy, encoder)
    result = run_episode(env, agent, task)
    env.close()
    assert 1 <= result.steps <= 2 and len(result.actions) == result.steps
    assert len(agent._actions) == result.steps  # it kept its own history of sampled ids
    obs = {"screenshot": np.zeros((360, 640, 3), np.uint8), "instruction": task.instruction}
    agent.reset(task)
    assert isinstance(agent.act(obs, {}), str)


def test_training_refuses_a_desktop_whose_agent_is_not_separated_from_the_judge():
    """``info["separated"]`` is False on a one-identity desktop; a collector built for training
    (``allow_unseparated=False``, the trainer's default) refuses it with the way out."""
    import pytest

    kwargs = {
        "provider": "local",
        "provider_kwargs": {"judge_separation": False},
        "settle": None,
        "screen_size": (640, 360),
        "action_set": "uitars",
        "max_steps": 1,
    }
    with DesktopPool(1, kwargs, backend="sync") as pool:
        refusing = Collector(
            pool,
            None,
            make_action_set("uitars", screen_size=(640, 360)),
            max_turns=1,
            allow_unseparated=False,
        )
        with pytest.raises(RuntimeError, match="allow_unseparated_desktops"):
            refusing.run([builtin_task("os-mkdir-001")], policy=None)
        _, infos = pool.reset([builtin_task("os-mkdir-001")])
        assert infos[0]["separated"] is False
