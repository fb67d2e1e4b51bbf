"""Baseline rollouts for ARPO's task selection (§3.4) on the evaluation code path.

``arpo-train select-tasks`` keeps the tasks a baseline policy solves at least once in k tries.
The same rollouts can be played by :func:`~arpo_eval.runner.evaluate_agent` (k trials, any
agent, parallel desktops, infrastructure errors retried and never counted as failures) and
turned into the trainer's :class:`~arpo_trainer.selection.TaskStats` here, so
``choose_tasks``/``success_table`` work unchanged::

    from arpo_eval.agents import LockedPolicy
    from arpo_trainer.agent import PolicyAgent
    policy = LockedPolicy(TransformersPolicy(model, encoder, generation_config))
    records = evaluate_agent(lambda: PolicyAgent(policy, encoder), tasks, trials=16,
                             env_kwargs=env_kwargs(args, encoder), num_envs=8)
    selected = choose_tasks(baseline_stats(records))

>>> from arpo_eval.layout import EpisodeRecord as E
>>> stats = baseline_stats([E("a", "os", 0, 1.0), E("a", "os", 1, 0.0),
...                         E("b", "os", 0, None, infra_error="x"), E("b", "os", 1, 0.05)])
>>> [(s.task_id, s.attempts, s.successes, s.infra_errors) for s in stats]
[('a', 2, 1, 0), ('b', 1, 0, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arpo_eval.layout import EpisodeRecord


def baseline_stats(
    records: Iterable[EpisodeRecord], *, success_threshold: float = 0.1
) -> list[Any]:
    """Per-task :class:`arpo_trainer.selection.TaskStats` (in first-seen order); a success is a
    score above ``success_threshold`` (the trainer's replay threshold, ARPO 0.1)."""
    from arpo_eval.agents import trainer_module

    TaskStats = trainer_module("arpo_trainer.selection", what="baseline_stats").TaskStats
    stats: dict[str, Any] = {}
    for r in records:
        s = stats.setdefault(r.task_id, TaskStats(r.task_id, r.domain, r.infeasible))
        if not r.scored:
            s.infra_errors += 1
            continue
        s.attempts += 1
        s.score_sum += float(r.score)  # type: ignore[arg-type]
        s.successes += int(float(r.score) > success_threshold)  # type: ignore[arg-type]
    return list(stats.values())
