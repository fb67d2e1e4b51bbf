"""Demonstrations from task oracles, in the policy's own action syntax.

Every built-in task carries an ``oracle``: pyautogui actions that solve it through the GUI. To
warm-start the replay buffer, each oracle is converted to the policy's action set (one oracle
action = one turn; pure ``time.sleep`` steps are dropped because the desktop already waits for the
screen to settle; a final DONE is added), then *executed* on a real desktop with the same
collector the policy uses. Only demonstrations that the task's evaluator scores as successes are
kept, with the real screenshots they produced, so a stored demo is exactly what the policy would
have seen and written. The conversion (:func:`~osworld_gym.episodes.oracle_script`) lives with
the oracle agents in :mod:`osworld_gym.episodes`.

>>> from osworld_gym.actions import make_action_set
>>> from osworld_gym.support import builtin_task
>>> aset = make_action_set("uitars", screen_size=(640, 360))
>>> for line in oracle_script(builtin_task("os-mkdir-001"), aset):
...     print(line)
Action: hotkey(key='ctrl alt t')
Action: type(content='mkdir -p /home/user/Desktop/projects\\n')
Action: finished(content='')
"""

from __future__ import annotations

import logging
from typing import Any

from osworld_gym.episodes import done_text, oracle_script

from arpo_trainer.generation import ScriptedPolicy
from arpo_trainer.rollout import Collector, Trajectory

__all__ = ["oracle_script", "record_demonstrations"]

log = logging.getLogger(__name__)


def record_demonstrations(
    tasks: list[Any],
    collector: Collector,
    *,
    repeats: int = 1,
    step: int = 0,
    keep_waits_fallback: bool = True,
) -> list[Trajectory]:
    """Execute every task's oracle script on the collector's desktops; return the runs (all of
    them).

    Runs go in batches of the collector's pool size. A task whose wait-free script does not
    succeed is retried once with its waits kept as ``wait()`` turns (when ``keep_waits_fallback``).
    Trajectories come back with ``source="demo"``; check ``score`` before storing them.
    """
    action_set = collector.action_set
    jobs: list[tuple[Any, list[str]]] = []
    for task in tasks:
        try:
            script = oracle_script(task, action_set)
        except ValueError as e:
            log.warning("no demonstration for %s: %s", getattr(task, "id", task), e)
            continue
        if len(script) > collector.max_turns:
            log.warning(
                "the oracle of %s needs %d turns, more than max_turns=%d; skipped",
                task.id,
                len(script),
                collector.max_turns,
            )
            continue
        jobs.extend((task, script) for _ in range(repeats))
    runs = _run_scripts(jobs, collector, step)
    if keep_waits_fallback:
        retry = []
        for (task, _), traj in zip(jobs, runs, strict=True):
            if traj.valid and traj.score <= 0:
                slow = oracle_script(task, action_set, keep_waits=True)
                if len(slow) <= collector.max_turns:
                    retry.append((task, slow))
        if retry:
            log.info("retrying %d demonstrations with their waits kept", len(retry))
            runs += _run_scripts(retry, collector, step)
    for traj in runs:
        log.info(
            "demonstration of %s: score %.2f in %d turns%s",
            traj.task_id,
            traj.score,
            len(traj.turns),
            f" (infra error: {traj.infra_error})" if traj.infra_error else "",
        )
    return runs


def _run_scripts(
    jobs: list[tuple[Any, list[str]]], collector: Collector, step: int
) -> list[Trajectory]:
    n = collector.pool.n
    fallback = done_text(collector.action_set)
    out: list[Trajectory] = []
    for start in range(0, len(jobs), n):
        chunk = jobs[start : start + n]
        pad = n - len(chunk)
        tasks = [t for t, _ in chunk] + [chunk[-1][0]] * pad
        scripts = [s for _, s in chunk] + [[fallback]] * pad
        trajs = collector.run(
            tasks, ScriptedPolicy(collector.encoder, scripts, fallback=fallback), step=step
        )
        for traj in trajs[: len(chunk)]:
            traj.source = "demo"
            out.append(traj)
    return out
