"""The vLLM importance-sampling correction chosen for multi-turn trajectories, and the vLLM request
settings, checked without vLLM (these run in the main environment).

A trajectory of 15 turns is thousands of sampled tokens. vLLM and the trainer compute slightly
different log-probs (kernels, precision), so the per-token log-ratio is a small noise. TRL's
default ``sequence_mask`` multiplies those ratios over the whole trajectory and zeroes the
trajectory once the product leaves ``[0, 3]``; ``token_truncate`` (our default) does not compound.
"""

from __future__ import annotations

import torch
from arpo_trainer.batch import importance_sampling_ratio
from arpo_trainer.config import ARPOConfig
from arpo_trainer.tiny import build_tokenizer
from arpo_trainer.vllm_rollout import VISION_TOKENS, collapse_image_runs, vllm_sampling_kwargs


def long_trajectories(tokens: int = 15 * 600, rows: int = 8, drift: float = 0.002):
    """Trainer/vLLM log-probs of sampled tokens differing by a small, biased noise per token."""
    g = torch.Generator().manual_seed(0)
    sampling = -torch.rand(rows, tokens, generator=g) * 3
    old = sampling + drift + 0.01 * torch.randn(rows, tokens, generator=g)
    return old, sampling, torch.ones(rows, tokens)


def test_sequence_mask_zeroes_whole_multi_turn_trajectories_for_a_tiny_mismatch():
    old, sampling, mask = long_trajectories()
    ratio = importance_sampling_ratio(old, sampling, mask, mode="sequence_mask", clip_max=3.0)
    assert (ratio == 0).all()  # every trajectory dropped from the loss


def test_token_truncate_keeps_every_token_near_weight_one():
    old, sampling, mask = long_trajectories()
    ratio = importance_sampling_ratio(old, sampling, mask, mode="token_truncate", clip_max=3.0)
    assert ratio.shape == old.shape
    assert (ratio > 0.9).all() and (ratio < 1.1).all()


def test_arpo_defaults_to_token_truncate():
    cfg = ARPOConfig(
        output_dir="/tmp/arpo-is",
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=4,
        num_generations=4,
    )
    assert cfg.vllm_importance_sampling_mode == "token_truncate"
    assert cfg.vllm_importance_sampling_clip_max == 3.0


def test_vllm_requests_stop_at_im_end_and_ban_every_vision_token():
    tok = build_tokenizer()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    kwargs = vllm_sampling_kwargs(tok, eos)
    assert kwargs["stop_token_ids"] == [eos]
    assert sorted(kwargs["bad_words"]) == sorted(VISION_TOKENS)
    # each bad word is one token, so vLLM masks it unconditionally (like suppress_tokens)
    for word in kwargs["bad_words"]:
        assert len(tok.encode(word, add_special_tokens=False)) == 1


def test_colocate_prompts_carry_one_placeholder_per_image():
    pad = 9
    ids = [1, 2, *[pad] * 4, 3, 4, *[pad] * 6, 5]
    assert collapse_image_runs(ids, pad) == [1, 2, pad, 3, 4, pad, 5]
