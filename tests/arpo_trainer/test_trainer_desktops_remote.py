"""The trainer on remote desktops: two real guest servers reached by URL, with reset hooks.

Each guest is our guest server (``python -m osworld_gym.guest`` on its own Xvfb, TCP on
loopback), started as the remote-provider tests start theirs; the trainer knows only their URLs
and token, as it would know OSWorld VMs on another machine. The reset hook is a real shell
command run before every episode's reset; its log shows which desktop it was run for.
"""

from __future__ import annotations

import json
import os

import pytest
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer
from tcp_guest import TOKEN, H, W, launch_guests
from test_trainer_training import INFEASIBLE, make_config

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

HOOK = 'echo "$OSWORLD_DESKTOP_INDEX $OSWORLD_DESKTOP_URL" >> "{log}"'


@pytest.fixture(scope="module")
def guests(tmp_path_factory):
    yield from launch_guests(tmp_path_factory, 2)


def remote_config(tmp_path, desktops, **overrides):
    return make_config(
        tmp_path,
        desktops=desktops,
        provider="local",  # the desktops section decides: remote
        per_device_train_batch_size=2,
        num_generations=2,
        vector_env="async",
        screen_width=W,
        screen_height=H,
        max_turns=2,
        max_steps=1,
        rollout_log="rollouts.jsonl",
        **overrides,
    )


def test_a_training_step_runs_on_two_remote_guests_and_the_hook_runs_before_each_reset(
    tmp_path, guests
):
    hook_log = tmp_path / "hooks.log"
    args = remote_config(
        tmp_path,
        {"source": "remote", "token": TOKEN, "urls": [g.url for g in guests],
         "reset_hook": HOOK.format(log=hook_log)},
    )  # fmt: skip
    assert args.provider == "remote"
    # a file the previous episode left in the home: our guest's own reset still runs after the hook
    stray = guests[0].home / "Desktop" / "left-over.txt"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_text("from an earlier episode")
    vlm = build_tiny_vlm(seed=0)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor)
    try:
        trainer.train()
    finally:
        trainer.close_desktops()
    # one episode per desktop, each reset preceded by the hook, for its own desktop
    assert sorted(hook_log.read_text().splitlines()) == [
        f"{i} {g.url}" for i, g in enumerate(guests)
    ]
    assert not stray.exists()
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 1 and history[0]["episode/infra_errors"] == 0
    rollouts = [
        json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()
    ]
    assert len(rollouts) == 2 and all(r["infra_error"] is None for r in rollouts)
    assert trainer.state.global_step == 1
    assert all(g.proc.poll() is None for g in guests), "remote guests must outlive the trainer"


def test_a_failing_reset_hook_is_an_infra_error_and_its_episode_is_left_out(tmp_path, guests):
    hook_log = tmp_path / "hooks.log"
    args = remote_config(
        tmp_path,
        {"source": "remote", "token": TOKEN, "urls": [
            {"url": guests[0].url, "reset_hook": HOOK.format(log=hook_log)},
            {"url": guests[1].url, "reset_hook": "echo snapshot revert refused >&2; exit 3"},
        ]},
    )  # fmt: skip
    vlm = build_tiny_vlm(seed=0)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor)
    rows = [trainer.train_dataset[0]] * 2
    assert rows[0]["task_id"] == INFEASIBLE
    try:
        batch = trainer._generate_and_score_completions(rows)
    finally:
        trainer.close_desktops()
    assert hook_log.read_text().splitlines() == [f"0 {guests[0].url}"]
    assert trainer._metrics["train"]["episode/infra_errors"][-1] == 1.0
    # the failed desktop's episode has no loss and no advantage: not a score of 0
    assert batch["tool_mask"][1].sum() == 0 and batch["advantages"][1].abs().sum() == 0
    assert batch["tool_mask"][0].sum() > 0
    rollouts = [
        json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()
    ]
    failed = [r for r in rollouts if r["infra_error"]]
    assert len(rollouts) == 2 and len(failed) == 1
    assert "exited with status 3" in failed[0]["infra_error"]
    assert "snapshot revert refused" in failed[0]["infra_error"]
    assert guests[1].url in failed[0]["infra_error"]
