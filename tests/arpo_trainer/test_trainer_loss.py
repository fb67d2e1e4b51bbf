"""What the loss is normalized over and which distribution its log-probs come from.

* A trajectory whose desktop failed is a stub without loss tokens, but it still fills one row of a
  micro-batch (TRL splits generation batches evenly). The update must be the mean over the *valid*
  trajectories, not shrink by the share of failed ones.
* Both sampling paths never sample vision tokens (vLLM ``bad_words``, ``generate``'s
  ``suppress_tokens``) and report log-probs of the distribution without them. The trainer's
  log-probs, which the importance-sampling ratio and the PPO ratio compare against, must be of the
  same distribution.
"""

from __future__ import annotations

import os

import pytest
import torch
from arpo_trainer.batch import collate, training_sequence
from arpo_trainer.testing.tiny_vllm import _bias_towards
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer
from osworld_gym.support import builtin_task
from osworld_gym.tasks import Task, TaskSet
from test_trainer_training import INFEASIBLE, LogpProbe, make_config, make_trainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

BROKEN = {
    "id": "broken-setup",
    "instruction": "never starts",
    "snapshot": "os",
    "config": [
        {
            "type": "download",
            "parameters": {
                "files": [{"url": "builtin-asset://no-such-asset.txt", "path": "/home/user/x.txt"}]
            },
        }
    ],
    "evaluator": {"func": "infeasible"},
}


def half_failed_trainer(tmp_path, **overrides) -> tuple[LogpProbe, list[dict]]:
    """A trainer over 4 rollouts of a working task and 4 of a task whose setup always fails."""
    tasks = TaskSet([builtin_task(INFEASIBLE), Task.from_dict(BROKEN, validate=False)])
    vlm = build_tiny_vlm(seed=0)
    args = make_config(tmp_path, task_ids=None, **overrides)
    trainer = LogpProbe(vlm.model, args, vlm.processor, tasks=tasks)
    trainer.warm_start_replay()  # a stored success: the working group gets non-zero advantages
    rows = [
        {"prompt": [{"role": "user", "content": t.instruction}], "task_id": t.id}
        for t in tasks
        for _ in range(4)
    ]
    return trainer, rows


def gradient_weights(trainer: LogpProbe, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """``d loss / d log p`` of each trained token times its trajectory's token count over
    ``-advantage``: the weight each valid trajectory gets in the update (at ratio 1, where the
    clipped objective is ``-A`` times the mean log-prob of the trajectory)."""
    trainer.probe = None
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    adv = inputs["advantages"]
    weights, rows = [], []
    for i in range(mask.size(0)):
        if mask[i].any() and adv[i] != 0:
            g = trainer.probe.grad[i][mask[i]] * mask[i].sum() / -adv[i]
            weights.append(g)
            rows.append(i)
    return (torch.cat(weights) if weights else torch.zeros(0)), torch.tensor(rows)


def test_failed_desktops_do_not_shrink_the_update(tmp_path):
    trainer, rows = half_failed_trainer(tmp_path, per_device_train_batch_size=8)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop in a real run
    inputs = trainer._prepare_inputs(rows)  # TRL's path: generate, shuffle, split, buffer
    trainer.close_desktops()
    valid = (inputs["completion_mask"] * inputs["tool_mask"]).sum(1) > 0
    assert int(valid.sum()) == 4  # the 4 broken rollouts are stubs without loss tokens
    weights, _ = gradient_weights(trainer, inputs)
    assert weights.numel() > 0
    # every valid trajectory weighs 1/4: the mean over the 4 valid ones, not 1/8 over all rows
    torch.testing.assert_close(weights, torch.full_like(weights, 1 / 4), rtol=1e-4, atol=0)


def test_the_scale_spans_the_accumulation_window_not_the_micro_batch(tmp_path):
    """Micro-batches of 2 rows, 4 per optimizer step: stubs and valid rows land in different
    micro-batches after TRL's shuffle, and every valid row still weighs 1 / (valid rows)."""
    trainer, rows = half_failed_trainer(
        tmp_path, per_device_train_batch_size=2, gradient_accumulation_steps=4
    )
    assert trainer.args.steps_per_generation == 4
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 4
    seen = []
    for _ in range(4):
        inputs = trainer._prepare_inputs(rows)
        trainer._step += 1
        weights, _ = gradient_weights(trainer, inputs)
        trainer.model.zero_grad()
        seen.append(weights)
    trainer.close_desktops()
    weights = torch.cat(seen)
    assert weights.numel() > 0
    # loss per micro-batch = mean over its 2 rows / 4 accumulation steps, times 8 rows / 4 valid
    torch.testing.assert_close(weights, torch.full_like(weights, 1 / 4), rtol=1e-4, atol=0)


@pytest.fixture
def vision_biased_trainer(tmp_path):
    """A trainer whose model puts most of its probability on ``<|image_pad|>``: exactly the
    token both sampling paths suppress."""
    trainer = make_trainer(tmp_path, lora=False, max_turns=2, end_on_format_error=False)
    image_pad = trainer.encoder.image_token_id
    _bias_towards(trainer.model, image_pad, 4.0)
    return trainer


def sampled_and_scored(trainer, **score_kwargs):
    """Four episodes of the infeasible task played by the trainer's policy, as the learner sees
    them: ``(sampling log-probs, learner log-probs, the learner's other outputs, the sampled-token
    mask, score(**kw))`` where ``score`` scores the same tokens again (e.g. under another
    setting)."""
    enc = trainer.encoder
    task = trainer.tasks[INFEASIBLE]
    with trainer.policy() as policy:
        trajs = trainer.collector(4).run([task] * 4, policy)
    trainer.close_desktops()
    batch, sampling = collate(
        [training_sequence(t, enc) for t in trajs],
        pad_id=enc.tokenizer.pad_token_id,
        image_token_id=enc.image_token_id,
    )
    device = trainer.accelerator.device  # the learner's (a GPU under ARPO_TEST_DEVICE=cuda)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1).to(device)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1).to(device)
    inputs = {
        k: batch[k].to(device) if isinstance(batch[k], torch.Tensor) else batch[k]
        for k in ("pixel_values", "image_grid_thw", "num_images", "mm_token_type_ids")
    }

    def score(**kw):
        with torch.no_grad():
            out = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, mask, batch["completion_ids"].size(1), **inputs, **kw
            )
        return tuple(None if t is None else t.cpu() for t in out)  # beside the host's batch

    logps, *rest = score(**score_kwargs)
    return sampling, logps, rest, batch["tool_mask"].bool(), score


def test_the_trainer_scores_the_distribution_the_policy_sampled_from(vision_biased_trainer):
    sampling, logps, _, sampled, _ = sampled_and_scored(vision_biased_trainer)
    assert sampled.sum() > 10
    # the suppressed tokens carry real probability here: a trainer scoring over the full
    # vocabulary would sit log(1 - p(vision)) below the sampler on every token
    torch.testing.assert_close(logps[sampled], sampling[sampled], atol=1e-4, rtol=0)


def test_the_ratio_between_trainer_and_sampler_is_one_on_sampled_tokens(vision_biased_trainer):
    """The same check through TRL's own seam: with old log-probs recomputed (two optimizer steps
    per generation batch), ``sampling_per_token_logps`` and ``old_per_token_logps`` agree."""
    trainer = vision_biased_trainer
    trainer.args.gradient_accumulation_steps = 2  # 1 % 2 != 0 would not apply; force recompute
    trainer.args.steps_per_generation = 4
    trainer.model.train()
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    trainer.close_desktops()
    assert "old_per_token_logps" in batch
    sampled = (batch["tool_mask"] * batch["completion_mask"]).bool()
    torch.testing.assert_close(
        batch["old_per_token_logps"][sampled],
        batch["sampling_per_token_logps"][sampled],
        atol=1e-4,
        rtol=0,
    )


def test_suppression_only_while_scoring(vision_biased_trainer):
    """Outside the trainer's scoring the model is untouched (generation, saving, PEFT)."""
    model = vision_biased_trainer.model
    assert "get_output_embeddings" not in vars(model)
    assert model.get_output_embeddings() is model.lm_head
    assert isinstance(vision_biased_trainer, ARPOTrainer)
