"""Group-relative advantages on known groups (TRL's semantics; infra failures excluded)."""

from __future__ import annotations

import math

import pytest
import torch
from arpo_trainer.rewards import evaluator_score, format_error, group_advantages


def col(*values: float) -> torch.Tensor:
    return torch.tensor([[v] for v in values], dtype=torch.float32)


def test_arpo_replay_group_gets_the_advantages_of_the_paper_example():
    # ARPO.md §2.2: one replayed success in a group of 8 failures -> A+ = 2.47, A- = -0.35.
    adv, _, _ = group_advantages(col(1, 0, 0, 0, 0, 0, 0, 0), torch.ones(1), 8)
    assert adv[0].item() == pytest.approx(2.47, abs=0.01)
    assert adv[1:].tolist() == pytest.approx([-0.354] * 7, abs=0.01)


def test_groups_are_normalised_separately():
    adv, _, std = group_advantages(col(1, 0, 1, 1), torch.ones(1), 2)
    assert adv.tolist() == pytest.approx([0.707, -0.707, 0.0, 0.0], abs=1e-3)
    assert std[2].item() == 0.0


def test_uniform_groups_carry_no_signal():
    adv, _, _ = group_advantages(col(0, 0, 0, 0), torch.ones(1), 4)
    assert adv.tolist() == [0.0] * 4


def test_unscorable_rows_are_left_out_of_the_group_statistics_and_get_zero_advantage():
    nan = math.nan
    with_crash, _, _ = group_advantages(col(1, 0, nan, 0), torch.ones(1), 4)
    without, _, _ = group_advantages(col(1, 0, 0), torch.ones(1), 3)
    assert with_crash[2].item() == 0.0
    assert [with_crash[i].item() for i in (0, 1, 3)] == pytest.approx(without.tolist())


def test_format_penalty_is_the_weight_of_the_format_error_indicator():
    per_func = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    _, rewards, _ = group_advantages(per_func, torch.tensor([1.0, -0.5]), 4)
    assert rewards.tolist() == [1.0, -0.5, 0.0, 0.0]


def test_scale_rewards_none_only_centres_and_batch_uses_the_batch_std():
    none, _, _ = group_advantages(col(1, 0, 0, 0), torch.ones(1), 4, scale_rewards="none")
    assert none.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    batch, _, _ = group_advantages(col(1, 0, 1, 1), torch.ones(1), 2, scale_rewards="batch")
    assert batch.tolist() == pytest.approx([0.5 / 0.5, -0.5 / 0.5, 0.0, 0.0], abs=1e-3)


def test_reward_functions_read_the_rollout_columns():
    assert evaluator_score(completions=[0, 0], score=[0.5, 1.0], infra_error=[None, "boom"]) == [
        0.5,
        None,
    ]
    assert format_error(completions=[0, 0], format_errors=[0, 3], infra_error=[None, None]) == [
        0.0,
        1.0,
    ]
