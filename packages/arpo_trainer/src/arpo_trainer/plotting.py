"""The training curve: success rate of the policy's own rollouts per step, as a PNG and as text."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SUCCESS_KEY = "episode/success_rate"


def success_curve(
    log_history: list[dict[str, Any]], key: str = SUCCESS_KEY
) -> list[tuple[int, float]]:
    """``(step, success rate)`` pairs from a trainer's ``state.log_history``."""
    return [(int(h["step"]), float(h[key])) for h in log_history if key in h and h[key] is not None]


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values.

    >>> moving_average([0, 1, 1, 0], 2)
    [0.0, 0.5, 1.0, 0.5]
    """
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def plot_success(
    log_history: list[dict[str, Any]],
    path: str | Path,
    *,
    title: str = "ARPO training",
    note: str | None = None,
    window: int = 5,
) -> Path | None:
    """Plot success rate (raw and moving average) and the share of replayed rollouts; ``None`` if no
    data."""
    curve = success_curve(log_history)
    if not curve:
        log.warning("no %s in the log history; nothing to plot", SUCCESS_KEY)
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s for s, _ in curve]
    rates = [r for _, r in curve]
    replay = [
        (int(h["step"]), float(h["replay/injected_frac"]))
        for h in log_history
        if "replay/injected_frac" in h
    ]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, rates, "o", alpha=0.35, label="success rate (policy rollouts of the step)")
    ax.plot(
        steps, moving_average(rates, window), "-", lw=2, label=f"moving average ({window} steps)"
    )
    if replay:
        ax.plot(
            [s for s, _ in replay],
            [v for _, v in replay],
            ":",
            color="gray",
            label="replayed share of the batch",
        )
    ax.axhline(0.5, color="red", lw=0.8, ls="--")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, ha="left", va="bottom")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def curve_text(log_history: list[dict[str, Any]], window: int = 5, target: float = 0.5) -> str:
    """A compact printable curve (step, minutes since the first rollout, success, moving average),
    and when the moving average first reached ``target``."""
    curve = success_curve(log_history)
    avg = moving_average([r for _, r in curve], window)
    minutes = {int(h["step"]): float(h["time/minutes"]) for h in log_history if "time/minutes" in h}
    lines = ["step  minutes  success  moving_avg"]
    lines += [
        f"{s:4d}  {minutes.get(s, float('nan')):7.1f}  {r:7.2f}  {a:10.2f}"
        for (s, r), a in zip(curve, avg, strict=True)
    ]
    reached = next(
        ((s, minutes.get(s)) for (s, _), a in zip(curve, avg, strict=True) if a >= target), None
    )
    if reached is None:
        lines.append(f"the {window}-step moving average never reached {target:.0%}")
    else:
        when = f" after {reached[1]:.1f} min" if reached[1] is not None else ""
        lines.append(
            f"the {window}-step moving average first reached {target:.0%} at step "
            f"{reached[0]}{when}"
        )
    return "\n".join(lines)
