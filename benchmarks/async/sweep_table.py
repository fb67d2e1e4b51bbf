"""The sweep tables of docs/async.md from ``bench_async_rollout.py --json`` files, one row per run
and async mode (``async``: with the version gate; ``async-nogate``: the earlier loop; files
written before the gate existed have no ``groups_per_step`` setting and their ``async`` is the
earlier loop).

uv run --frozen python benchmarks/async/sweep_table.py benchmarks/async/sweep/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEAD = (
    "| desktops | group | episodes per step | learner s | gen s/turn | staleness | prefetch "
    "| rounds | async loop | sync eps/h | async eps/h | async/sync per round | pooled "
    "| utilisation sync / async | learner idle sync / async | groups dropped (async) "
    "| turns per episode trained on sync / async |"
)


def rows(path: Path) -> list[str]:
    d = json.loads(path.read_text())
    s, rounds, pooled = d["settings"], d["rounds"], d["pooled"]
    gated_era = "groups_per_step" in s
    per_step = s.get("groups_per_step") or s["desktops"] // s["group_size"]
    prefetch = s["prefetch_groups"] or 2 * per_step
    learner = f"{s['learn_s']:g}"
    if s.get("learn_s_per_turn"):
        learner += f" + {s['learn_s_per_turn']:g}/turn"
    sy = pooled["sync"]
    out = []
    for mode in (m for m in ("async", "async-nogate") if m in pooled):
        asy = pooled[mode]
        loop = "gate" if mode == "async" and gated_era else "no gate"
        groups = asy["dropped_stale"] + asy["episodes"] / s["group_size"]  # dropped + taken
        ratios = ", ".join(
            f"{a['episodes_per_hour'] / b['episodes_per_hour']:.2f}x"
            for a, b in zip(rounds[mode], rounds["sync"], strict=True)
        )
        out.append(
            f"| {s['desktops']} | {s['group_size']} | {per_step * s['group_size']} | {learner} "
            f"| {s['gen_latency_s']:g} | {s['max_staleness']} | {prefetch} | {s['rounds']} "
            f"| {loop} | {sy['episodes_per_hour']:.0f} | {asy['episodes_per_hour']:.0f} "
            f"| {ratios} | **{asy['episodes_per_hour'] / sy['episodes_per_hour']:.2f}x** "
            f"| {sy['desktop_utilisation']:.1%} / {asy['desktop_utilisation']:.1%} "
            f"| {sy['learner_idle']:.0%} / {asy['learner_idle']:.0%} "
            f"| {asy['dropped_stale']:.0f} of {groups:.0f} "
            f"| {_turns(sy)} / {_turns(asy)} |"
        )
    return out


def _turns(pooled: dict) -> str:
    t = pooled.get("taken_turns_per_episode")
    return "-" if t is None else f"{t:.1f}"


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    if not paths:
        raise SystemExit("usage: sweep_table.py RUN.json [RUN.json ...]")
    print(HEAD)
    print("|" + "---:|" * 17)
    for p in paths:
        print("\n".join(rows(p)))


if __name__ == "__main__":
    main()
