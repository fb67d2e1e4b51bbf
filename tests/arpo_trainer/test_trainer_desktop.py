"""A short real training run on local sandboxed desktops (needs Xvfb, bubblewrap and the apps)."""

from __future__ import annotations

import os

import pytest
import torch
from arpo_trainer.modeling import lora_config
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer
from test_trainer_training import make_config

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.mark.desktop
@pytest.mark.slow
def test_a_short_arpo_run_on_real_desktops_learns_from_a_real_success(tmp_path):
    args = make_config(
        tmp_path,
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=2,
        num_generations=2,
        provider="local",
        settle=True,
        vector_env="async",
        settle_max_s=2.0,
        max_turns=3,
        task_ids=["os-mkdir-001"],
        rollout_log="rollouts.jsonl",
    )
    vlm = build_tiny_vlm(seed=0)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor, peft_config=lora_config(vlm.model, r=4))
    try:
        # The oracle, rendered as UI-TARS actions, opens a terminal and runs mkdir: the desktop's
        # evaluator must score it 1, so the buffer holds a real, screenshot-backed success.
        assert trainer.warm_start_replay() == 1
        demo = trainer.replay_buffer.entries("os-mkdir-001")[0].trajectory
        assert (
            demo.score == 1.0
            and len(demo.turns) == 3
            and demo.turns[0].screenshot.startswith(b"\x89PNG")
        )
        before = {
            n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad
        }
        trainer.train()
    finally:
        trainer.close_desktops()
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 2
    assert all(h["episode/infra_errors"] == 0 for h in history)
    assert any(
        h["replay/injected_frac"] > 0 for h in history
    )  # a random policy fails: the demo is replayed
    assert all(h["rollout/env_steps_per_s"] > 0 for h in history)
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(after[n], p) for n, p in before.items())
    assert (tmp_path / "run" / "rollouts.jsonl").read_text().count("\n") == 4
