"""ARPO's success replay: per task, a FIFO of successful trajectories injected into all-fail groups.

Rules (ARPO, with its magic numbers made parameters):

* after each batch, every *fresh* trajectory (sampled by the policy, not injected) whose
  evaluator score exceeds ``success_threshold`` is appended to its task's FIFO of ``capacity``;
* before advantages are computed, a group whose valid scores have ``std < fail_std`` and
  ``mean < fail_mean`` (all-failure: GRPO would learn nothing from it) gets one rollout replaced
  by a success drawn uniformly (with replacement) from its task's FIFO, if any. The replaced
  rollout is one whose desktop failed (infra error) if there is one, else the first;
* injection happens before the update with this batch's successes (ARPO's order), so a group is
  never "rescued" by one of its own members.

Storage is compact (PNG bytes + token ids, no pixel tensors) and the whole buffer, including its
random state, round-trips through :meth:`ReplayBuffer.save` / :meth:`ReplayBuffer.load` (one zip
file: ``manifest.json`` plus de-duplicated PNG members).

>>> buf = ReplayBuffer(capacity=2)
>>> ok = Trajectory("t", "do it", score=1.0)
>>> buf.update([ok, Trajectory("t", "do it", score=0.0)], step=3)
1
>>> groups, stats = buf.inject([[Trajectory("t", "do it"), Trajectory("t", "do it")]], step=5)
>>> [g.source for g in groups[0]], stats.injected, stats.mean_age
(['replay', 'policy'], 1, 2.0)
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import random
import zipfile
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arpo_trainer.rollout import Trajectory, Turn

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


@dataclass
class ReplayEntry:
    """A stored success and the trainer step at which it entered the buffer."""

    trajectory: Trajectory
    added_step: int


@dataclass
class InjectionStats:
    """What one :meth:`ReplayBuffer.inject` call did."""

    groups: int = 0
    all_fail_groups: int = 0
    injected: int = 0
    ages: tuple[int, ...] = ()

    @property
    def mean_age(self) -> float:
        """Mean age in trainer steps of the injected samples (NaN if none)."""
        return sum(self.ages) / len(self.ages) if self.ages else float("nan")

    @classmethod
    def merged(cls, per_rank: list[InjectionStats]) -> InjectionStats:
        """The injections of all ranks in one step (counts add up, ages are pooled)."""
        return cls(
            groups=sum(s.groups for s in per_rank),
            all_fail_groups=sum(s.all_fail_groups for s in per_rank),
            injected=sum(s.injected for s in per_rank),
            ages=tuple(a for s in per_rank for a in s.ages),
        )


def group_scores_fail(scores: list[float], *, fail_std: float, fail_mean: float) -> bool:
    """ARPO's all-failure test on a group's evaluator scores (unbiased std; one score has std 0).

    >>> group_scores_fail([0.0, 0.0, 0.0], fail_std=0.05, fail_mean=0.2)
    True
    >>> group_scores_fail([0.0, 1.0, 0.0], fail_std=0.05, fail_mean=0.2)
    False
    >>> group_scores_fail([1.0, 1.0], fail_std=0.05, fail_mean=0.2)
    False
    """
    if not scores:
        return False
    mean = sum(scores) / len(scores)
    var = sum((s - mean) ** 2 for s in scores) / (len(scores) - 1) if len(scores) > 1 else 0.0
    return math.sqrt(var) < fail_std and mean < fail_mean


class ReplayBuffer:
    """Per-task FIFO of successful trajectories (see the module docstring).

    Args:
        capacity: successes kept per task (ARPO 8); the oldest is evicted first.
        success_threshold: store trajectories scoring strictly above this (ARPO 0.1).
        fail_std, fail_mean: the all-failure test (ARPO 0.05 and 0.2).
        seed: seed of the sampler that picks the injected success.
    """

    def __init__(
        self,
        capacity: int = 8,
        success_threshold: float = 0.1,
        fail_std: float = 0.05,
        fail_mean: float = 0.2,
        seed: int = 0,
    ):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.success_threshold = success_threshold
        self.fail_std = fail_std
        self.fail_mean = fail_mean
        self.rng = random.Random(seed)
        self._fifo: dict[str, deque[ReplayEntry]] = {}

    # -- contents ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return sum(len(q) for q in self._fifo.values())

    def size(self, task_id: str) -> int:
        """Successes stored for ``task_id``."""
        return len(self._fifo.get(task_id, ()))

    def task_ids(self) -> list[str]:
        """Tasks with at least one stored success."""
        return sorted(t for t, q in self._fifo.items() if q)

    def entries(self, task_id: str) -> list[ReplayEntry]:
        """Stored successes of ``task_id``, oldest first."""
        return list(self._fifo.get(task_id, ()))

    def is_success(self, traj: Trajectory) -> bool:
        """Worth storing: scored by a working desktop and above the threshold."""
        return traj.valid and traj.score > self.success_threshold

    def add(self, traj: Trajectory, step: int) -> bool:
        """Store ``traj`` if it is a success; returns whether it was stored."""
        if not self.is_success(traj):
            return False
        q = self._fifo.setdefault(traj.task_id, deque(maxlen=self.capacity))
        q.append(ReplayEntry(trajectory=traj, added_step=step))
        return True

    def update(self, trajectories: list[Trajectory], step: int) -> int:
        """Store the fresh (``source="policy"``) successes of a batch; returns how many."""
        return sum(self.add(t, step) for t in trajectories if t.source == "policy")

    # -- injection ---------------------------------------------------------------------------------

    def inject(
        self, groups: list[list[Trajectory]], step: int
    ) -> tuple[list[list[Trajectory]], InjectionStats]:
        """Replace one rollout of every all-failure group that has a stored success (new lists
        returned)."""
        stats = InjectionStats(groups=len(groups))
        ages: list[int] = []
        out: list[list[Trajectory]] = []
        for group in groups:
            group = list(group)
            scores = [t.score for t in group if t.valid]
            if group and group_scores_fail(
                scores, fail_std=self.fail_std, fail_mean=self.fail_mean
            ):
                stats.all_fail_groups += 1
                entries = self._fifo.get(group[0].task_id)
                if entries:
                    entry = self.rng.choice(list(entries))
                    target = next((i for i, t in enumerate(group) if not t.valid), 0)
                    replayed = copy.copy(entry.trajectory)
                    replayed.source = "replay"
                    group[target] = replayed
                    stats.injected += 1
                    ages.append(step - entry.added_step)
            out.append(group)
        stats.ages = tuple(ages)
        return out, stats

    # -- persistence -------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Settings and random state (JSON-able; the trajectories go through :meth:`save`)."""
        version, internal, gauss = self.rng.getstate()
        return {
            "capacity": self.capacity,
            "success_threshold": self.success_threshold,
            "fail_std": self.fail_std,
            "fail_mean": self.fail_mean,
            "rng": [version, list(internal), gauss],
        }

    def save(self, path: str | Path) -> Path:
        """Write the buffer to one zip file (``manifest.json`` + PNG screenshots, de-duplicated)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        images: OrderedDict[str, bytes] = OrderedDict()

        def png_name(png: bytes) -> str:
            name = f"images/{hashlib.blake2b(png, digest_size=12).hexdigest()}.png"
            images.setdefault(name, png)
            return name

        entries = []
        for task_id in sorted(self._fifo):
            for e in self._fifo[task_id]:
                t = e.trajectory
                entries.append(
                    {
                        "added_step": e.added_step,
                        "trajectory": {
                            "task_id": t.task_id,
                            "instruction": t.instruction,
                            "score": t.score,
                            "format_errors": t.format_errors,
                            "infra_error": t.infra_error,
                            "end": t.end,
                            "source": t.source,
                            "step": t.step,
                            "turns": [
                                {
                                    "screenshot": png_name(u.screenshot),
                                    "action_ids": u.action_ids,
                                    "action_logps": u.action_logps,
                                    "action_text": u.action_text,
                                    "action_error": u.action_error,
                                }
                                for u in t.turns
                            ],
                        },
                    }
                )
        manifest = {"version": FORMAT_VERSION, "state": self.state(), "entries": entries}
        tmp = path.with_suffix(path.suffix + ".tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
            for name, png in images.items():
                zf.writestr(name, png)
        tmp.replace(path)
        log.info(
            "saved replay buffer: %d trajectories of %d tasks, %d screenshots -> %s",
            len(self),
            len(self.task_ids()),
            len(images),
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> ReplayBuffer:
        """Read a buffer written by :meth:`save`."""
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            if manifest.get("version") != FORMAT_VERSION:
                raise ValueError(
                    f"{path}: replay buffer format {manifest.get('version')!r}, "
                    f"this version reads {FORMAT_VERSION}"
                )
            st = manifest["state"]
            buf = cls(
                capacity=st["capacity"],
                success_threshold=st["success_threshold"],
                fail_std=st["fail_std"],
                fail_mean=st["fail_mean"],
            )
            version, internal, gauss = st["rng"]
            buf.rng.setstate((version, tuple(internal), gauss))
            pngs: dict[str, bytes] = {}
            for e in manifest["entries"]:
                t = dict(e["trajectory"])
                turns = []
                for u in t.pop("turns"):
                    name = u.pop("screenshot")
                    if name not in pngs:
                        pngs[name] = zf.read(name)
                    turns.append(Turn(screenshot=pngs[name], **u))
                traj = Trajectory(turns=turns, **t)
                q = buf._fifo.setdefault(traj.task_id, deque(maxlen=buf.capacity))
                q.append(ReplayEntry(trajectory=traj, added_step=e["added_step"]))
        return buf

    def load_state_from(self, other: ReplayBuffer) -> None:
        """Take over another buffer's contents and random state (keeps this buffer's settings)."""
        self.rng.setstate(other.rng.getstate())
        self._fifo = {}
        for task_id, q in other._fifo.items():
            self._fifo[task_id] = deque(list(q)[-self.capacity :], maxlen=self.capacity)
