"""The ``ubuntu`` profile's wallpaper: a diagonal aubergine-to-orange gradient in the colours of
Ubuntu 22.04's default background (its artwork is not packaged in Debian).

Painted as the root window's background pixmap straight through the X protocol, so no extra
program (feh, xsetroot) is needed and nothing keeps running: the server keeps the pixmap
referenced by the root window after this connection closes.
"""

from __future__ import annotations

import functools

import numpy as np
from Xlib import X
from Xlib import display as xdisplay

from osworld_gym.guest.xgrab import make_impervious

#: (position 0..1 along the diagonal, RGB)
STOPS = ((0.0, (0x2C, 0x00, 0x1E)), (0.55, (0x77, 0x21, 0x6F)), (1.0, (0xE9, 0x54, 0x20)))


def gradient(width: int, height: int) -> np.ndarray:
    """The wallpaper as a (height, width, 3) uint8 array.

    >>> gradient(4, 2).shape, gradient(4, 2)[0, 0].tolist()
    ((2, 4, 3), [44, 0, 30])
    """
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    t = x / max(1, width - 1) * 0.6 + y / max(1, height - 1) * 0.4
    pos = np.array([s[0] for s in STOPS], dtype=np.float32)
    out = np.empty((height, width, 3), dtype=np.uint8)
    for c in range(3):
        out[..., c] = np.interp(t, pos, [s[1][c] for s in STOPS]).astype(np.uint8)
    return out


@functools.lru_cache(maxsize=2)
def _bgrx(width: int, height: int) -> bytes:
    """The gradient as the X server's 32-bit ZPixmap rows, computed once per size (a reset
    paints the wallpaper again: the agent may have replaced it)."""
    rgb = gradient(width, height)
    bgrx = np.zeros((height, width, 4), dtype=np.uint8)
    bgrx[..., 0], bgrx[..., 1], bgrx[..., 2] = rgb[..., 2], rgb[..., 1], rgb[..., 0]
    return bgrx.tobytes()


def paint(display_name: str) -> None:
    """Set the gradient as the root window's background and repaint the root."""
    d = make_impervious(xdisplay.Display(display_name))
    try:
        screen = d.screen()
        root = screen.root
        w, h, depth = screen.width_in_pixels, screen.height_in_pixels, screen.root_depth
        if depth not in (24, 32):  # 16-bit screens get the plain dark colour
            root.change_attributes(background_pixel=0x2C001E)
        else:
            data = _bgrx(w, h)
            pixmap = root.create_pixmap(w, h, depth)
            gc = pixmap.create_gc()
            rows = max(1, 200_000 // (w * 4))  # stay under the core protocol's request size
            for y in range(0, h, rows):
                n = min(rows, h - y)
                chunk = data[y * w * 4 : (y + n) * w * 4]
                pixmap.put_image(gc, 0, y, w, n, X.ZPixmap, depth, 0, chunk)
            root.change_attributes(background_pixmap=pixmap)
            gc.free()
            pixmap.free()
        root.clear_area(0, 0, 0, 0)
        d.sync()
    finally:
        d.close()
