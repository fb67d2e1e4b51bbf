"""Trajectories to the tensors TRL's loss reads (the dict contract of
``_generate_and_score_completions``).

One sequence per trajectory: the prompt (left-padded) is the system message, the task prompt and
the first screenshot; the completion (right-padded) is everything after, with ``tool_mask`` 1 only
on the tokens the policy sampled. ``mm_token_type_ids`` marks the image tokens over the whole
sequence (Qwen2.5-VL computes its 3D mRoPE only when it gets them), and every screenshot's
features follow in order of appearance, ``num_images`` per row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from trl.trainer.utils import pad

from arpo_trainer.chat import EncodedSequence, TurnEncoder, batch_image_inputs
from arpo_trainer.rollout import Trajectory


def training_sequence(traj: Trajectory, encoder: TurnEncoder) -> EncodedSequence:
    """The trajectory's sequence; one whose desktop failed becomes a short stub that carries no
    loss (and no weight in it: :func:`window_loss_scales`).

    The stub shows one small black screenshot, so that a micro-batch of stubs runs the vision
    tower like every other: under ZeRO-3 each module's forward gathers its parameters from all
    ranks, and a rank that skipped the vision tower would leave the others waiting (and without
    any image the model gets an empty ``pixel_values`` and fails).
    """
    if traj.valid and traj.turns:
        return traj.encode(encoder)
    blank = encoder.screenshot_png(np.zeros((56, 56, 3), np.uint8))
    seq = encoder.encode(traj.instruction, [blank], [])
    seq.completion_ids, seq.action_mask, seq.sampling_logps = (
        [encoder.eos_token_id],
        [0],
        [math.nan],
    )
    return seq


def collate(
    seqs: list[EncodedSequence],
    *,
    pad_id: int,
    image_token_id: int,
    device: torch.device | str = "cpu",
) -> tuple[dict[str, Any], torch.Tensor]:
    """Pad and stack sequences; returns ``(batch, sampling_logps)``.

    ``batch`` holds ``prompt_ids``/``prompt_mask`` (left-padded), ``completion_ids``/
    ``completion_mask``/``tool_mask`` (right-padded), ``mm_token_type_ids``, ``num_images`` and,
    when there are screenshots, ``pixel_values``/``image_grid_thw``. ``sampling_logps`` is
    ``(B, C)`` with NaN where the log-prob is unknown (not sampled by the policy) and 0 on padding.

    >>> from arpo_trainer.chat import EncodedSequence
    >>> a = EncodedSequence([5, 6], [7, 8, 9], [1, 1, 0], [-0.1, -0.2, float("nan")])
    >>> b = EncodedSequence([5], [7], [1], [-0.3])
    >>> batch, logps = collate([a, b], pad_id=0, image_token_id=99)
    >>> batch["prompt_ids"].tolist(), batch["completion_ids"].tolist(), batch["tool_mask"].tolist()
    ([[5, 6], [0, 5]], [[7, 8, 9], [7, 0, 0]], [[1, 1, 0], [1, 0, 0]])
    >>> batch["completion_mask"].tolist(), batch["num_images"]
    ([[1, 1, 1], [1, 0, 0]], [0, 0])
    """

    def stack(rows: list[list[Any]], value: Any, side: str, dtype: torch.dtype) -> torch.Tensor:
        return pad(
            [torch.tensor(r, dtype=dtype) for r in rows], padding_value=value, padding_side=side
        ).to(device)

    prompt_ids = stack([s.prompt_ids for s in seqs], pad_id, "left", torch.long)
    prompt_mask = stack([[1] * len(s.prompt_ids) for s in seqs], 0, "left", torch.long)
    completion_ids = stack([s.completion_ids for s in seqs], pad_id, "right", torch.long)
    completion_mask = stack([[1] * len(s.completion_ids) for s in seqs], 0, "right", torch.long)
    tool_mask = stack([s.action_mask for s in seqs], 0, "right", torch.long)
    sampling_logps = stack([s.sampling_logps for s in seqs], 0.0, "right", torch.float32)
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    batch: dict[str, Any] = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "mm_token_type_ids": (input_ids == image_token_id).long() * attention_mask,
        "num_images": [len(s.images) for s in seqs],
        **{k: v.to(device) for k, v in batch_image_inputs(seqs).items()},
    }
    return batch, sampling_logps


#: Loss types whose loss is a mean over the rows (trajectories) of a micro-batch, then divided by
#: the gradient accumulation steps (TRL 1.16 ``_compute_loss``).
PER_ROW_LOSSES = frozenset({"grpo", "sapo", "luspo", "dr_grpo"})
#: Loss types normalized by the token count of each micro-batch, then by the accumulation steps.
PER_MICRO_BATCH_LOSSES = frozenset({"bnpo"})


def window_loss_scales(
    valid: torch.Tensor, *, rows: int, accumulation: int, first_step: int, loss_type: str
) -> torch.Tensor:
    """Per micro-batch factor that makes an optimizer step average over *valid* trajectories only.

    A trajectory whose desktop failed stays in the batch as a stub without loss tokens (TRL splits
    a generation batch into equal micro-batches), but TRL's per-row losses still count it: the
    mean over a micro-batch's rows and the division by ``accumulation`` treat it as a trajectory
    with zero gradient, so an update shrinks by the share of failed episodes. Multiplying every
    micro-batch's loss by ``rows in its window / valid rows in its window`` (over all processes,
    whose gradients are averaged) restores the mean over valid trajectories. ``bnpo`` normalizes
    by tokens within a micro-batch, so only micro-batches without any valid row are discounted;
    the token-count losses (``dapo``, ``cispo``, ``vespo``) already divide by the valid tokens of
    the whole generation batch and get 1.

    Args:
        valid: ``(processes, micro_batches)`` valid rows per micro-batch of one generation batch.
        rows: rows per micro-batch.
        accumulation: micro-batches per optimizer step.
        first_step: the trainer's micro-step count at the buffer's first micro-batch (windows are
            ``step // accumulation``).
        loss_type: TRL's ``loss_type``.

    >>> v = torch.tensor([[2, 1, 2, 2], [2, 0, 2, 2]])  # 2 processes, 4 micro-batches of 2 rows
    >>> window_loss_scales(v, rows=2, accumulation=2, first_step=0, loss_type="grpo").tolist()
    [1.6, 1.6, 1.0, 1.0]
    >>> window_loss_scales(v, rows=2, accumulation=2, first_step=0, loss_type="bnpo").tolist()
    [1.3333333333333333, 1.3333333333333333, 1.0, 1.0]
    >>> window_loss_scales(v, rows=2, accumulation=2, first_step=0, loss_type="dapo").tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    valid = valid.to(torch.float64)
    processes, micro = valid.shape
    windows = (first_step + torch.arange(micro)) // accumulation
    scales = torch.ones(micro, dtype=torch.float64)
    if loss_type not in PER_ROW_LOSSES | PER_MICRO_BATCH_LOSSES:
        return scales
    for w in windows.unique():
        sel = windows == w
        if loss_type in PER_ROW_LOSSES:
            total, kept = processes * int(sel.sum()) * rows, float(valid[:, sel].sum())
        else:
            total, kept = processes * int(sel.sum()), float((valid[:, sel] > 0).sum())
        if kept > 0:
            scales[sel] = total / kept
    return scales


def importance_sampling_ratio(
    old: torch.Tensor,
    sampling: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: str = "sequence_mask",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> torch.Tensor:
    """TRL's trainer/vLLM mismatch correction ``exp(old - sampling)`` per token (``token_*``) or
    per sequence (``sequence_*``), truncated (``*_truncate``) or zeroed (``*_mask``) outside
    ``[clip_min, clip_max]``.

    >>> old = torch.tensor([[-1.0, -1.0]]); s = torch.tensor([[-1.5, -1.0]]); m = torch.ones(1, 2)
    >>> round(importance_sampling_ratio(old, s, m, mode="sequence_truncate").item(), 3)
    1.649
    >>> importance_sampling_ratio(old, s, m, mode="token_mask", clip_max=1.5).tolist()
    [[0.0, 1.0]]
    """
    diff = torch.nan_to_num((old - sampling) * mask, nan=0.0)
    ratio = torch.exp(diff.sum(dim=-1, keepdim=True) if mode.startswith("sequence") else diff)
    lo = 0.0 if clip_min is None else clip_min
    hi = math.inf if clip_max is None else clip_max
    if mode.endswith("truncate"):
        return ratio.clamp(min=lo, max=hi)
    if mode.endswith("mask"):
        return ratio.masked_fill((ratio < lo) | (ratio > hi), 0.0)
    raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")
