"""The base policy's grounding mix: generic widgets at random places, a click inside one of them.

The mix (``arpo_trainer.testing.base_policy``) is what could make the tiny base policy aim
(issue 26); these tests check that its targets are right on the environment's own coordinate
mapping, and that the hit-rate measurement scores an aiming policy 1 and a blind one near the
floor. ``test_trainer_noleak.py`` checks its words and colours against the pixel family.
"""

from __future__ import annotations

import io
import random
import re

import numpy as np
import pytest
import torch
from arpo_trainer.generation import TurnSample
from arpo_trainer.testing.base_policy import (
    GROUNDING_FILLS,
    behaviour_clone,
    build_base_policy,
    grounding_episode,
    grounding_hit_rate,
    grounding_scene,
    main,
    tiny_encoder,
)
from arpo_trainer.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS, build_tiny_vlm, load_tiny_vlm
from osworld_gym.actions.uitars import UITarsActionSet
from PIL import Image

SCREEN = (640, 360)
ACTIONS = UITarsActionSet(SCREEN, max_pixels=TINY_MAX_PIXELS, min_pixels=TINY_MIN_PIXELS)
POINT = re.compile(r"start_box='\((\d+),(\d+)\)'")


def _on_a_widget(shot: np.ndarray, x: int, y: int) -> bool:
    """Whether a widget's fill is within 2 pixels of (x, y) (the point itself may fall on the
    widget's dark label; a target is at least 12 pixels inside its widget's edge)."""
    patch = shot[max(0, y - 2) : y + 3, max(0, x - 2) : x + 3].reshape(-1, 3).astype(int)
    return any((np.abs(patch - np.array(f)).max(axis=1) <= 8).any() for f in GROUNDING_FILLS)


def test_every_cloned_click_lands_on_a_widget_shown_on_that_turn():
    rng = random.Random(3)
    episodes = clicks = finished = 0
    for _ in range(200):
        shots, actions = grounding_episode(rng, SCREEN, ACTIONS.frame, 3)
        episodes += 1
        assert len(shots) == len(actions) and 1 <= len(actions) <= 3
        for shot, action in zip(shots, actions, strict=True):
            m = POINT.search(action)
            if m is None:
                assert action == "Action: finished(content='')"
                # nothing left: the screen is one plain grey
                assert (shot == shot[0, 0]).all()
                finished += 1
                continue
            clicks += 1
            x, y = ACTIONS.point(f"({m[1]},{m[2]})")
            assert _on_a_widget(shot, x, y), (action, shot[y, x])
    assert clicks > 300 and finished > 20, (clicks, finished)


def test_scenes_hold_separate_widgets_of_the_asked_number():
    rng = random.Random(0)
    for n in (1, 2, 3, 4):
        for _ in range(50):
            scene = grounding_scene(rng, SCREEN, n)
            assert len(scene) == n
            for i, ((x, y, w, h), _, _) in enumerate(scene):
                assert 0 <= x and x + w <= SCREEN[0] and 0 <= y and y + h <= SCREEN[1]
                for (bx, by, bw, bh), _, _ in scene[i + 1 :]:
                    assert x + w <= bx or bx + bw <= x or y + h <= by or by + bh <= y


class _Aim:
    """Clicks the centroid of the non-background pixels of the screenshot it is shown, in the
    model's frame: a policy that reads the screen (with one widget)."""

    def __init__(self, aim: bool):
        self.aim = aim

    def sample(self, contexts):
        out = []
        for ctx in contexts:
            img = np.asarray(Image.open(io.BytesIO(ctx.pngs[-1])).convert("RGB")).astype(int)
            if self.aim:
                ys, xs = np.nonzero(np.abs(img - img[0, 0]).max(axis=2) > 40)
                x, y = int(xs.mean()), int(ys.mean())
            else:
                x, y = 3, 80  # a blind habit: always the same corner
            text = f"Action: click(start_box='({x},{y})')"
            out.append(TurnSample(ids=[], logps=[], text=text))
        return out


@pytest.fixture(scope="module")
def tiny():
    vlm = build_tiny_vlm(seed=0, vocab_size=1024)
    return vlm, tiny_encoder(vlm)


def test_the_hit_rate_scores_aim_and_blindness(tiny):
    vlm, enc = tiny
    aim = grounding_hit_rate(vlm, enc, n=64, widgets=1, policy=_Aim(True))
    blind = grounding_hit_rate(vlm, enc, n=64, widgets=1, policy=_Aim(False))
    assert aim["click_share"] == blind["click_share"] == 1.0
    assert aim["hit"] > 0.95 and aim["hit_shuffled"] < 0.2  # another screen's widget: rarely
    assert blind["hit"] < 0.1
    assert 0.01 < aim["floor"] == blind["floor"] < 0.1  # the same screens: one widget each


def test_cloning_with_the_mix_records_its_curve(tiny):
    vlm, enc = tiny
    rep = behaviour_clone(vlm, enc, steps=2, batch_size=2, grounding=1.0, eval_every=2)
    assert len(rep.losses) == 2 and [c["step"] for c in rep.curve] == [0, 2]
    assert all(0 <= c["hit"] <= 1 and 0 <= c["click_share"] <= 1 for c in rep.curve)


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--mrope", "0,1,x"], "comma-separated integers"),
        (["--mrope", "4,2,1"], "summing to 8"),
        (["--mrope", "10,-1,-1"], "summing to 8"),
        (["--rope_theta", "0"], "must be positive"),
    ],
)
def test_the_cli_refuses_a_position_encoding_it_cannot_build(tmp_path, capsys, flags, match):
    with pytest.raises(SystemExit):
        main(["--output", str(tmp_path / "base"), "--steps", "1", *flags])
    assert match in capsys.readouterr().err
    assert not (tmp_path / "base").exists()  # refused before anything was built


def test_the_cli_refuses_zero_cloning_steps_before_building_anything(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--output", str(tmp_path / "base"), "--steps", "0"])
    assert "--steps must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "base").exists()


def test_the_cli_builds_the_grounded_base_s_position_encoding(tmp_path):
    """What docs/learning.md's grounded base needs, from the standard entry point (1 step)."""
    out = tmp_path / "base"
    main(["--output", str(out), "--steps", "1", "--grounding", "1", "--rope_theta", "100",
          "--mrope", "0,1,1,0,1,1,0,1,1,0,1,1"])  # fmt: skip
    rope = load_tiny_vlm(out).model.config.get_text_config().rope_parameters
    assert rope["rope_theta"] == 100 and rope["mrope_section"] == [0, 1, 1] * 4


def test_the_builder_passes_its_learning_rate_and_curve_to_the_cloning(tmp_path):
    """``words_base.py --lr --eval_every`` go through ``build_base_policy``: at learning rate 0
    the saved weights are the freshly built model's, and the report holds the hit-rate curve."""
    out, rep = build_base_policy(tmp_path / "base", steps=2, grounding=1.0, lr=0.0, eval_every=2)
    assert [c["step"] for c in rep.curve] == [0, 2]
    saved = load_tiny_vlm(out).model.state_dict()
    fresh = build_tiny_vlm(seed=0, vocab_size=1024).model.state_dict()  # the builder's vocabulary
    assert saved.keys() == fresh.keys()
    assert all(torch.equal(saved[k], fresh[k]) for k in fresh)
    moved = load_tiny_vlm(build_base_policy(tmp_path / "moved", steps=2)[0]).model.state_dict()
    assert not all(torch.equal(v, fresh[k]) for k, v in moved.items())  # the default rate moves it


def test_the_builder_gives_the_saved_processor_its_screenshot_budget(tmp_path):
    """``words_base.py --max_pixels`` reaches the saved processor: four times the default budget
    makes a 640x360 screenshot 60 image tokens (6 rows of 10) instead of 15 (3 of 5)."""
    shot = np.full((360, 640, 3), 200, dtype=np.uint8)
    tokens = {}
    for budget in (TINY_MAX_PIXELS, 4 * TINY_MAX_PIXELS):
        out, rep = build_base_policy(
            tmp_path / f"b{budget}", steps=1, grounding=1.0, max_pixels=budget
        )
        enc = tiny_encoder(load_tiny_vlm(out))
        feats = enc.features(enc.screenshot_png(shot))
        tokens[budget] = (feats.num_tokens, feats.grid_thw.tolist())
        assert rep.steps == 1
    assert tokens == {TINY_MAX_PIXELS: (15, [[1, 6, 10]]), 4 * TINY_MAX_PIXELS: (60, [[1, 12, 20]])}
