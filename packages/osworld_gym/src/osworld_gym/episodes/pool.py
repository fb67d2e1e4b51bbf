"""A pool of independent episodes over ``N`` desktops: :func:`run_pool`.

One worker thread per desktop (an env spends its time waiting on its desktop, so threads suffice
and start instantly, and the thread that starts a desktop keeps driving it). Each worker builds its
own env with ``make_env()`` and takes jobs from a shared :class:`JobQueue` until it is empty; a job
may put more jobs (e.g. a retry) on the queue while the pool runs. Failures stay local:

- a desktop that cannot be built stops its worker (logged); the other workers carry on, and the
  jobs no worker took come back in :attr:`PoolRun.left` with the build errors;
- a job whose ``play`` raises is handed to ``on_crash`` and its desktop is closed and rebuilt
  (the exception says the env is in an unknown state).

>>> from osworld_gym.support import builtin_tasks
>>> from osworld_gym.episodes import FailAgent, run_episode
>>> scores = {}
>>> def play(env, task, queue):
...     scores[task.id] = run_episode(env, FailAgent(), task).score
>>> run = run_pool(builtin_tasks("os")[5:8], play, num_envs=2,
...                make_env=lambda: make_osworld_env(provider="fake", tasks=None, settle=None),
...                on_crash=lambda task, exc, queue: None)
>>> sorted(scores.items()), run.left
([('os-copy-001', 0.0), ('os-infeasible-001', 1.0), ('os-write-file-001', 0.0)], [])
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

J = TypeVar("J")
E = TypeVar("E")


def make_osworld_env(**kwargs: Any) -> Any:
    """``gym.make("OSWorld-v0", **kwargs)``: the env factory the pool's users build desktops
    with."""
    import gymnasium as gym

    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    return gym.make("OSWorld-v0", **kwargs)


class JobQueue(Generic[J]):
    """The pool's shared jobs (thread-safe): workers ``get`` them, a playing job may ``put``
    more."""

    def __init__(self, jobs: Iterable[J] = ()):
        self._q: queue.Queue[J] = queue.Queue()
        for job in jobs:
            self._q.put(job)

    def put(self, job: J) -> None:
        self._q.put(job)

    def get(self) -> J | None:
        """The next job, or ``None`` when there is none left."""
        try:
            return self._q.get_nowait()
        except queue.Empty:
            return None

    def drain(self) -> list[J]:
        out = []
        while (job := self.get()) is not None:
            out.append(job)
        return out

    def __len__(self) -> int:
        return self._q.qsize()


@dataclass
class PoolRun(Generic[J]):
    """What a :func:`run_pool` call left undone.

    Attributes:
        left: jobs no worker took (every worker's desktop failed), in queue order.
        env_errors: why desktops could not be built, one per failed build.
    """

    left: list[J] = field(default_factory=list)
    env_errors: list[BaseException] = field(default_factory=list)


def _close(env: Any, index: int) -> None:
    try:
        env.close()
    except Exception:  # closing a broken desktop must not stop the others
        log.exception("closing desktop %d failed", index)


def run_pool(
    jobs: Iterable[J],
    play: Callable[[E, J, JobQueue[J]], None],
    *,
    make_env: Callable[[], E],
    on_crash: Callable[[J, Exception, JobQueue[J]], None],
    num_envs: int = 1,
    name: str = "episodes",
) -> PoolRun[J]:
    """Play every job on one of ``num_envs`` desktops, each driven by its own thread.

    Args:
        jobs: the work, e.g. (task, trial) pairs; played in queue order, spread over desktops.
        play: ``play(env, job, queue)`` plays one job on the worker's env and delivers its
            result itself (from the worker thread); it may ``queue.put`` follow-up jobs.
        make_env: builds one desktop's env (an object with ``close()``), in its worker thread.
        on_crash: ``on_crash(job, exc, queue)``: ``play`` raised; record the job's failure (or
            queue a retry). The desktop is then closed and rebuilt.
        num_envs: desktops at once (never more than there are jobs).
        name: worker thread name prefix.

    Returns:
        The jobs left undone and the desktop build errors (:class:`PoolRun`).
    """
    todo: JobQueue[J] = JobQueue(jobs)
    run: PoolRun[J] = PoolRun()
    lock = threading.Lock()

    def worker(index: int) -> None:
        env = None
        try:
            env = make_env()
            while (job := todo.get()) is not None:
                try:
                    play(env, job, todo)
                except Exception as e:  # unexpected: count it, start a new desktop
                    log.exception("desktop %d: %s crashed the harness", index, job)
                    on_crash(job, e, todo)
                    _close(env, index)
                    env = None
                    env = make_env()
        except Exception as e:  # this desktop is gone; the others carry on
            log.exception("desktop %d failed; its worker stops", index)
            with lock:
                run.env_errors.append(e)
        finally:
            if env is not None:
                _close(env, index)

    count = max(1, min(num_envs, len(todo))) if len(todo) else 0
    threads = [
        threading.Thread(target=worker, args=(i,), name=f"{name}-{i}", daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.left = todo.drain()
    return run
