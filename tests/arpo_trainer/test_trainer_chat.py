"""The token layout of an episode: one sequence per trajectory, built from sampled ids."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from arpo_trainer.chat import OMITTED_SCREENSHOT, TurnEncoder
from arpo_trainer.tiny import build_tiny_vlm
from PIL import Image


@pytest.fixture(scope="module")
def vlm():
    return build_tiny_vlm(seed=0)


def frame(color: int, w: int = 640, h: int = 360) -> np.ndarray:
    return np.full((h, w, 3), color, np.uint8)


def test_sequence_equals_the_chat_template_of_the_same_conversation(vlm):
    enc = TurnEncoder(vlm.processor, "Task: {instruction}")
    shots = [enc.screenshot_png(frame(10)), enc.screenshot_png(frame(200))]
    actions = ["Action: hotkey(key='ctrl alt t')", "Action: finished(content='')"]
    seq = enc.encode("make a folder", shots, [enc.action_ids(a) for a in actions])

    images = [Image.open(io.BytesIO(p)) for p in shots]
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Task: make a folder"},
        {"role": "user", "content": [{"type": "image", "image": images[0]}]},
        {"role": "assistant", "content": actions[0]},
        {"role": "user", "content": [{"type": "image", "image": images[1]}]},
        {"role": "assistant", "content": actions[1]},
    ]
    ref = vlm.processor.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_tensors="pt"
    )
    ref_ids = ref["input_ids"][0].tolist()
    newline = vlm.processor.tokenizer.encode("\n")
    assert seq.input_ids + newline == ref_ids  # the template ends with "<|im_end|>\n"
    assert ref["pixel_values"].shape[0] == sum(f.pixel_values.shape[0] for f in seq.images)


def test_only_sampled_action_tokens_are_trained(vlm):
    enc = TurnEncoder(vlm.processor, "Task: {instruction}")
    shots = [enc.screenshot_png(frame(c)) for c in (0, 80, 160)]
    sampled = [[300, 301, enc.eos_token_id], [302, enc.eos_token_id], [303, enc.eos_token_id]]
    logps = [[-0.1, -0.2, -0.3], [-0.4, -0.5], [-0.6, -0.7]]
    seq = enc.encode("x", shots, sampled, logps)

    trained = [t for t, m in zip(seq.completion_ids, seq.action_mask, strict=True) if m]
    assert trained == [i for turn in sampled for i in turn]
    assert [lp for lp, m in zip(seq.sampling_logps, seq.action_mask, strict=True) if m] == sum(
        logps, []
    )
    assert all(
        math.isnan(lp) for lp, m in zip(seq.sampling_logps, seq.action_mask, strict=True) if not m
    )
    image_tokens = sum(t == enc.image_token_id for t in seq.input_ids)
    assert image_tokens == sum(f.num_tokens for f in seq.images) and len(seq.images) == 3
    assert enc.tokenizer.decode(seq.prompt_ids).endswith("<|im_start|>assistant\n")


def test_a_turn_cut_at_the_token_limit_is_closed_but_the_closing_token_is_not_trained(vlm):
    enc = TurnEncoder(vlm.processor, "{instruction}")
    shot = enc.screenshot_png(frame(0))
    seq = enc.encode("x", [shot], [[300, 301]])
    assert seq.completion_ids == [300, 301, enc.eos_token_id]
    assert seq.action_mask == [1, 1, 0]


def test_the_context_of_each_turn_is_a_prefix_of_the_trajectory(vlm):
    enc = TurnEncoder(vlm.processor, "{instruction}", max_history_images=15)
    shots = [enc.screenshot_png(frame(c)) for c in (0, 50, 100)]
    actions = [[300, enc.eos_token_id], [301, enc.eos_token_id], [302, enc.eos_token_id]]
    full = enc.encode("x", shots, actions).input_ids
    for t in range(3):
        context = enc.encode("x", shots[: t + 1], actions[:t]).input_ids
        assert full[: len(context)] == context


def test_screenshots_beyond_the_history_cap_become_a_text_marker(vlm):
    enc = TurnEncoder(vlm.processor, "{instruction}", max_history_images=2)
    shots = [enc.screenshot_png(frame(c)) for c in (0, 50, 100, 150)]
    actions = [[300, enc.eos_token_id]] * 4
    seq = enc.encode("x", shots, actions)
    assert len(seq.images) == 2 and seq.pngs == shots[2:]
    text = enc.tokenizer.decode(seq.input_ids)
    assert text.count(OMITTED_SCREENSHOT) == 2
    assert text.count("<|vision_start|>") == 2


def test_screenshots_are_resized_to_the_model_pixel_budget(vlm):
    enc = TurnEncoder(vlm.processor, "{instruction}")
    png = enc.screenshot_png(frame(0, 1920, 1080))
    img = Image.open(io.BytesIO(png))
    assert img.width * img.height <= enc.max_pixels
    assert img.width % enc.factor == 0 and img.height % enc.factor == 0
    assert img.width > img.height  # aspect kept


def test_decoded_actions_keep_box_tokens_and_drop_the_closing_token(vlm):
    enc = TurnEncoder(vlm.processor, "{instruction}")
    text = "Action: click(start_box='<|box_start|>(10,20)<|box_end|>')"
    assert enc.decode_action(enc.action_ids(text)) == text
