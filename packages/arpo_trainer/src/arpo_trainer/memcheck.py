"""Measure a training process's memory and speed on the trainer's own code paths.

The harness behind ``scripts/gpu-check.sh`` (:mod:`arpo_trainer.gpu_check`) and the memory
model's tests: a randomly initialized Qwen2.5-VL of a given shape (:mod:`arpo_trainer.
model_shapes`, config values only), one synthetic trajectory of given lengths, one ``generate``
turn after its longest context, and two updates through :class:`~arpo_trainer.trainer.
ARPOTrainer`'s loss (TRL's fused LM head, screenshots expanded from uint8 on the device, gradient
checkpointing, AdamW), with peak memory counted by the CUDA allocator or, on CPU, by
:class:`~arpo_trainer.memtrack.TensorPeak`; and :func:`plan_for`, the plan
(:func:`~arpo_trainer.memory.estimate_memory`) for exactly what ran.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arpo_trainer.memory import (
    MemoryEstimate,
    MemorySettings,
    ModelShape,
    estimate_memory,
)
from arpo_trainer.memtrack import TensorPeak
from arpo_trainer.model_shapes import (
    QWEN2_5_VL_7B,
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
    #: the same turn's prefill alone (one new token): the rollout turn is this plus the decode
    rollout_prefill_seconds: float = 0.0
    host_batch_bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def update_tokens_per_s(self) -> float:
        return self.tokens / self.update_seconds if self.update_seconds else math.nan

    @property
    def rollout_tokens_per_s(self) -> float:
        return self.rollout_new_tokens / self.rollout_seconds if self.rollout_seconds else math.nan

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second after the prefill: what the plan's decode rate estimates (vLLM's
        prefix cache skips most of the prefill from the second turn on)."""
        decode = self.rollout_seconds - self.rollout_prefill_seconds
        if not self.rollout_prefill_seconds or decode <= 0 or self.rollout_new_tokens < 2:
            return math.nan
        return (self.rollout_new_tokens - 1) / decode


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
    attn = "flash_attention_2" if device.startswith("cuda") and has_flash_attn() else "sdpa"
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(
            config, dtype=dtype, attn_implementation=attn
        )
    model.generation_config.eos_token_id = encoder.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def has_flash_attn() -> bool:
    try:
        importlib.import_module("flash_attn")  # optional, not installed here
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
    trainer uses without vLLM (``generate`` with a KV cache), timed after an untimed warm-up turn
    (the first call in a process pays CUDA's and the kernels' one-time costs: 25 s against 7 s on
    an H200), and the same turn's prefill alone (one new token), so that the decode rate can be
    set beside the plan's."""
    from arpo_trainer.generation import TransformersPolicy, turn_generation_config

    def policy(new_tokens: int) -> TransformersPolicy:
        cfg = turn_generation_config(encoder, max_new_tokens=new_tokens, do_sample=True)
        cfg.min_new_tokens = new_tokens  # a full-length turn, whatever the random model says
        cfg.use_cache = True
        return TransformersPolicy(trainer.model, encoder, cfg)

    def timed(p: TransformersPolicy) -> tuple[float, int]:
        t0 = time.perf_counter()
        sample = p.sample([context], [0])[0]
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - t0, len(sample.ids)

    device = out.device
    try:
        prefill = policy(1)
        timed(prefill)  # warm-up
        out.rollout_prefill_seconds, _ = timed(prefill)
        with peak_memory(device, trainer.model) as mem:
            out.rollout_seconds, out.rollout_new_tokens = timed(policy(workload.turn_tokens))
        out.rollout_peak_bytes = mem["peak"]
        out.rollout_context = len(context.input_ids)
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


_SMALL = {"heads": 4, "kv_heads": 2, "vision_heads": 2}
_NARROW_VISION = {"vision_depth": 2, "vision_hidden": 64, "vision_intermediate": 128}
_SHORT = Workload(screenshots=2, width=640, height=360, turns=2, turn_tokens=64, prompt_tokens=200)
_LONG = Workload(screenshots=4, width=1280, height=720, turns=4, turn_tokens=128, prompt_tokens=400)

#: Small models on which the plan is checked on CPU (tests/arpo_trainer/
#: test_trainer_memory_model.py, benchmarks/bench_memory_model.py): name -> (sizes for
#: :func:`~arpo_trainer.model_shapes.scaled_shape`, workload, TRL's head vocabulary chunk).
CPU_CASES: dict[str, tuple[dict[str, Any], Workload, int]] = {
    "deep language model": (
        dict(layers=6, hidden=256, intermediate=1024, vocab=2048, **_NARROW_VISION, **_SMALL),
        _SHORT,
        256,
    ),
    "wide vision tower": (
        dict(
            layers=1,
            hidden=128,
            intermediate=256,
            vocab=2048,
            vision_depth=4,
            vision_hidden=256,
            vision_intermediate=1024,
            **_SMALL,
        ),
        _SHORT,
        256,
    ),
    "large vocabulary": (
        dict(layers=1, hidden=128, intermediate=256, vocab=40000, **_NARROW_VISION, **_SMALL),
        _SHORT,
        32768,
    ),
    "long trajectory": (
        dict(layers=2, hidden=256, intermediate=1024, vocab=2048, **_NARROW_VISION, **_SMALL),
        _LONG,
        256,
    ),
}
