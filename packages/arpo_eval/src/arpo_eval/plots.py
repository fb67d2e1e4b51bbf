"""Plots (matplotlib, Agg): per-domain success bars, and training curves from a trainer's log.

Training curves read ``trainer_state.json`` (written by the HF/TRL trainer into its output dir
and into every ``checkpoint-*``): ``log_history`` holds one dict per logging step, and every
numeric key that mentions ``reward`` or ``success`` (``reward``, ``reward_std``,
``rewards/evaluator_score/mean``, ``episode/success_rate``, ``eval/...``) is plotted against
``step``.

>>> history = [{"step": 1, "reward": 0.1, "episode/success_rate": 0.2, "loss": 3.0},
...            {"step": 2, "reward": 0.4, "episode/success_rate": 0.5}]
>>> sorted(curves(history))
['episode/success_rate', 'reward']
>>> curves(history)["reward"]
[(1, 0.1), (2, 0.4)]
"""

from __future__ import annotations

import io
import json
import logging
import math
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CURVE_WORDS = ("reward", "success")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()


def domain_bars(summary: dict[str, Any], *, title: str | None = None) -> bytes:
    """PNG bytes: per-domain mean@k (and pass@k when k > 1) bars, with task counts."""
    plt = _plt()
    k = summary["trials"]
    names = list(summary["domains"])
    mean = [summary["domains"][d]["mean_at_k"] or 0.0 for d in names]
    best = [summary["domains"][d]["pass_at_k"] or 0.0 for d in names]
    names.append("overall")
    mean.append(summary["overall"]["mean_at_k"] or 0.0)
    best.append(summary["overall"]["pass_at_k"] or 0.0)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(names) + 2), 4))
    xs = range(len(names))
    width = 0.4 if k > 1 else 0.7
    ax.bar(
        [x - (width / 2 if k > 1 else 0) for x in xs],
        [100 * m for m in mean],
        width,
        label=f"mean@{k}",
    )
    if k > 1:
        ax.bar([x + width / 2 for x in xs], [100 * b for b in best], width, label=f"pass@{k}")
    for x, m in zip(xs, mean, strict=True):
        ax.text(
            x - (width / 2 if k > 1 else 0), 100 * m + 1, f"{100 * m:.0f}", ha="center", fontsize=7
        )
    ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("success (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title or "success per domain")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def find_trainer_state(log_dir: str | Path) -> Path:
    """``trainer_state.json`` in ``log_dir``, else in its latest ``checkpoint-*``.

    Raises:
        FileNotFoundError: none found (the message says where it looked).
    """
    log_dir = Path(log_dir)
    if log_dir.is_file():
        return log_dir
    direct = log_dir / "trainer_state.json"
    if direct.is_file():
        return direct
    ckpts = sorted(
        log_dir.glob("checkpoint-*/trainer_state.json"),
        key=lambda p: (
            int(p.parent.name.split("-")[-1]) if p.parent.name.split("-")[-1].isdigit() else -1
        ),
    )
    if ckpts:
        return ckpts[-1]
    raise FileNotFoundError(
        f"no trainer_state.json in {log_dir} or its checkpoint-* folders; "
        "pass the trainer's output_dir"
    )


def curves(
    log_history: list[dict[str, Any]], words: tuple[str, ...] = CURVE_WORDS
) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(step, value), ...]}`` for every numeric log key containing one of ``words``."""
    out: dict[str, list[tuple[int, float]]] = {}
    for entry in log_history:
        step = entry.get("step")
        if step is None:
            continue
        for key, value in entry.items():
            if not any(w in key.lower() for w in words):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not math.isfinite(float(value)):
                continue
            out.setdefault(key, []).append((int(step), float(value)))
    return out


def training_curves(log_dir: str | Path, *, title: str = "training") -> bytes:
    """PNG bytes: reward and success curves of a training run (module docstring).

    Raises:
        FileNotFoundError: no ``trainer_state.json``.
        ValueError: its ``log_history`` has no reward or success values.
    """
    state = json.loads(find_trainer_state(log_dir).read_text())
    data = curves(state.get("log_history", []))
    if not data:
        raise ValueError(f"the log_history of {log_dir} has no reward or success values to plot")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, points in sorted(data.items()):
        steps, values = zip(*points, strict=True)
        style = "-" if ("success" in key or key == "reward") else ":"
        ax.plot(steps, values, style, marker="o" if len(points) < 30 else None, ms=3, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("value")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def save_png(data: bytes, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
