"""Metrics on images: SSIM written with numpy (no scikit-image).

>>> import numpy as np
>>> a = np.tile(np.arange(32, dtype=np.uint8) * 8, (32, 1))
>>> round(ssim(a, a), 6), ssim(a, 255 - a) < 0
(1.0, True)
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from osworld_gym.evaluators.metrics.options import check_options, honours

logger = logging.getLogger(__name__)

_K1, _K2 = 0.01, 0.03


def _window_means(x: np.ndarray, w: int) -> np.ndarray:
    """Mean over every fully-inside ``w`` x ``w`` window (integral image)."""
    c = np.pad(x, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    return (c[w:, w:] - c[:-w, w:] - c[w:, :-w] + c[:-w, :-w]) / (w * w)


def ssim(a: np.ndarray, b: np.ndarray, *, win_size: int = 7, data_range: float = 255.0) -> float:
    """Mean structural similarity of two equally-shaped grayscale arrays, in ``[-1, 1]``.

    Same definition as ``skimage.metrics.structural_similarity`` with its defaults (7x7 uniform
    window, sample covariance, K1=0.01, K2=0.03, mean over windows fully inside the image).
    Images smaller than the window use the largest odd window that fits.
    """
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"ssim needs two 2-D arrays of one shape, got {a.shape} and {b.shape}")
    w = min(win_size, *a.shape)
    w -= (w + 1) % 2
    x, y = a.astype(np.float64), b.astype(np.float64)
    n = w * w
    cov_norm = n / (n - 1) if n > 1 else 1.0
    ux, uy = _window_means(x, w), _window_means(y, w)
    vx = cov_norm * (_window_means(x * x, w) - ux * ux)
    vy = cov_norm * (_window_means(y * y, w) - uy * uy)
    vxy = cov_norm * (_window_means(x * y, w) - ux * uy)
    c1, c2 = (_K1 * data_range) ** 2, (_K2 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    return float(s.mean())


def _gray(path: str, size: tuple[int, int] | None = None) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        g = im.convert("L")
        if size is not None and g.size != size:
            g = g.resize(size, Image.Resampling.LANCZOS)
        return np.asarray(g)


def _size(path: str) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size


_MIN_SIDE = 7  # scikit-image's default SSIM window; OSWorld's ssim call raises below it


@honours("reference_base_result")
def compare_images(result: str | None, expected: str | None, **options: Any) -> float:
    """SSIM of the two images in grayscale, as OSWorld's ``compare_images`` computes it.

    Both images are resized (Lanczos) to ``min(result.size, expected.size)``, a *tuple*
    minimum: the size with the smaller width wins whole, height and all (a quirk kept for
    parity: 100x50 vs 90x200 compares at 90x200).

    Option ``reference_base_result`` (OSWorld's): the SSIM an unchanged image gets; the score is
    then ``(ssim - base) / (1 - base)`` when ``ssim >= base + 0.01``, else 0.

    Where OSWorld's score is not a reward, we decide:

    * a negative SSIM (an inverted image) is returned raw by OSWorld; rewards here are in
      ``[0, 1]``, so it scores 0;
    * a compared size under 7 pixels makes OSWorld's SSIM raise: if the *gold* image is that
      small the task cannot be judged (``ValueError``, an evaluator error); if only the agent's
      image is, its output is wrong: 0;
    * a missing or unreadable result scores 0 (agent); an unreadable gold image raises.
    """
    check_options("compare_images", options, compare_images.honoured_options)
    if not result or not expected:
        return 0.0
    esize = _size(expected)
    if min(esize) < _MIN_SIDE:
        raise ValueError(f"compare_images: gold image {expected} is {esize}, too small for SSIM")
    try:
        rsize = _size(result)
    except OSError as exc:
        logger.info("compare_images: cannot read result %s: %s", result, exc)
        return 0.0
    size = min(rsize, esize)
    if min(size) < _MIN_SIDE:
        logger.info("compare_images: result %s is %s, too small for SSIM: 0", result, rsize)
        return 0.0
    score = ssim(_gray(result, size), _gray(expected, size))
    base = options.get("reference_base_result")
    if base is not None:
        base = float(base)
        score = (score - base) / (1 - base) if score >= base + 0.01 and base < 1 else 0.0
    return min(1.0, max(0.0, score))
