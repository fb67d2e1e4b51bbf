"""Screen capture: XShm grab (``mss``), the real cursor drawn in (XFixes), one encode.

Usage (needs a running X display)::

    screen = Screen(":0")
    frame = screen.capture(cursor=True)       # RGB PIL image + capture time
    png = encode_png(frame.image)             # or encode_raw(frame.image): H*W*3 bytes
"""

from __future__ import annotations

import array
import ctypes
import io
import logging
import threading
import time
from dataclasses import dataclass

import mss
from PIL import Image, ImageDraw
from Xlib import display as xdisplay

from osworld_gym.guest.xgrab import make_impervious, make_mss_impervious

log = logging.getLogger(__name__)

#: zlib level for PNGs: 1 is ~5x faster than the default and only slightly larger.
PNG_LEVEL = 1

# A classic arrow pointer (hotspot at 0,0), used when XFixes cannot give the cursor image.
_ARROW = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]


@dataclass
class Frame:
    """One captured screen: an RGB image and how long capturing took."""

    image: Image.Image
    capture_ms: float


class Screen:
    """Captures one X display. Thread-safe."""

    def __init__(self, display_name: str):
        self.display_name = display_name
        self._x = make_impervious(xdisplay.Display(display_name))
        self._xlock = threading.Lock()
        screen = self._x.screen()
        self.width, self.height = screen.width_in_pixels, screen.height_in_pixels
        self._root = screen.root
        self._xfixes = self._x.has_extension("XFIXES")
        if self._xfixes:
            self._x.xfixes_query_version()
        self._grabber = mss.MSS(display=display_name)
        make_mss_impervious(self._grabber)  # a player's XGrabServer cannot stall screenshots
        self._grab_lock = threading.Lock()

    def capture(self, cursor: bool = True) -> Frame:
        """Grab the whole screen as RGB; with ``cursor`` the pointer is drawn on top."""
        t0 = time.perf_counter()
        with self._grab_lock:
            shot = self._grabber.grab(
                {"left": 0, "top": 0, "width": self.width, "height": self.height}
            )
        image = Image.frombuffer("RGB", shot.size, shot.raw, "raw", "BGRX", 0, 1)
        if cursor:
            image = image.copy() if image.readonly else image
            self._draw_cursor(image)
        return Frame(image, (time.perf_counter() - t0) * 1000)

    def cursor_position(self) -> tuple[int, int]:
        with self._xlock:
            reply = self._root.query_pointer()
        return reply.root_x, reply.root_y

    def close(self) -> None:
        self._grabber.close()
        with self._xlock:
            self._x.close()

    # ---- cursor -----------------------------------------------------------------------------
    def _draw_cursor(self, image: Image.Image) -> None:
        sprite = self._cursor_sprite() if self._xfixes else None
        if sprite is None:
            x, y = self.cursor_position()
            draw = ImageDraw.Draw(image)
            draw.polygon([(x + dx, y + dy) for dx, dy in _ARROW], fill="black", outline="white")
            return
        rgba, left, top = sprite
        image.paste(rgba, (left, top), rgba)

    def _cursor_sprite(self) -> tuple[Image.Image, int, int] | None:
        """The current cursor as straight-alpha RGBA and its top-left screen position."""
        try:
            with self._xlock:
                reply = self._x.xfixes_get_cursor_image(self._root)
        except Exception:
            log.debug("XFixes cursor image unavailable", exc_info=True)
            return None
        w, h = reply.width, reply.height
        if w == 0 or h == 0 or len(reply.cursor_image) < w * h:
            return None
        # 32-bit premultiplied ARGB in native (little-endian) order = bytes B, G, R, A.
        data = array.array("I", (v & 0xFFFFFFFF for v in reply.cursor_image[: w * h])).tobytes()
        rgba = Image.frombytes("RGBa", (w, h), data, "raw", "BGRa").convert("RGBA")
        return rgba, reply.x - reply.xhot, reply.y - reply.yhot


_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_frame_buffers(mmap_threshold: int = 32 << 20, trim_threshold: int = 256 << 20) -> bool:
    """Let glibc reuse freed frame-sized buffers instead of returning them to the kernel.

    Every capture allocates a few screen-sized buffers (the grab, the RGB image, the encoded
    body). By default glibc serves blocks that big with a fresh ``mmap`` and unmaps them on
    ``free``, so each frame pays page faults on ~20 MB: measured on a 1920x1080 desktop, capture +
    raw encode drop from ~11 ms to ~3.4 ms with this. Process-wide, so only the guest (its own
    process) calls it; children do not inherit it. Returns False where not glibc.
    """
    try:
        libc = ctypes.CDLL(None)
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
            and libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold)
        )
    except (OSError, AttributeError):
        return False


def encode_png(image: Image.Image, level: int = PNG_LEVEL) -> bytes:
    """PNG bytes of ``image`` (fast compression)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=level)
    return buf.getvalue()


def encode_raw(image: Image.Image) -> bytes:
    """Packed RGB bytes, row-major, ``height * width * 3`` long."""
    return image.tobytes()
