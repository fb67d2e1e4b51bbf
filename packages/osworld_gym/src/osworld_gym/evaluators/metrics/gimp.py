"""Image-editing metrics (OSWorld's GIMP checks): the agent's image against the original.

``result`` (OSWorld's ``src``) is the agent's exported image; ``expected`` (``tgt``) the
task's original or gold image. "Same structure" is OSWorld's ``structure_check_by_ssim``:
both images as RGB, same size (else not the same), at least 7 pixels a side (else not the
same), mean SSIM over the three channels (7x7 window, :func:`.images.ssim`) at least a
threshold (0.9 unless said otherwise). A missing or unreadable result scores 0; an
unreadable original raises.

>>> import tempfile, pathlib
>>> from PIL import Image
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> im = Image.linear_gradient("L").convert("RGB"); im.save(d / "a.png")
>>> im.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(d / "m.png")
>>> a, m = str(d / "a.png"), str(d / "m.png")
>>> check_image_mirror(a, m), check_structure_sim(a, a)
(1.0, 1.0)
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from osworld_gym.evaluators.metrics.images import ssim

logger = logging.getLogger(__name__)


def _open(path: str | None, *, gold: bool = False) -> Any:
    from PIL import Image

    if not path:
        return None
    if gold:
        im = Image.open(path)
        im.load()
        return im
    try:
        im = Image.open(path)
        im.load()
        return im
    except (OSError, ValueError) as exc:
        logger.info("cannot read result image %s: %s", path, exc)
        return None


def same_structure(a: Any, b: Any, threshold: float = 0.9) -> bool:
    """OSWorld's ``structure_check_by_ssim`` (see the module docstring)."""
    if min(*a.size, *b.size) < 7 or a.size != b.size:
        return False
    x, y = np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB"))
    score = float(np.mean([ssim(x[..., c], y[..., c]) for c in range(3)]))
    return score >= threshold


def _same_by_mse(a: Any, b: Any, threshold: float) -> bool:
    """OSWorld's ``structure_check_by_mse``: ``a`` resized (Lanczos) to ``b``'s size, both RGB,
    mean squared difference of values scaled to [0, 1] below ``threshold``."""
    from PIL import Image

    if a.size != b.size:
        a = a.resize(b.size, Image.Resampling.LANCZOS)
    x = np.asarray(a.convert("RGB"), dtype=np.float32) / 255
    y = np.asarray(b.convert("RGB"), dtype=np.float32) / 255
    return float(np.mean((x - y) ** 2)) < threshold


def _brightness(im: Any) -> float:
    from PIL import ImageStat

    return float(ImageStat.Stat(im.convert("L")).mean[0])


def _normalised(im: Any, target: float = 128) -> Any:
    """Every band scaled so the mean grey level becomes ``target`` (clipped to 0..255)."""
    factor = target / _brightness(im)
    return im.point(lambda v: min(255, max(0, int(v * factor))))


def check_structure_sim(result: str | None, expected: str | None) -> float:
    """1 if the two images have the same size and structure (SSIM >= 0.9)."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    return float(same_structure(a, b))


def check_file_exists_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 if the exported file exists and has the original's structure (SSIM >= 0.9)."""
    if not result or not os.path.isfile(result):
        return 0.0
    return check_structure_sim(result, expected)


def check_brightness_decrease_and_structure_sim(
    result: str | None, expected: str | None, threshold: float = 0.03
) -> float:
    """1 if the result is darker than the original (mean grey level) and, both brought to a
    mean grey of 128, their mean squared difference is below ``threshold``. A fully black
    image cannot be normalised: it scores 0 (OSWorld divides by zero there)."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    if _brightness(a) == 0:
        return 0.0
    if _brightness(b) == 0:
        raise ValueError(f"check_brightness_decrease_and_structure_sim: {expected} is black")
    darker = _brightness(b) > _brightness(a)
    return float(darker and _same_by_mse(_normalised(a), _normalised(b), threshold))


def check_contrast_increase_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 if the result's contrast (standard deviation of all pixel values, in the image's own
    mode) is higher than the original's and the structure holds (SSIM >= 0.65)."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    higher = np.std(np.asarray(b, dtype=np.float32)) < np.std(np.asarray(a, dtype=np.float32))
    return float(bool(higher) and same_structure(a, b, 0.65))


def check_saturation_increase_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 if the result's mean HSV saturation is higher than the original's and its hue and
    value channels each keep the original's structure (SSIM >= 0.9)."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    ha, sa, va = a.convert("HSV").split()
    hb, sb, vb = b.convert("HSV").split()
    more = float(np.mean(np.asarray(sb))) < float(np.mean(np.asarray(sa)))
    return float(more and same_structure(ha, hb) and same_structure(va, vb))


def check_image_mirror(result: str | None, expected: str | None) -> float:
    """1 if the result flipped left-right has the structure of ``expected`` (SSIM >= 0.99).

    As in OSWorld, ``result`` is the *source* that is flipped and compared with the other
    image; a task passes the two the way round it needs.
    """
    from PIL import Image

    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    return float(same_structure(a.transpose(Image.Transpose.FLIP_LEFT_RIGHT), b, 0.99))


def check_image_file_size(result: str | None, rule: dict[str, Any]) -> float:
    """1 if the file is smaller than ``rule["max_size"]`` bytes; a missing file scores 0."""
    if not result or not os.path.isfile(result):
        return 0.0
    return float(os.path.getsize(result) < rule["max_size"])


def _alpha_box(im: Any) -> tuple[int, int, int, int] | None:
    rgba = im if im.mode == "RGBA" else im.convert("RGBA")
    return rgba.split()[-1].getbbox()


def check_image_size(result: str | None, rule: dict[str, Any]) -> float:
    """1 if the image's width/height equal ``rule["width"]``/``rule["height"]`` (each only if
    given). The size measured is the bounding box of non-transparent pixels when
    ``ignore_transparent`` is set and the image has alpha, *or* whenever the image declares a
    transparent colour (OSWorld's operator precedence, kept); otherwise the canvas size."""
    im = _open(result)
    if im is None:
        return 0.0
    if (rule.get("ignore_transparent", False) and im.mode in ("RGBA", "LA")) or (
        "transparency" in im.info
    ):
        box = _alpha_box(im)
        width, height = (0, 0) if box is None else (box[2] - box[0], box[3] - box[1])
    else:
        width, height = im.size
    return float(
        (rule.get("height") is None or height == rule["height"])
        and (rule.get("width") is None or width == rule["width"])
    )


def check_structure_sim_resized(result: str | None, expected: str | None) -> float:
    """1 if the result, cropped to its non-transparent pixels when it has transparency and
    resized (Pillow's default filter) to the original's size, keeps its structure (SSIM >=
    0.9). A fully transparent result scores 0."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    if a.mode in ("RGBA", "LA") or "transparency" in a.info:
        box = _alpha_box(a)
        if box is None:
            return 0.0
        a = a.convert("RGBA").crop(box).convert("RGB")
    return float(same_structure(a.resize(b.size), b.convert("RGB")))


def check_palette_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 if the result is a palette (indexed-colour, mode ``P``) image with the original's
    structure (SSIM >= 0.9)."""
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    return float(a.mode == "P" and same_structure(a.convert("RGB"), b))


def check_green_background(result: str | None, expected: str | None) -> float:
    """1 if every pixel that is not black in the mask ``expected`` is green-dominant in the
    result (G above R and B).

    Quirk kept: OSWorld indexes both pixel arrays as ``[x, y]`` (column number as the row
    index), so it compares the pixels of rows ``< width`` and columns ``< height``: the whole
    image when it is square; for a mask wider than tall that walk leaves the array, which
    OSWorld cannot score: here a ``ValueError`` (the judge's mask), or 0 when only the
    result is too small.
    """
    a, b = _open(result), _open(expected, gold=True) if expected else None
    if a is None or b is None:
        return 0.0
    src, mask = np.asarray(a), np.asarray(b)
    w, h = b.size
    if w > mask.shape[0]:
        raise ValueError(f"check_green_background: mask {expected} is {b.size}, wider than tall")
    if src.ndim < 3 or w > src.shape[0] or h > src.shape[1]:
        return 0.0
    for x in range(w):
        for y in range(h):
            if tuple(mask[x, y][:3]) != (0, 0, 0):
                r, g, bl = (int(v) for v in src[x, y][:3])
                if not (g > r and g > bl):
                    return 0.0
    return 1.0


def check_triangle_position(result: str | None) -> float:
    """1 if the centroid of the *second-rarest* colour (OSWorld's pick for "the triangle")
    lies within 5 % of the image centre on both axes. An image with fewer than two colours,
    or without colour channels, scores 0."""
    im = _open(result)
    if im is None:
        return 0.0
    arr = np.asarray(im)
    if arr.ndim != 3:
        return 0.0
    colours, counts = np.unique(arr.reshape(-1, arr.shape[2]), axis=0, return_counts=True)
    if len(colours) < 2:
        return 0.0
    triangle = colours[np.argsort(counts, kind="stable")][1]
    centroid = np.argwhere(np.all(arr == triangle, axis=2)).mean(axis=0)
    shape = np.array(arr.shape[:2])
    return float(np.all(np.abs(centroid - shape / 2) < 0.05 * shape))


def check_textbox_on_leftside(result: str | None) -> float:
    """1 if the leftmost dark pixel (grey below 128) lies in the left 5 % of the image."""
    im = _open(result)
    if im is None:
        return 0.0
    grey = np.asarray(im.convert("L"))
    dark = np.argwhere(grey < 128)
    left = int(dark[:, 1].min()) if len(dark) else im.size[0]
    return float(left < im.size[0] * 0.05)


def compare_image_list(result: str | list[str] | None, expected: str | list[str] | None) -> float:
    """1 if every result image equals its gold image pixel for pixel, after resizing the result
    (Lanczos) to the gold's size and converting it to the gold's mode (OSWorld's way); pairs
    beyond the shorter list are not compared. A missing image on either side scores 0."""
    from PIL import Image, ImageChops

    mine = result if isinstance(result, list) else [result]
    gold = expected if isinstance(expected, list) else [expected]
    for r, e in zip(mine, gold, strict=False):
        a, b = _open(r), _open(e, gold=True) if e else None
        if a is None or b is None:
            return 0.0
        if a.size != b.size:
            a = a.resize(b.size, Image.Resampling.LANCZOS)
        if a.mode != b.mode:
            a = a.convert(b.mode)
        if ImageChops.difference(a, b).getbbox():
            return 0.0
    return 1.0
