"""Wait for the screen to settle after an action instead of sleeping a fixed time.

Two ways, chosen per step by the env:

* **The guest's signal** (``SettleConfig.signal``, the default where the desktop runs our
  guest): the guest watches the X server's damage reports and the desktop's processes and
  answers with the screenshot once both have been idle for a moment
  (:mod:`osworld_gym.guest.settle_signal`, :meth:`GuestClient.settled_screenshot_array
  <osworld_gym.client.GuestClient.settled_screenshot_array>`). Typically 60-100 ms after an
  action, longer while an app keeps drawing or computing.
* **Polling** (:func:`wait_until_settled`; VNC desktops, OSWorld's server, the first frame after
  a reset): screenshots until the screen has been still for ``quiet_s`` (frames compared on a
  coarse grid, so a blinking caret or clock does not count as motion), or until ``max_s``.
  Apps take a moment to map their first window, so while the screen still shows exactly the
  frame from before the action, stillness only counts after ``first_change_s``. The last frame
  polled is the observation, so settling costs no extra capture.

>>> import numpy as np
>>> a = np.zeros((100, 100, 3), np.uint8); b = a.copy(); b[50:60, 50:60] = 255
>>> changed_fraction(a, a), round(changed_fraction(a, b), 3)
(0.0, 0.01)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: ``OSWORLD_GYM_SETTLE=poll`` makes polling the default everywhere (to compare the two, e.g.
#: in the training demo's env seconds); ``signal`` (the default) uses the guest's signal.
SETTLE_ENV = "OSWORLD_GYM_SETTLE"


def _signal_default() -> bool:
    value = os.environ.get(SETTLE_ENV, "signal")
    if value not in ("signal", "poll"):
        raise ValueError(f"${SETTLE_ENV} must be 'signal' or 'poll', not {value!r}")
    return value == "signal"


@dataclass(frozen=True)
class SettleConfig:
    """How to decide the screen has settled.

    Attributes:
        min_s: always wait at least this long after an action (input events to be processed).
        quiet_s: the screen must stay unchanged for this long.
        first_change_s: while nothing at all has changed since the action, keep waiting this
            long for a first change (a window being mapped) before stillness counts.
        max_s: give up waiting after this long; the latest frame is returned.
        poll_s: pause between captures.
        threshold: fraction of sampled pixels that may differ between frames and still count
            as "unchanged" (a text caret is ~1e-5 of a 1080p screen).
        stride: sample every ``stride``-th pixel in each direction when comparing.
        signal: ask the guest to say when its desktop has gone idle (XDamage and process
            activity) where it can; the other fields then only apply to the fallback, except
            ``max_s``, which caps both. Default: true unless ``$OSWORLD_GYM_SETTLE`` is ``poll``.
    """

    min_s: float = 0.05
    quiet_s: float = 0.3
    first_change_s: float = 1.0
    max_s: float = 3.0
    poll_s: float = 0.05
    threshold: float = 2e-4
    stride: int = 4
    signal: bool = field(default_factory=_signal_default)


def changed_fraction(a: np.ndarray, b: np.ndarray, stride: int = 1) -> float:
    """Fraction of (sub-sampled) pixels that differ between two frames of the same shape."""
    if a.shape != b.shape:
        return 1.0
    sa, sb = a[::stride, ::stride], b[::stride, ::stride]
    diff = np.any(sa != sb, axis=-1)
    return float(diff.mean())


def wait_until_settled(
    capture: Callable[[], np.ndarray],
    cfg: SettleConfig = SettleConfig(),
    previous: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Poll ``capture`` until the screen is still; return the last frame and timing facts.

    ``previous`` (the frame before the action) is only used to report whether anything changed.
    """
    t0 = time.monotonic()
    time.sleep(cfg.min_s)
    frame = capture()
    n = 1
    changed = previous is None or changed_fraction(previous, frame, cfg.stride) > cfg.threshold
    still_since = time.monotonic()
    while True:
        now = time.monotonic()
        waited_for_change = changed or now - t0 >= cfg.first_change_s
        if (waited_for_change and now - still_since >= cfg.quiet_s) or now - t0 >= cfg.max_s:
            break
        time.sleep(cfg.poll_s)
        nxt = capture()
        n += 1
        if changed_fraction(frame, nxt, cfg.stride) > cfg.threshold:
            still_since = time.monotonic()
            changed = True
        frame = nxt
    elapsed = time.monotonic() - t0
    facts = {
        "settle_ms": 1000 * elapsed,
        "settle_frames": float(n),
        "settle_capped": float(elapsed >= cfg.max_s),
    }
    if previous is not None:
        facts["screen_changed"] = float(
            changed_fraction(previous, frame, cfg.stride) > cfg.threshold
        )
    return frame, facts


@dataclass(frozen=True)
class LaterDifference:
    """How a returned observation differs from the screen a while later (the stale-frame check).

    ``kind`` is ``"same"``; ``"caret"`` (all differing pixels in one caret-sized box: a text
    caret blinked, or a block cursor of one character cell, solid in one frame); ``"masked"``
    (differences only in the ignored top rows, e.g. the top bar's
    clock); or ``"changed"``: the observation was returned before the screen got where it went.
    """

    kind: str
    #: Bounding box ``(x0, y0, x1, y1)`` of the differing pixels outside the mask, if any.
    box: tuple[int, int, int, int] | None = None
    pixels: int = 0

    @property
    def explained(self) -> bool:
        return self.kind != "changed"


def compare_later(
    observed: np.ndarray,
    later: np.ndarray,
    *,
    ignore_top: int = 0,
    caret: tuple[int, int] = (4, 48),
    cell: tuple[int, int] = (16, 48),
) -> LaterDifference:
    """Classify the difference between an observation and the screen later on.

    ``ignore_top`` rows are not compared (a top bar with a clock); a difference that fits in a
    ``caret`` = (width, height) box is a blinking text caret, and one that changes every pixel
    of a box no larger than a character ``cell``, solid in one frame, a terminal's blinking
    block cursor (a glyph typed onto the background changes only some of its pixels).

    >>> import numpy as np
    >>> a = np.zeros((100, 100, 3), np.uint8); b = a.copy(); b[40:56, 30:32] = 255
    >>> compare_later(a, b).kind, compare_later(a, a).kind
    ('caret', 'same')
    >>> b[5, 90] = 1; compare_later(a, b).kind, compare_later(a, b, ignore_top=10).kind
    ('changed', 'caret')
    >>> c = a.copy(); c[20:38, 60:69] = 200; compare_later(a, c).kind   # a block cursor
    'caret'
    >>> c[25, 62] = 0; compare_later(a, c).kind   # a pixel of the cell unchanged: a glyph
    'changed'
    """
    if observed.shape != later.shape:
        return LaterDifference("changed", None, int(np.prod(later.shape[:2])))
    diff = np.any(observed != later, axis=-1)
    masked = diff[:ignore_top].any()
    diff[:ignore_top] = False
    ys, xs = np.nonzero(diff)
    if len(ys) == 0:
        return LaterDifference("masked" if masked else "same")
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    w, h = box[2] - box[0], box[3] - box[1]
    x0, y0, x1, y1 = box

    def solid(frame: np.ndarray) -> bool:
        region = frame[y0:y1, x0:x1].reshape(-1, frame.shape[-1])
        return bool((region == region[0]).all())

    bar = w <= caret[0] and h <= caret[1]
    block = (
        w <= cell[0]
        and h <= cell[1]
        and len(ys) == w * h  # the whole cell changed
        and (solid(observed) or solid(later))
    )
    kind = "caret" if bar or block else "changed"
    return LaterDifference(kind, box, int(len(ys)))
