"""CIE colour difference (CIEDE2000) for metrics that judge "is this red enough", as OSWorld does
with scikit-image's ``rgb2lab`` and ``deltaE_ciede2000`` (written here with the standard
library: sRGB, D65 white, 2-degree observer, kL = kC = kH = 1).

>>> round(delta_e_2000(rgb_to_lab((255, 0, 0)), rgb_to_lab((255, 0, 0))), 6)
0.0
>>> round(delta_e_2000((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485)), 4)  # Sharma et al. pair 1
2.0425
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_D65 = (0.95047, 1.0, 1.08883)


def rgb_to_lab(rgb: Sequence[int]) -> tuple[float, float, float]:
    """CIELAB of an 8-bit sRGB colour (D65)."""

    def linear(c: float) -> float:
        c /= 255.0
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (linear(float(c)) for c in rgb[:3])
    xyz = (
        0.412453 * r + 0.357580 * g + 0.180423 * b,
        0.212671 * r + 0.715160 * g + 0.072169 * b,
        0.019334 * r + 0.119193 * g + 0.950227 * b,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = (f(v / w) for v, w in zip(xyz, _D65, strict=True))
    ly = 116 * fy - 16 if xyz[1] / _D65[1] > 0.008856 else 903.3 * xyz[1] / _D65[1]
    return (ly, 500 * (fx - fy), 200 * (fy - fz))


def delta_e_2000(lab1: Sequence[float], lab2: Sequence[float]) -> float:
    """CIEDE2000 difference of two CIELAB colours."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = a1 * (1 + g), a2 * (1 + g)
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl, dc = l2 - l1, c2p - c1p
    if c1p * c2p == 0:
        dh = 0.0
    else:
        dh = h2p - h1p
        dh = dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dH = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))  # noqa: N806 - CIE's name
    l_bar, c_barp = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    else:
        h_bar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_bar - 30))
        + 0.24 * math.cos(math.radians(2 * h_bar))
        + 0.32 * math.cos(math.radians(3 * h_bar + 6))
        - 0.20 * math.cos(math.radians(4 * h_bar - 63))
    )
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    rc = 2 * math.sqrt(c_barp**7 / (c_barp**7 + 25**7))
    sl = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    sc = 1 + 0.045 * c_barp
    sh = 1 + 0.015 * c_barp * t
    rt = -math.sin(math.radians(2 * d_theta)) * rc
    return math.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dH / sh) ** 2 + rt * (dc / sc) * (dH / sh))
