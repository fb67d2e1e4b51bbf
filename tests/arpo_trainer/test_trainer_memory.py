"""Where a rollout's screenshots live and how many bytes they take.

A 15-turn trajectory at the recipe's settings holds 15 screenshots of 1092x1932 (10,764 patches
each). As the image processor's float32 ``pixel_values`` that is 50.6 MB per screenshot; a
generation batch of 16 trajectories per process kept on the GPU until the next rollout (TRL's
``_buffered_inputs``) would be ~12 GB per GPU. Here screenshots stay uint8 patches until a
micro-batch's forward pass, the generation batch stays on the host, and only the micro-batch
being trained on moves to the device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from arpo_trainer.chat import TurnEncoder
from arpo_trainer.tiny import build_processor, build_tokenizer
from test_trainer_training import make_trainer

ARPO_MAX_PIXELS = 2116800
PATCHES_1080P = 78 * 138  # 1092x1932 in 14 px patches


def frame(seed: int, h: int = 1080, w: int = 1920) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, (h, w, 3), dtype=np.uint8)


def uitars_encoder(**kwargs) -> TurnEncoder:
    processor = build_processor(build_tokenizer(), min_pixels=100 * 28 * 28, max_pixels=16384 * 784)
    return TurnEncoder(processor, "{instruction}", image_max_pixels=ARPO_MAX_PIXELS, **kwargs)


def test_a_1080p_screenshot_is_kept_in_6_3_mb_not_50_6():
    enc = uitars_encoder()
    feats = enc.features(enc.screenshot_png(frame(0)))
    assert feats.pixel_values.shape[0] == PATCHES_1080P
    assert feats.pixel_values.dtype == torch.uint8
    # 3 channels x 14 x 14 bytes per patch, one temporal frame (the processor repeats it twice
    # in float32: 3 x 2 x 14 x 14 x 4 = 4,704 bytes per patch, 50.6 MB)
    assert feats.nbytes <= PATCHES_1080P * 588 + 64
    model_input = enc.model_pixels(feats.pixel_values, torch.bfloat16)
    assert model_input.shape == (PATCHES_1080P, 1176) and model_input.dtype == torch.bfloat16


def test_the_feature_cache_is_bounded_in_bytes():
    one = PATCHES_1080P * 588 + 24  # a 1080p screenshot's patches and grid
    enc = uitars_encoder(feature_cache_bytes=3 * one)
    pngs = [enc.screenshot_png(frame(s)) for s in range(6)]
    kept = [enc.features(p) for p in pngs]
    assert enc.cache_bytes <= 3 * one
    assert enc.cache_bytes == 3 * kept[-1].nbytes
    # the three most recent are served from the cache, the oldest are processed again
    assert all(enc.features(p) is f for p, f in zip(pngs[3:], kept[3:], strict=True))
    assert enc.features(pngs[0]) is not kept[0]


def test_a_zero_byte_cache_keeps_nothing_and_negative_is_an_error():
    enc = uitars_encoder(feature_cache_bytes=0)
    png = enc.screenshot_png(frame(1, 360, 640))
    assert enc.features(png) is not enc.features(png)
    assert enc.cache_bytes == 0
    with pytest.raises(ValueError, match="feature_cache_bytes"):
        uitars_encoder(feature_cache_bytes=-1)


def test_the_generation_batch_stays_on_the_host_and_one_micro_batch_moves(tmp_path, monkeypatch):
    # 2 micro-batches of 4 rollouts per generation batch (TRL buffers both until step 2)
    trainer = make_trainer(
        tmp_path,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_turns=2,
        end_on_format_error=False,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 2
    rows = [trainer.train_dataset[0]] * 4
    first = trainer._prepare_inputs(rows)  # rollout, then micro-batch 0
    trainer.close_desktops()
    trainer._step += 1
    buffered = trainer._buffered_inputs
    assert len(buffered) == 2
    for mb in buffered:
        tensors = {k: v for k, v in mb.items() if isinstance(v, torch.Tensor) and v.ndim > 0}
        assert all(v.device.type == "cpu" for v in tensors.values()), {
            k: v.device for k, v in tensors.items()
        }
        assert mb["pixel_values"].dtype == torch.uint8
    assert first["pixel_values"].shape[0] == int(first["image_grid_thw"].prod(-1).sum())

    # micro-batch 1 goes to the device; the buffer stays where it is
    meta = torch.device("meta")
    monkeypatch.setattr(type(trainer.accelerator), "device", property(lambda self: meta))
    second = trainer._prepare_inputs(rows)
    moved = [v for v in second.values() if isinstance(v, torch.Tensor)]
    assert moved and all(v.device == meta for v in moved)
    assert all(
        v.device.type == "cpu"
        for v in buffered[1].values()
        if isinstance(v, torch.Tensor) and v.ndim > 0
    )
    # what moved is one micro-batch: its own rows and screenshots only
    assert second["prompt_ids"].shape[0] == 2
    assert second["pixel_values"].shape[0] == buffered[1]["pixel_values"].shape[0]
