"""Checkpoint -> kill -> resume: the optimizer, the step and the replay buffer come back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch
from arpo_trainer.cli import build_policy
from arpo_trainer.config import ARPOConfig
from arpo_trainer.modeling import ModelArguments, lora_config
from arpo_trainer.replay import ReplayBuffer
from arpo_trainer.tasks import resolve_tasks
from arpo_trainer.trainer import REPLAY_FILE, ARPOTrainer
from transformers import TrainerCallback

COMMON = {
    "provider": "fake",
    "settle": False,
    "vector_env": "sync",
    "task_ids": ["os-infeasible-001"],
    "per_device_train_batch_size": 4,
    "num_generations": 4,
    "max_turns": 2,
    "max_turn_tokens": 8,
    "learning_rate": 0.01,
    "use_cpu": True,
    "bf16": False,
    "gradient_checkpointing": False,
    "report_to": "none",
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 2,
    "replay_warm_start": "oracle",
    "screen_width": 640,
    "screen_height": 360,
    "seed": 0,
}
MODEL = {"model_name_or_path": "tiny", "lora_r": 4}


def cli_flags(options: dict) -> list[str]:
    flags = []
    for key, value in options.items():
        flags.append(f"--{key}")
        flags.extend(str(v) for v in value) if isinstance(value, list) else flags.append(str(value))
    return flags


class Snapshot(TrainerCallback):
    """What the trainer holds when training (re)starts."""

    def __init__(self, trainer: ARPOTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.step = state.global_step
        self.optimizer = {
            k: {n: v.clone() for n, v in s.items() if torch.is_tensor(v)}
            for k, s in self.trainer.optimizer.state_dict()["state"].items()
        }
        self.replay = {
            t: [e.trajectory.turns for e in self.trainer.replay_buffer.entries(t)]
            for t in self.trainer.replay_buffer.task_ids()
        }


def test_a_killed_run_resumes_with_its_optimizer_step_and_replay_buffer(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "arpo_trainer.cli",
        *cli_flags({**COMMON, **MODEL, "output_dir": out, "max_steps": 50}),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    checkpoint = out / "checkpoint-2"
    deadline = time.monotonic() + 240
    try:
        while not (checkpoint / REPLAY_FILE).exists():
            assert proc.poll() is None, f"training exited early:\n{proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint-2 after 240 s"
            time.sleep(0.2)
    finally:
        proc.kill()  # SIGKILL: no chance to clean up
        proc.wait(timeout=30)

    saved_state = json.loads((checkpoint / "trainer_state.json").read_text())
    saved_opt = torch.load(checkpoint / "optimizer.pt", weights_only=True)["state"]
    saved_replay = ReplayBuffer.load(checkpoint / REPLAY_FILE)
    assert saved_state["global_step"] == 2 and len(saved_replay) >= 1

    args = ARPOConfig(
        **{k: v for k, v in COMMON.items() if k != "replay_warm_start"},
        output_dir=str(out),
        max_steps=3,
    )
    margs = ModelArguments(**MODEL)
    tasks = resolve_tasks("builtin", args.task_ids)
    model, processor = build_policy(margs, args, tasks)
    trainer = ARPOTrainer(model, args, processor, tasks=tasks, peft_config=lora_config(model, r=4))
    snap = Snapshot(trainer)
    trainer.add_callback(snap)
    trainer.train(resume_from_checkpoint=str(checkpoint))
    trainer.close_desktops()

    assert snap.step == 2
    assert set(snap.optimizer) == set(saved_opt)
    for k, tensors in snap.optimizer.items():
        for name, value in tensors.items():
            assert torch.equal(value, saved_opt[k][name]), (k, name)
    assert snap.replay == {
        t: [e.trajectory.turns for e in saved_replay.entries(t)] for t in saved_replay.task_ids()
    }
    assert trainer.state.global_step == 3
