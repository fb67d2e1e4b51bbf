"""compare_images: SSIM in numpy on images drawn with PIL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from osworld_gym.evaluators.metrics.images import compare_images, ssim
from PIL import Image, ImageDraw


def picture(
    path: Path,
    *,
    size: tuple[int, int] = (160, 120),
    shift: int = 0,
    noise: float = 0.0,
    invert: bool = False,
) -> str:
    """A scene with shapes (and optional shift, noise, inversion), saved as PNG."""
    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    w, h = size
    d.rectangle([w // 8 + shift, h // 6, w // 2 + shift, h // 2], fill=(200, 30, 30))
    d.ellipse([w // 2, h // 2, w - 10, h - 10], fill=(20, 90, 200))
    d.line([0, h - 1, w - 1, 0], fill="black", width=3)
    arr = np.asarray(im).astype(np.float64)
    if noise:
        arr += np.random.default_rng(0).normal(0, noise, arr.shape)
    if invert:
        arr = 255 - arr
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(path)
    return str(path)


def test_identical_images_score_one_and_different_ones_less(tmp_path):
    gold = picture(tmp_path / "gold.png")
    assert compare_images(picture(tmp_path / "same.png"), gold) == pytest.approx(1.0)
    noisy = compare_images(picture(tmp_path / "noisy.png", noise=25), gold)
    moved = compare_images(picture(tmp_path / "moved.png", shift=30), gold)
    assert 0.0 < noisy < 0.9 and 0.0 < moved < 0.95
    assert compare_images(picture(tmp_path / "inverted.png", invert=True), gold) < 0.05


def test_sizes_are_reconciled_by_resizing(tmp_path):
    gold = picture(tmp_path / "gold.png", size=(160, 120))
    assert compare_images(picture(tmp_path / "big.png", size=(320, 240)), gold) > 0.8


def test_reference_base_result_rescales(tmp_path):
    gold = picture(tmp_path / "gold.png")
    same = picture(tmp_path / "same.png")
    noisy = picture(tmp_path / "noisy.png", noise=25)
    raw = compare_images(noisy, gold)
    assert compare_images(same, gold, reference_base_result=0.5) == pytest.approx(1.0)
    assert compare_images(noisy, gold, reference_base_result=raw - 0.1) == pytest.approx(
        0.1 / (1 - (raw - 0.1))
    )
    assert compare_images(noisy, gold, reference_base_result=raw) == 0.0  # not better than base


def test_missing_or_broken_result_scores_zero(tmp_path):
    gold = picture(tmp_path / "gold.png")
    broken = tmp_path / "broken.png"
    broken.write_text("nope")
    assert compare_images(None, gold) == 0.0
    assert compare_images(str(broken), gold) == 0.0
    with pytest.raises(NotImplementedError):
        compare_images(gold, gold, use_color=True)


def test_ssim_properties():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (40, 50)).astype(np.uint8)
    assert ssim(a, a) == pytest.approx(1.0)
    assert ssim(a, np.full_like(a, 128)) < 0.1
    assert ssim(a[:5, :5], a[:5, :5]) == pytest.approx(1.0)  # smaller than the window
    with pytest.raises(ValueError):
        ssim(a, a[:10])
