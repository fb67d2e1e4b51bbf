"""The sweep table of docs/async.md from ``bench_async_rollout.py --json`` files, one row per run.

uv run --frozen python benchmarks/async/sweep_table.py benchmarks/async/sweep/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEAD = (
    "| desktops | group | learner s | gen s/turn | staleness | prefetch | rounds "
    "| sync eps/h | async eps/h | async/sync per round | pooled "
    "| utilisation sync / async | learner idle sync / async | groups dropped (async) "
    "| turns per episode trained on sync / async |"
)


def row(path: Path) -> str:
    d = json.loads(path.read_text())
    s, rounds, pooled = d["settings"], d["rounds"], d["pooled"]
    per_step = s["desktops"] // s["group_size"]
    prefetch = s["prefetch_groups"] or 2 * per_step
    learner = f"{s['learn_s']:g}"
    if s.get("learn_s_per_turn"):
        learner += f" + {s['learn_s_per_turn']:g}/turn"
    sy, asy = pooled["sync"], pooled["async"]
    groups = asy["dropped_stale"] + asy["episodes"] / s["group_size"]  # dropped + taken
    ratios = ", ".join(
        f"{a['episodes_per_hour'] / b['episodes_per_hour']:.2f}x"
        for a, b in zip(rounds["async"], rounds["sync"], strict=True)
    )
    return (
        f"| {s['desktops']} | {s['group_size']} | {learner} | {s['gen_latency_s']:g} "
        f"| {s['max_staleness']} | {prefetch} | {s['rounds']} "
        f"| {sy['episodes_per_hour']:.0f} | {asy['episodes_per_hour']:.0f} | {ratios} "
        f"| **{asy['episodes_per_hour'] / sy['episodes_per_hour']:.2f}x** "
        f"| {sy['desktop_utilisation']:.1%} / {asy['desktop_utilisation']:.1%} "
        f"| {sy['learner_idle']:.0%} / {asy['learner_idle']:.0%} "
        f"| {asy['dropped_stale']:.0f} of {groups:.0f} "
        f"| {_turns(sy)} / {_turns(asy)} |"
    )


def _turns(pooled: dict) -> str:
    t = pooled.get("taken_turns_per_episode")
    return "-" if t is None else f"{t:.1f}"


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    if not paths:
        raise SystemExit("usage: sweep_table.py RUN.json [RUN.json ...]")
    print(HEAD)
    print("|" + "---:|" * 15)
    for p in paths:
        print(row(p))


if __name__ == "__main__":
    main()
