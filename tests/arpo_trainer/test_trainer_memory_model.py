"""The memory plan (``arpo_trainer.memory``) against peaks measured on the trainer's own loss path.

Each case builds a random Qwen2.5-VL in bf16 (the recipe's precision) of a different shape,
encodes a trajectory of screenshots and turns, and runs two updates through ``ARPOTrainer``'s
loss (TRL's fused LM head, uint8 screenshots expanded on the device, gradient checkpointing,
AdamW); :class:`~arpo_trainer.memtrack.TensorPeak` counts every tensor alive at the second
update's peak. The plan must predict the model states exactly and the activations within
``TOLERANCE``, in cases where each of its terms is the one that decides the peak:

* a deeper and a wider language model (a recomputed layer's working set, the kept layer inputs),
* a wide vision tower (a recomputed vision block),
* a large vocabulary (the fused head's tiles; on CPU TRL's torch fallback, whose tile copies the
  plan counts only where Triton is absent),
* a 4x longer trajectory (every term grows with the tokens and patches).

TRL's fused head allocates a ``[tokens x 32768]`` buffer whatever the vocabulary, which would hide
everything else in models this small; the cases other than the vocabulary one shrink that chunk
(TRL reads ``_CHUNKED_LOGPROB_CHUNK_SIZE`` at each call) and the plan is told the same chunk.
The GPU counterpart (``scripts/gpu-check.sh``) runs the same measurement at UI-TARS-1.5-7B's widths.
"""

from __future__ import annotations

import pytest
import torch
from arpo_trainer.memcheck import CPU_CASES, measure, plan_for, shape_of
from arpo_trainer.memory import GB, ModelShape
from arpo_trainer.model_shapes import QWEN2_5_VL_7B, scaled_shape

TOLERANCE = 0.15


@pytest.mark.parametrize("case", list(CPU_CASES))
def test_the_plan_predicts_the_measured_peak(case, monkeypatch):
    from trl.trainer import utils as trl_utils

    sizes, workload, chunk = CPU_CASES[case]
    monkeypatch.setattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", chunk)
    shape = scaled_shape(QWEN2_5_VL_7B, **sizes)
    m = measure(shape, workload, device="cpu", dtype=torch.bfloat16, rollout=False)
    assert not m.errors
    plan = plan_for(m, shape_of(shape, m.params), gpu_gb=0.0)
    # weights, gradients and AdamW's two moments, all bf16: exact
    assert plan.states * GB == pytest.approx(m.states_bytes, rel=1e-6)
    measured = m.update_peak_bytes - m.states_bytes
    assert measured > 0
    assert plan.activations * GB == pytest.approx(measured, rel=TOLERANCE), (
        f"{case}: plan {plan.activations * 1e3:.1f} MB vs measured {measured / 1e6:.1f} MB"
    )


def test_the_plan_names_the_phase_that_peaks():
    """Which backward phase decides the peak moves with the shape (what the cases above rely on):
    at the recipe's shape a recomputed language layer; with a huge vocabulary and a tiny model,
    the head."""
    from arpo_trainer.memory import KNOWN_SHAPES, MemorySettings, activation_terms

    recipe = activation_terms(KNOWN_SHAPES["qwen2.5-vl-7b"], MemorySettings(tokens=45_800))
    assert recipe["lm_work"] > max(recipe["head_work"], recipe["vision_work"])
    tiny = ModelShape(2e6, 64, 1, 128, 150_000, 32, 2)
    terms = activation_terms(tiny, MemorySettings(tokens=2000, image_tokens=500, triton=False))
    assert terms["head_work"] > 10 * terms["lm_work"]
