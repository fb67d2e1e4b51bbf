"""Task selection (ARPO §3.4): keep the tasks the baseline policy solves at least once in k tries.

Rollouts run through the same lock-step collector as training (k copies of a task are k rows),
so selection sees exactly the prompts, image budget and action syntax training will use.
Attempts whose desktop failed are retried up to ``max_retries`` times and never count as failures.

>>> rows = [TaskStats("a", "os", False, attempts=4, successes=0), TaskStats("b", "os", False, 4, 4),
...         TaskStats("c", "os", True, 4, 1), TaskStats("d", "os", False, 4, 2)]
>>> choose_tasks(rows)
['b', 'c', 'd']
>>> choose_tasks(rows, exclude_infeasible=True, uncertain_only=True)
['d']
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from arpo_trainer.generation import Policy
from arpo_trainer.rollout import Collector

log = logging.getLogger(__name__)


@dataclass
class TaskStats:
    """Baseline outcome of one task."""

    task_id: str
    domain: str
    infeasible: bool
    attempts: int = 0
    successes: int = 0
    infra_errors: int = 0
    score_sum: float = 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else float("nan")


def evaluate_tasks(
    tasks: list[Any],
    collector: Collector,
    policy: Policy,
    *,
    k: int = 16,
    success_threshold: float = 0.1,
    max_retries: int = 2,
) -> list[TaskStats]:
    """Run ``policy`` ``k`` times on every task (batched over the collector's desktops)."""
    stats = {t.id: TaskStats(t.id, t.domain, bool(t.is_infeasible)) for t in tasks}
    by_id = {t.id: t for t in tasks}
    pending = [t.id for t in tasks for _ in range(k)]
    retries: dict[str, int] = {}
    n = collector.pool.n
    batch_no = 0
    while pending:
        chunk, pending = pending[:n], pending[n:]
        rows = chunk + [chunk[-1]] * (n - len(chunk))
        trajs = collector.run([by_id[i] for i in rows], policy)
        batch_no += 1
        for task_id, traj in zip(chunk, trajs[: len(chunk)], strict=True):
            s = stats[task_id]
            if not traj.valid:
                s.infra_errors += 1
                retries[task_id] = retries.get(task_id, 0) + 1
                if retries[task_id] <= max_retries * k:
                    pending.append(task_id)
                continue
            s.attempts += 1
            s.score_sum += traj.score
            s.successes += int(traj.score > success_threshold)
        done = sum(s.attempts for s in stats.values())
        log.info("select-tasks: batch %d, %d/%d attempts done", batch_no, done, k * len(tasks))
    return [stats[t.id] for t in tasks]


def choose_tasks(
    stats: list[TaskStats], *, exclude_infeasible: bool = False, uncertain_only: bool = False
) -> list[str]:
    """Ids of tasks solved at least once (and, with ``uncertain_only``, not always: 0 < p < 1)."""
    keep = []
    for s in stats:
        if s.attempts == 0 or s.successes == 0:
            continue
        if exclude_infeasible and s.infeasible:
            continue
        if uncertain_only and s.successes == s.attempts:
            continue
        keep.append(s.task_id)
    return keep


def success_table(stats: list[TaskStats], selected: list[str]) -> str:
    """A Markdown table: one row per task with its success rate and whether it was selected."""
    lines = [
        (
            "| task | domain | infeasible | successes | attempts | success rate | infra "
            "errors | selected |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    chosen = set(selected)
    for s in stats:
        rate = f"{s.success_rate:.2f}" if s.attempts else "-"
        lines.append(
            f"| {s.task_id} | {s.domain} | {'yes' if s.infeasible else 'no'} | {s.successes} | "
            f"{s.attempts} | {rate} | {s.infra_errors} | {'yes' if s.task_id in chosen else 'no'} |"
        )
    return "\n".join(lines)


def stats_records(stats: list[TaskStats]) -> list[dict[str, Any]]:
    """JSON-able rows (with the success rate)."""
    return [{**asdict(s), "success_rate": s.success_rate} for s in stats]
