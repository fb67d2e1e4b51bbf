"""Trainer benchmark: rollout turns/s and training tokens/s of the tiny model, side by side in one run.

Each *variant* is a short real training run (``ARPOTrainer``, tiny Qwen2.5-VL built offline, real
local desktops, task ``os-mkdir-001``) launched as its own subprocess: one process with plain
``python``, several with ``accelerate launch`` (gloo on CPU). Every variant gets the same load per
process (one group of ``G`` rollouts per step: weak scaling), and the CPU threads are split evenly
between processes. Episodes run all ``max_turns`` turns (``end_on_format_error=False``), so every
step has the same number of turns.

Measured per step after the first (which starts the desktops), median over those steps (the
machine is shared: the min-max row shows the spread):

* **rollout turns/s**: turns played by all ranks / wall time of the rollout (desktop resets,
  generation, desktop steps); the trainer's own ``rollout/turns_per_s`` metric;
* **train tokens/s**: tokens forwarded and back-propagated by all ranks (prompt + completion of
  every trajectory) / wall time of the loss computation (``training_step`` minus the rollout).

New columns (e.g. vLLM against transformers generation) are new entries in :data:`VARIANTS`: a
process count and config overrides.

    uv run python benchmarks/bench_trainer.py [--steps 4] [--variants "transformers x1,transformers x2"]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TASK = "os-mkdir-001"


@dataclass
class Variant:
    """One column of the table: how many processes, and what differs from the base config."""

    processes: int = 1
    overrides: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None  # CPU threads per process (default: the cores split evenly)


VARIANTS: dict[str, Variant] = {
    "transformers x1": Variant(processes=1),
    "transformers x1 (1 thread)": Variant(processes=1, threads=1),
    "transformers x2": Variant(processes=2),
}

BASE: dict[str, Any] = dict(
    use_cpu=True,
    bf16=False,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    gradient_checkpointing=False,
    per_device_train_batch_size=4,
    num_generations=4,
    learning_rate=1e-3,
    provider="local",
    settle=True,
    settle_max_s=1.0,
    vector_env="async",
    screen_width=640,
    screen_height=360,
    max_turns=3,
    max_turn_tokens=16,
    end_on_format_error=False,
    replay=False,
    task_ids=[TASK],
    seed=0,
)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


# -- worker: one training run, in every process of the variant ----------------------------------


def worker(out: Path, variant: str, steps: int) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.tasks import resolve_tasks, task_dataset
    from arpo_trainer.testing.tiny import build_tiny_vlm
    from arpo_trainer.trainer import ARPOTrainer

    class TimedTrainer(ARPOTrainer):
        """Times the rollout (inside ``_generate_and_score_completions``) and the whole step."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.steps: list[dict[str, float]] = []

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            output = super()._generate_and_score_completions(inputs)
            tokens = int(output["prompt_mask"].sum() + output["completion_mask"].sum())
            self.steps.append({"gen_s": time.perf_counter() - t0, "tokens": tokens})
            return output

        def training_step(self, model, inputs, num_items_in_batch):
            t0 = time.perf_counter()
            n = len(self.steps)
            loss = super().training_step(model, inputs, num_items_in_batch)
            if len(self.steps) > n:  # this step generated: its time includes the rollout
                self.steps[-1]["step_s"] = time.perf_counter() - t0
            return loss

    args = ARPOConfig(
        output_dir=str(out / _slug(variant)),
        max_steps=steps,
        **{**BASE, **VARIANTS[variant].overrides},
    )
    tasks = resolve_tasks("builtin", [TASK])
    rows = task_dataset(tasks).select([0] * 8)
    vlm = build_tiny_vlm(seed=0)
    trainer = TimedTrainer(vlm.model, args, vlm.processor, tasks=tasks, train_dataset=rows)
    try:
        trainer.train()
    finally:
        trainer.close_desktops()
    rank = trainer.accelerator.process_index
    turns = [h["rollout/turns_per_s"] for h in trainer.state.log_history if "rollout/turns_per_s" in h]
    result = {"steps": trainer.steps, "turns_per_s": turns}
    (out / f"{_slug(variant)}.rank{rank}.json").write_text(json.dumps(result))


# -- driver ----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_variant(name: str, out: Path, steps: int, timeout_s: int) -> dict[str, float]:
    v = VARIANTS[name]
    threads = v.threads or max(1, (os.cpu_count() or 1) // v.processes)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TRL_EXPERIMENTAL_SILENCE": "1"}
    script = [str(HERE), "--worker", str(out), "--variant", name, "--steps", str(steps)]
    if v.processes == 1:
        cmd = [sys.executable, *script]
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(v.processes), "--num_machines", "1", "--mixed_precision", "no",
               "--dynamo_backend", "no", "--main_process_port", str(_free_port()), *script]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"variant {name!r} failed:\n{proc.stderr[-4000:]}")
    ranks = [
        json.loads((out / f"{_slug(name)}.rank{r}.json").read_text())
        for r in range(v.processes)
    ]
    measured = range(1, steps)  # step 0 starts the desktops
    turns_per_s = [ranks[0]["turns_per_s"][i] for i in measured]  # global already (all ranks)
    tokens = [sum(r["steps"][i]["tokens"] for r in ranks) for i in measured]
    train_s = [max(r["steps"][i]["step_s"] - r["steps"][i]["gen_s"] for r in ranks) for i in measured]
    return {
        "processes": v.processes,
        "threads": threads,
        "turns_per_s": statistics.median(turns_per_s),
        "turns_per_s_range": f"{min(turns_per_s):.1f}-{max(turns_per_s):.1f}",
        "train_tokens_per_s": statistics.median(t / s for t, s in zip(tokens, train_s)),
        "tokens_per_step": sum(tokens) / len(tokens),
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6, help="training steps per variant (>= 2)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names")
    ap.add_argument("--out", default="/tmp/bench_trainer")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds per variant")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(Path(a.worker), a.variant, a.steps)
        return
    if a.steps < 2:
        ap.error("--steps must be at least 2 (the first step is not measured)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in a.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    results = {n: run_variant(n, out, a.steps, a.timeout) for n in names}
    rows = [
        ("processes", "{:d}", "processes"),
        ("CPU threads per process", "{:d}", "threads"),
        ("rollout turns/s (all ranks), median", "{:.2f}", "turns_per_s"),
        ("rollout turns/s, min-max over steps", "{}", "turns_per_s_range"),
        ("train tokens/s (all ranks), median", "{:.0f}", "train_tokens_per_s"),
        ("tokens per step (all ranks)", "{:.0f}", "tokens_per_step"),
        ("wall time of the run, s", "{:.0f}", "wall_s"),
    ]
    print(f"| measurement | {' | '.join(names)} |")
    print(f"|---|{'---:|' * len(names)}")
    for label, fmt, key in rows:
        print(f"| {label} | {' | '.join(fmt.format(results[n][key]) for n in names)} |")


if __name__ == "__main__":
    main()
