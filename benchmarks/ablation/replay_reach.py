"""How far ARPO's per-task replay could reach in a run, from its ``rollouts.jsonl``.

Replay injects a stored success only into an all-fail group *of the same task*, so it can act
only on visits to a task after the policy first solved it. With many tasks, few visits each and
rare successes, that is a small share of the run, whatever replay does when it acts. Per run:

* own episodes, their successes, and the share of groups with no success (all-fail: no gradient
  in GRPO, the groups replay may fill);
* tasks solved at least once, of the tasks played, and visits (steps) per task;
* **reachable group visits**: group visits to a task after its first own success (where an
  ARPO run has a success to inject; a GRPO run's count says where it would have had one);
* injected (replayed) trajectories, as a count and a share of all trajectories trained on;
* how the episodes of the last quarter ended (``DONE``, ``FAIL``, ``truncated``...).

    uv run --frozen python benchmarks/ablation/replay_reach.py RUN_DIR [RUN_DIR ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def reach(rows: list[dict[str, Any]], threshold: float = 0.5) -> dict[str, Any]:
    """The figures above for one run's rollout log lines.

    Two tasks, groups of two over three steps; task ``a`` is solved at step 0 and visited again
    at steps 1 and 2, where replay fills its all-fail group of step 1:

    >>> def ep(step, task, score, source="policy", end="DONE"):
    ...     return {"global_step": step, "task_id": task, "score": score, "source": source,
    ...             "end": end}
    >>> rows = [ep(0, "a", 1), ep(0, "a", 0), ep(0, "b", 0), ep(0, "b", 0),
    ...         ep(1, "a", 0), ep(1, "a", 1, "replay"), ep(2, "a", 0, end="truncated"),
    ...         ep(2, "a", 1)]
    >>> r = reach(rows)
    >>> r["own_episodes"], r["successes"], r["all_fail_groups"], r["tasks_solved"]
    (7, 2, 0.5, 1)
    >>> r["reachable_group_visits"], r["injected"], r["injected_share"]
    (2, 1, 0.125)
    """
    own = [r for r in rows if r.get("source") != "replay" and not r.get("infra_error")]
    steps = max((int(r["global_step"]) for r in rows), default=-1) + 1
    groups: dict[tuple[int, str], list[bool]] = defaultdict(list)
    for r in own:
        groups[(int(r["global_step"]), str(r["task_id"]))].append(float(r["score"]) > threshold)
    first: dict[str, int] = {}
    for (step, task), wins in sorted(groups.items()):
        if any(wins) and task not in first:
            first[task] = step
    tasks = {task for _, task in groups}
    injected = sum(r.get("source") == "replay" for r in rows)
    last = [r for r in own if int(r["global_step"]) >= steps - steps // 4]
    return {
        "steps": steps,
        "own_episodes": len(own),
        "successes": sum(w for g in groups.values() for w in g),
        "all_fail_groups": sum(not any(g) for g in groups.values()) / max(1, len(groups)),
        "tasks_solved": len(first),
        "tasks": len(tasks),
        "visits_per_task": len(groups) / max(1, len(tasks)),
        "reachable_group_visits": sum(
            1 for (step, task) in groups if task in first and step > first[task]
        ),
        "group_visits": len(groups),
        "injected": injected,
        "injected_share": injected / max(1, len(rows)),
        "last_quarter_ends": dict(Counter(str(r.get("end")) for r in last)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("runs", type=Path, nargs="+", help="run directories with rollouts.jsonl")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    out = {}
    print(
        "| run | own episodes | successes | all-fail groups | tasks solved | visits per task "
        "| reachable group visits | injected | episode ends, last quarter |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    for run in args.runs:
        path = run / "rollouts.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path}: no rollout log")
        lines = path.read_text().splitlines()
        r = reach([json.loads(line) for line in lines if line.strip()])
        out[run.name] = r
        ends = ", ".join(f"{k} {v}" for k, v in sorted(r["last_quarter_ends"].items()))
        print(
            f"| {run.name} | {r['own_episodes']} | {r['successes']} "
            f"({r['successes'] / max(1, r['own_episodes']):.1%}) | {r['all_fail_groups']:.1%} | "
            f"{r['tasks_solved']} of {r['tasks']} | {r['visits_per_task']:.1f} | "
            f"{r['reachable_group_visits']} of {r['group_visits']} | {r['injected']} "
            f"({r['injected_share']:.1%}) | {ends} |"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
