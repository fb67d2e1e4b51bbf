"""Multi-turn rollouts: trajectories and the lock-step collector that produces them.

Per turn, the collector encodes every live episode's context (instruction, the actions so far,
the latest screenshots), asks the :class:`~arpo_trainer.generation.Policy` for one turn for all of
them in one batch, sends the decoded texts to the desktops in one vector step, and records the
*sampled* ids and log-probs. Turns whose text the action set cannot parse are format errors: with
``end_on_format_error`` (ARPO) the desktop receives the action set's DONE instead, which ends
the episode and scores it; otherwise the desktop reports the error and nothing happens.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
from osworld_gym.actions import ActionSet
from osworld_gym.episodes import done_text
from osworld_gym.errors import ActionError
from osworld_gym.outcome import counts

from arpo_trainer.chat import EncodedSequence, TurnEncoder
from arpo_trainer.desktops import DesktopPool
from arpo_trainer.generation import Policy
from arpo_trainer.ranks import RankGroup

log = logging.getLogger(__name__)

Source = Literal["policy", "replay", "demo"]


@dataclass
class Turn:
    """One observation and the action that answered it."""

    screenshot: bytes  # PNG, already resized to the model's budget
    action_ids: list[int]
    action_logps: list[float]
    action_text: str
    action_error: str | None = None


@dataclass
class Trajectory:
    """A finished episode, compact enough to store (PNG bytes and token ids, no tensors).

    Attributes:
        score: the evaluator's score on the final step (not meaningful when ``infra_error``).
        format_errors: turns whose text could not be parsed.
        infra_error: the desktop or evaluator failed; the trajectory must not be trained on.
        end: ``"DONE"``, ``"FAIL"``, ``"truncated"``, ``"format_error"`` or ``"infra_error"``.
        source: ``"policy"`` (sampled now), ``"replay"`` (injected from the buffer), ``"demo"``.
        step: trainer step at which it was collected.
    """

    task_id: str
    instruction: str
    turns: list[Turn] = field(default_factory=list)
    score: float = 0.0
    format_errors: int = 0
    infra_error: str | None = None
    end: str | None = None
    source: Source = "policy"
    step: int = 0

    @property
    def valid(self) -> bool:
        """Scored by a working desktop (only these enter group statistics and the loss):
        :func:`osworld_gym.outcome.counts`."""
        return counts(self.score, self.infra_error)

    def encode(self, encoder: TurnEncoder) -> EncodedSequence:
        """The training sequence (one per trajectory)."""
        return encoder.encode(
            self.instruction,
            [t.screenshot for t in self.turns],
            [t.action_ids for t in self.turns],
            [t.action_logps for t in self.turns],
        )

    def without_screenshots(self) -> Trajectory:
        """A copy without the PNG bytes and log-probs (what ranks exchange for metrics and logs)."""
        turns = [Turn(b"", t.action_ids, [], t.action_text, t.action_error) for t in self.turns]
        return replace(self, turns=turns)

    def summary(self) -> dict[str, Any]:
        """A JSON-able record without screenshots or token ids (for logs)."""
        d = asdict(self)
        d["turns"] = [
            {"action": t.action_text, "error": t.action_error, "tokens": len(t.action_ids)}
            for t in self.turns
        ]
        return d


@dataclass
class RolloutStats:
    """Timing and counts of one :meth:`Collector.run`."""

    seconds: float = 0.0
    generate_seconds: float = 0.0
    env_seconds: float = 0.0
    env_steps: int = 0
    turns: int = 0
    padded_turns: int = 0  # throw-away generations while other ranks still had live episodes

    @classmethod
    def merged(cls, per_rank: list[RolloutStats]) -> RolloutStats:
        """Stats of one rollout over all ranks: ranks run at once, so times are the slowest rank's
        and counts add up (``turns / seconds`` is then the whole run's throughput)."""
        return cls(
            seconds=max((s.seconds for s in per_rank), default=0.0),
            generate_seconds=max((s.generate_seconds for s in per_rank), default=0.0),
            env_seconds=max((s.env_seconds for s in per_rank), default=0.0),
            env_steps=sum(s.env_steps for s in per_rank),
            turns=sum(s.turns for s in per_rank),
            padded_turns=sum(s.padded_turns for s in per_rank),
        )


class Collector:
    """Runs one episode per desktop of a :class:`DesktopPool`, in lock-step turns.

    Args:
        pool: the desktops (one episode each per :meth:`run`).
        encoder: builds each turn's context.
        action_set: the policy's action syntax (to detect format errors before the desktop).
        max_turns: actions per episode; the desktops must truncate at the same count.
        end_on_format_error: replace an unparsable turn by DONE, ending the episode (ARPO).
        ranks: the trainer's processes. A turn is played while *any* rank has a live episode; a rank
            whose episodes have all ended samples one throw-away turn (its last context again) so
            that collective generation (ZeRO-3 ``synced_gpus``, TRL's vLLM server/colocate paths)
            sees every rank in every call. See :mod:`arpo_trainer.ranks`.
        allow_unseparated: play on desktops whose reset info says ``separated: False`` (the
            agent shares the judge's identity). The trainer passes
            ``allow_unseparated_desktops`` (default off): a policy trained there can forge scores.
    """

    def __init__(
        self,
        pool: DesktopPool,
        encoder: TurnEncoder,
        action_set: ActionSet,
        *,
        max_turns: int,
        end_on_format_error: bool = True,
        ranks: RankGroup | None = None,
        allow_unseparated: bool = True,
    ):
        self.pool = pool
        self.allow_unseparated = allow_unseparated
        self.ranks = ranks or RankGroup()
        self.encoder = encoder
        self.action_set = action_set
        self.max_turns = max_turns
        self.end_on_format_error = end_on_format_error
        self._done_text = done_text(action_set)
        self.last_stats = RolloutStats()

    def run(self, tasks: list[Any], policy: Policy, *, step: int = 0) -> list[Trajectory]:
        """One episode of ``tasks[i]`` on desktop ``i``; the trajectories in the same order."""
        stats = RolloutStats()
        t_start = time.monotonic()
        t0 = time.monotonic()
        frames, infos = self.pool.reset(list(tasks))
        stats.env_seconds += time.monotonic() - t0
        if not self.allow_unseparated and any(i.get("separated") is False for i in infos):
            raise RuntimeError(
                "a desktop runs the agent with the judge's identity (reset info['separated'] is "
                "False): under RL the policy could forge its own scores. Run as root for judge "
                "separation, or set allow_unseparated_desktops=True to train anyway."
            )
        trajs: list[Trajectory] = []
        shots: list[list[bytes]] = []
        live: list[bool] = []
        for task, frame, info in zip(tasks, frames, infos, strict=True):
            task_id = str(info.get("task_id") or getattr(task, "id", task))
            instruction = getattr(task, "instruction", None) or (
                task.get("instruction") if isinstance(task, dict) else ""
            )
            traj = Trajectory(task_id=task_id, instruction=str(instruction), step=step)
            if info.get("infra_error"):
                traj.infra_error, traj.end = str(info["infra_error"]), "infra_error"
            trajs.append(traj)
            shots.append([self.encoder.screenshot_png(frame)] if traj.valid else [])
            live.append(traj.valid)

        padding: EncodedSequence | None = None
        for _turn in range(self.max_turns):
            idx = [i for i, alive in enumerate(live) if alive]
            if not self.ranks.any(bool(idx)):
                break
            if not idx:  # only other ranks are still playing: join their generate call
                if padding is None:
                    padding = self._padding_context(trajs)
                t0 = time.monotonic()
                policy.sample([padding], [-1])
                stats.generate_seconds += time.monotonic() - t0
                stats.padded_turns += 1
                continue
            contexts = [
                self.encoder.encode(
                    trajs[i].instruction, shots[i], [t.action_ids for t in trajs[i].turns]
                )
                for i in idx
            ]
            padding = contexts[0]
            t0 = time.monotonic()
            samples = policy.sample(contexts, idx)
            stats.generate_seconds += time.monotonic() - t0
            actions: list[str | None] = [None] * self.pool.n
            for i, sample in zip(idx, samples, strict=True):
                error = self._parse_error(sample.text)
                trajs[i].turns.append(
                    Turn(
                        screenshot=shots[i][-1],
                        action_ids=sample.ids,
                        action_logps=sample.logps,
                        action_text=sample.text,
                        action_error=error,
                    )
                )
                if error is not None:
                    trajs[i].format_errors += 1
                actions[i] = (
                    self._done_text
                    if (error is not None and self.end_on_format_error)
                    else sample.text
                )
            t0 = time.monotonic()
            results = self.pool.step(actions)
            stats.env_seconds += time.monotonic() - t0
            stats.env_steps += len(idx)
            for i in idx:
                res = results[i]
                traj = trajs[i]
                if res is None:  # the slot was already over: cannot happen for a live episode
                    live[i], traj.infra_error, traj.end = (
                        False,
                        "desktop slot ended unexpectedly",
                        "infra_error",
                    )
                    continue
                if res.info.get("infra_error"):
                    live[i], traj.infra_error, traj.end = (
                        False,
                        str(res.info["infra_error"]),
                        "infra_error",
                    )
                    continue
                if res.done:
                    live[i] = False
                    traj.score = res.reward
                    if traj.turns[-1].action_error is not None and self.end_on_format_error:
                        traj.end = "format_error"
                    else:
                        traj.end = res.info.get("special") or (
                            "truncated" if res.truncated else "DONE"
                        )
                    continue
                shots[i].append(self.encoder.screenshot_png(res.screenshot))
        for i, alive in enumerate(live):
            if alive:  # the desktop allows more steps than max_turns: stop here, unscored
                trajs[i].infra_error = (
                    f"episode still running after max_turns={self.max_turns}; "
                    "make the env's max_steps equal to max_turns"
                )
                trajs[i].end = "infra_error"
        stats.turns = sum(len(t.turns) for t in trajs)
        stats.seconds = time.monotonic() - t_start
        self.last_stats = stats
        return trajs

    def join(self, policy: Policy, instruction: str = "") -> int:
        """Join the other ranks' turns without playing: for a rank with no episode to start
        while others run theirs (task selection's last batches). Generates the throw-away turns
        :meth:`run` generates for a rank whose episodes all ended, and answers the same
        all-reduce every turn, so collective generation sees every rank. Returns the turns
        joined."""
        padding: EncodedSequence | None = None
        joined = 0
        for _turn in range(self.max_turns):
            if not self.ranks.any(False):
                break
            if padding is None:
                padding = self._padding_context([Trajectory("-", instruction)])
            policy.sample([padding], [-1])
            joined += 1
        return joined

    def _padding_context(self, trajs: list[Trajectory]) -> EncodedSequence:
        """A context to generate a throw-away turn from when this rank never encoded one (every
        desktop failed at reset): the first instruction over a black screenshot. It holds an image,
        so the vision tower runs as on the other ranks (ZeRO-3 gathers its parameters too)."""
        blank = self.encoder.screenshot_png(np.zeros((64, 64, 3), np.uint8))
        instruction = trajs[0].instruction if trajs else ""
        return self.encoder.encode(instruction, [blank], [])

    def _parse_error(self, text: str) -> str | None:
        try:
            self.action_set.parse(text)
        except ActionError as e:
            return str(e)
        return None
