"""Success tables of a run: per domain and overall, per trial, mean@k and pass@k, splits.

Definitions (``k`` = trials of the run; scores are the evaluators', fractional ones kept):

* **per-trial score** (OSWorld's ``show_result.py``): the mean score of the trial's *scored*
  episodes, per domain and overall;
* **mean@k** of a task: the mean of its scored trials; of a group of tasks: the mean over the
  tasks that have at least one scored trial (equals the per-trial score when ``k = 1``);
* **pass@k** of a task: its best scored trial (1/0 for binary evaluators: "solved in any of
  the k tries"); of a group: the mean over tasks with a scored trial. A task with fewer scored
  trials than ``k`` (infrastructure errors) gets pass@(its scored trials), which the
  ``scored_episodes`` count shows;
* **infrastructure errors** (``infra_errors``: episodes without a score) and ``unscored_tasks``
  (no scored trial at all) are counted apart and never enter a mean as 0; ``infra_rate`` is
  their share of the episodes run, per domain and overall, so an agent that provokes them
  (excluded episodes flatter a mean) is visible; ``not_run`` counts episodes of the manifest's
  tasks that have no directory yet.

>>> from arpo_eval.layout import EpisodeRecord as E
>>> recs = [E("a", "os", 0, 1.0), E("a", "os", 1, 0.0), E("b", "os", 0, 0.5),
...         E("b", "os", 1, None, infra_error="desktop died"), E("c", "vlc", 0, 0.0),
...         E("c", "vlc", 1, 0.0)]
>>> t = summarize(recs, trials=2)
>>> t["overall"]["mean_at_k"], t["overall"]["pass_at_k"], t["overall"]["infra_errors"]
(0.3333333333333333, 0.5, 1)
>>> t["overall"]["infra_rate"], t["domains"]["os"]["infra_rate"], t["domains"]["vlc"]["infra_rate"]
(0.16666666666666666, 0.25, 0.0)
>>> t["domains"]["os"]["pass_at_k"], [p["overall"]["score"] for p in t["per_trial"]]
(0.75, [0.5, 0.0])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from arpo_eval.layout import EpisodeRecord

#: OSWorld's ``show_result.py`` categories.
CATEGORIES = {
    "Office": ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer"),
    "Daily": ("vlc", "thunderbird", "chrome"),
    "Professional": ("gimp", "vs_code"),
}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_rows(
    records: Iterable[EpisodeRecord], tasks: list[dict[str, Any]] | None = None, trials: int = 1
) -> list[dict[str, Any]]:
    """One row per task: its scores per trial (``None`` = no score), mean, best, error counts."""
    by_task: dict[str, dict[str, Any]] = {}
    for t in tasks or []:
        by_task[t["id"]] = {
            "task_id": t["id"],
            "domain": t["domain"],
            "infeasible": bool(t.get("infeasible")),
            "instruction": t.get("instruction", ""),
            "scores": [None] * trials,
            "infra_errors": 0,
            "run": [False] * trials,
        }
    for r in records:
        row = by_task.setdefault(
            r.task_id,
            {
                "task_id": r.task_id,
                "domain": r.domain,
                "infeasible": r.infeasible,
                "instruction": "",
                "scores": [None] * trials,
                "infra_errors": 0,
                "run": [False] * trials,
            },
        )
        if r.trial >= len(row["scores"]):
            grow = r.trial + 1 - len(row["scores"])
            row["scores"] += [None] * grow
            row["run"] += [False] * grow
        row["run"][r.trial] = True
        if r.scored:
            row["scores"][r.trial] = float(r.score)  # type: ignore[arg-type]
        else:
            row["infra_errors"] += 1
        row["infeasible"] = row["infeasible"] or r.infeasible
    for row in by_task.values():
        scored = [s for s in row["scores"] if s is not None]
        row["scored_trials"] = len(scored)
        row["mean"] = _mean(scored)
        row["best"] = max(scored) if scored else None
        row["not_run"] = row["run"].count(False)
    return list(by_task.values())


def _group(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["scored_trials"]]
    return {
        "tasks": len(rows),
        "scored_tasks": len(scored),
        "unscored_tasks": len(rows) - len(scored),
        "scored_episodes": sum(r["scored_trials"] for r in rows),
        "infra_errors": sum(r["infra_errors"] for r in rows),
        "infra_rate": _rate(
            sum(r["infra_errors"] for r in rows),
            sum(r["scored_trials"] + r["infra_errors"] for r in rows),
        ),
        "not_run": sum(r["not_run"] for r in rows),
        "mean_at_k": _mean([r["mean"] for r in scored]),
        "pass_at_k": _mean([r["best"] for r in scored]),
        "solved_tasks": sum(1 for r in scored if r["best"] >= 1.0),
    }


def _per_trial(rows: list[dict[str, Any]], trials: int) -> list[dict[str, Any]]:
    out = []
    for k in range(trials):
        domains: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            s = r["scores"][k] if k < len(r["scores"]) else None
            if s is not None:
                domains[r["domain"]].append(s)
        every = [s for v in domains.values() for s in v]
        out.append(
            {
                "trial": k,
                "overall": {"score": _mean(every), "tasks": len(every)},
                "domains": {
                    d: {"score": _mean(v), "tasks": len(v)} for d, v in sorted(domains.items())
                },
            }
        )
    return out


def summarize(
    records: Iterable[EpisodeRecord],
    *,
    trials: int = 1,
    tasks: list[dict[str, Any]] | None = None,
    train_ids: set[str] | None = None,
) -> dict[str, Any]:
    """Every table of a run as one JSON-able dict (the content of ``summary.json``).

    Args:
        records: the run's episodes.
        trials: ``k``.
        tasks: the manifest's task list (tasks not run yet then count as ``not_run``).
        train_ids: task ids trained on: adds ``split`` with ``in_domain`` (those) and
            ``held_out`` (the others) groups.
    """
    rows = task_rows(records, tasks, trials)
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_domain[r["domain"]].append(r)
    out: dict[str, Any] = {
        "trials": trials,
        "overall": _group(rows),
        "domains": {d: _group(v) for d, v in sorted(by_domain.items())},
        "per_trial": _per_trial(rows, trials),
        "infeasible": _group([r for r in rows if r["infeasible"]]),
        "feasible": _group([r for r in rows if not r["infeasible"]]),
    }
    cats = {
        name: [r for r in rows if r["domain"] in members] for name, members in CATEGORIES.items()
    }
    cats = {name: _group(v) for name, v in cats.items() if v}
    if cats:
        out["categories"] = cats
    if train_ids is not None:
        out["split"] = {
            "in_domain": _group([r for r in rows if r["task_id"] in train_ids]),
            "held_out": _group([r for r in rows if r["task_id"] not in train_ids]),
        }
    out["task_results"] = [{k: v for k, v in r.items() if k not in ("run",)} for r in rows]
    return out


def _rate(part: int, whole: int) -> float | None:
    """``part / whole``; None when nothing ran."""
    return part / whole if whole else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_summary(summary: dict[str, Any]) -> str:
    """Plain-text tables: per domain, overall, splits, per trial."""
    k = summary["trials"]
    head = (
        f"{'domain':<22} {'tasks':>5} {'scored':>6} {f'mean@{k}':>8} {f'pass@{k}':>8} "
        f"{'solved':>6} {'infra':>5} {'infra %':>7} {'not run':>7}"
    )
    lines = [head, "-" * len(head)]

    def line(name: str, g: dict[str, Any]) -> str:
        return (
            f"{name:<22} {g['tasks']:>5} {g['scored_tasks']:>6} {_pct(g['mean_at_k']):>8} "
            f"{_pct(g['pass_at_k']):>8} {g['solved_tasks']:>6} {g['infra_errors']:>5} "
            f"{_pct(g['infra_rate']):>7} {g['not_run']:>7}"
        )

    for d, g in summary["domains"].items():
        lines.append(line(d, g))
    lines.append("-" * len(head))
    lines.append(line("overall", summary["overall"]))
    for name in ("feasible", "infeasible"):
        if summary[name]["tasks"]:
            lines.append(line(f"  {name}", summary[name]))
    for name, g in summary.get("categories", {}).items():
        lines.append(line(f"  {name}", g))
    for name, g in summary.get("split", {}).items():
        lines.append(line(f"  {name.replace('_', '-')}", g))
    if k > 1:
        trials = ", ".join(
            f"{_pct(p['overall']['score'])} ({p['overall']['tasks']})" for p in summary["per_trial"]
        )
        lines.append(f"per trial (OSWorld success rate, scored tasks): {trials}")
    return "\n".join(lines)
