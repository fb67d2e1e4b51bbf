"""Asynchronous, episode-level rollouts (issue 28), and the timeline that measures both modes.

The synchronous :class:`~arpo_trainer.rollout.Collector` plays every desktop of a process in lock
step: a turn waits for the slowest desktop, a desktop that finished early idles until the batch
ends, and the generator idles while desktops act. This module holds the pieces of the other mode:

* :class:`BatchingGenerator`: an in-process generation service. Desktop threads submit one
  context each; a server thread answers, in one batched ``Policy.sample`` call, every context
  that is waiting when it becomes free. Swapping in new weights (:meth:`BatchingGenerator.sync`)
  happens between batches and bumps the *policy version* that every answer carries. On GPU the
  same role is played by a ``vllm serve`` process (TRL's server mode, which
  :class:`~arpo_trainer.generation.TRLGenerationPolicy` already drives); this CPU service wraps
  :class:`~arpo_trainer.generation.TransformersPolicy`.
* :class:`AsyncCollector`: one thread per desktop (each desktop a one-slot
  :class:`~arpo_trainer.desktops.DesktopPool`, i.e. its own worker process), each playing whole
  episodes from a job queue against the generator and putting finished trajectories, tagged with
  the oldest policy version any of their turns was sampled with, on a result queue.
* :class:`GroupAssembler`: collects the members of each GRPO group; a group is complete when all
  its members arrived; complete groups at most ``max_staleness`` versions behind the learner are
  handed out, older ones are dropped and counted. Infra-failed members stay in the group as
  invalid rows (they never count in statistics or the loss, exactly as in sync mode), and ARPO's
  replay (:meth:`~arpo_trainer.replay.ReplayBuffer.inject` into all-fail groups, the per-task
  buffer updated with fresh successes) runs on the complete groups, unchanged.
* :class:`GroupFeed`: what is submitted to the desktops and when the learner gets it, for both
  drivers (:func:`run_async`, :class:`TrainerRollouts`). By default the *version gate*: a group
  starts only when it can be taken within ``max_staleness``, and steps take groups in the order
  they were submitted, so staleness is bounded by admission and no played group is dropped.
* :class:`Timeline`: spans recorded by the rollout code itself (desktop busy time from each
  desktop's own ``info["timings"]``, generate calls, learner steps), turned into the utilisation
  figures the benchmark prints.
"""

from __future__ import annotations

import io
import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from osworld_gym.actions import ActionSet
from osworld_gym.episodes import done_text
from osworld_gym.errors import ActionError
from PIL import Image

from arpo_trainer.chat import EncodedSequence, TurnEncoder
from arpo_trainer.desktops import DesktopPool, StepResult
from arpo_trainer.generation import Policy, SimulatedLatencyPolicy, TurnSample, served_turns
from arpo_trainer.replay import InjectionStats, ReplayBuffer
from arpo_trainer.rollout import Trajectory, Turn
from arpo_trainer.vllm_rollout import VLLMRolloutEngine

log = logging.getLogger(__name__)

#: keys of a desktop's ``info["timings"]`` (milliseconds) that are the desktop working: acting
#: (parse, execute), settling and taking the screenshot (observe), scoring (eval), resetting.
BUSY_TIMING_KEYS = ("reset_ms", "parse_ms", "exec_ms", "observe_ms", "eval_ms")


def desktop_busy_s(info: dict[str, Any]) -> float:
    """Seconds desktop work took in one reset or step, from the desktop's own timings."""
    timings = info.get("timings") or {}
    if "reset_ms" in timings:  # a reset's own parts are inside reset_ms
        return float(timings["reset_ms"]) / 1000.0
    return sum(float(timings.get(k, 0.0)) for k in BUSY_TIMING_KEYS) / 1000.0


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Timeline:
    """Thread-safe record of what each part of the loop spent its time on.

    ``desktop_busy`` adds up desktop-seconds inside an action, its settle, a reset or scoring;
    ``spans`` holds the generator's and learner's busy intervals (``(kind, start, end)``,
    ``time.monotonic`` seconds).
    """

    desktop_busy: float = 0.0
    spans: list[tuple[str, float, float]] = field(default_factory=list)
    episodes: int = 0
    turns: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_desktop(self, seconds: float) -> None:
        with self._lock:
            self.desktop_busy += seconds

    def add_span(self, kind: str, start: float, end: float) -> None:
        with self._lock:
            self.spans.append((kind, start, end))

    def add_episode(self, turns: int) -> None:
        with self._lock:
            self.episodes += 1
            self.turns += turns

    def busy(self, kind: str, start: float, end: float) -> float:
        """Seconds of ``[start, end]`` covered by spans of ``kind`` (overlaps merged)."""
        ivs = sorted((max(s, start), min(e, end)) for k, s, e in self.spans if k == kind)
        total, cur_s, cur_e = 0.0, None, None
        for s, e in ivs:
            if e <= s:
                continue
            if cur_e is None or s > cur_e:
                if cur_e is not None and cur_s is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None and cur_s is not None:
            total += cur_e - cur_s
        return total

    def report(self, start: float, end: float, desktops: int) -> dict[str, float]:
        """The figures of issue 28 over ``[start, end]``."""
        wall = max(end - start, 1e-9)
        return {
            "wall_s": wall,
            "episodes": float(self.episodes),
            "turns": float(self.turns),
            "episodes_per_hour": self.episodes * 3600.0 / wall,
            "desktop_utilisation": self.desktop_busy / (desktops * wall),
            "generator_idle": 1.0 - self.busy("generate", start, end) / wall,
            "learner_idle": 1.0 - self.busy("learn", start, end) / wall,
        }


class InstrumentedPool:
    """A :class:`DesktopPool` whose resets and steps add each desktop's busy time to a
    :class:`Timeline` (what the synchronous collector is measured with; same interface)."""

    def __init__(self, pool: DesktopPool, timeline: Timeline):
        self.pool, self.timeline, self.n = pool, timeline, pool.n

    def reset(self, tasks: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
        frames, infos = self.pool.reset(tasks)
        for info in infos:
            self.timeline.add_desktop(desktop_busy_s(info))
        return frames, infos

    def step(self, actions: list[str | None]) -> list[StepResult | None]:
        results = self.pool.step(actions)
        for res in results:
            if res is not None:
                self.timeline.add_desktop(desktop_busy_s(res.info))
        return results

    def close(self) -> None:
        self.pool.close()


class InstrumentedPolicy:
    """A :class:`Policy` whose calls are recorded as ``generate`` spans; ``latency_s`` adds a
    *simulated* per-call latency (a stand-in for a large model's per-turn time on a GPU, where a
    batched call costs about the same whatever the batch size)."""

    def __init__(self, policy: Policy, timeline: Timeline, latency_s: float = 0.0):
        self.policy = SimulatedLatencyPolicy(policy, latency_s) if latency_s > 0 else policy
        self.timeline, self.latency_s = timeline, latency_s

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        t0 = time.monotonic()
        out = self.policy.sample(contexts, rows)
        self.timeline.add_span("generate", t0, time.monotonic())
        return out


# -- the generation service -------------------------------------------------------------------


class BatchingGenerator:
    """Answers single contexts from many threads with batched ``policy.sample`` calls.

    Args:
        policy: what samples (its ``sample`` runs on the server thread only).
        max_batch: most contexts in one call (``None``: everything waiting).
        version: the policy version answers are tagged with until :meth:`sync`.
        request_latency_s: *simulated* latency of every request, paid concurrently by all
            requests (as on a continuous-batching server such as vLLM, where a new request joins
            the running batch instead of waiting for it): each answer is delivered this long
            after its batch was computed, without holding the server. Recorded as ``generate``
            spans on ``timeline``.
        timeline: where the simulated request spans go.
        max_in_flight: batches being sampled at once. 1: a batch waits for the one before it
            (one model copy answers one call at a time). More: a batch whose contexts arrived
            while earlier ones are still being sampled goes out at once, on its own thread, as
            concurrent requests to a vLLM server (which batches them into its running batch)
            should; ``policy.sample`` must then be safe to call from several threads.
            :meth:`sync` stops new batches, waits for every one in flight and only then swaps
            the weights, so each answer is tagged with the version that sampled it.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        max_batch: int | None = None,
        version: int = 0,
        request_latency_s: float = 0.0,
        timeline: Timeline | None = None,
        max_in_flight: int = 1,
    ):
        if max_batch is not None and max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.policy = policy
        self.max_batch = max_batch
        self._version_changed = threading.Condition()
        self._version = version
        self.batches = 0
        self.batch_sizes: list[int] = []
        self.request_latency_s = request_latency_s
        self.timeline = timeline
        self._pending: queue.Queue[tuple[EncodedSequence, int, Future] | None] = queue.Queue()
        self.max_in_flight = max_in_flight
        # batches being sampled, and whether a weight swap waits for them to end (it keeps new
        # batches out meanwhile, so a push is never starved by a steady stream of requests)
        self._flight = threading.Condition()
        self._in_flight = 0
        self._swapping = False
        self.peak_in_flight = 0  # most batches ever sampled at once
        self._samplers: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._serve, name="batching-generator", daemon=True)
        self._closed = False
        self._thread.start()

    @property
    def version(self) -> int:
        """The policy version answers are tagged with (what the version gate reads)."""
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        with self._version_changed:
            self._version = value
            self._version_changed.notify_all()

    def wait_version(
        self, at_least: Callable[[], int | None], stop: threading.Event, poll_s: float = 0.5
    ) -> bool:
        """Block until :attr:`version` is at least ``at_least()`` (re-read on every wake-up, so a
        gate may be lowered while a desktop waits; ``None``: no gate) and return True, or until
        ``stop`` is set (False)."""
        with self._version_changed:
            while True:
                gate = at_least()
                if gate is None or self._version >= gate:
                    return True
                if stop.is_set():
                    return False
                self._version_changed.wait(poll_s)

    def wake(self) -> None:
        """Wake the desktops waiting at the version gate to re-read their gates."""
        with self._version_changed:
            self._version_changed.notify_all()

    def submit(self, context: EncodedSequence, row: int) -> Future:
        """A future of ``(TurnSample, version)`` for ``context``."""
        if self._closed:
            raise RuntimeError("the generator is closed")
        fut: Future = Future()
        self._pending.put((context, row, fut))
        return fut

    def sync(
        self, policy: Policy | None, version: int, update: Callable[[], None] | None = None
    ) -> None:
        """New weights: later batches sample with ``policy`` (or the same object, whose weights
        ``update`` copies in, between batches) and are tagged ``version``. Starts no new batch
        and waits for every batch in flight first."""
        with self._flight:
            while self._swapping:  # one swap at a time
                self._flight.wait()
            self._swapping = True
            while self._in_flight:
                self._flight.wait()
        try:
            if update is not None:
                update()
            if policy is not None:
                self.policy = policy
            self.version = version
        finally:
            with self._flight:
                self._swapping = False
                self._flight.notify_all()

    def close(self) -> None:
        self._closed = True
        self._pending.put(None)
        self._thread.join(timeout=60)
        for t in list(self._samplers):
            t.join(timeout=60)

    def _begin_batch(self) -> int:
        """Wait for a free slot and no swap pending; the version the batch samples with."""
        with self._flight:
            while self._swapping or self._in_flight >= self.max_in_flight:
                self._flight.wait()
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            return self._version

    def _end_batch(self) -> None:
        with self._flight:
            self._in_flight -= 1
            self._flight.notify_all()

    def _serve(self) -> None:
        while True:
            first = self._pending.get()
            if first is None:
                return
            # a slot first, then whatever else arrived while waiting for it joins the batch
            version = self._begin_batch()
            batch = [first]
            while self.max_batch is None or len(batch) < self.max_batch:
                try:
                    item = self._pending.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._pending.put(None)
                    break
                batch.append(item)
            if self.max_in_flight == 1:
                self._sample(batch, version)
                continue
            self._samplers = [t for t in self._samplers if t.is_alive()]
            sampler = threading.Thread(
                target=self._sample, args=(batch, version), name="generator-batch", daemon=True
            )
            self._samplers.append(sampler)
            sampler.start()

    def _sample(self, batch: list[tuple[EncodedSequence, int, Future]], version: int) -> None:
        """One batch, begun by :meth:`_begin_batch`: its answers, or its error, to its futures."""
        t0 = time.monotonic()
        try:
            policy = self.policy
            samples = policy.sample([b[0] for b in batch], [b[1] for b in batch])
            if len(samples) != len(batch):
                # checked here, not by a strict zip below: an error raised outside this try
                # would end the serving thread and leave every desktop waiting
                raise ValueError(
                    f"the policy answered {len(samples)} samples for {len(batch)} contexts"
                )
        except BaseException as e:  # noqa: BLE001 - handed to every waiting desktop
            for _, _, fut in batch:
                fut.set_exception(e)
            return
        finally:
            self._end_batch()
        with self._flight:
            self.batches += 1
            self.batch_sizes.append(len(batch))
        if self.request_latency_s > 0:
            if self.timeline is not None:
                self.timeline.add_span("generate", t0, time.monotonic() + self.request_latency_s)
            for (_, _, fut), sample in zip(batch, samples, strict=True):
                timer = threading.Timer(
                    self.request_latency_s, fut.set_result, ((sample, version),)
                )
                timer.daemon = True
                timer.start()
            return
        for (_, _, fut), sample in zip(batch, samples, strict=True):
            fut.set_result((sample, version))


class ServerPolicy:
    """The asynchronous generator's policy over a vLLM server (``rollout_mode="async"``): one
    batched request per call, with the weights the server holds; the sampled tokens' processed
    log-probs come back with them (the importance-sampling correction needs them). Weight
    pushes are the generator's business (``VLLMRolloutEngine.push_weights`` between two of its
    batches), never this object's."""

    def __init__(self, engine: VLLMRolloutEngine, encoder: TurnEncoder):
        if engine.mode != "server":
            raise ValueError("ServerPolicy samples from a vLLM server (vllm_mode='server')")
        self.engine, self.encoder = engine, encoder

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        if not contexts:
            return []
        images = [[Image.open(io.BytesIO(png)).convert("RGB") for png in c.pngs] for c in contexts]
        ids, logps = self.engine.serve(
            [c.input_ids for c in contexts], [im or None for im in images]
        )
        return served_turns(ids, logps, self.encoder)


# -- desktops playing on their own ------------------------------------------------------------


class LoopError(RuntimeError):
    """What stops the whole asynchronous loop, not one episode (the generator failed, a desktop
    is unfit to train on, anything raised while playing that is not a desktop's reset or step
    failing): the desktop thread that met it records it and plays no more, and the learner's
    :meth:`GroupFeed.take` raises it, where a synchronous rollout raises it too."""


class _DesktopFailed(Exception):
    """A desktop's reset or step raised (its ``__cause__``): that episode ends as an infra
    failure, the loop goes on."""


@dataclass
class EpisodeJob:
    """One episode to play: member ``index`` of GRPO group ``group``."""

    task: Any
    group: int
    index: int
    uid: int = 0
    #: the version gate: the episode starts (reset) only once the generator's version is at
    #: least this (``None``: at once)
    not_before: int | None = None


@dataclass
class Played:
    """A finished episode with what the assembler needs."""

    job: EpisodeJob
    trajectory: Trajectory
    version: int  # oldest policy version any of its turns was sampled with


def _task_fields(task: Any, info: dict[str, Any]) -> tuple[str, str]:
    task_id = str(info.get("task_id") or getattr(task, "id", task))
    instruction = getattr(task, "instruction", None) or (
        task.get("instruction") if isinstance(task, dict) else ""
    )
    return task_id, str(instruction)


class AsyncCollector:
    """Desktops that each play whole episodes on their own thread against a
    :class:`BatchingGenerator`.

    Args:
        pools: one one-slot :class:`DesktopPool` (or :class:`InstrumentedPool`) per desktop.
        encoder, action_set, max_turns, end_on_format_error: as for
            :class:`~arpo_trainer.rollout.Collector` (same episode semantics, same format-error
            and infra-error handling; a desktop whose reset or step raises ends that episode as
            an infra failure, anything else raised stops the loop as a :class:`LoopError`).
        generator: the shared generation service.
        timeline: where finished episodes are counted.
        max_staleness: the learner's bound (``None``: none). An episode whose newest answer is
            more than this many versions ahead of the first answer of *any* member of its group
            is abandoned before its action runs (``end="stale"``, no score): its group can only
            be dropped by a learner at least at that version (a group's version is its oldest
            turn's), so playing it on wastes the desktop. Long episodes (15 turns) otherwise
            finish only to be dropped. For the same reason a member that would start when the
            generator is already more than this many versions past its group's first answer is
            not started at all (no reset, no turn). Members of one group start at different
            times (a desktop takes the next job when it is free), so the group's first answer,
            not the episode's own, is what dooms it.
        allow_unseparated: play on desktops whose reset info says ``separated: False`` (the
            agent runs with the judge's identity and could forge its scores), as
            :class:`~arpo_trainer.rollout.Collector`'s; otherwise such a reset stops the loop
            (:class:`LoopError`) before any action.
    """

    def __init__(
        self,
        pools: list[Any],
        encoder: TurnEncoder,
        action_set: ActionSet,
        generator: BatchingGenerator,
        *,
        max_turns: int,
        end_on_format_error: bool = True,
        timeline: Timeline | None = None,
        max_staleness: int | None = None,
        allow_unseparated: bool = True,
    ):
        if any(p.n != 1 for p in pools):
            raise ValueError("each desktop of an AsyncCollector is a pool of one")
        self.pools = pools
        self.encoder = encoder
        self.action_set = action_set
        self.generator = generator
        self.max_turns = max_turns
        self.end_on_format_error = end_on_format_error
        self.timeline = timeline or Timeline()
        self.max_staleness = max_staleness
        self.allow_unseparated = allow_unseparated
        self.abandoned_stale = 0  # episodes abandoned as already too stale to train on
        self.gated_waits = 0  # episodes whose start waited for the version gate
        self.error: LoopError | None = None  # what stopped a desktop thread (see check)
        self._stop = threading.Event()
        self._done_text = done_text(action_set)
        self.jobs: queue.Queue[EpisodeJob | None] = queue.Queue()
        self.results: queue.Queue[Played] = queue.Queue()
        self.episode_of: dict[int, EpisodeJob] = {}  # uid -> job (for scripted policies)
        # group -> the oldest version any of its members' first answers carried, and how many of
        # its members are still to return (the entry goes when the last one returns)
        self._group_first: dict[int, int] = {}
        self._group_left: dict[int, int] = {}
        self._uid = 0
        self.episodes_per_desktop = [0] * len(pools)  # played to their end, whatever the outcome
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"desktop-{i}", daemon=True)
            for i in range(len(pools))
        ]
        for t in self._threads:
            t.start()

    def submit_group(
        self, task: Any, group: int, size: int, not_before: int | None = None
    ) -> list[EpisodeJob]:
        """Queue ``size`` episodes of ``task`` as GRPO group ``group``; with ``not_before`` none
        of them starts before the generator's version reaches it (the version gate). Jobs start
        in the order they were queued, so gates must not decrease from one group to the next.
        Returns the jobs (their ``not_before`` may be changed until they start)."""
        with self._lock:
            self._group_left[group] = self._group_left.get(group, 0) + size
        jobs: list[EpisodeJob] = []
        for k in range(size):
            with self._lock:
                self._uid += 1
                job = EpisodeJob(task, group, k, self._uid, not_before)
                self.episode_of[job.uid] = job
            jobs.append(job)
            self.jobs.put(job)
        return jobs

    def check(self) -> None:
        """Raise the :class:`LoopError` that stopped a desktop thread, if one did."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """Stop the desktop threads after their current episode (desktops stay open); a thread
        waiting at the version gate stops without playing."""
        self._stop.set()
        for _ in self._threads:
            self.jobs.put(None)
        # one deadline for all: threads stuck on a hung generator made it 300 s per desktop
        deadline = time.monotonic() + 300
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        alive = sum(t.is_alive() for t in self._threads)
        if alive:
            log.warning("%d desktop thread(s) still playing 300 s after close; left behind", alive)

    def _work(self, slot: int) -> None:
        pool = self.pools[slot]
        while True:
            job = self.jobs.get()
            if job is None or self._stop.is_set():  # closing: jobs still queued are not played
                return
            if job.not_before is not None and self.generator.version < job.not_before:
                with self._lock:
                    self.gated_waits += 1
                if not self.generator.wait_version(lambda j=job: j.not_before, self._stop):
                    return  # closing
            try:
                played = self.play(pool, job)
            except _DesktopFailed as failed:  # a broken desktop ends only its episode
                e = failed.__cause__
                log.warning("desktop %d: episode failed: %s", slot, e, exc_info=True)
                task_id, instruction = _task_fields(job.task, {})
                traj = Trajectory(task_id, instruction, infra_error=repr(e), end="infra_error")
                played = Played(job, traj, self.generator.version)
            except Exception as e:  # noqa: BLE001 - not this episode's failure: the learner's
                # (a sync rollout raises it too; as an infra failure it would repeat unseen)
                error = e if isinstance(e, LoopError) else LoopError(f"desktop {slot}: {e!r}")
                if error is not e:
                    error.__cause__ = e
                log.error("desktop %d: the async loop stops: %s", slot, error, exc_info=True)
                with self._lock:
                    self.error = self.error or error
                return
            self.timeline.add_episode(len(played.trajectory.turns))
            self.episodes_per_desktop[slot] += 1
            with self._lock:
                self._group_left[job.group] -= 1
                if self._group_left[job.group] <= 0:
                    del self._group_left[job.group]
                    self._group_first.pop(job.group, None)
            self.results.put(played)

    def _group_too_stale(self, group: int, version: int) -> bool:
        """Whether an answer of ``version`` is more than ``max_staleness`` versions past the
        first answer of ``group``'s oldest member (then the group can only be dropped)."""
        if self.max_staleness is None:
            return False
        with self._lock:
            first = self._group_first.get(group)
        return first is not None and version - first > self.max_staleness

    def _abandon(self, traj: Trajectory) -> None:
        traj.end = "stale"  # its group will be dropped: stop using the desktop for it
        with self._lock:
            self.abandoned_stale += 1

    def play(self, pool: Any, job: EpisodeJob) -> Played:
        """One episode of ``job`` on ``pool`` (the same turn semantics as ``Collector.run``)."""
        if self._group_too_stale(job.group, self.generator.version):
            # a sibling's first answer is already too old: the group can only be dropped
            task_id, instruction = _task_fields(job.task, {})
            traj = Trajectory(task_id=task_id, instruction=instruction)
            self._abandon(traj)
            with self._lock:
                oldest = self._group_first[job.group]
            traj.step = oldest
            return Played(job, traj, oldest)
        try:
            frames, infos = pool.reset([job.task])
        except Exception as e:
            raise _DesktopFailed from e
        if not self.allow_unseparated and infos[0].get("separated") is False:
            raise LoopError(
                "a desktop runs the agent with the judge's identity (reset info['separated'] is "
                "False): under RL the policy could forge its own scores. Run as root for judge "
                "separation, or set allow_unseparated_desktops=True to train anyway."
            )
        task_id, instruction = _task_fields(job.task, infos[0])
        traj = Trajectory(task_id=task_id, instruction=instruction)
        version = self.generator.version
        if infos[0].get("infra_error"):
            traj.infra_error, traj.end = str(infos[0]["infra_error"]), "infra_error"
            return Played(job, traj, version)
        shots = [self.encoder.screenshot_png(frames[0])]
        versions: list[int] = []
        for _turn in range(self.max_turns):
            context = self.encoder.encode(instruction, shots, [t.action_ids for t in traj.turns])
            try:
                sample, v = self.generator.submit(context, job.uid).result()
            except Exception as e:
                # the policy's failure, not the desktop's: a sync rollout raises it, and as an
                # infra-failed episode every later one would fail too, unseen by the learner
                raise LoopError(f"the generator failed: {e!r}") from e
            versions.append(v)
            if len(versions) == 1:
                with self._lock:
                    first = self._group_first.get(job.group)
                    self._group_first[job.group] = v if first is None else min(first, v)
            if self._group_too_stale(job.group, v):
                self._abandon(traj)
                break
            error = self._parse_error(sample.text)
            traj.turns.append(Turn(shots[-1], sample.ids, sample.logps, sample.text, error))
            if error is not None:
                traj.format_errors += 1
            action = (
                self._done_text if (error is not None and self.end_on_format_error) else sample.text
            )
            try:
                res = pool.step([action])[0]
            except Exception as e:
                raise _DesktopFailed from e
            if res is None:
                traj.infra_error, traj.end = "desktop slot ended unexpectedly", "infra_error"
                break
            if res.info.get("infra_error"):
                traj.infra_error, traj.end = str(res.info["infra_error"]), "infra_error"
                break
            if res.done:
                traj.score = res.reward
                if error is not None and self.end_on_format_error:
                    traj.end = "format_error"
                else:
                    traj.end = res.info.get("special") or ("truncated" if res.truncated else "DONE")
                break
            shots.append(self.encoder.screenshot_png(res.screenshot))
        else:
            traj.infra_error = (
                f"episode still running after max_turns={self.max_turns}; "
                "make the env's max_steps equal to max_turns"
            )
            traj.end = "infra_error"
        version = min(versions, default=version)
        traj.step = version
        return Played(job, traj, version)

    def _parse_error(self, text: str) -> str | None:
        try:
            self.action_set.parse(text)
        except ActionError as e:
            return str(e)
        return None


# -- groups for the learner -------------------------------------------------------------------


@dataclass
class AssemblyStats:
    """Counts of :class:`GroupAssembler` since it was made."""

    complete: int = 0
    taken: int = 0
    dropped_stale: int = 0
    infra_members: int = 0
    staleness: list[int] = field(default_factory=list)  # versions behind, per group taken
    injection: InjectionStats = field(default_factory=InjectionStats)


class GroupAssembler:
    """Complete GRPO groups, at most ``max_staleness`` policy versions old, with ARPO replay.

    Args:
        group_size: members per group (``num_generations``).
        max_staleness: a group whose oldest member was sampled with version ``v`` is handed to a
            learner at version ``current`` only if ``current - v <= max_staleness``; otherwise it
            is dropped and counted in ``stats.dropped_stale``. 0 is on-policy.
        replay: ARPO's buffer (``None``: no replay). Injection runs on each group handed out, the
            buffer then stores its fresh successes, as the synchronous trainer does per step.
        in_order: hand groups out in the order they were announced with :meth:`expect` (the
            version gate's order: a group is taken at the learner step its gate was set for),
            waiting for the oldest; ``False``: whichever complete groups arrived first.
    """

    def __init__(
        self,
        group_size: int,
        max_staleness: int,
        replay: ReplayBuffer | None = None,
        *,
        in_order: bool = False,
    ):
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be at least 0, got {max_staleness}")
        self.group_size = group_size
        self.max_staleness = max_staleness
        self.replay = replay
        self.in_order = in_order
        self.stats = AssemblyStats()
        self._partial: dict[int, list[Played]] = {}
        self._ready: list[list[Played]] = []
        self._order: list[int] = []  # in_order: groups announced and not yet taken or dropped

    @property
    def unused(self) -> bool:
        """Nothing was announced, added or taken yet."""
        return not (self.stats.complete or self.stats.taken or self._partial or self._order)

    def waiting_order(self) -> list[int]:
        """In order mode: the groups announced and not yet taken or dropped, oldest first."""
        return list(self._order)

    def expect(self, group: int) -> None:
        """``group`` was submitted (in order mode its turn comes after every group before)."""
        if self.in_order:
            self._order.append(group)

    def add(self, played: Played) -> None:
        """One finished episode (any member of any group, in any order)."""
        members = self._partial.setdefault(played.job.group, [])
        members.append(played)
        if played.trajectory.infra_error is not None:
            self.stats.infra_members += 1
        if len(members) == self.group_size:
            del self._partial[played.job.group]
            members.sort(key=lambda p: p.job.index)
            self._ready.append(members)
            self.stats.complete += 1

    @property
    def ready(self) -> int:
        """Complete groups that :meth:`take` can hand out now (in order mode: the complete ones
        at the head of the order)."""
        if not self.in_order:
            return len(self._ready)
        done = {g[0].job.group for g in self._ready}
        n = 0
        for group in self._order:
            if group not in done:
                break
            n += 1
        return n

    def take(self, n: int, current_version: int) -> list[list[Trajectory]]:
        """Up to ``n`` complete, fresh-enough groups (oldest first), replay applied."""
        if self.in_order:
            by_id = {g[0].job.group: g for g in self._ready}
            candidates = [by_id[gid] for gid in self._order[: self.ready]]
        else:
            candidates = list(self._ready)
        fresh: list[list[Played]] = []
        gone: set[int] = set()
        for group in candidates:
            if len(fresh) >= n:
                break
            oldest = min(p.version for p in group)
            if current_version - oldest > self.max_staleness:
                self.stats.dropped_stale += 1  # with the version gate: never (a safety net)
            else:
                fresh.append(group)
                self.stats.staleness.append(current_version - oldest)
            gone.add(group[0].job.group)
        self._ready = [g for g in self._ready if g[0].job.group not in gone]
        self._order = [g for g in self._order if g not in gone]
        groups = [[p.trajectory for p in g] for g in fresh]
        self.stats.taken += len(groups)
        if self.replay is not None and groups:
            groups, inj = self.replay.inject(groups, current_version)
            self.stats.injection = InjectionStats.merged([self.stats.injection, inj])
            self.replay.update([t for g in groups for t in g], current_version)
        return groups


class GroupFeed:
    """What the asynchronous loop submits to the desktops and when the learner gets it: the one
    implementation behind :func:`run_async` (the benchmark's driver) and
    :class:`TrainerRollouts` (the trainer's).

    **The version gate** (``gate=True``, the default; bounded staleness by admission, as
    AReaL does, instead of by dropping): the ``i``-th group submitted is meant for learner step
    ``start_version + floor((i // groups_per_step) * steps_per_take)`` (its *target*), and none
    of its members starts (resets) before the generator's version reaches
    ``target - max_staleness``.
    The learner takes groups strictly in submission order, ``groups_per_step`` per step, so a
    group is taken at its target step or earlier (earlier only once a group before it was
    dropped). Its oldest turn was sampled at version ``target - max_staleness`` or later, so it is
    never too stale when taken: no played group is dropped by construction (the drop path stays
    as a safety net, counted in ``stats.dropped_stale``). Desktops idle while the gate is closed.
    The learner never waits for ever: the groups of its step can always start, because the
    generator's version at step ``v`` is at least ``v - (weight_sync_every - 1)``, and the config
    requires ``weight_sync_every <= max_staleness + 1``.

    ``gate=False`` is the earlier loop: groups start as soon as a desktop is free, the learner
    takes whichever complete groups arrived first, too stale ones are dropped and replaced.

    Args:
        collector, assembler: the desktops and the groups (a fresh assembler; the feed sets its
            ``in_order`` to ``gate``).
        task_of: the task of the ``i``-th group submitted.
        groups_per_step: groups a learner step takes.
        prefetch: most groups submitted and not yet taken or dropped (at least one step's).
        budget: most groups to hand out in all (``None``: no end); dropped groups are replaced.
        start_version: the learner version of the first step.
        steps_per_take: learner versions between two takes (the trainer's optimizer steps per
            generation batch), a fraction where that is not whole: with TRL generating every 3
            micro-batches and stepping the optimizer every 2, take ``k`` comes at step
            ``floor(3k / 2)``, i.e. 0, 1, 3, 4, 6.
    """

    def __init__(
        self,
        collector: AsyncCollector,
        assembler: GroupAssembler,
        task_of: Callable[[int], Any],
        *,
        groups_per_step: int,
        prefetch: int,
        gate: bool = True,
        budget: int | None = None,
        start_version: int = 0,
        steps_per_take: int | Fraction = 1,
    ):
        if groups_per_step < 1:
            raise ValueError(f"groups_per_step must be at least 1, got {groups_per_step}")
        if not assembler.unused:
            raise ValueError("a GroupFeed needs a fresh GroupAssembler")
        assembler.in_order = gate  # the gate's groups are taken in the order they were submitted
        self.collector, self.assembler, self.task_of = collector, assembler, task_of
        self.groups_per_step = groups_per_step
        self.prefetch = max(prefetch, groups_per_step)
        self.gate, self.budget = gate, budget
        if steps_per_take <= 0:
            raise ValueError(f"steps_per_take must be positive, got {steps_per_take}")
        self.start_version, self.steps_per_take = start_version, Fraction(steps_per_take)
        self.submitted = 0
        self.rebased = 0  # times the schedule was moved to the learner's actual version
        self._jobs: dict[int, list[EpisodeJob]] = {}  # group -> its jobs, until taken or dropped

    def target(self, index: int) -> int:
        """The learner step group ``index`` is meant for (taken then or earlier)."""
        return self.start_version + math.floor(
            (index // self.groups_per_step) * self.steps_per_take
        )

    def top_up(self) -> None:
        """Queue groups until ``prefetch`` are submitted and not yet taken or dropped (and no
        more than the budget needs)."""
        stats = self.assembler.stats
        while self.submitted - stats.taken - stats.dropped_stale < self.prefetch and (
            self.budget is None or self.submitted - stats.dropped_stale < self.budget
        ):
            gate = self._gate_of(self.submitted)
            self.assembler.expect(self.submitted)
            self._jobs[self.submitted] = self.collector.submit_group(
                self.task_of(self.submitted), self.submitted, self.assembler.group_size, gate
            )
            self.submitted += 1

    def _gate_of(self, index: int) -> int | None:
        return self.target(index) - self.assembler.max_staleness if self.gate else None

    def _keep_schedule(self, version: int) -> None:
        """Move the targets so that the oldest group not yet taken is meant for ``version``.

        Without drops and with ``steps_per_take`` right this never changes anything. A learner
        ahead of the schedule (``steps_per_take`` wrong, a skipped step) would otherwise find its
        groups too stale, and their replacements' gates too high to ever open; one behind it
        (groups taken early after a drop) would find the gates of the groups it needs above the
        generator's version. Gates of jobs not yet started are re-set, the waiting desktops woken.
        """
        waiting = self.assembler.waiting_order()
        head = waiting[0] if waiting else self.submitted
        shift = version - self.target(head)
        if not self.gate or shift == 0:
            return
        self.start_version += shift
        self.rebased += 1
        live = set(waiting)
        self._jobs = {g: jobs for g, jobs in self._jobs.items() if g in live}
        for g, jobs in self._jobs.items():
            for job in jobs:
                job.not_before = self._gate_of(g)
        self.collector.generator.wake()

    def take(self, n: int, version: int, *, poll_s: float = 1.0) -> list[list[Trajectory]]:
        """``n`` complete groups for the learner at ``version`` (waits for the desktops as long
        as any desktop thread is alive; raises the :class:`LoopError` a desktop thread met). The
        queue is topped up right after the groups are taken, *before* the learner step, so the
        desktops keep playing while it runs."""
        out: list[list[Trajectory]] = []
        while len(out) < n:
            self.collector.check()  # a desktop thread stopped the loop
            self._keep_schedule(version)  # the oldest group waiting is needed now
            self.top_up()
            if self.assembler.ready:
                out.extend(self.assembler.take(n - len(out), version))
                continue
            try:
                self.assembler.add(self.collector.results.get(timeout=poll_s))
            except queue.Empty:
                self.collector.check()
                if not any(t.is_alive() for t in self.collector._threads):  # noqa: SLF001
                    raise RuntimeError("every desktop thread of the async loop ended") from None
                continue
            while not self.collector.results.empty():
                self.assembler.add(self.collector.results.get_nowait())
        self.top_up()
        return out


def run_async(
    collector: AsyncCollector,
    assembler: GroupAssembler,
    tasks: Callable[[int], Any],
    *,
    groups: int,
    groups_per_step: int,
    learn: Callable[[list[list[Trajectory]], int], None],
    weight_sync_every: int = 1,
    sync_policy: Callable[[int], Policy | None] | None = None,
    prefetch_groups: int | None = None,
    timeline: Timeline | None = None,
    gate: bool = True,
) -> int:
    """Drive an asynchronous run: keep groups queued for the desktops, hand complete groups to
    ``learn(groups, version)`` ``groups_per_step`` at a time, push weights to the generator every
    ``weight_sync_every`` learner steps. Returns the learner steps taken.

    ``gate``: the version gate (see :class:`GroupFeed`; ``False``: the earlier
    take-whatever-is-complete loop, which drops too stale groups). ``tasks(g)`` is
    the task of group ``g``; ``groups`` is the budget of groups *handed to the learner*: a group
    dropped as stale is replaced by a new one, so the learner trains on as many groups as a
    synchronous run of the same budget (episodes played ahead and not taken when the budget is
    reached are not waited for). At most ``prefetch_groups`` (default ``2 * groups_per_step``)
    groups are submitted and not yet taken or dropped.
    """
    if weight_sync_every > assembler.max_staleness + 1:
        raise ValueError(
            f"weight_sync_every={weight_sync_every} needs max_staleness >= "
            f"{weight_sync_every - 1}: groups played between two syncs would be too stale"
        )
    feed = GroupFeed(
        collector,
        assembler,
        tasks,
        groups_per_step=groups_per_step,
        prefetch=prefetch_groups or 2 * groups_per_step,
        gate=gate,
        budget=groups,
        start_version=collector.generator.version,
    )
    version = collector.generator.version
    steps = 0
    while assembler.stats.taken < groups:
        batch = feed.take(min(groups_per_step, groups - assembler.stats.taken), version)
        t0 = time.monotonic()
        learn(batch, version)
        if timeline is not None:
            timeline.add_span("learn", t0, time.monotonic())
        steps += 1
        version += 1
        if steps % weight_sync_every == 0:
            collector.generator.sync(sync_policy(version) if sync_policy else None, version)
    return steps


def row_stream(
    n_rows: int, seed: int, rank: int = 0, processes: int = 1, skip: int = 0
) -> Iterator[int]:
    """The row indices process ``rank`` of ``processes`` plays, for ever: every process draws the
    same seeded shuffle of ``range(n_rows)``, epoch after epoch, and takes every ``processes``-th
    row of that one stream from position ``rank``. So the processes split each epoch between them
    (no row twice while the epoch lasts), as TRL's distributed sampler splits a batch's rows.
    ``skip``: leave out this process's first ``skip`` rows (those a resumed run played before).

    >>> ranks = [row_stream(4, 0, r, 2) for r in (0, 1)]
    >>> [[next(s), next(s)] for s in ranks]  # one epoch of 4 rows, split between 2 processes
    [[3, 0], [1, 2]]
    >>> next(row_stream(4, 0, 0, 2, skip=1))
    0
    """
    if n_rows < 1:
        raise ValueError("row_stream needs at least one row")
    if not 0 <= rank < processes:
        raise ValueError(f"rank {rank} is not one of {processes} processes")
    if skip < 0:
        raise ValueError(f"skip must be 0 or more, not {skip}")
    rng = random.Random(seed)
    position = 0
    while True:
        order = list(range(n_rows))
        rng.shuffle(order)
        while order:
            i = order.pop()
            if position % processes == rank:
                if skip:
                    skip -= 1
                else:
                    yield i
            position += 1


def takes_before(step: int, steps_per_take: int | Fraction) -> int:
    """How many takes a run whose k-th take is at learner step ``floor(k * steps_per_take)``
    made before ``step`` (the groups a run resumed at ``step`` has already trained on, in
    takes).

    >>> takes_before(0, 1), takes_before(3, 1), takes_before(3, Fraction(3, 2)), takes_before(4, 2)
    (0, 3, 2, 2)
    """
    if step < 0 or steps_per_take <= 0:
        raise ValueError(f"need step >= 0 and steps_per_take > 0, got {step}, {steps_per_take}")
    return math.ceil(Fraction(step) / Fraction(steps_per_take))


class TrainerRollouts:
    """The asynchronous loop as :class:`~arpo_trainer.trainer.ARPOTrainer` runs it in one process
    (each trainer process has its own, over its own desktops and share of the rows).

    Desktops play episodes of groups drawn from ``rows`` (a seeded shuffle, epoch after epoch) on
    their own threads, ``prefetch_groups`` groups ahead of the learner, while the learner trains;
    :meth:`take` hands out complete groups at most ``max_staleness`` versions old, through the
    same :class:`GroupFeed` as :func:`run_async` (by default the version gate: a group starts only
    when it can be taken within the bound, so none is dropped). Replay is left to the trainer,
    which applies it exactly as in sync mode.

    Args:
        pools: one one-slot desktop pool per desktop.
        rows: the training rows (``task_id``, ``prompt``); ``task_of(row)`` is the row's task.
        policy: the generator's policy (its own copy of the weights; see :meth:`sync`).
        groups_per_step: groups each :meth:`take` asks for (what the version gate's targets
            count in); ``steps_per_take``: learner versions between two takes (see
            :class:`GroupFeed`; a fraction where not whole).
        start_version: the learner's step at the first :meth:`take`.
        gate: the version gate (``False``: take whatever is complete, drop too stale groups).
        allow_unseparated: train on desktops whose agent is not separated from the judge
            (``allow_unseparated_desktops``; see :class:`AsyncCollector`).
        request_latency_s: a *simulated* latency paid per request, concurrently (see
            :class:`BatchingGenerator`; benchmarks only).
    """

    def __init__(
        self,
        pools: list[Any],
        encoder: TurnEncoder,
        action_set: ActionSet,
        policy: Policy,
        *,
        rows: list[dict[str, Any]],
        task_of: Callable[[dict[str, Any]], Any],
        group_size: int,
        max_staleness: int,
        max_turns: int,
        end_on_format_error: bool,
        prefetch_groups: int,
        seed: int,
        rank: int = 0,
        processes: int = 1,
        groups_per_step: int = 1,
        steps_per_take: int | Fraction = 1,
        start_version: int = 0,
        gate: bool = True,
        allow_unseparated: bool = True,
        requests_in_flight: int = 1,
        request_latency_s: float = 0.0,
    ):
        if not rows:
            raise ValueError("TrainerRollouts needs at least one training row")
        self.timeline = Timeline()
        self.generator = BatchingGenerator(
            policy,
            version=start_version,
            max_in_flight=requests_in_flight,
            request_latency_s=request_latency_s,
            timeline=self.timeline,
        )
        self.collector = AsyncCollector(
            [InstrumentedPool(p, self.timeline) for p in pools],  # desktop-seconds counted
            encoder,
            action_set,
            self.generator,
            max_turns=max_turns,
            end_on_format_error=end_on_format_error,
            timeline=self.timeline,
            max_staleness=max_staleness,
            allow_unseparated=allow_unseparated,
        )
        self.assembler = GroupAssembler(group_size, max_staleness, replay=None)
        self.rows, self.task_of = rows, task_of
        # a resumed run goes on where it stopped: the rows of the takes before its first step
        # were trained on already (sync mode's dataloader skips them the same way)
        self._stream = row_stream(
            len(rows),
            seed,
            rank,
            processes,
            skip=groups_per_step * takes_before(start_version, steps_per_take),
        )
        self._rows_of: dict[str, dict[str, Any]] = {}  # task id -> its row
        self.feed = GroupFeed(
            self.collector,
            self.assembler,
            self._task_of_group,
            groups_per_step=groups_per_step,
            prefetch=max(1, prefetch_groups),
            gate=gate,
            start_version=start_version,
            steps_per_take=steps_per_take,
        )

    @property
    def submitted(self) -> int:
        return self.feed.submitted

    def _task_of_group(self, index: int) -> Any:  # groups are submitted in index order
        row = self.rows[next(self._stream)]
        self._rows_of[str(row["task_id"])] = row
        return self.task_of(row)

    def top_up(self) -> None:
        """Queue groups until ``prefetch_groups`` are submitted and not yet taken or dropped."""
        self.feed.top_up()

    def take(
        self, n: int, version: int, *, poll_s: float = 1.0
    ) -> list[tuple[dict[str, Any], list[Trajectory]]]:
        """``n`` complete groups, each with its training row, at most ``max_staleness`` versions
        behind ``version`` (waits for the desktops as long as any desktop thread is alive); the
        desktops' queue is refilled before returning, so they play while the learner steps."""
        groups = self.feed.take(n, version, poll_s=poll_s)
        return [(self._rows_of[g[0].task_id], g) for g in groups]

    def sync(self, version: int, update: Callable[[], None]) -> None:
        """Copy the learner's weights into the generator (``update``, between batches) and tag
        later answers ``version``."""
        self.generator.sync(None, version, update)

    def close(self) -> None:
        """Stop the desktop threads (after their current episode), the generator, the desktops."""
        while True:  # episodes queued ahead are not played
            try:
                self.collector.jobs.get_nowait()
            except queue.Empty:
                break
        self.collector.close()
        self.generator.close()
        for pool in self.collector.pools:
            pool.close()
