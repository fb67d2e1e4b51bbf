"""ARPOTrainer on a tiny offline VLM and the fake desktop: what a training step touches and what it
may not.

On the fake desktop nothing the agent types has an effect, except on the infeasible task, whose
evaluator scores the FAIL action (UI-TARS ``call_user()``) 1: its oracle demonstration is a real,
evaluator-scored success, so replay has something to inject.
"""

from __future__ import annotations

import os

import pytest
import torch
from arpo_trainer.config import ARPOConfig
from arpo_trainer.modeling import lora_config
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

INFEASIBLE = "os-infeasible-001"


def make_config(tmp_path, **overrides) -> ARPOConfig:
    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        # ARPO_TEST_DEVICE=cuda runs these trainings on a GPU (the device check does); CI has none
        use_cpu=os.environ.get("ARPO_TEST_DEVICE", "cpu") == "cpu",
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        gradient_checkpointing=False,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        learning_rate=1e-2,
        provider="fake",
        settle=False,
        vector_env="sync",
        screen_width=640,
        screen_height=360,
        max_turns=2,
        max_turn_tokens=8,
        task_ids=[INFEASIBLE],
        seed=0,
    )
    kwargs.update(overrides)
    return ARPOConfig(**kwargs)


def make_trainer(
    tmp_path, *, lora: bool = True, trainer_cls=ARPOTrainer, **overrides
) -> ARPOTrainer:
    vlm = build_tiny_vlm(seed=0)
    peft = lora_config(vlm.model, r=4) if lora else None
    return trainer_cls(
        vlm.model, make_config(tmp_path, **overrides), vlm.processor, peft_config=peft
    )


def test_lora_weights_change_and_base_weights_stay_frozen(tmp_path):
    trainer = make_trainer(tmp_path)
    assert trainer.warm_start_replay() == 1  # the oracle's call_user() really scores 1
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not any("visual" in n for n in trainable)  # the vision tower is not adapted
    trainer.train()
    trainer.close_desktops()
    for name, param in trainer.model.named_parameters():
        changed = not torch.equal(param, before[name])
        assert changed == (name in trainable), name
    history = trainer.state.log_history
    assert any(h.get("replay/injected_frac", 0) > 0 for h in history)


class LogpProbe(ARPOTrainer):
    """Keeps the per-token log-probs of the loss forward pass, to read their gradient."""

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if torch.is_grad_enabled():
            logps.retain_grad()
            self.probe = logps
        return logps, entropies, aux


def test_gradient_is_zero_on_observation_tokens(tmp_path):
    # Three turns that keep going after unparsable output: every trajectory has observation
    # (screenshot) tokens between its actions.
    trainer = make_trainer(tmp_path, trainer_cls=LogpProbe, max_turns=3, end_on_format_error=False)
    trainer.warm_start_replay()
    rows = [trainer.train_dataset[0]] * 4
    trainer.model.train()
    batch = trainer._generate_and_score_completions(rows)
    trainer.close_desktops()
    observation = (batch["completion_mask"] == 1) & (batch["tool_mask"] == 0)
    action = (batch["completion_mask"] == 1) & (batch["tool_mask"] == 1)
    assert observation.any() and action.any()
    assert batch["advantages"].abs().sum() > 0
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop in a real run
    # the batch stays on the host; the training loop moves each micro-batch to the learner
    device = trainer.accelerator.device
    on_device = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    loss = trainer.compute_loss(trainer.model, on_device)
    loss.backward()
    grad = trainer.probe.grad.cpu()
    assert grad[observation].abs().max().item() == 0.0
    assert grad[action].abs().sum().item() > 0.0


def test_the_batch_follows_trls_contract_for_qwen_vl(tmp_path):
    trainer = make_trainer(tmp_path, max_turns=2, end_on_format_error=False)
    rows = [trainer.train_dataset[0]] * 4
    batch = trainer._generate_and_score_completions(rows)
    trainer.close_desktops()
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    image_token = trainer.encoder.image_token_id
    assert torch.equal(batch["mm_token_type_ids"], (ids == image_token).long())
    assert batch["image_grid_thw"].shape[0] == sum(batch["num_images"])
    patches = int(batch["image_grid_thw"].prod(-1).sum())
    assert batch["pixel_values"].shape[0] == patches
    tokens = int((ids == image_token).sum())
    assert tokens == patches // 4  # 2x2 patch merge
    assert batch["num_items_in_batch"].item() == int(
        (batch["completion_mask"] * batch["tool_mask"]).sum()
    )


def test_replay_can_be_switched_off(tmp_path):
    trainer = make_trainer(tmp_path, replay=False)
    trainer.warm_start_replay()
    trainer.train()
    trainer.close_desktops()
    assert all(h.get("replay/injected_frac", 0) == 0 for h in trainer.state.log_history)
    assert len(trainer.replay_buffer) == 1  # untouched: nothing stored, nothing injected


def test_trajectories_whose_desktop_failed_are_excluded_and_counted(tmp_path):
    broken = {
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
    }
    from osworld_gym.support import builtin_task
    from osworld_gym.tasks import Task, TaskSet

    tasks = TaskSet([builtin_task(INFEASIBLE), Task.from_dict(broken, validate=False)])
    vlm = build_tiny_vlm(seed=0)
    args = make_config(tmp_path, task_ids=None, per_device_train_batch_size=8)
    trainer = ARPOTrainer(vlm.model, args, vlm.processor, tasks=tasks)
    trainer.warm_start_replay()
    rows = [
        {"prompt": [{"role": "user", "content": t.instruction}], "task_id": t.id}
        for t in tasks
        for _ in range(4)
    ]
    batch = trainer._generate_and_score_completions(rows)
    trainer.close_desktops()
    assert batch["advantages"][4:].abs().sum() == 0
    assert batch["tool_mask"][4:].sum() == 0  # no loss on them
    assert trainer._metrics["train"]["episode/infra_errors"][-1] == 4.0


def test_the_format_penalty_is_applied_once_per_trajectory(tmp_path):
    trainer = make_trainer(tmp_path, format_penalty=-0.5, max_turns=3, end_on_format_error=False)
    rows = [trainer.train_dataset[0]] * 4
    trainer._generate_and_score_completions(rows)
    trainer.close_desktops()
    # a random tiny model never writes a valid action: every trajectory is penalised exactly once
    assert trainer._metrics["train"]["rewards/format_error/mean"][-1] == pytest.approx(1.0)
    assert trainer._metrics["train"]["reward"][-1] == pytest.approx(-0.5)
