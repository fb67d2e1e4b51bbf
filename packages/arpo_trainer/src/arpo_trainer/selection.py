"""Task selection (ARPO §3.4): keep the tasks the baseline policy solves at least once in k tries.

Rollouts run through the same lock-step collector as training (k copies of a task are k rows),
so selection sees exactly the prompts, image budget and action syntax training will use.
Attempts whose desktop failed are retried up to ``max_retries`` times and never count as failures.

At scale (``accelerate launch ... arpo-train select-tasks``: ARPO's k = 16 over OSWorld's tasks is
thousands of long episodes) every process plays its share of the attempts (attempt ``i`` on
process ``i mod N``) on its own desktops with the training generation backend; a process whose
share is done joins the others' turns (:meth:`~arpo_trainer.rollout.Collector.join`), since
generation can be a collective call, and the counts are gathered on every process at the end.

>>> rows = [TaskStats("a", "os", False, attempts=4, successes=0), TaskStats("b", "os", False, 4, 4),
...         TaskStats("c", "os", True, 4, 1), TaskStats("d", "os", False, 4, 2)]
>>> choose_tasks(rows)
['b', 'c', 'd']
>>> choose_tasks(rows, exclude_infeasible=True, uncertain_only=True)
['d']
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
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
    #: attempts scored by each process (rank -> count)
    by_rank: dict[int, int] = field(default_factory=dict)

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
    """Run ``policy`` ``k`` times on every task (batched over the collector's desktops; over
    its ranks' desktops too when the collector has several, see the module docstring)."""
    ranks = collector.ranks
    stats = {t.id: TaskStats(t.id, t.domain, bool(t.is_infeasible)) for t in tasks}
    by_id = {t.id: t for t in tasks}
    attempts = [t.id for t in tasks for _ in range(k)]
    pending = attempts[ranks.process_index :: ranks.num_processes]
    retries: dict[str, int] = {}
    n = collector.pool.n
    batch_no = 0
    while ranks.any(bool(pending)):
        if not pending:  # this rank's share is done: join the others' turns
            collector.join(policy, tasks[0].instruction)
            continue
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
            s.by_rank[ranks.process_index] = s.by_rank.get(ranks.process_index, 0) + 1
        done = sum(s.attempts for s in stats.values())
        log.info(
            "select-tasks: process %d batch %d, %d/%d of its attempts done",
            ranks.process_index,
            batch_no,
            done,
            len(attempts[ranks.process_index :: ranks.num_processes]),
        )
    if ranks.distributed:
        stats = _merged(ranks.gather(list(stats.values())), [t.id for t in tasks])
    return [stats[t.id] for t in tasks]


def _merged(parts: list[TaskStats], order: list[str]) -> dict[str, TaskStats]:
    """Every rank's counts of each task added up."""
    out: dict[str, TaskStats] = {}
    for p in parts:
        s = out.setdefault(p.task_id, TaskStats(p.task_id, p.domain, p.infeasible))
        s.attempts += p.attempts
        s.successes += p.successes
        s.infra_errors += p.infra_errors
        s.score_sum += p.score_sum
        for rank, count in p.by_rank.items():
            s.by_rank[rank] = s.by_rank.get(rank, 0) + count
    return {task_id: out[task_id] for task_id in order}


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
