"""The memory plan against measured peaks: the plan's terms next to what the trainer's loss holds.

    uv run python benchmarks/bench_memory_model.py

Runs the cases of ``tests/arpo_trainer/test_trainer_memory_model.py`` (``arpo_trainer.memcheck.
CPU_CASES``: small random Qwen2.5-VL models in bf16 on CPU, each shaped so that a different term
decides the peak) and prints, per case, the plan's model states and activations (kept, and the
largest of the three backward working sets) next to the peak ``TensorPeak`` counted during the
second update. Byte counts do not depend on the machine's load. ~4 minutes on 2 cores.
"""

from __future__ import annotations

import logging
import os

import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from arpo_trainer.memcheck import CPU_CASES, measure, plan_for, shape_of  # noqa: E402
from arpo_trainer.memory import GB  # noqa: E402
from arpo_trainer.model_shapes import QWEN2_5_VL_7B, scaled_shape  # noqa: E402
from trl.trainer import utils as trl_utils  # noqa: E402


def main() -> None:
    logging.disable(logging.WARNING)
    print(
        f"{'case':22} {'tokens':>7} {'patches':>8} {'states plan':>12} {'measured':>9} "
        f"{'activations plan':>17} {'measured':>9} {'ratio':>6}  peak phase (plan)"
    )
    kept = trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE
    for name, (sizes, workload, chunk) in CPU_CASES.items():
        trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = chunk
        try:
            shape = scaled_shape(QWEN2_5_VL_7B, **sizes)
            m = measure(shape, workload, device="cpu", dtype=torch.bfloat16, rollout=False)
            plan = plan_for(m, shape_of(shape, m.params), gpu_gb=0.0)  # told the same chunk
        finally:
            trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = kept
        measured = m.update_peak_bytes - m.states_bytes
        base = plan.inputs + plan.vision_kept
        phases = {
            "LM head": base + plan.lm_kept + plan.head_work,
            "LM layer": base + plan.lm_kept + plan.lm_work,
            "vision block": base + plan.vision_work,
        }
        phase = max(phases, key=lambda k: phases[k])
        print(
            f"{name:22} {m.tokens:7d} {m.patches:8d} {plan.states * 1e3:9.1f} MB "
            f"{m.states_bytes / 1e6:6.1f} MB {plan.activations * 1e3:14.1f} MB "
            f"{measured / 1e6:6.1f} MB {plan.activations * GB / measured:6.2f}  {phase}"
        )


if __name__ == "__main__":
    main()
