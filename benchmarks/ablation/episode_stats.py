"""Per-episode statistics of ``arpo-eval run`` result directories: success, episodes that end on
a format error (an unparsable action), and what the actions were.

    uv run --frozen python benchmarks/ablation/episode_stats.py DIR [DIR ...]

Prints one Markdown row per directory (the tables of docs/learning.md).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def stats(run: Path) -> dict:
    episodes = successes = format_errors = 0
    kinds: Counter[str] = Counter()
    for traj in sorted(run.rglob("traj.jsonl")):
        steps = [json.loads(x) for x in traj.read_text().splitlines() if x.strip()]
        result = traj.parent / "result.txt"
        episodes += 1
        successes += result.exists() and float(result.read_text().strip() or 0) > 0.5
        format_errors += any(s.get("info", {}).get("action_error") for s in steps)
        for s in steps:
            call = str(s.get("action", "")).removeprefix("Action: ").split("(")[0].strip()
            kinds[call if call.isidentifier() else "(unparsable)"] += 1
    actions = sum(kinds.values())
    return {
        "run": run.name,
        "episodes": episodes,
        "successes": successes,
        "format_error_episodes": format_errors,
        "actions": actions,
        "kinds": {k: round(v / max(1, actions), 3) for k, v in kinds.most_common(6)},
    }


def main(argv: list[str]) -> int:
    print("| run | success | episodes with a format error | actions | commonest calls |")
    print("|---|---|---|---|---|")
    for d in argv:
        s = stats(Path(d))
        kinds = ", ".join(f"{k} {v:.0%}" for k, v in s["kinds"].items())
        print(
            f"| {s['run']} | {s['successes']}/{s['episodes']} | "
            f"{s['format_error_episodes']}/{s['episodes']} | {s['actions']} | {kinds} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
