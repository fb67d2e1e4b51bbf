"""Prove tasks are solvable: replay each oracle (must score 1) and do nothing (must score 0).

Used by ``osworld-gym tasks check`` and by the test suite. Tasks are spread over ``num_envs``
desktops, each driven by its own thread (an env spends its time waiting on its desktop, so
threads suffice and start instantly).

For infeasible tasks the oracle is ``FAIL`` (must score 1) and the no-op is ``DONE`` (must score 0).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from osworld_gym.tasks.task import Task

log = logging.getLogger(__name__)


@dataclass
class CheckResult:
    """The outcome of checking one task instance."""

    task_id: str
    domain: str
    variation: int | None
    oracle_score: float | None = None
    noop_score: float | None = None
    oracle_s: float = 0.0
    noop_s: float = 0.0
    steps: int = 0
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.oracle_score == 1.0 and self.noop_score == 0.0


def _episode(env: Any, task: Task, variation: int | None, actions: list[str]) -> tuple[float, int]:
    env.reset(options={"task": task.id, "variation": variation})
    for n, action in enumerate(actions, 1):
        _, reward, terminated, truncated, info = env.step(action)
        if info["action_error"]:
            raise RuntimeError(f"action {n} rejected: {action!r}: {info['action_error']}")
        if info["infra_error"]:
            raise RuntimeError(f"infrastructure error at action {n}: {info['infra_error']}")
        if terminated or truncated:
            return float(reward), n
    raise RuntimeError("the episode did not end after the last action")


def check_task(env: Any, task: Task, variation: int | None = None) -> CheckResult:
    """Check one task on an open env (whose task set contains ``task``)."""
    res = CheckResult(task.id, task.domain, variation)
    final, noop = ("FAIL", "DONE") if task.is_infeasible else ("DONE", "DONE")
    oracle = list(task.instantiate(variation).oracle or [])
    if not oracle:
        res.error = "the task has no oracle"
        return res
    try:
        t0 = time.monotonic()
        actions = oracle if oracle[-1] in ("DONE", "FAIL") else [*oracle, final]
        res.oracle_score, res.steps = _episode(env, task, variation, actions)
        res.oracle_s = time.monotonic() - t0
        t0 = time.monotonic()
        res.noop_score, _ = _episode(env, task, variation, [noop])
        res.noop_s = time.monotonic() - t0
    except Exception as exc:  # noqa: BLE001 - reported per task, the run goes on
        res.error = f"{type(exc).__name__}: {exc}"
    return res


def check_tasks(
    tasks: Iterable[Task],
    *,
    num_envs: int = 2,
    variations: Iterable[int | None] = (None,),
    variation_of: Callable[[str], int | None] | None = None,
    make_env: Callable[[list[Task]], Any] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Check every (task, variation) pair on ``num_envs`` parallel desktops.

    Args:
        tasks: the tasks to check.
        num_envs: desktops to run at once.
        variations: variation seeds to check each task with (``None``: the default instance).
        variation_of: instead of ``variations``, one seed per task id.
        make_env: builds an env for a task list (default: ``gym.make("OSWorld-v0", tasks=...)``
            on the local desktop).
        on_result: called from worker threads as each result arrives (e.g. to print progress).

    Returns:
        Results in input order.
    """
    tasks = list(tasks)
    jobs: queue.Queue[tuple[int, Task, int | None]] = queue.Queue()
    if variation_of is not None:
        order = [(t, variation_of(t.id)) for t in tasks]
    else:
        order = [(t, v) for t in tasks for v in list(variations)]
    for i, (t, v) in enumerate(order):
        jobs.put((i, t, v))
    results: list[CheckResult | None] = [None] * len(order)

    def default_env(ts: list[Task]) -> Any:
        import gymnasium as gym

        import osworld_gym  # noqa: F401 - registers OSWorld-v0

        return gym.make("OSWorld-v0", provider="local", tasks=ts, max_steps=200)

    build = make_env or default_env

    def worker() -> None:
        env = None
        try:
            env = build(tasks)
            while True:
                try:
                    i, task, variation = jobs.get_nowait()
                except queue.Empty:
                    return
                res = check_task(env, task, variation)
                results[i] = res
                if on_result:
                    on_result(res)
        except Exception as exc:  # noqa: BLE001 - the env itself failed to build
            log.exception("checker desktop failed")
            while True:
                try:
                    i, task, variation = jobs.get_nowait()
                except queue.Empty:
                    return
                results[i] = CheckResult(task.id, task.domain, variation, error=f"desktop failed: {exc}")
        finally:
            if env is not None:
                env.close()

    threads = [threading.Thread(target=worker, name=f"check-{n}", daemon=True)
               for n in range(max(1, min(num_envs, len(order))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def format_table(results: list[CheckResult]) -> str:
    """A plain-text table: one row per result and a summary line."""
    header = f"{'task':<40} {'var':>4} {'oracle':>6} {'noop':>5} {'steps':>5} {'oracle_s':>8} {'noop_s':>6}  status"
    lines = [header, "-" * len(header)]
    for r in results:
        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:g}"
        status = "ok" if r.ok else f"FAIL {r.error or ''}".strip()
        var = "-" if r.variation is None else str(r.variation)
        lines.append(f"{r.task_id:<40} {var:>4} {fmt(r.oracle_score):>6} {fmt(r.noop_score):>5} "
                     f"{r.steps:>5} {r.oracle_s:>8.1f} {r.noop_s:>6.1f}  {status}")
    passed = sum(r.ok for r in results)
    lines.append(f"tasks: {passed} ok, {len(results) - passed} failing")
    return "\n".join(lines)
