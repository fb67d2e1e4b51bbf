"""Demonstrations from task oracles, in the policy's own action syntax.

Every built-in task carries an ``oracle``: pyautogui actions that solve it through the GUI. To
warm-start the replay buffer, each oracle is converted to the policy's action set (one oracle
action = one turn; pure ``time.sleep`` steps are dropped because the desktop already waits for the
screen to settle; a final DONE is added), then *executed* on a real desktop with the same
collector the policy uses. Only demonstrations that the task's evaluator scores as successes are
kept, with the real screenshots they produced, so a stored demo is exactly what the policy would
have seen and written.

>>> from osworld_gym.actions import make_action_set
>>> from osworld_gym.support import builtin_task
>>> oracle_script(builtin_task("os-mkdir-001"), make_action_set("uitars", screen_size=(640, 360)))
["Action: hotkey(key='ctrl alt t')", "Action: type(content='mkdir -p /home/user/Desktop/projects\\\\n')", "Action: finished(content='')"]
"""

from __future__ import annotations

import logging
from typing import Any

from osworld_gym.actions import ActionSet, ParsedAction, make_action_set
from osworld_gym.actions.primitives import Press, Primitive, TypeText, Wait
from osworld_gym.errors import ActionError

from arpo_trainer.generation import ScriptedPolicy
from arpo_trainer.rollout import Collector, Trajectory, done_text

log = logging.getLogger(__name__)


def _split_trailing_enter(prims: tuple[Primitive, ...]) -> list[Primitive]:
    """``TypeText("ls\\n")`` -> ``TypeText("ls"), Press("enter")`` (how UI-TARS writes "type, then submit")."""
    out: list[Primitive] = []
    for p in prims:
        if isinstance(p, TypeText) and p.text.endswith("\n") and p.text.rstrip("\n"):
            stripped = p.text.rstrip("\n")
            out.append(TypeText(stripped))
            out.extend(Press("enter") for _ in range(len(p.text) - len(stripped)))
        else:
            out.append(p)
    return out


def oracle_script(task: Any, action_set: ActionSet, *, keep_waits: bool = False) -> list[str]:
    """The task's oracle as one action text per turn in ``action_set``'s syntax.

    Raises:
        ValueError: the task has no oracle, or an oracle action cannot be expressed in the set.
    """
    oracle = getattr(task, "oracle", None)
    if not oracle:
        raise ValueError(f"task {getattr(task, 'id', task)!r} has no oracle to demonstrate")
    source = make_action_set("pyautogui", screen_size=action_set.screen_size)
    script: list[str] = []
    special = None
    for step in oracle:
        parsed = source.parse(step)
        prims = _split_trailing_enter(parsed.primitives)
        waits = [p for p in prims if isinstance(p, Wait)]
        prims = [p for p in prims if not isinstance(p, Wait)]
        if parsed.special in ("DONE", "FAIL"):
            special = parsed.special
        if not prims:
            if waits and keep_waits:
                script.append(_render(action_set, ParsedAction((), "WAIT")))
            continue
        script.append(_render(action_set, ParsedAction(tuple(prims))))
    script.append(_render(action_set, ParsedAction((), special or "DONE")))
    return script


def _render(action_set: ActionSet, parsed: ParsedAction) -> str:
    try:
        text = action_set.render(parsed)
    except ActionError as e:
        raise ValueError(
            f"the {action_set.name} action set cannot express {parsed.primitives}: {e}"
        ) from e
    assert isinstance(text, str)
    return text


def record_demonstrations(
    tasks: list[Any],
    collector: Collector,
    *,
    repeats: int = 1,
    step: int = 0,
    keep_waits_fallback: bool = True,
) -> list[Trajectory]:
    """Execute every task's oracle script on the collector's desktops; return the runs (all of them).

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
