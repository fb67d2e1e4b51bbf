"""A training run's success on the pixel family by how often its layout had been trained on:
does the policy get better on layouts it has not met yet, or only on those it has?

    uv run --frozen python benchmarks/ablation/visits.py RUN_DIR [--window 100] [--json OUT]

Reads the run's ``rollouts.jsonl`` (the policy's own episodes; replayed and infra-failed ones are
left out). An episode's visit is the number of training steps in which its task had been played
up to and including this one: a group of four at one step is one visit. A first visit is an
episode on a layout the policy has never been trained on, so first-visit success is a held-out
score measured inside the run; success that rises on later visits only is a policy remembering
its training layouts.

The trainer draws tasks in seeded shuffles, epoch after epoch (TRL's sampler), so with N tasks
and G groups a step, visit k is played in the steps of epoch k, ``[(k-1) N/G, k N/G)``: visit and
time go together. Rows are therefore split by window of steps too; where a window holds two
visits, compare them within it, and read a rise across windows as time, not visits.

For each (window, visit) row and each button kind it prints the successes against the
instruction-blind expectation of the same presses (``click_spread.instruction_test``: what those
clicks would score if the instruction were any other the layout allows) and the tail
probability of as many successes blind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from click_spread import instruction_test  # noqa: E402  (a sibling script, not a package)


def by_visit(run: Path, window: int) -> list[dict]:
    """One row per (window of steps, visit number, button kind) with episodes in it."""
    log = run / "rollouts.jsonl"
    if not log.exists():
        raise SystemExit(f"{run}: no rollouts.jsonl (a training run's directory is needed)")
    if window < 1:
        raise SystemExit(f"--window must be at least 1, got {window}")
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("source") == "policy" and not r.get("infra_error")]
    if not rows:
        raise SystemExit(f"{log}: no episodes of the policy's own")
    steps_of: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        steps_of[r["task_id"]].add(r["global_step"])
    cells: dict[tuple[int, int], list[tuple[str, list[str], float]]] = defaultdict(list)
    for r in rows:
        step = r["global_step"]
        visit = sum(1 for s in steps_of[r["task_id"]] if s <= step)
        episode = (r["task_id"], [t["action"] for t in r["turns"]], float(r["score"]))
        cells[(step // window, visit)].append(episode)
    out = []
    for (w, visit), eps in sorted(cells.items()):
        for kind, t in instruction_test(eps).items():
            out.append(
                {
                    "steps": [w * window, (w + 1) * window - 1],
                    "visit": visit,
                    "kind": kind,
                    **t,
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--window", type=int, default=100, help="training steps per row")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    rows = by_visit(args.run, args.window)
    print(
        "| steps | visit | kind | episodes | success | instruction-blind expectation "
        "| P(at least as many, blind) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        a, b = r["steps"]
        print(
            f"| {a}-{b} | {r['visit']} | `{r['kind']}` | {r['episodes']} "
            f"| {r['successes']} ({r['successes'] / r['episodes']:.1%}) "
            f"| {r['instruction_blind_expected']:.1f} | {r['p_value']:.2g} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
