"""``arpo-eval compare RUN_A RUN_B``: what changed from A to B, task by task, with uncertainty.

Each task's score in a run is its mean@k (the mean of its scored trials). Only tasks scored in
**both** runs are paired; the others are listed apart (never counted as 0). Deltas are B - A.

The interval is a **paired bootstrap** over tasks: resample the paired tasks with replacement
(``samples`` times, ``numpy.random.default_rng(seed)``), take the mean delta of each resample,
and report the central ``confidence`` percentile interval; per domain, the tasks of that domain
are resampled. The seed makes the interval reproducible. ``p_le_0`` is the share of resamples
whose mean delta is <= 0 (a one-sided bootstrap p-value for "B is better").

Each run's ``infra_rate`` (infrastructure errors per episode run) is reported beside the
deltas: unscored episodes are left out of both means, so a policy that provokes them would
otherwise look better than it is.

>>> deltas = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
>>> lo, hi, _ = paired_bootstrap(deltas, seed=0, samples=2000)
>>> lo < 0.5 < hi
True
>>> paired_bootstrap(deltas, seed=0, samples=2000) == paired_bootstrap(deltas, seed=0, samples=2000)
True
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from arpo_eval.layout import read_run
from arpo_eval.tables import task_rows


def paired_bootstrap(
    deltas: list[float], *, seed: int = 0, samples: int = 10000, confidence: float = 0.95
) -> tuple[float, float, float]:
    """``(low, high, p_le_0)`` of the mean of ``deltas`` by the bootstrap (module docstring)."""
    if not deltas:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    d = np.asarray(deltas, dtype=np.float64)
    idx = rng.integers(0, len(d), size=(samples, len(d)))
    means = d[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi), float(np.mean(means <= 0.0))


def _scores(run: str | Path) -> tuple[str, dict[str, dict[str, Any]]]:
    manifest, records = read_run(Path(run))
    rows = task_rows(records, manifest.tasks or None, manifest.trials)
    return f"{manifest.model} ({manifest.protocol})", {r["task_id"]: r for r in rows}


def _infra_rate(rows: dict[str, dict[str, Any]]) -> float | None:
    infra = sum(r["infra_errors"] for r in rows.values())
    ran = infra + sum(r["scored_trials"] for r in rows.values())
    return infra / ran if ran else None


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    seed: int = 0,
    samples: int = 10000,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per-task and per-domain deltas (B - A) with paired bootstrap intervals.

    Returns:
        ``{"a", "b", "seed", "samples", "confidence", "overall": {...}, "domains": {d: {...}},
        "tasks": [{"task_id", "domain", "a", "b", "delta"}], "only_a", "only_b", "unpaired"}``;
        each group has ``tasks``, ``mean_a``, ``mean_b``, ``delta``, ``ci``, ``p_le_0``, ``wins``
        (B better), ``losses``, ``ties``.
    """
    name_a, a = _scores(run_a)
    name_b, b = _scores(run_b)
    paired = []
    unpaired = []
    for tid in sorted(set(a) & set(b)):
        ra, rb = a[tid], b[tid]
        if ra["mean"] is None or rb["mean"] is None:
            unpaired.append(tid)
            continue
        paired.append(
            {
                "task_id": tid,
                "domain": ra["domain"],
                "a": ra["mean"],
                "b": rb["mean"],
                "delta": rb["mean"] - ra["mean"],
            }
        )

    def group(rows: list[dict[str, Any]], salt: int) -> dict[str, Any]:
        deltas = [r["delta"] for r in rows]
        lo, hi, p = paired_bootstrap(
            deltas, seed=seed + salt, samples=samples, confidence=confidence
        )
        n = len(rows)
        return {
            "tasks": n,
            "mean_a": sum(r["a"] for r in rows) / n if n else None,
            "mean_b": sum(r["b"] for r in rows) / n if n else None,
            "delta": sum(deltas) / n if n else None,
            "ci": [lo, hi] if n else None,
            "p_le_0": p if n else None,
            "wins": sum(d > 0 for d in deltas),
            "losses": sum(d < 0 for d in deltas),
            "ties": sum(d == 0 for d in deltas),
        }

    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in paired:
        by_domain[r["domain"]].append(r)
    return {
        "a": {"dir": str(run_a), "name": name_a, "infra_rate": _infra_rate(a)},
        "b": {"dir": str(run_b), "name": name_b, "infra_rate": _infra_rate(b)},
        "seed": seed,
        "samples": samples,
        "confidence": confidence,
        "overall": group(paired, 0),
        "domains": {d: group(rows, i + 1) for i, (d, rows) in enumerate(sorted(by_domain.items()))},
        "tasks": paired,
        "only_a": sorted(set(a) - set(b)),
        "only_b": sorted(set(b) - set(a)),
        "unpaired": unpaired,
    }


def format_comparison(result: dict[str, Any]) -> str:
    """Plain-text tables: per domain and overall, then the tasks that changed."""
    conf = f"{100 * result['confidence']:.0f}% CI"
    head = (
        f"{'domain':<22} {'tasks':>5} {'A':>7} {'B':>7} {'B-A':>7}  {conf:<17} "
        f"{'wins':>4} {'losses':>6}"
    )

    def rate(side: str) -> str:
        r = result[side].get("infra_rate")
        return "-" if r is None else f"{100 * r:.1f}%"

    lines = [
        f"A = {result['a']['name']}  ({result['a']['dir']}), infra rate {rate('a')}",
        f"B = {result['b']['name']}  ({result['b']['dir']}), infra rate {rate('b')}",
        f"paired bootstrap over tasks: {result['samples']} resamples, seed {result['seed']}",
        "",
        head,
        "-" * len(head),
    ]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    def line(name: str, g: dict[str, Any]) -> str:
        ci = "-" if not g["ci"] else f"[{100 * g['ci'][0]:+.1f}, {100 * g['ci'][1]:+.1f}]"
        delta = "-" if g["delta"] is None else f"{100 * g['delta']:+.1f}"
        return (
            f"{name:<22} {g['tasks']:>5} {pct(g['mean_a']):>7} {pct(g['mean_b']):>7} "
            f"{delta:>7}  {ci:<17} {g['wins']:>4} {g['losses']:>6}"
        )

    for d, g in result["domains"].items():
        lines.append(line(d, g))
    lines += ["-" * len(head), line("overall", result["overall"])]
    changed = [t for t in result["tasks"] if t["delta"] != 0]
    if changed:
        lines += ["", "tasks that changed (B - A):"]
        for t in sorted(changed, key=lambda t: (-t["delta"], t["task_id"])):
            lines.append(
                f"  {t['delta']:+.2f}  {t['domain']}/{t['task_id']}  ({t['a']:g} -> {t['b']:g})"
            )
    for key, label in (
        ("only_a", "only in A"),
        ("only_b", "only in B"),
        ("unpaired", "not scored in both (infra errors / not run)"),
    ):
        if result[key]:
            lines.append(f"{label}: {len(result[key])} task(s): {', '.join(result[key][:10])}")
    return "\n".join(lines)
