"""Run an agent over tasks x trials on parallel desktops: :func:`evaluate_agent`.

The desktops are osworld-gym's episode pool (:func:`~osworld_gym.episodes.run_pool`: one worker
thread per desktop, and the thread that starts a desktop keeps driving it). Each worker builds its
own ``OSWorld-v0`` env and its own agent (``agent_factory()``), then takes (task, trial) jobs from
a shared queue. An episode is played by osworld-gym's loop
(:func:`~osworld_gym.episodes.run_episode`, as OSWorld's ``run_single_example`` does: reset, then
one agent answer per turn until DONE/FAIL or the step limit), with the step limit scored by the
chosen :mod:`~arpo_eval.protocol`.

**Infrastructure errors are never scores.** A desktop that fails to reset or dies mid-episode,
an evaluator that raises, or an agent backend that fails (:class:`~arpo_eval.agent_spec.AgentError`,
or any exception from ``act``) leaves the episode without ``result.txt`` (an
``infra_error.txt`` instead); it is retried ``infra_retries`` times in the same run, and a later
resumed run re-runs it. Summaries count such episodes apart.

With ``out_dir`` the episodes are recorded in OSWorld's layout (:mod:`arpo_eval.layout`) and a
resumed run skips every episode that has a ``result.txt``. Without it nothing is written, which
is what task selection wants:

>>> from arpo_eval.agents import FailAgent
>>> from osworld_gym.support import builtin_tasks
>>> tasks = builtin_tasks("os")[5:8]
>>> records = evaluate_agent(FailAgent, tasks, env_kwargs={"provider": "fake", "settle": None},
...                          progress=False)
>>> [(r.task_id, r.score) for r in records]
[('os-copy-001', 0.0), ('os-write-file-001', 0.0), ('os-infeasible-001', 1.0)]
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from osworld_gym.episodes import JobQueue, make_osworld_env, run_episode, run_pool
from osworld_gym.outcome import is_scored, write_outcome

from arpo_eval.layout import EPISODE, EpisodeRecord, RunManifest, read_episode, trial_model
from arpo_eval.protocol import Protocol, last_action

log = logging.getLogger(__name__)


class Annotate(gym.Wrapper):
    """Adds ``notes`` to the ``info`` of the next step (so the recorder writes them)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.notes: dict[str, Any] = {}

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.notes:
            info = {**info, **self.notes}
            self.notes = {}
        return obs, reward, terminated, truncated, info


@dataclass
class _Job:
    task: Any
    trial: int
    attempt: int = 0

    def __str__(self) -> str:
        return f"task {self.task.id} trial {self.trial}"


class _Desktop:
    """One worker's env, its per-trial recorders, and the protocol."""

    def __init__(
        self,
        env_kwargs: dict[str, Any],
        manifest: RunManifest | None,
        out: Path | None,
        record_video: bool,
    ):
        kwargs = {k: v for k, v in env_kwargs.items() if k != "tasks"}  # tasks come per episode
        self.env = make_osworld_env(disable_env_checker=True, tasks=None, **kwargs)
        self.annotated = Annotate(self.env)
        self.manifest, self.out, self.record_video = manifest, out, record_video
        self._recorders: dict[int, gym.Env] = {}

    @property
    def action_set(self):
        return self.env.unwrapped.action_set

    def for_trial(self, trial: int) -> gym.Env:
        if self.manifest is None or self.out is None:
            return self.annotated
        if trial not in self._recorders:
            from osworld_gym.recording import RecordEpisode

            m = self.manifest

            self._recorders[trial] = RecordEpisode(
                self.annotated,
                self.out,
                action_space=m.action_space,
                observation_type=m.observation_type,
                model=trial_model(m.model, trial),
                record_video=self.record_video,
            )
        return self._recorders[trial]

    def close(self) -> None:
        self.env.close()


def play_episode(
    env: gym.Env,
    annotate: Annotate,
    agent: Any,
    task: Any,
    *,
    trial: int,
    protocol: Protocol,
    max_steps: int,
    action_set: Any,
) -> EpisodeRecord:
    """Play one episode of ``task`` on ``env`` (a recorder around ``annotate``, or ``annotate``).

    The loop is osworld-gym's :func:`~osworld_gym.episodes.run_episode`; the protocol decides
    what the last turn's answer becomes. Never raises for desktop or agent failures: they come
    back as ``infra_error`` (unscored; the record has one field for every reason).
    """
    t0 = time.monotonic()
    rec = EpisodeRecord(
        task_id=task.id,
        domain=task.domain,
        trial=trial,
        infeasible=bool(task.is_infeasible),
        protocol=protocol.value,
    )
    recordable = env is not annotate

    def prepare(turn: int, text: str) -> tuple[Any, dict[str, Any]]:
        action, replaced = last_action(
            protocol, text, turn=turn, max_steps=max_steps, action_set=action_set
        )
        if replaced:
            annotate.notes = {"protocol_replaced": True, "protocol": protocol.value}
            rec.replaced_last_action = True
        return action, ({"response": text} if recordable else {})

    result = run_episode(env, agent, task, agent_task=task.instantiate(None), prepare=prepare)
    rec.steps = result.steps
    if result.scored:
        rec.score = result.score
    else:
        rec.infra_error = result.error
    rec.seconds = time.monotonic() - t0
    return rec


def _finish_dir(rec: EpisodeRecord, episode_dir: Path | None) -> None:
    """Write ``episode.json`` (and ``infra_error.txt`` when unscored) into its directory."""
    if episode_dir is None:
        return
    episode_dir.mkdir(parents=True, exist_ok=True)
    rec.episode_dir = str(episode_dir)
    if rec.infra_error is not None:
        write_outcome(episode_dir, infra_error=rec.infra_error)
    doc = {k: v for k, v in rec.to_json().items() if k != "episode_dir"}
    (episode_dir / EPISODE).write_text(json.dumps(doc, indent=2) + "\n")


def pending_jobs(
    tasks: Iterable[Any],
    trials: int,
    manifest: RunManifest | None,
    out: Path | None,
    *,
    resume: bool,
) -> tuple[list[_Job], list[EpisodeRecord]]:
    """Jobs still to run, and the records of those already done (``result.txt`` present).

    An unfinished episode directory is cleared, as OSWorld's ``get_unfinished`` does.
    """
    jobs, done = [], []
    for trial in range(trials):
        for task in tasks:
            if manifest is not None and out is not None:
                d = manifest.episode_dir(out, trial, task.domain, task.id)
                if resume and is_scored(d):
                    rec = read_episode(
                        d,
                        task_id=task.id,
                        domain=task.domain,
                        trial=trial,
                        infeasible=bool(task.is_infeasible),
                        protocol=manifest.protocol,
                    )
                    assert rec is not None
                    done.append(rec)
                    continue
                if d.exists():
                    shutil.rmtree(d)
            jobs.append(_Job(task, trial))
    return jobs, done


def evaluate_agent(
    agent_factory: Callable[[], Any],
    tasks: Iterable[Any],
    *,
    env_kwargs: dict[str, Any] | None = None,
    num_envs: int = 1,
    trials: int = 1,
    protocol: Protocol | str = Protocol.STANDARD,
    out_dir: str | Path | None = None,
    manifest: RunManifest | None = None,
    resume: bool = True,
    infra_retries: int = 1,
    record_video: bool = False,
    progress: bool = True,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    desktops: Sequence[Mapping[str, Any]] | None = None,
) -> list[EpisodeRecord]:
    """Run ``agent_factory()`` agents on every task ``trials`` times over ``num_envs`` desktops.

    Args:
        agent_factory: makes one agent (``reset(task)``, ``act(obs, info) -> str``) per desktop.
        tasks: osworld-gym :class:`~osworld_gym.tasks.Task` objects.
        env_kwargs: ``gym.make("OSWorld-v0", ...)`` arguments (``provider``, ``action_set``,
            ``action_set_kwargs``, ``max_steps``, ``screen_size``, ``settle``, ...).
        num_envs: desktops at once.
        trials: episodes per task.
        protocol: how the step limit is scored (:mod:`arpo_eval.protocol`).
        out_dir: record episodes in OSWorld's layout there (needs ``manifest``, which names the
            model directory); ``None``: record nothing.
        manifest: the run's manifest (:class:`~arpo_eval.layout.RunManifest`).
        resume: skip episodes that already have a ``result.txt`` under ``out_dir``.
        infra_retries: re-run an episode whose desktop/evaluator/agent failed this many times.
        record_video: also save the guest's screen recording per episode.
        progress: show a tqdm bar (done/total and the running success rate).
        on_record: called (from worker threads) with every finished record.
        desktops: what each desktop runs, one entry per desktop (at least ``num_envs``), laid
            over ``env_kwargs``: desktop ``i`` is ``{**env_kwargs, **desktops[i]}`` (the slots of
            :meth:`osworld_gym.providers.sources.DesktopSource.slots`: each remote desktop its
            own guest URL). A desktop rebuilt after a crash keeps its slot.

    Returns:
        One record per (task, trial), trial-major in task order: done ones read from disk, new
        ones as played (after retries).
    """
    tasks = list(tasks)
    protocol = Protocol.parse(protocol)
    env_kwargs = dict(env_kwargs or {})
    if desktops is not None and len(desktops) < num_envs:
        raise ValueError(f"{num_envs} desktops at once, but only {len(desktops)} desktop slots")
    max_steps = int(env_kwargs.setdefault("max_steps", 15))
    out = Path(out_dir) if out_dir is not None else None
    if out is not None and manifest is None:
        raise ValueError("recording into out_dir needs the run's manifest (model directory names)")
    jobs, done = pending_jobs(tasks, trials, manifest, out, resume=resume)
    results: dict[tuple[str, int], EpisodeRecord] = {(r.task_id, r.trial): r for r in done}
    bar = _Progress(len(tasks) * trials, done, enabled=progress)
    lock = threading.Lock()
    local = threading.local()  # one agent per worker thread, kept when its desktop is replaced
    slots = iter(range(num_envs))  # desktop slot i: claimed by the worker that first builds one

    def episode_dir(job: _Job) -> Path | None:
        if manifest is None or out is None:
            return None
        return manifest.episode_dir(out, job.trial, job.task.domain, job.task.id)

    def finish(rec: EpisodeRecord, job: _Job, todo: JobQueue[_Job]) -> None:
        _finish_dir(rec, episode_dir(job))
        if rec.infra_error is not None and job.attempt < infra_retries:
            log.warning(
                "task %s trial %d: %s; retrying (%d/%d)",
                job.task.id,
                job.trial,
                rec.infra_error,
                job.attempt + 1,
                infra_retries,
            )
            todo.put(_Job(job.task, job.trial, job.attempt + 1))
            return
        with lock:
            results[(rec.task_id, rec.trial)] = rec
            bar.add(rec)
        if on_record is not None:
            on_record(rec)

    def make_desktop() -> _Desktop:
        kwargs = env_kwargs
        if desktops is not None:
            if not hasattr(local, "slot"):  # a worker keeps its slot when its desktop is rebuilt
                with lock:
                    local.slot = next(slots)
            kwargs = {**env_kwargs, **desktops[local.slot]}
        desktop = _Desktop(kwargs, manifest, out, record_video)
        if not hasattr(local, "agent"):
            try:
                local.agent = agent_factory()
            except BaseException:
                desktop.close()
                raise
        return desktop

    def play(desktop: _Desktop, job: _Job, todo: JobQueue[_Job]) -> None:
        rec = play_episode(
            desktop.for_trial(job.trial),
            desktop.annotated,
            local.agent,
            job.task,
            trial=job.trial,
            protocol=protocol,
            max_steps=max_steps,
            action_set=desktop.action_set,
        )
        finish(rec, job, todo)

    def crashed(job: _Job, e: Exception, todo: JobQueue[_Job]) -> None:  # then a new desktop
        rec = EpisodeRecord(
            task_id=job.task.id,
            domain=job.task.domain,
            trial=job.trial,
            infeasible=bool(job.task.is_infeasible),
            protocol=protocol.value,
            infra_error=f"harness error: {type(e).__name__}: {e}",
        )
        finish(rec, job, todo)

    run = run_pool(
        jobs, play, make_env=make_desktop, on_crash=crashed, num_envs=num_envs, name="arpo-eval"
    )
    bar.close()
    # jobs no desktop could take (every worker failed): unscored, counted as infra errors
    for job in run.left:
        results.setdefault(
            (job.task.id, job.trial),
            EpisodeRecord(
                task_id=job.task.id,
                domain=job.task.domain,
                trial=job.trial,
                infeasible=bool(job.task.is_infeasible),
                protocol=protocol.value,
                infra_error="not run: no desktop was available (every worker failed; see the log)",
            ),
        )
    return [results[(t.id, k)] for k in range(trials) for t in tasks if (t.id, k) in results]


class _Progress:
    """tqdm bar: episodes done / total, running success rate (mean score), infra errors."""

    def __init__(self, total: int, done: list[EpisodeRecord], *, enabled: bool):
        self.scores: list[float] = []
        self.infra = 0
        for rec in done:
            self._count(rec)
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, initial=len(done), desc="episodes", unit="ep", dynamic_ncols=True
            )
            self._postfix()

    def _count(self, rec: EpisodeRecord) -> None:
        if rec.scored and rec.score is not None:  # (scored says so; the type checker cannot)
            self.scores.append(float(rec.score))
        else:
            self.infra += 1

    def add(self, rec: EpisodeRecord) -> None:
        self._count(rec)
        if self.bar is not None:
            self.bar.update(1)
            self._postfix()

    def _postfix(self) -> None:
        assert self.bar is not None
        rate = sum(self.scores) / len(self.scores) if self.scores else float("nan")
        self.bar.set_postfix(
            success=f"{rate:.1%}", scored=len(self.scores), infra=self.infra, refresh=False
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
