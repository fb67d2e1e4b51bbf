"""``rollout_mode: async`` over two trainer processes (``accelerate launch --num_processes 2``, gloo
on CPU), each with its own real local desktops and its own batching generator.

Both ranks train on the built-in ``os-mkdir-001`` (groups of 2, one group a step, 2 steps). The
tiny model generates every turn for real, but what each rank *plays* is paced: rank 0 answers
``finished()`` at once (score 0), rank 1 plays the task's oracle (score 1). So rank 0 never
succeeds on its own, and replay must still be global: rank 1's successes reach rank 0's buffer
after step 1 and are injected into rank 0's all-fail group in step 2, as in sync mode.

This file is also the worker script that ``accelerate launch`` runs (``__main__`` below).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pytest
from test_trainer_multiprocess import TASK

HERE = Path(__file__).resolve()
LAUNCH_TIMEOUT_S = 420


def _worker(out: Path) -> None:
    from arpo_trainer.demos import oracle_script
    from arpo_trainer.generation import TurnSample
    from arpo_trainer.ranks import end_process_group
    from arpo_trainer.tasks import resolve_tasks, task_dataset
    from arpo_trainer.tiny import build_tiny_vlm
    from arpo_trainer.trainer import ARPOTrainer
    from osworld_gym.support import builtin_task
    from test_trainer_multiprocess import worker_config

    class PacedPolicy:
        """The generator's real policy samples; the rank's script decides what is played (per
        episode: ``rows`` are the episodes' ids in the async loop)."""

        def __init__(self, inner, encoder, script: list[str]):
            self.inner, self.encoder, self.script = inner, encoder, script
            self.turn: dict[int, int] = {}

        def sample(self, contexts, rows):
            self.inner.sample(contexts, rows)
            out = []
            for r in rows:
                k = self.turn.get(r, 0)
                self.turn[r] = k + 1
                text = self.script[min(k, len(self.script) - 1)]
                ids = self.encoder.action_ids(text)
                # not this policy's sample: no sampling log-probs (importance ratio 1)
                out.append(TurnSample(ids=ids, logps=[math.nan] * len(ids), text=text))
            return out

    class PacedTrainer(ARPOTrainer):
        script: list[str]

        def async_policy(self, model):
            return PacedPolicy(super().async_policy(model), self.encoder, self.script)

        def _async_groups(self, rows, G, step):
            taken = super()._async_groups(rows, G, step)
            with (out / f"rank{rank}_episodes.jsonl").open("a") as f:
                for t in taken[1]:
                    f.write(json.dumps({"step": step, "score": t.score, "valid": t.valid}) + "\n")
            return taken

    args = worker_config(
        out,
        save_strategy="no",
        max_steps=2,
        rollout_mode="async",
        max_staleness=1,
        weight_sync_every=1,
    )
    vlm = build_tiny_vlm(seed=0)
    tasks = resolve_tasks("builtin", [TASK])
    rows = task_dataset(tasks).select([0, 0])  # a generation batch of one group per rank
    trainer = PacedTrainer(vlm.model, args, vlm.processor, tasks=tasks, train_dataset=rows)
    rank = trainer.accelerator.process_index
    trainer.script = (
        oracle_script(builtin_task(TASK), trainer.action_set)
        if rank == 1
        else ["Action: finished(content='')"]
    )
    try:
        trainer.train()
    finally:
        trainer.close_desktops()
    buf = trainer.replay_buffer
    result = {
        "global_step": trainer.state.global_step,
        "buffer": [
            {
                "task": t,
                "score": e.trajectory.score,
                "ids": [u.action_ids for u in e.trajectory.turns],
                "png": [hashlib.sha256(u.screenshot).hexdigest()[:16] for u in e.trajectory.turns],
            }
            for t in buf.task_ids()
            for e in buf.entries(t)
        ],
        "log_history": trainer.state.log_history,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    end_process_group()


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)
def test_two_async_processes_train_on_their_own_desktops_with_one_global_replay(tmp_path):
    from accelerate_launch import launch_two

    launch_two([str(HERE), str(tmp_path)], cwd=HERE.parent, timeout_s=LAUNCH_TIMEOUT_S,
               what="async training run")  # fmt: skip
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    ep = {
        r: [
            json.loads(x)
            for x in (tmp_path / f"rank{r}_episodes.jsonl").read_text().split("\n")
            if x
        ]
        for r in (0, 1)
    }
    assert r0["global_step"] == r1["global_step"] == 2
    # each rank took one group of 2 per step, played on its own desktops: rank 0 failed, rank 1
    # succeeded, every episode scored (no infra error)
    assert [e["step"] for e in ep[0]] == [e["step"] for e in ep[1]] == [0, 0, 1, 1]
    assert all(e["valid"] for r in (0, 1) for e in ep[r])
    assert [e["score"] for e in ep[0]] == [0.0] * 4 and [e["score"] for e in ep[1]] == [1.0] * 4

    # one global buffer: rank 1's successes are on rank 0 too, byte for byte
    assert r0["buffer"] == r1["buffer"] and r0["buffer"]
    assert all(e["score"] == 1.0 and e["task"] == TASK for e in r0["buffer"])

    # logged figures cover both ranks: step 0 (buffer still empty) injects nothing; in step 1
    # rank 0's all-fail group gets one of rank 1's stored successes: 1 of the 4 trajectories
    logged = [h for h in r0["log_history"] if "episode/success_rate" in h]
    assert len(logged) == 2
    assert logged[0]["replay/injected_frac"] == 0
    assert logged[1]["replay/injected_frac"] == pytest.approx(0.25)
    assert logged[0]["episode/success_rate"] == pytest.approx(0.5)  # 2 of the 4 own episodes
    # the loop's own figures: both ranks' groups, within the staleness bound
    assert [h["async/groups_taken"] for h in logged] == [2, 4]
    assert all(0 <= h["async/staleness_max"] <= 1 for h in logged)
    assert [h["async/generator_version"] for h in logged] == [0, 1]


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
