"""Rollout sampling on CPU: transformers ``generate`` vs vLLM colocate, same tiny VLM and contexts.

Run in the vLLM environment (``bash scripts/setup-vllm-cpu.sh``)::

    .venv-vllm-cpu/bin/python benchmarks/bench_vllm_cpu.py [--batch 8] [--turn-tokens 32]

Both policies sample one turn for ``--batch`` episode contexts (a screenshot of 640x360 each,
plus one earlier turn for half of them), ``--repeats`` times, at temperature 1 with the vision
tokens suppressed; the figures are turns/s and sampled tokens/s over the timed repeats (one
warm-up call each first). The vLLM engine start-up is reported separately. CPU timings are noisy
when other work runs on the machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import numpy as np  # noqa: E402
from arpo_trainer.config import ARPOConfig  # noqa: E402
from arpo_trainer.generation import (  # noqa: E402
    TransformersPolicy,
    TRLGenerationPolicy,
    turn_generation_config,
)
from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402


def contexts(encoder, n: int):
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        shots = [
            encoder.screenshot_png(rng.integers(0, 255, (360, 640, 3), dtype=np.uint8))
            for _ in range(1 + k % 2)
        ]
        acts = [encoder.action_ids("Action: hotkey(key='ctrl alt t')")] * (k % 2)
        out.append(encoder.encode("make a folder", shots, acts))
    return out


def timed(policy, ctxs, repeats: int) -> tuple[float, float]:
    policy.sample(ctxs, list(range(len(ctxs))))  # warm-up
    t0 = time.perf_counter()
    tokens = 0
    for _ in range(repeats):
        tokens += sum(len(s.ids) for s in policy.sample(ctxs, list(range(len(ctxs)))))
    dt = time.perf_counter() - t0
    return repeats * len(ctxs) / dt, tokens / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--turn-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = save_tiny_vllm_vlm(Path(tmp) / "tiny")
        args = ARPOConfig(
            output_dir=str(Path(tmp) / "out"),
            use_cpu=True,
            bf16=False,
            report_to="none",
            save_strategy="no",
            gradient_checkpointing=False,
            per_device_train_batch_size=2,
            num_generations=2,
            provider="fake",
            vector_env="sync",
            screen_width=640,
            screen_height=360,
            max_turn_tokens=a.turn_tokens,
            task_ids=["os-infeasible-001"],
            use_vllm=True,
            vllm_mode="colocate",
            vllm_max_model_length=4096,
        )
        t0 = time.perf_counter()
        trainer = ARPOTrainer(
            Qwen2_5_VLForConditionalGeneration.from_pretrained(path),
            args,
            AutoProcessor.from_pretrained(path),
        )
        startup = time.perf_counter() - t0
        enc = trainer.encoder
        ctxs = contexts(enc, a.batch)
        hf = TransformersPolicy(
            trainer.model, enc, turn_generation_config(enc, max_new_tokens=a.turn_tokens)
        )
        rows = {
            "transformers generate": timed(hf, ctxs, a.repeats),
            "vLLM colocate (vllm-cpu)": timed(TRLGenerationPolicy(trainer, enc), ctxs, a.repeats),
        }
    print(f"tiny Qwen2.5-VL, batch {a.batch}, <= {a.turn_tokens} tok/turn, {os.cpu_count()} CPUs")
    print(f"{'policy':28} {'turns/s':>9} {'tokens/s':>9}")
    for name, (turns, toks) in rows.items():
        print(f"{name:28} {turns:9.3f} {toks:9.2f}")
    print(f"vLLM colocate start-up (trainer construction): {startup:.1f} s")


if __name__ == "__main__":
    main()
