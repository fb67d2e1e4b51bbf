"""One rollout turn and one update of a model of the recipe's shape, measured against the plan.

``scripts/gpu-check.sh`` runs this on one GPU; CI runs its one-layer CPU version. A randomly
initialized Qwen2.5-VL (:mod:`arpo_trainer.model_shapes`: UI-TARS-1.5-7B's widths, vocabulary and
vision tower, built from config values, no weights) gets one synthetic trajectory of the
recipe's lengths (15 screenshots of 1920x1080 resized to 1092x1932, 15 turns of ~256 tokens,
~45.8k tokens); the check samples one turn after its longest context (``generate``, the policy's
own sampling code) and runs two updates through the trainer's loss path (TRL's fused LM head,
screenshots expanded from uint8 on the device, gradient checkpointing, AdamW), measuring peak
memory and tokens per second, and prints them next to :func:`~arpo_trainer.memory.estimate_memory`
for exactly what ran.

**Why not the whole 7B model on one GPU.** The recipe trains it with ZeRO-3 over 8 GPUs: 16 bytes
per parameter of model states (bf16 weights and gradients, fp32 master weights and AdamW moments)
divided by 8, 16.6 GB per GPU. On one GPU the states are not divided: 133 GB, more than any single
GPU holds. So the check keeps every *width* of the 7B model (hidden 3584, MLP 18944, 28 heads,
152,064-token vocabulary and LM head, the full 32-block vision tower at width 1280) and reduces
only the number of language layers (default 2 and 4). What each plan term becomes:

* per-layer terms (the checkpointed layer inputs): measured at two depths at the full sequence
  length; their slope is the per-layer cost, scaled to 28 layers in the plan's own formula;
* layer-count-independent terms (the recomputed layer, the fused-head tiles and their fp32
  gradient, the vision tower's activations, the micro-batch's pixels): measured at full size;
* model states: measured for the reduced model under the optimizer that ran (bytes per parameter
  checked); the recipe's ``16 x P / 8`` divides by 8 GPUs, which one GPU cannot show;
* vLLM's share while it generates: ``gpu_memory_utilization x GPU`` is reserved by vLLM by
  construction and is not measured here (this check samples with ``generate``);
* host memory per process (the buffered generation batch, the feature cache): counted exactly
  from the tensors.

Run ``python -m arpo_trainer.gpu_check --help``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from arpo_trainer.memcheck import (
    Measured,
    Workload,
    has_flash_attn,
    measure,
    plan_for,
    shape_of,
    tiny_shape,
)
from arpo_trainer.memory import (
    GB,
    MemorySettings,
    estimate_memory,
    estimate_throughput,
    host_memory,
)
from arpo_trainer.model_shapes import (
    QWEN2_5_VL_7B,
    parameter_count,
    qwen2_5_vl_config,
    scaled_shape,
)

# -- the command ---------------------------------------------------------------------------------


@dataclass
class Device:
    """The accelerator's size and the figures the throughput plan assumes for it."""

    name: str
    memory_gb: float
    peak_tflops: float  # dense bf16
    bandwidth_tbps: float

    @classmethod
    def detect(cls, device: str) -> Device:
        if not device.startswith("cuda"):
            return cls("cpu", 0.0, math.nan, math.nan)
        props = torch.cuda.get_device_properties(torch.device(device))
        h200 = "H200" in props.name
        return cls(props.name, props.total_memory / GB, 989.0, 4.8 if h200 else 3.35)


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument(
        "--depths",
        default="2,4",
        help="language layers of the reduced models (two or more give the per-layer slope)",
    )
    ap.add_argument(
        "--tiny",
        action="store_true",
        help="the CPU smoke version CI runs: narrow widths, 2 small screenshots, depth 1",
    )
    ap.add_argument("--no-rollout", action="store_true", help="skip the rollout turn")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    device = a.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (use --device cpu --tiny for the CPU version)")
        return 2
    dtype = torch.bfloat16  # the recipe's precision, on CPU too
    depths = [int(d) for d in a.depths.split(",")] if not a.tiny else [1]
    if a.tiny:
        workload = Workload(screenshots=2, width=640, height=360, turns=2, turn_tokens=16)
        workload.prompt_tokens = 64
    else:
        workload = Workload()
    dev = Device.detect(device)
    if device.startswith("cuda") and not has_flash_attn():
        print(
            "gpu-check: flash-attn is not installed (uv sync --extra gpu): attention runs on "
            "PyTorch's SDPA, where the vision tower attends window by window; memory is the "
            "recipe's, update speed is not (docs/recipe-memory.md)"
        )
    widths = "narrow widths (the CPU smoke version)" if a.tiny else "Qwen2.5-VL-7B's widths"
    print(
        f"gpu-check on {dev.name}: {widths}, random weights, {workload.screenshots} screenshots "
        f"{workload.width}x{workload.height}, {workload.turns} turns of {workload.turn_tokens} "
        f"tokens"
    )
    rows: list[tuple[Measured, dict[str, Any]]] = []
    for depth in depths:
        shape = tiny_shape(depth) if a.tiny else scaled_shape(QWEN2_5_VL_7B, layers=depth)
        t0 = time.perf_counter()
        m = measure(shape, workload, device=device, dtype=dtype, rollout=not a.no_rollout)
        _print_run(m, shape, dev, time.perf_counter() - t0)
        rows.append((m, shape))
    if not a.tiny:
        _print_recipe(rows, dev)
    if a.json:
        a.json.write_text(json.dumps([asdict(m) for m, _ in rows], indent=2))
    failed = [e for m, _ in rows for e in m.errors]
    print("gpu-check: " + ("FAILED: " + "; ".join(failed) if failed else "done"))
    return 1 if failed else 0


def _gb(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x / GB:.2f} GB" if x >= 0.01 * GB else f"{x / 1e6:.1f} MB"


def _rate(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:,.0f}/s" if x >= 10 else f"{x:.2f}/s"


def _print_run(m: Measured, shape_dict: dict[str, Any], dev: Device, seconds: float) -> None:
    shape = shape_of(shape_dict, m.params)
    plan = plan_for(m, shape, gpu_gb=dev.memory_gb)
    speed = estimate_throughput(
        shape, tokens=m.tokens, image_tokens=m.image_tokens,
        screenshots=m.screenshots,
        peak_tflops=dev.peak_tflops, bandwidth_tbps=dev.bandwidth_tbps,
    )  # fmt: skip
    print(
        f"\n== {m.depth} language layer(s): {m.params / 1e9:.2f}e9 parameters, {m.dtype} on "
        f"{m.device}; one trajectory of {m.tokens} tokens ({m.image_tokens} visual, "
        f"{m.patches} patches); {seconds:.0f} s"
    )
    table = [
        ("model states (weights, grads, AdamW)", _gb(plan.states * GB), _gb(m.states_bytes)),
        ("activations of one update", _gb(plan.activations * GB),
         _gb(m.update_peak_bytes - m.states_bytes)),
        ("update peak", _gb((plan.states + plan.activations) * GB), _gb(m.update_peak_bytes)),
        ("optimizer step peak", "", _gb(m.step_peak_bytes)),
        ("update tokens/s (forward + backward)", _rate(speed.update_tokens_per_s),
         _rate(m.update_tokens_per_s)),
        (f"rollout turn prefill ({m.rollout_context} tokens)", "",
         "n/a" if not m.rollout_prefill_seconds else f"{m.rollout_prefill_seconds:.2f} s"),
        ("rollout decode tokens/s (after the prefill)",
         _rate(speed.decode_tokens_per_s), _rate(m.decode_tokens_per_s)),
        ("rollout turn tokens/s (prefill included)", "", _rate(m.rollout_tokens_per_s)),
        ("rollout turn peak (generate)", "", _gb(m.rollout_peak_bytes)),
        ("host: the trajectory's screenshots (uint8)", "", _gb(m.host_batch_bytes)),
    ]  # fmt: skip
    print(f"  {'':46} {'plan':>12} {'measured':>12}")
    for name, planned, measured in table:
        print(f"  {name:46} {planned:>12} {measured:>12}")
    for e in m.errors:
        print(f"  ERROR {e}")


def _print_recipe(rows: list[tuple[Measured, dict[str, Any]]], dev: Device) -> None:
    """The per-layer slope of two depths, scaled to the recipe's 28 layers, next to the recipe's
    plan (8 GPUs, ZeRO-3, vLLM colocate), whose model-state share needs 8 ranks to measure."""
    ok = [(m, s) for m, s in rows if not m.errors and m.update_peak_bytes]
    if len(ok) < 2:
        print("\n(two depths are needed to scale to 28 layers)")
        return
    (a, _), (b, _) = ok[0], ok[-1]
    act_a, act_b = a.update_peak_bytes - a.states_bytes, b.update_peak_bytes - b.states_bytes
    per_layer = (act_b - act_a) / (b.depth - a.depth)
    layers = QWEN2_5_VL_7B["text"]["num_hidden_layers"]
    full = act_b + per_layer * (layers - b.depth)
    sec_layer = (b.update_seconds - a.update_seconds) / (b.depth - a.depth)
    # a slope at or below zero means the per-layer time is within the run-to-run noise of the
    # constant part (on an H200 without flash-attn, the vision tower's 35 of 38 s): no estimate
    full_seconds = b.update_seconds + sec_layer * (layers - b.depth) if sec_layer > 0 else math.nan
    recipe_shape = shape_of(QWEN2_5_VL_7B, parameter_count(qwen2_5_vl_config(QWEN2_5_VL_7B)))
    settings = MemorySettings(
        tokens=b.tokens, image_tokens=b.image_tokens, prompt_tokens=b.prompt_tokens,
        gpu_gb=dev.memory_gb or 80.0,
    )  # fmt: skip
    recipe = estimate_memory(recipe_shape, settings)
    speed = estimate_throughput(
        recipe_shape, tokens=b.tokens, image_tokens=b.image_tokens,
        screenshots=b.screenshots, peak_tflops=dev.peak_tflops, bandwidth_tbps=dev.bandwidth_tbps,
    )  # fmt: skip
    print(f"\n== the recipe: {layers} layers, scaled from {a.depth} and {b.depth} by the slope")
    print(f"  {'':46} {'plan':>12} {'measured':>12}")
    print(f"  {'activations per language layer':46} "
          f"{_gb(recipe_shape.hidden * b.tokens * 2):>12} {_gb(per_layer):>12}")  # fmt: skip
    print(f"  {'activations of one update at 28 layers':46} {_gb(recipe.activations * GB):>12} "
          f"{_gb(full):>12}")  # fmt: skip
    print(f"  {'update tokens/s at 28 layers':46} {_rate(speed.update_tokens_per_s):>12} "
          f"{_rate(b.tokens / full_seconds if full_seconds > 0 else math.nan):>12}")  # fmt: skip
    if math.isnan(full_seconds):
        print(f"  (n/a: {b.depth} layers took {b.update_seconds:.1f} s, {a.depth} took "
              f"{a.update_seconds:.1f} s: the per-layer time is below the noise of the constant "
              "part, the vision tower and the head)")  # fmt: skip
    print(
        f"  per GPU in the recipe (8 GPUs, ZeRO-3): model states {recipe.states:.1f} GB + ZeRO-3 "
        f"buffers {recipe.zero3_live:.1f} GB (need 8 ranks to measure) + activations (above) + "
        f"vLLM asleep {recipe.vllm_during_training:.1f} GB = training peak "
        f"{recipe.training:.1f} GB planned, "
        f"{recipe.states + recipe.zero3_live + recipe.vllm_during_training + full / GB:.1f} GB "
        f"with the measured activations; rollout peak {recipe.rollout:.1f} GB "
        f"(vLLM reserves {recipe.vllm_awake:.0f} GB by construction)"
    )
    patches = b.patches // max(1, b.screenshots)
    host = host_memory(
        rollouts_per_process=16, screenshots=15, patches_per_screenshot=patches, tokens=b.tokens
    )
    print(f"  host per process (16 trajectories): {host}")


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
