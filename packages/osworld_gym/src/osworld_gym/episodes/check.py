"""Prove tasks are solvable: replay each oracle (must score 1) and do nothing (must score 0).

Used by ``osworld-gym tasks check`` and by the test suite. Tasks are spread over ``num_envs``
desktops by the episode pool (:mod:`osworld_gym.episodes`), each episode played by its loop.

For infeasible tasks the oracle is ``FAIL`` (must score 1) and the no-op is ``DONE`` (must score 0).

An oracle is a fixed script: its waits (``time.sleep``) can fall short when the machine is
loaded, and then it misses a dialog and scores 0 although the task is solvable. With
``retries``, an oracle that scores below 1 is replayed on a fresh reset, up to that many more
times; every try's score is kept in :attr:`CheckResult.oracle_tries` and the table names a task
that needed more than one. The no-op is never retried: doing nothing must score 0 every time.

With ``keep_failures`` (a folder), every oracle try that scores below 1 leaves what it saw there:
``<task>-v<variation>-try<k>/NN.png``, the screen before each action (half size), and
``actions.txt``, so a rare miss can be read afterwards instead of guessed at.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.episodes import ScriptAgent, make_osworld_env, run_episode, run_pool
from osworld_gym.episodes.agents import replay_script
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
    oracle_tries: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.oracle_score == 1.0 and self.noop_score == 0.0


class _SeeingScript(ScriptAgent):
    """A :class:`ScriptAgent` that keeps the screen it was shown before each action."""

    def __init__(self, script: list[str]):
        super().__init__(script)
        self.frames: list[Any] = []

    def reset(self, task: Any) -> None:
        super().reset(task)
        self.frames = []

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        self.frames.append(obs.get("screenshot"))
        return super().act(obs, info)


def _keep(folder: Path, agent: _SeeingScript) -> None:
    """Write what a failed oracle try saw: each frame at half size, and the actions."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(agent.frames):
        if frame is not None:
            img = Image.fromarray(frame)
            img.reduce(2).save(folder / f"{i:02d}.png")
    lines = [f"{i:02d} {a}" for i, a in enumerate(agent.script[: len(agent.frames)])]
    (folder / "actions.txt").write_text("\n".join(lines) + "\n")


def _episode(
    env: Any,
    task: Task,
    variation: int | None,
    actions: list[str],
    agent: ScriptAgent | None = None,
) -> tuple[float, int]:
    """Play ``actions`` as one episode; anything but a score raises (with what went wrong)."""
    res = run_episode(
        env,
        agent or ScriptAgent(actions),
        task,
        stop_on_action_error=True,
        reset_options={"task": task.id, "variation": variation},
    )
    if res.exception is not None:  # reset failed, or the script ran out before the episode ended
        raise res.exception
    if res.agent_error:
        raise RuntimeError(res.agent_error)
    if res.infra_error:
        raise RuntimeError(f"infrastructure error at action {res.steps}: {res.infra_error}")
    assert res.score is not None
    return res.score, res.steps


def check_task(
    env: Any,
    task: Task,
    variation: int | None = None,
    *,
    retries: int = 0,
    keep_failures: Path | None = None,
) -> CheckResult:
    """Check one task on an open env (whose task set contains ``task``).

    ``retries``: replay an oracle that scored below 1 up to this many more times;
    ``keep_failures``: a folder for what each such try saw (module doc).
    """
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, not {retries}")
    res = CheckResult(task.id, task.domain, variation)
    noop = "DONE"
    instance = task.instantiate(variation)
    if not (instance.oracle or []):
        res.error = "the task has no oracle"
        return res
    try:
        t0 = time.monotonic()
        actions = replay_script(instance)
        # the frames (a few MB each) are held only when a miss is to be written out
        seeing = _SeeingScript(actions) if keep_failures is not None else None
        while True:
            res.oracle_score, res.steps = _episode(env, task, variation, actions, seeing)
            res.oracle_tries.append(res.oracle_score)
            if res.oracle_score != 1.0 and seeing is not None and keep_failures is not None:
                var = "-" if variation is None else variation
                kept = Path(keep_failures) / f"{task.id}-v{var}-try{len(res.oracle_tries)}"
                _keep(kept, seeing)
                res.details.setdefault("kept", []).append(str(kept))
            if res.oracle_score == 1.0 or len(res.oracle_tries) > retries:
                break
            log.warning(
                "%s: the oracle scored %g; replaying it (try %d of %d)",
                task.id,
                res.oracle_score,
                len(res.oracle_tries) + 1,
                retries + 1,
            )
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
    retries: int = 0,
    keep_failures: Path | None = None,
) -> list[CheckResult]:
    """Check every (task, variation) pair on ``num_envs`` parallel desktops.

    A desktop that cannot start leaves its share to the others; pairs no desktop could take fail
    with ``desktop failed: ...``.

    Args:
        tasks: the tasks to check.
        num_envs: desktops to run at once.
        variations: variation seeds to check each task with (``None``: the default instance).
        variation_of: instead of ``variations``, one seed per task id.
        make_env: builds an env for a task list (default: an ``OSWorld-v0`` env with those
            tasks on the local desktop, :func:`~osworld_gym.episodes.make_osworld_env`).
        on_result: called from worker threads as each result arrives (e.g. to print progress).
        retries: replay an oracle that scored below 1 up to this many more times (module doc).
        keep_failures: a folder where each oracle try that scores below 1 leaves the screens it
            saw and its actions (module doc); the result's ``details["kept"]`` lists them.

    Returns:
        Results in input order.
    """
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, not {retries}")
    tasks = list(tasks)
    if variation_of is not None:
        order = [(t, variation_of(t.id)) for t in tasks]
    else:
        order = [(t, v) for t in tasks for v in list(variations)]
    results: list[CheckResult | None] = [None] * len(order)

    def build() -> Any:
        if make_env is not None:
            return make_env(tasks)
        return make_osworld_env(provider="local", tasks=tasks, max_steps=200)

    def play(env: Any, job: tuple[int, Task, int | None], _: Any) -> None:
        i, task, variation = job
        res = check_task(env, task, variation, retries=retries, keep_failures=keep_failures)
        results[i] = res
        if on_result:
            on_result(res)

    def crashed(job: tuple[int, Task, int | None], exc: Exception, _: Any) -> None:
        i, task, variation = job
        results[i] = res = CheckResult(
            task.id, task.domain, variation, error=f"{type(exc).__name__}: {exc}"
        )
        if on_result:
            on_result(res)

    run = run_pool(
        [(i, t, v) for i, (t, v) in enumerate(order)],
        play,
        make_env=build,
        on_crash=crashed,
        num_envs=num_envs,
        name="check",
    )
    for i, task, variation in run.left:
        exc = run.env_errors[0] if run.env_errors else "no desktop"
        results[i] = CheckResult(task.id, task.domain, variation, error=f"desktop failed: {exc}")
    return [r for r in results if r is not None]


def format_table(results: list[CheckResult]) -> str:
    """A plain-text table: one row per result and a summary line."""
    header = (
        f"{'task':<40} {'var':>4} {'oracle':>6} {'noop':>5} {'steps':>5} {'oracle_s':>8} "
        f"{'noop_s':>6}  status"
    )
    lines = [header, "-" * len(header)]
    for r in results:

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:g}"

        status = "ok" if r.ok else f"FAIL {r.error or ''}".strip()
        if len(r.oracle_tries) > 1:
            status += " (oracle tries: " + ", ".join(f"{x:g}" for x in r.oracle_tries) + ")"
        var = "-" if r.variation is None else str(r.variation)
        lines.append(
            f"{r.task_id:<40} {var:>4} {fmt(r.oracle_score):>6} {fmt(r.noop_score):>5} "
            f"{r.steps:>5} {r.oracle_s:>8.1f} {r.noop_s:>6.1f}  {status}"
        )
    passed = sum(r.ok for r in results)
    retried = sum(r.ok and len(r.oracle_tries) > 1 for r in results)
    lines.append(
        f"tasks: {passed} ok ({retried} of them after a replayed oracle), "
        f"{len(results) - passed} failing"
    )
    return "\n".join(lines)
