"""Rewards and group-relative advantages.

The reward of a trajectory is ``score + format_penalty * [any turn unparsable]``. Both terms are
TRL reward functions, so TRL computes, gathers and logs them (``rewards/evaluator_score/mean``,
``rewards/format_error/mean``); the penalty is the weight of the ``format_error`` indicator
(``reward_weights = [1, format_penalty]``). A trajectory whose desktop failed gets ``None`` from
both, i.e. it is *unscorable*: left out of its group's mean and std, advantage 0.

>>> evaluator_score(completions=["a", "b"], score=[1.0, 0.0], infra_error=[None, "desktop died"])
[1.0, None]
>>> format_error(completions=["a", "b"], format_errors=[2, 0], infra_error=[None, None])
[1.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import torch
from trl.trainer.utils import nanstd

SCALE_REWARDS = ("group", "batch", "none")


def evaluator_score(
    completions: list[Any], score: list[float], infra_error: list[str | None], **_: Any
) -> list[float | None]:
    """The desktop evaluator's score of each trajectory (``None`` when the desktop failed)."""
    return [None if err else float(s) for s, err in zip(score, infra_error, strict=True)]


def format_error(
    completions: list[Any], format_errors: list[int], infra_error: list[str | None], **_: Any
) -> list[float | None]:
    """1 if a turn of the trajectory did not parse, else 0 (weighted by ``format_penalty``)."""
    return [
        None if err else float(n > 0) for n, err in zip(format_errors, infra_error, strict=True)
    ]


def group_advantages(
    rewards_per_func: torch.Tensor,
    weights: torch.Tensor,
    num_generations: int,
    *,
    scale_rewards: str = "group",
    aggregation: str = "sum_then_normalize",
    clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GRPO advantages with TRL's semantics, for rows in contiguous groups of ``num_generations``.

    Args:
        rewards_per_func: ``(N, F)`` rewards, NaN where a function had no value; a row that is NaN
            everywhere is unscorable (excluded from statistics, advantage 0).
        weights: ``(F,)`` reward weights.
        scale_rewards: ``"group"`` divides by the group's std, ``"batch"`` by the batch std,
            ``"none"`` only centres (Dr. GRPO).
        aggregation: ``"sum_then_normalize"`` (weighted sum, then normalize) or
            ``"normalize_then_sum"`` (GDPO).
        clip: clip the advantages to ``[-clip, clip]`` (``None``: no clip).

    Returns:
        ``(advantages, rewards, std)``, each ``(N,)``; ``std`` is what the advantage was divided by
        (before the ``1e-4``), for zero-std logging.

    >>> r = torch.tensor([[1.0], [0.0], [0.0], [0.0]])
    >>> adv, _, _ = group_advantages(r, torch.ones(1), 4)
    >>> [round(a, 3) for a in adv.tolist()]
    [1.5, -0.5, -0.5, -0.5]

    A converged group: z-scoring gives the odd one out -1.5 whatever the reward gap; centring only
    (Dr. GRPO) gives it the gap, and a clip bounds both:

    >>> r = torch.tensor([[0.5], [1.0], [1.0], [1.0]])
    >>> [round(a, 2) for a in group_advantages(r, torch.ones(1), 4)[0].tolist()]
    [-1.5, 0.5, 0.5, 0.5]
    >>> unscaled = group_advantages(r, torch.ones(1), 4, scale_rewards="none")
    >>> [round(a, 3) for a in unscaled[0].tolist()]
    [-0.375, 0.125, 0.125, 0.125]
    >>> [round(a, 3) for a in group_advantages(r, torch.ones(1), 4, clip=1.0)[0].tolist()]
    [-1.0, 0.5, 0.5, 0.5]
    """
    if clip is not None and clip <= 0:
        raise ValueError(f"clip must be positive or None, got {clip}")
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {scale_rewards!r}")
    n = rewards_per_func.shape[0]
    if n % num_generations:
        raise ValueError(f"{n} rows do not split into groups of {num_generations}")
    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    if aggregation == "sum_then_normalize":
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[unscorable] = torch.nan
        grouped = rewards.view(-1, num_generations)
        mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
        if scale_rewards == "batch":
            std = nanstd(rewards).expand_as(rewards) if n > 1 else torch.zeros_like(rewards)
        elif num_generations > 1:
            std = nanstd(grouped, dim=1).repeat_interleave(num_generations)
        else:
            std = torch.zeros_like(rewards)
        advantages = rewards - mean
        if scale_rewards != "none":
            advantages = advantages / (std + 1e-4)
    elif aggregation == "normalize_then_sum":
        grouped = rewards_per_func.view(-1, num_generations, rewards_per_func.shape[1])
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
        std_k = (
            nanstd(grouped, dim=1, keepdim=True)
            if num_generations > 1
            else torch.zeros_like(mean_k)
        )
        per_func = ((grouped - mean_k) / (std_k + 1e-4)).view(-1, rewards_per_func.shape[1])
        rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[unscorable] = torch.nan
        std = nanstd(rewards).expand_as(rewards) if n > 1 else torch.zeros_like(rewards)
        advantages = (rewards - torch.nanmean(rewards)) / (std + 1e-4)
    else:
        raise ValueError(
            f"aggregation must be 'sum_then_normalize' or 'normalize_then_sum', got {aggregation!r}"
        )
    advantages = torch.nan_to_num(advantages, nan=0.0)
    if clip is not None:
        advantages = advantages.clamp(-clip, clip)
    return advantages, rewards, std
