"""What the trainer's processes agree on: turn counts, the replay buffer's new successes, metrics.

TRL runs one trainer per process (``accelerate launch``); each process rolls out its own share of
the generation batch on its own desktops. Three things must nevertheless be global:

* **the turn count.** Generation can be a collective call: ``generate(synced_gpus=True)`` under
  DeepSpeed ZeRO-3 gathers each layer's parameters from every rank, TRL's vLLM server mode gathers
  the prompts of every rank, colocate mode syncs weights. A process whose episodes have all ended
  must therefore keep joining generation until no process has a live episode:
  :meth:`RankGroup.any` is an all-reduce of "I still have a live episode" once per turn, and the
  idle process generates one throw-away turn (see :class:`~arpo_trainer.rollout.Collector`).
* **the replay buffer.** Every rank keeps the whole buffer: after each batch the fresh successes of
  every rank are all-gathered (:meth:`RankGroup.gather`) and added in rank order, so every buffer
  holds the same trajectories. This was chosen over ownership-by-task (one rank stores a task's
  successes and broadcasts them when needed) because TRL's sampler may put any task on any rank
  in any step, successes are rare (the gathered payload is a few trajectories per step, PNG bytes
  and ids), and a full copy per rank lets the checkpoint be written by the main process alone and
  read back identically by every rank.
* **metrics and completion logs**: per-rank trajectory summaries and prompts are gathered so the
  logged ``episode/*`` and ``replay/*`` values are means over every rank's episodes, and
  ``log_completions`` rows line up with TRL's (already global) rewards.

With one process every method returns its input unchanged, without touching ``torch.distributed``:

>>> one = RankGroup()
>>> one.any(False), one.gather([1, 2]), one.broadcast("x")
(False, [1, 2], 'x')
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class RankGroup:
    """The processes of one training run (a thin layer over ``torch.distributed``).

    Args:
        num_processes: world size (1: everything is local).
        process_index: this process's rank.
        device: where the all-reduce tensor lives (the backend's device: CPU for gloo, GPU for
            NCCL).
    """

    num_processes: int = 1
    process_index: int = 0
    device: torch.device | str = "cpu"

    @classmethod
    def from_accelerator(cls, accelerator: Any) -> RankGroup:
        """The ranks of an ``accelerate.Accelerator`` (or anything with its three attributes)."""
        return cls(accelerator.num_processes, accelerator.process_index, accelerator.device)

    @property
    def distributed(self) -> bool:
        return self.num_processes > 1

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on at least one (an all-reduce MAX)."""
        if not self.distributed:
            return flag
        t = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return bool(t.item())

    def gather(self, items: list[T]) -> list[T]:
        """Every rank's ``items`` concatenated in rank order, on every rank (pickled objects)."""
        if not self.distributed:
            return list(items)
        per_rank: list[list[T] | None] = [None] * self.num_processes
        torch.distributed.all_gather_object(per_rank, list(items))
        return [x for part in per_rank for x in (part or [])]

    def broadcast(self, obj: T, src: int = 0) -> T:
        """Rank ``src``'s ``obj`` on every rank (pickled)."""
        if not self.distributed:
            return obj
        box = [obj if self.process_index == src else None]
        torch.distributed.broadcast_object_list(box, src=src)
        return box[0]  # type: ignore[return-value]


def end_process_group() -> None:
    """Tear down ``torch.distributed`` once a run is over, on every rank (a no-op with one process).

    A process that exits with its gloo group still alive can abort at interpreter shutdown
    ("terminate called without an active exception", SIGABRT): gloo's worker threads still hold
    work whose tensors need the GIL while the interpreter is being torn down. The barrier first
    lets every rank finish its last collective, so no rank leaves while another still waits on it.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.barrier()
    dist.destroy_process_group()
