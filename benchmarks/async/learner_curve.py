"""The learner's curve, sync against async, from frozen plays of intermediate checkpoints.

``learning.py --save-every N`` keeps each run's checkpoint every N steps and ``final_policy.py``
plays one checkpoint step per invocation (weights frozen, replay off), into
``<plays>/step-<N>/final_policy.json``. This joins them: per checkpoint step, each mode's mean
frozen success over seeds with its 95 % t-interval, async minus sync with its 95 % Welch
interval, and beside them the success of the episodes each mode *trained on* in the N steps
before the checkpoint (from ``learning.py``'s ``learning.json``), which in async mode were
sampled up to one version behind.

    uv run --frozen python benchmarks/async/learner_curve.py \\
        --plays runs/learner-curve-8c --learning runs/async-learning-8c/learning.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (the doctest sweep), not run as a script
    sys.path.insert(0, str(HERE))

from final_policy import ablation, learning  # noqa: E402


def split_checkpoint(run: str) -> tuple[str, int]:
    """``async-s3-checkpoint-20`` (``final_policy.run_name`` of a checkpoint) -> the run and the
    step, ``("async-s3", 20)``.

    >>> split_checkpoint("async-s3-checkpoint-20")
    ('async-s3', 20)
    """
    m = re.fullmatch(r"(.+)-checkpoint-(\d+)", run)
    if not m:
        raise ValueError(f"{run!r} names no checkpoint")
    return m[1], int(m[2])


def curve_table(
    plays: dict[int, dict], trained: dict, sync: str, other: str, episodes_per_step: int
) -> str:
    """Markdown table; ``plays`` maps a checkpoint step to its ``final_policy.json``."""
    head = (
        f"| after step | episodes taken | {sync}, frozen | {other}, frozen | {other} minus {sync} "
        f"(95 % Welch) | trained-on episodes of the last window, {sync} / {other} |"
    )
    lines = [head, "|---:|---:|---:|---:|---:|---:|"]
    steps = sorted(plays)
    for i, step in enumerate(steps):
        rates = {g: [s / n for s, n in runs.values()] for g, runs in plays[step].items()}
        if sync not in rates or other not in rates:
            raise SystemExit(f"step {step}: groups {sorted(rates)}, need {sync} and {other}")
        cells = []
        for g in (sync, other):
            mean, lo, hi = ablation.mean_ci(rates[g])
            cells.append(f"{mean:.3f} [{lo:.3f}, {hi:.3f}]")
        d, lo, hi = learning.welch(rates[other], rates[sync], ablation.T95)
        lo_step = steps[i - 1] if i else 0
        window = []
        for mode in ("sync", "async"):
            vals = [
                ablation.window_mean(r["curve"], "own_success", lo_step, step)
                for name, r in trained.items()
                if name.startswith(f"{mode}-s")
            ]
            window.append(f"{ablation.mean_ci(vals)[0]:.2f}" if vals else "-")
        lines.append(
            f"| {step} | {step * episodes_per_step} | {cells[0]} | {cells[1]} | "
            f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {window[0]} / {window[1]} |"
        )
    # per run, the mean over its checkpoints (the area under its curve): one number a seed
    means = {}
    for g in (sync, other):
        per_run: dict[str, list[float]] = {}
        for step in steps:
            for run, (ok, n) in plays[step][g].items():
                per_run.setdefault(split_checkpoint(run)[0], []).append(ok / n)
        means[g] = [sum(v) / len(v) for v in per_run.values() if len(v) == len(steps)]
    d, lo, hi = learning.welch(means[other], means[sync], ablation.T95)
    lines.append(
        f"\nMean over the {len(steps)} checkpoints, {other} minus {sync}: {d:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] (95 % Welch; {len(means[other])} and {len(means[sync])} runs)"
    )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plays", type=Path, required=True, help="folder of step-N/final_policy.json")
    p.add_argument("--learning", type=Path, required=True, help="learning.py's learning.json")
    p.add_argument("--sync", default="sync", help="the reference group's label")
    p.add_argument("--other", default="async-staleness1", help="the group compared with it")
    p.add_argument("--episodes-per-step", type=int, default=16, help="episodes a learner step took")
    args = p.parse_args()
    plays = {}
    for f in sorted(args.plays.glob("step-*/final_policy.json")):
        data = json.loads(f.read_text())
        steps = {split_checkpoint(run)[1] for runs in data.values() for run in runs}
        if len(steps) != 1:
            raise SystemExit(f"{f}: checkpoints of several steps {sorted(steps)}")
        plays[steps.pop()] = data
    if not plays:
        raise SystemExit(f"{args.plays}: no step-*/final_policy.json")
    trained = json.loads(args.learning.read_text())
    print(curve_table(plays, trained, args.sync, args.other, args.episodes_per_step))


if __name__ == "__main__":
    main()
