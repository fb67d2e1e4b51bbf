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

import torch
from trl.trainer.utils import pad

from arpo_trainer.chat import EncodedSequence, TurnEncoder, batch_image_inputs
from arpo_trainer.rollout import Trajectory


def training_sequence(traj: Trajectory, encoder: TurnEncoder) -> EncodedSequence:
    """The trajectory's sequence; one whose desktop failed becomes a short stub that carries no
    loss."""
    if traj.valid and traj.turns:
        return traj.encode(encoder)
    return EncodedSequence(
        prompt_ids=encoder.header_ids(traj.instruction) + encoder.observation_ids(None, first=True),
        completion_ids=[encoder.eos_token_id],
        action_mask=[0],
        sampling_logps=[float("nan")],
    )


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
