"""A converged group cannot wreck the policy under the stable optimisation settings (issue 13).

The policy is first trained (supervised) to play a success X with high probability. Then it takes
three optimiser steps, from a fresh AdamW (the worst case: no second-moment history to damp the
step), on a converged group: three copies of X (reward 1) and one near-miss Y that shares X's
first turn and ends in a format error (reward -0.5). The group comes from real episodes on the
fake desktop (the infeasible task scores ``call_user()`` 1), and the update goes through
ARPOTrainer's own advantages and TRL's loss. With the demo's settings X stays likely (>= 80 % of
its probability); with the settings the demo collapsed under (z-scored advantages, per-sequence
loss, lr 5e-3) X is lost. Measured while writing this (p(X) 0.92 before): demo settings 0.87;
the same at lr 1e-3 0.34; the old settings 0.00. Adam moves every weight by about lr in its
first steps whatever the advantages' scale, so the learning rate is what bounds the damage; the
centred, clipped advantages and the token-level loss keep the direction right.

The pixel-family demo (issue 26) keeps every setting but the learning rate, which it raises to
1e-3: from a base policy that succeeds in a few percent of episodes, 3e-4 had not left the floor
within its budget (docs/learning.md). Its runs never reach a converged group; one that trains
that far should return to :data:`STABLE`'s rate.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import pytest
import torch
import yaml
from arpo_trainer.config import ARPOConfig
from arpo_trainer.generation import ScriptedPolicy
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer
from repo_paths import ROOT

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

DEMO = yaml.safe_load((ROOT / "packages/arpo_trainer/configs/demo.yaml").read_text())
SHARED = "Action: type(content='the quick brown fox\\n')"
X = [SHARED, "Action: call_user()"]
Y = [SHARED, "Action: oops"]
OPTIM_KEYS = ("learning_rate", "loss_type", "scale_rewards", "advantage_clip", "max_grad_norm")
#: The settings this test proves stable; the demo's are these but for ``learning_rate``.
STABLE = {
    "learning_rate": 3e-4,
    "loss_type": "dapo",
    "scale_rewards": "none",
    "advantage_clip": 1.0,
    "max_grad_norm": 1.0,
}
OLD = {
    "learning_rate": 5e-3,
    "loss_type": "grpo",
    "scale_rewards": "group",
    "advantage_clip": None,
    "max_grad_norm": 1.0,
}


class Scripted(ARPOTrainer):
    scripts: list[list[str]] = []

    @contextlib.contextmanager
    def policy(self):
        yield ScriptedPolicy(self.encoder, self.scripts, fallback="Action: wait()")


def make_trainer(tmp_path: Path, optim: dict) -> Scripted:
    vlm = build_tiny_vlm(seed=0)
    args = ARPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        provider="fake",
        settle=False,
        vector_env="sync",
        screen_width=640,
        screen_height=360,
        max_turns=2,
        max_turn_tokens=24,
        task_ids=["os-infeasible-001"],
        replay=False,
        format_penalty=-0.5,
        seed=0,
        epsilon=0.2,
        epsilon_high=0.3,
        beta=0.0,
        **optim,
    )
    trainer = Scripted(vlm.model, args, vlm.processor)
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def x_logprob(trainer: Scripted, batch: dict) -> torch.Tensor:
    """Mean over the X rows of the summed log-prob of their action tokens."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model,
        ids,
        mask,
        batch["completion_ids"].size(1),
        pixel_values=batch["pixel_values"],
        image_grid_thw=batch["image_grid_thw"],
        num_images=batch["num_images"],
        mm_token_type_ids=batch["mm_token_type_ids"],
    )
    action = batch["tool_mask"] * batch["completion_mask"]
    return (logps * action).sum(dim=1)[:3].mean()


def converged_policy(tmp_path: Path) -> tuple[Scripted, dict[str, torch.Tensor]]:
    """A trainer whose policy plays X with high probability, and its weights."""
    trainer = make_trainer(tmp_path, STABLE)
    trainer.scripts = [X, X, X, Y]
    trainer.model.train()
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    trainer.close_desktops()
    sft = torch.optim.Adam(trainer.model.parameters(), lr=1e-2)
    for _ in range(100):
        sft.zero_grad()
        (-x_logprob(trainer, batch)).backward()
        sft.step()
    weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return trainer, weights


def group_update(
    trainer: Scripted, weights: dict, optim: dict, steps: int = 3
) -> tuple[float, float]:
    """p(X) before and after ``steps`` optimiser steps on the converged group [X, X, X, Y]."""
    trainer.model.load_state_dict(weights)
    trainer.loss_type = optim["loss_type"]
    trainer.scale_rewards = optim["scale_rewards"]
    trainer.args.advantage_clip = optim["advantage_clip"]
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    trainer.close_desktops()
    assert batch["advantages"][3] < 0 < batch["advantages"][0]
    with torch.no_grad():
        before = x_logprob(trainer, batch).item()
    assert math.exp(before) > 0.5
    opt = torch.optim.AdamW(trainer.model.parameters(), lr=optim["learning_rate"], weight_decay=0.0)
    for _ in range(steps):
        opt.zero_grad()
        trainer.compute_loss(trainer.model, batch).backward()
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), optim["max_grad_norm"])
        opt.step()
    with torch.no_grad():
        after = x_logprob(trainer, batch).item()
    return math.exp(before), math.exp(after)


def test_the_demo_settings_are_the_stable_ones_but_for_its_learning_rate():
    assert {k: DEMO.get(k) for k in OPTIM_KEYS} == {**STABLE, "learning_rate": 0.001}


@pytest.mark.timeout(1200)  # two tiny-model trainings; minutes on a loaded 2-core machine
def test_a_converged_group_keeps_the_success_likely_under_the_stable_settings(tmp_path):
    trainer, weights = converged_policy(tmp_path)
    p_before, p_after = group_update(trainer, weights, STABLE)
    old_before, old_after = group_update(trainer, weights, OLD)
    print(f"stable: p(X) {p_before:.3f} -> {p_after:.3f}; old: {old_before:.3f} -> {old_after:.3f}")
    assert p_after >= 0.8 * p_before
    assert old_after / old_before < p_after / p_before
