"""The hand-built chat layout (``arpo_trainer.chat``) at UI-TARS-1.5's image processor settings.

UI-TARS-1.5 sizes screenshots with Qwen's smart resize between ``min_pixels = 100*28*28`` and
``max_pixels = 16384*28*28`` (its ``ui_tars`` action parser and preprocessor settings), patch 14,
merge 2. A 1920x1080 screenshot becomes 1932x1092 (multiples of 28), i.e. a 78x138 patch grid and
39*69 = 2691 ``<|image_pad|>`` tokens; ARPO's ``max_pixels = 2116800`` keeps that size. These
numbers are derived by hand here, not read back from the code under test.

The processor is built offline from config (no hub): the real PIL image processor of Qwen2-VL /
Qwen2.5-VL and the offline tokenizer with Qwen's special tokens and chat template. Where
torchvision is installed (the vLLM environment), the same checks run on a full
``Qwen2_5_VLProcessor`` (with its video processor) too.
"""

from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest
import torch
from arpo_trainer.chat import TurnEncoder
from arpo_trainer.tiny import build_processor, build_tokenizer
from PIL import Image

UITARS_MIN_PIXELS = 100 * 28 * 28
UITARS_MAX_PIXELS = 16384 * 28 * 28
ARPO_MAX_PIXELS = 2116800

# 1920x1080 -> round(1080/28)=39, round(1920/28)=69 merged cells of 28x28 -> 2x2 patches of 14
RESIZED_1080P = (69 * 28, 39 * 28)  # (1932, 1092)
GRID_1080P = [1, 39 * 2, 69 * 2]
TOKENS_1080P = 39 * 69


def image_only_processor():
    return build_processor(
        build_tokenizer(), min_pixels=UITARS_MIN_PIXELS, max_pixels=UITARS_MAX_PIXELS
    )


def full_processor():
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed (only in .venv-vllm-cpu): no video processor")
    from arpo_trainer.testing.tiny_vllm import full_processor as build

    return build(build_tokenizer(), min_pixels=UITARS_MIN_PIXELS, max_pixels=UITARS_MAX_PIXELS)


@pytest.fixture(scope="module", params=["image-only", "full"])
def processor(request):
    return image_only_processor() if request.param == "image-only" else full_processor()


def screenshot(seed: int) -> np.ndarray:
    """A 1080p frame with structure (so resizing matters), like a desktop screenshot."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (27, 48, 3), dtype=np.uint8)
    return np.kron(small, np.ones((40, 40, 1), dtype=np.uint8))  # 1080 x 1920


def test_a_1080p_screenshot_is_2691_image_tokens_at_uitars_settings(processor):
    enc = TurnEncoder(processor, "{instruction}")
    assert enc.image_size(1920, 1080) == RESIZED_1080P
    png = enc.screenshot_png(screenshot(0))
    assert Image.open(io.BytesIO(png)).size == RESIZED_1080P

    feats = enc.features(png)
    assert feats.grid_thw.tolist() == [GRID_1080P]
    assert feats.num_tokens == TOKENS_1080P
    assert feats.pixel_values.shape[0] == GRID_1080P[1] * GRID_1080P[2]

    # the processor applied to the raw 1080p frame agrees (it resizes the same way)
    raw = processor.image_processor(images=[Image.fromarray(screenshot(0))], return_tensors="pt")
    assert raw["image_grid_thw"].tolist() == [GRID_1080P]


def test_arpo_pixel_budget_keeps_1080p_at_full_resolution(processor):
    enc = TurnEncoder(processor, "{instruction}", image_max_pixels=ARPO_MAX_PIXELS)
    assert enc.image_size(1920, 1080) == RESIZED_1080P
    assert enc.features(enc.screenshot_png(screenshot(1))).num_tokens == TOKENS_1080P


def test_a_halved_budget_shrinks_the_screenshot_and_keeps_the_aspect(processor):
    enc = TurnEncoder(processor, "{instruction}", image_max_pixels=ARPO_MAX_PIXELS // 2)
    w, h = enc.image_size(1920, 1080)
    assert w * h <= ARPO_MAX_PIXELS // 2 and w % 28 == 0 and h % 28 == 0
    assert abs(w / h - 1920 / 1080) < 0.05
    assert enc.features(enc.screenshot_png(screenshot(2))).num_tokens == (w // 28) * (h // 28)


def test_the_episode_layout_equals_apply_chat_template_at_uitars_settings(processor):
    system = "You are a helpful assistant."
    enc = TurnEncoder(processor, "## User Instruction\n{instruction}", system_prompt=system)
    shots = [enc.screenshot_png(screenshot(s)) for s in (3, 4, 5)]
    actions = [
        "Thought: open a terminal\nAction: hotkey(key='ctrl alt t')",
        "Action: type(content='mkdir -p ~/Desktop/reports\\n')",
        "Action: finished(content='')",
    ]
    seq = enc.encode("make a folder", shots, [enc.action_ids(a) for a in actions])

    messages: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "## User Instruction\nmake a folder"},
    ]
    for png, action in zip(shots, actions, strict=True):
        img = Image.open(io.BytesIO(png))
        messages.append({"role": "user", "content": [{"type": "image", "image": img}]})
        messages.append({"role": "assistant", "content": action})
    ref = processor.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_tensors="pt"
    )
    ref_ids = ref["input_ids"][0].tolist()
    newline = processor.tokenizer.encode("\n", add_special_tokens=False)
    assert seq.input_ids + newline == ref_ids  # the template closes with "<|im_end|>\n"
    assert ref_ids.count(enc.image_token_id) == 3 * TOKENS_1080P
    assert ref["image_grid_thw"].tolist() == [GRID_1080P] * 3
    # the same pixels as the encoder's per-screenshot features (kept as uint8 patches, one
    # temporal frame: 8x smaller than the processor's float32), in order
    ours = np.concatenate([enc.model_pixels(f.pixel_values).numpy() for f in seq.images])
    np.testing.assert_allclose(ref["pixel_values"].numpy(), ours, atol=1e-5)
    assert all(f.pixel_values.dtype == torch.uint8 for f in seq.images)
    kept = sum(f.pixel_values.nbytes for f in seq.images)
    assert kept * 8 == ref["pixel_values"].nbytes
