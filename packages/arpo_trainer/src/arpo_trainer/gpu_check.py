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
import contextlib
import gc
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arpo_trainer.memory import (
    GB,
    MemoryEstimate,
    MemorySettings,
    ModelShape,
    estimate_memory,
    estimate_throughput,
    host_memory,
)
from arpo_trainer.memtrack import TensorPeak
from arpo_trainer.model_shapes import (
    QWEN2_5_VL_7B,
    parameter_count,
    qwen2_5_vl_config,
    scaled_shape,
)

log = logging.getLogger(__name__)

#: UI-TARS-1.5's screenshot budget (``max_pixels``) and ARPO's (2116800 keeps 1080p at 1092x1932).
UITARS_MIN_PIXELS = 100 * 28 * 28
UITARS_MAX_PIXELS = 16384 * 28 * 28
ARPO_MAX_PIXELS = 2116800


@dataclass
class Workload:
    """One trajectory of the recipe's lengths (``configs/arpo_uitars_osworld.yaml``)."""

    screenshots: int = 15
    width: int = 1920
    height: int = 1080
    max_pixels: int = ARPO_MAX_PIXELS
    turns: int = 15
    turn_tokens: int = 256
    prompt_tokens: int = 1500


@dataclass
class Measured:
    """What one run measured (bytes, seconds, tokens)."""

    depth: int
    device: str
    dtype: str
    params: int
    tokens: int
    image_tokens: int
    patches: int
    screenshots: int
    prompt_tokens: int
    states_bytes: int = 0
    update_peak_bytes: int = 0
    update_seconds: float = 0.0
    step_peak_bytes: int = 0
    rollout_peak_bytes: int = 0
    rollout_context: int = 0
    rollout_new_tokens: int = 0
    rollout_seconds: float = 0.0
    host_batch_bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def update_tokens_per_s(self) -> float:
        return self.tokens / self.update_seconds if self.update_seconds else math.nan

    @property
    def rollout_tokens_per_s(self) -> float:
        return self.rollout_new_tokens / self.rollout_seconds if self.rollout_seconds else math.nan


def build_encoder(workload: Workload):
    """A UI-TARS-1.5 image processor (patch 14, merge 2) with the offline tokenizer."""
    from arpo_trainer.chat import TurnEncoder
    from arpo_trainer.tiny import build_processor, build_tokenizer

    processor = build_processor(
        build_tokenizer(), min_pixels=UITARS_MIN_PIXELS, max_pixels=UITARS_MAX_PIXELS
    )
    return TurnEncoder(
        processor,
        "{instruction}",
        max_history_images=workload.screenshots,
        image_max_pixels=workload.max_pixels,
    )


def synthetic_episode(encoder, workload: Workload, seed: int = 0):
    """``(trajectory, last context)`` of ``workload``'s lengths: random screenshots (with
    structure, like a desktop) and random action tokens closed by ``<|im_end|>``, all sampled
    (trained). The context is the one the last turn is sampled in: every screenshot, every action
    but the last."""
    from arpo_trainer.generation import special_token_suppression

    rng = np.random.default_rng(seed)
    tok = encoder.tokenizer
    special = set(tok.all_special_ids) | set(special_token_suppression(encoder))
    special |= {encoder.eos_token_id, encoder.image_token_id}
    vocab = [
        i
        for i in range(len(tok))
        if i not in special and not tok.convert_ids_to_tokens(i).startswith("<|")
    ]
    words = " ".join(tok.decode([int(i)]) for i in rng.choice(vocab, 64))
    instruction = words
    while len(encoder.header_ids(instruction)) < workload.prompt_tokens:
        instruction += " " + words
    shots = []
    for _ in range(workload.turns):
        small = rng.integers(0, 255, (workload.height // 40, workload.width // 40, 3), np.uint8)
        frame = np.kron(small, np.ones((40, 40, 1), np.uint8))
        shots.append(encoder.screenshot_png(frame))
    actions = [
        [int(t) for t in rng.choice(vocab, workload.turn_tokens)] + [encoder.eos_token_id]
        for _ in range(workload.turns)
    ]
    logps = [[-1.0] * len(a) for a in actions]
    trajectory = encoder.encode(instruction, shots, actions, logps)
    context = encoder.encode(instruction, shots, actions[:-1])
    return trajectory, context


def build_model(shape: dict[str, Any], encoder, *, dtype: torch.dtype, device: str, seed: int):
    """A randomly initialized Qwen2.5-VL of ``shape``, token ids from ``encoder``'s tokenizer."""
    from transformers import Qwen2_5_VLForConditionalGeneration

    tok = encoder.tokenizer
    ids = {
        "image": encoder.image_token_id,
        "video": tok.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start": tok.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end": tok.convert_tokens_to_ids("<|vision_end|>"),
        "eos": encoder.eos_token_id,
        "pad": tok.pad_token_id,
    }
    config = qwen2_5_vl_config(shape, ids)
    attn = "flash_attention_2" if device.startswith("cuda") and _has_flash_attn() else "sdpa"
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(
            config, dtype=dtype, attn_implementation=attn
        )
    model.generation_config.eos_token_id = encoder.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def _has_flash_attn() -> bool:
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def peak_memory(device: str, *track: Any) -> Iterator[dict[str, int]]:
    """``{"peak": bytes, "current": bytes}`` of tensor memory inside the block (CUDA: the
    allocator's counters; CPU: :class:`~arpo_trainer.memtrack.TensorPeak` over ``track``)."""
    out: dict[str, int] = {}
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        yield out
        torch.cuda.synchronize()
        out["peak"] = torch.cuda.max_memory_allocated()
        out["current"] = torch.cuda.memory_allocated()
        return
    with TensorPeak("cpu") as mem:
        mem.track(*track)
        mem.reset_peak()
        yield out
    out["peak"], out["current"] = mem.peak, mem.current


def make_trainer(model, encoder, workdir: str, *, device: str, gradient_checkpointing: bool):
    """An :class:`~arpo_trainer.trainer.ARPOTrainer` around ``model`` (fake desktops; the check
    calls its loss and generation code, not its training loop)."""
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.trainer import ARPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    on_cpu = not device.startswith("cuda")
    args = ARPOConfig(
        output_dir=str(Path(workdir) / "out"),
        use_cpu=on_cpu,
        bf16=False,  # the weights are bf16 already; as under DeepSpeed's bf16, no autocast
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        per_device_train_batch_size=2,
        num_generations=2,
        provider="fake",
        vector_env="sync",
        task_ids=["os-infeasible-001"],
        learning_rate=1e-6,
        optim="adamw_torch",
        loss_type="grpo",
        epsilon_high=0.3,
        delta=3.0,
        beta=0.0,
    )
    trainer = ARPOTrainer(model, args, encoder.processor)
    trainer.encoder = encoder  # the UI-TARS pixel budget, not the config's default
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def micro_batch(trainer, seq, device: str) -> dict[str, Any]:
    """The micro-batch ``_prepare_inputs`` would hand the loss for ``seq``: on the device, pixels
    still uint8."""
    from arpo_trainer.batch import collate

    enc = trainer.encoder
    batch, sampling = collate(
        [seq], pad_id=enc.tokenizer.pad_token_id, image_token_id=enc.image_token_id
    )
    mask = batch["completion_mask"] * batch["tool_mask"]
    inputs = {
        **batch,
        "advantages": torch.tensor([1.0]),
        "num_items_in_batch": mask.sum(),
        "old_per_token_logps": sampling.masked_fill(torch.isnan(sampling), -1.0),
    }
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def measure(
    shape: dict[str, Any],
    workload: Workload,
    *,
    device: str,
    dtype: torch.dtype,
    gradient_checkpointing: bool = True,
    rollout: bool = True,
    seed: int = 0,
) -> Measured:
    """Build a model of ``shape``, sample one turn at the longest context, run two updates."""
    encoder = build_encoder(workload)
    seq, context = synthetic_episode(encoder, workload, seed)
    model = build_model(shape, encoder, dtype=dtype, device=device, seed=seed)
    patches = sum(int(f.grid_thw.prod()) for f in seq.images)
    out = Measured(
        depth=shape["text"]["num_hidden_layers"],
        device=device,
        dtype=str(dtype).removeprefix("torch."),
        params=sum(p.numel() for p in model.parameters()),
        tokens=len(seq.input_ids),
        prompt_tokens=len(seq.prompt_ids),
        image_tokens=sum(f.num_tokens for f in seq.images),
        patches=patches,
        screenshots=len(seq.images),
        host_batch_bytes=sum(f.nbytes for f in seq.images),
    )
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(
            model, encoder, tmp, device=device, gradient_checkpointing=gradient_checkpointing
        )
        if rollout:
            _measure_rollout(trainer, encoder, context, workload, out)
        _measure_updates(trainer, seq, out)
        trainer.close_desktops()
    del trainer, model
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def _measure_rollout(trainer, encoder, context, workload: Workload, out: Measured) -> None:
    """One full-length turn after the trajectory's longest context, sampled by the policy the
    trainer uses without vLLM (``generate`` with a KV cache)."""
    from arpo_trainer.generation import TransformersPolicy, turn_generation_config

    cfg = turn_generation_config(encoder, max_new_tokens=workload.turn_tokens, do_sample=True)
    cfg.min_new_tokens = workload.turn_tokens  # a full-length turn, whatever the random model says
    cfg.use_cache = True
    model = trainer.model
    device = out.device
    policy = TransformersPolicy(model, encoder, cfg)
    try:
        with peak_memory(device, model) as mem:
            t0 = time.perf_counter()
            sample = policy.sample([context], [0])[0]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            out.rollout_seconds = time.perf_counter() - t0
        out.rollout_peak_bytes = mem["peak"]
        out.rollout_context = len(context.input_ids)
        out.rollout_new_tokens = len(sample.ids)
    except Exception as e:  # noqa: BLE001 - reported, the update is still measured
        out.errors.append(f"rollout turn: {type(e).__name__}: {e}")


def _measure_updates(trainer, seq, out: Measured) -> None:
    model = trainer.model
    model.train()
    device = out.device
    inputs = micro_batch(trainer, seq, device)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=1e-6, fused=False, foreach=False
    )
    try:
        # the first update creates the optimizer states and the gradients, which stay allocated
        # (zeroed, as DeepSpeed keeps its gradient buffers): the second is the steady state
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        states = sum(p.numel() * p.element_size() for p in model.parameters())
        states += sum(
            t.numel() * t.element_size()
            for s in optimizer.state.values()
            for t in s.values()
            if isinstance(t, torch.Tensor) and t.ndim > 0
        )
        states += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters()
                      if p.grad is not None)  # fmt: skip
        out.states_bytes = states
        with peak_memory(device, model, optimizer, inputs) as mem:
            t0 = time.perf_counter()
            loss = trainer.compute_loss(model, inputs)
            loss.backward()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            out.update_seconds = time.perf_counter() - t0
        out.update_peak_bytes = mem["peak"]
        with peak_memory(device, model, optimizer, inputs) as mem:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        out.step_peak_bytes = mem["peak"]
    except Exception as e:  # noqa: BLE001 - reported with what was measured so far
        out.errors.append(f"update: {type(e).__name__}: {e}")


def plan_for(measured: Measured, shape: ModelShape, *, gpu_gb: float) -> MemoryEstimate:
    """The plan's estimate for exactly what :func:`measure` ran (one process, no ZeRO, plain
    AdamW in the model's dtype, micro-batch 1, no vLLM)."""
    from trl.trainer import utils as trl_utils

    act_bytes = 2 if measured.dtype in ("bfloat16", "float16") else 4
    return estimate_memory(
        shape,
        MemorySettings(
            num_gpus=1,
            gpu_gb=gpu_gb,
            zero_stage=0,
            tokens=measured.tokens,
            image_tokens=measured.image_tokens,
            prompt_tokens=measured.prompt_tokens,
            activation_bytes=act_bytes,
            state_bytes_per_param=4 * act_bytes,  # weights, grads, AdamW m and v, all this dtype
            triton=measured.device.startswith("cuda") and _has_triton(),
            head_vocab_chunk=trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE,
            vllm_colocate=False,
        ),
    )


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


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


def shape_of(shape: dict[str, Any], params: int) -> ModelShape:
    """The memory model's view of a :mod:`~arpo_trainer.model_shapes` shape."""
    t, v = shape["text"], shape["vision"]
    return ModelShape(
        params=float(params),
        hidden=t["hidden_size"],
        layers=t["num_hidden_layers"],
        intermediate=t["intermediate_size"],
        vocab=t["vocab_size"],
        vision_hidden=v["hidden_size"],
        vision_layers=v["depth"],
        heads=t["num_attention_heads"],
        kv_heads=t["num_key_value_heads"],
        vision_intermediate=v["intermediate_size"],
        vision_heads=v["num_heads"],
    )


def tiny_shape(depth: int) -> dict[str, Any]:
    """The CPU smoke version's model: the 7B's layout at narrow widths."""
    return scaled_shape(
        QWEN2_5_VL_7B, layers=depth, hidden=128, intermediate=256, heads=4, kv_heads=2,
        vocab=2048, vision_depth=2, vision_hidden=64, vision_intermediate=128, vision_heads=2,
    )  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        (f"rollout turn tokens/s (after {m.rollout_context} tokens)",
         _rate(speed.decode_tokens_per_s), _rate(m.rollout_tokens_per_s)),
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
    full_seconds = b.update_seconds + sec_layer * (layers - b.depth)
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
