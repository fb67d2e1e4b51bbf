"""Two trainer processes (``accelerate launch --num_processes 2``, gloo on CPU) on real local
desktops.

Both ranks train on the built-in ``os-mkdir-001`` (one group of 2 rollouts each). The tiny model
generates every turn for real, but what each rank *plays* is paced so that the ranks finish at
different turns: rank 0 answers ``finished()`` at once (1 turn, score 0), rank 1 plays the task's
oracle (3 turns, score 1). Every generation starts with an all-reduce, as ZeRO-3's
``synced_gpus`` generate does, so a rank that stopped generating early would hang the run (the
subprocess timeout turns a hang into a failure).

This file is also the worker script that ``accelerate launch`` runs (``__main__`` below).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
TASK = "os-mkdir-001"
LAUNCH_TIMEOUT_S = 420  # one launch takes ~40 s on 2 busy cores


# -- the worker (runs in each accelerate process) ------------------------------------------------


def worker_config(out: Path, **overrides: Any):
    """The 2-process tests' run: the tiny model on 2 local desktops per process, groups of 2,
    ``os-mkdir-001``, 3 turns (the async test imports it too: the script's folder is on the
    workers' path)."""
    from arpo_trainer.config import ARPOConfig

    settings: dict[str, Any] = {
        "output_dir": str(out / "run"), "use_cpu": True, "bf16": False, "report_to": "none",
        "logging_steps": 1, "gradient_checkpointing": False, "per_device_train_batch_size": 2,
        "num_generations": 2, "learning_rate": 1e-2, "provider": "local", "settle": True,
        "settle_max_s": 2.0, "vector_env": "async", "screen_width": 640, "screen_height": 360,
        "max_turns": 3, "max_turn_tokens": 8, "task_ids": [TASK], "seed": 0,
    }  # fmt: skip
    return ARPOConfig(**{**settings, **overrides})


def _worker(out: Path, resume: bool) -> None:
    import torch
    import torch.distributed as dist
    from arpo_trainer.demos import oracle_script
    from arpo_trainer.generation import TurnSample
    from arpo_trainer.ranks import end_process_group
    from arpo_trainer.tasks import resolve_tasks, task_dataset
    from arpo_trainer.tiny import build_tiny_vlm
    from arpo_trainer.trainer import ARPOTrainer
    from osworld_gym.support import builtin_task

    class PacedPolicy:
        """The real policy generates; the rank's script decides what is played."""

        def __init__(self, inner, encoder, script: list[str], calls: list[int]):
            self.inner, self.encoder, self.script, self.calls = inner, encoder, script, calls
            self.turn: dict[int, int] = {}

        def sample(self, contexts, rows):
            t = torch.ones(1)
            dist.all_reduce(t)  # a collective in every generate call, as under ZeRO-3
            samples = self.inner.sample(contexts, rows)
            self.calls.append(0 if rows == [-1] else len(rows))
            out = []
            for sample, r in zip(samples, rows, strict=True):
                k = self.turn.get(r, 0)
                self.turn[r] = k + 1
                text = self.script[min(k, len(self.script) - 1)] if r >= 0 else sample.text
                ids = self.encoder.action_ids(text)
                out.append(TurnSample(ids=ids, logps=[math.nan] * len(ids), text=text))
            return out

    class PacedTrainer(ARPOTrainer):
        calls: list[int]
        padded: list[int]
        script: list[str]

        @contextlib.contextmanager
        def policy(self):
            with super().policy() as real:
                yield PacedPolicy(real, self.encoder, self.script, self.calls)

        def collector(self, n):
            c = super().collector(n)
            if not hasattr(c, "_recorded"):
                run = c.run

                def recorded(*a, **kw):
                    trajs = run(*a, **kw)
                    self.padded.append(c.last_stats.padded_turns)
                    with (out / f"rank{rank}_episodes.jsonl").open("a") as f:
                        for t in trajs:
                            f.write(
                                json.dumps(
                                    {
                                        "turns": len(t.turns),
                                        "score": t.score,
                                        "valid": t.valid,
                                        "end": t.end,
                                    }
                                )
                                + "\n"
                            )
                    return trajs

                c.run, c._recorded = recorded, True
            return c

    args = worker_config(
        out,
        save_strategy="steps",
        save_steps=1,
        max_steps=1,
        log_completions=True,
        rollout_log="rollouts.jsonl",
    )
    vlm = build_tiny_vlm(seed=0)
    tasks = resolve_tasks("builtin", [TASK])
    rows = task_dataset(tasks).select([0, 0])  # one group per rank: two rows of the task
    trainer = PacedTrainer(vlm.model, args, vlm.processor, tasks=tasks, train_dataset=rows)
    rank = trainer.accelerator.process_index
    trainer.calls, trainer.padded = [], []
    finished = ["Action: finished(content='')"]
    trainer.script = (
        oracle_script(builtin_task(TASK), trainer.action_set) if rank == 1 else finished
    )
    try:
        trainer.train(resume_from_checkpoint=str(out / "run" / "checkpoint-1") if resume else None)
    finally:
        trainer.close_desktops()
    buf = trainer.replay_buffer
    digest = [
        {
            "task": t,
            "added_step": e.added_step,
            "score": e.trajectory.score,
            "ids": [u.action_ids for u in e.trajectory.turns],
            "png": [hashlib.sha256(u.screenshot).hexdigest()[:16] for u in e.trajectory.turns],
        }
        for t in buf.task_ids()
        for e in buf.entries(t)
    ]
    result = {
        "buffer": digest,
        "calls": trainer.calls,
        "padded_turns": trainer.padded,
        "log_history": trainer.state.log_history,
    }
    name = f"rank{rank}_{'resume' if resume else 'train'}.json"
    (out / name).write_text(json.dumps(result))
    # as arpo-train does: without it a rank can abort at exit (gloo threads outliving Python)
    end_process_group()


# -- the test ------------------------------------------------------------------------------------


def _launch(out: Path, *extra: str) -> None:
    from accelerate_launch import launch_two  # tests/ is on pytest's path, not the worker's

    launch_two([str(HERE), str(out), *extra], cwd=HERE.parent, timeout_s=LAUNCH_TIMEOUT_S,
               what="training run")  # fmt: skip


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.timeout(2 * LAUNCH_TIMEOUT_S + 120)  # two launches (train, resume); ~3 min when busy
def test_two_processes_agree_on_turns_share_one_replay_buffer_and_log_global_metrics(tmp_path):
    _launch(tmp_path)
    r0, r1 = (json.loads((tmp_path / f"rank{r}_train.json").read_text()) for r in (0, 1))
    ep = {r: [json.loads(x)
              for x in (tmp_path / f"rank{r}_episodes.jsonl").read_text().split("\n") if x]
          for r in (0, 1)}  # fmt: skip

    # ranks finished at different turns ...
    assert [e["turns"] for e in ep[0]] == [1, 1] and [e["turns"] for e in ep[1]] == [3, 3]
    assert all(e["valid"] for r in (0, 1) for e in ep[r])
    # ... yet both generated in every turn: the idle rank joined with throw-away turns
    assert len(r0["calls"]) == len(r1["calls"]) == 3
    assert r0["calls"] == [2, 0, 0] and r0["padded_turns"] == [2] and r1["padded_turns"] == [0]

    # one global buffer: rank 1's real successes are on rank 0 too, byte for byte
    assert [e["score"] for e in r1["buffer"]] == [1.0, 1.0]
    assert r0["buffer"] == r1["buffer"]

    # metrics are the mean over both ranks' episodes
    logged = next(h for h in r0["log_history"] if "episode/turns_mean" in h)
    everyone = ep[0] + ep[1]
    assert logged["episode/turns_mean"] == pytest.approx(
        sum(e["turns"] for e in everyone) / len(everyone)
    )
    assert logged["episode/success_rate"] == pytest.approx(
        sum(e["score"] for e in everyone) / len(everyone)
    )
    assert logged["replay/stored"] == 2 and logged["replay/buffer_size"] == 2

    # log_completions: one row per rollout of both ranks, each with its own reward
    import pandas as pd

    table = pd.read_parquet(tmp_path / "run" / "completions" / "completions_00001.parquet")
    assert len(table) == 4
    for completion, score in zip(table["completion"], table["evaluator_score"], strict=True):
        played_oracle = "mkdir" in str(completion)
        assert score == (1.0 if played_oracle else 0.0)
    assert sum("mkdir" in str(c) for c in table["completion"]) == 2
    rollouts = (tmp_path / "run" / "rollouts.jsonl").read_text().strip().split("\n")
    assert len(rollouts) == 4

    # saved once, restored on every rank
    assert (tmp_path / "run" / "checkpoint-1" / "arpo_replay.zip").exists()
    _launch(tmp_path, "--resume")
    for r in (0, 1):
        restored = json.loads((tmp_path / f"rank{r}_resume.json").read_text())
        assert restored["buffer"] == r1["buffer"]


if __name__ == "__main__":
    _worker(Path(sys.argv[1]), resume="--resume" in sys.argv[2:])
