"""GPU memory of one training process, estimated from the model's shape and the run's settings.

The numbers the recipe's comments (``configs/arpo_uitars_osworld.yaml``) are written from, as code,
so that ``arpo-train --dry_run`` checks a config before 8 GPUs are rented. It is arithmetic, not a
profiler: each term is a standard rule of thumb (named below), good to ~20%, and the point is to
see which term dominates and whether the sum is far from the GPU's size.

Per process and GPU (bytes; ``P`` parameters, ``N`` GPUs, ``T`` tokens of one trajectory):

* **model states**: full fine-tune with AdamW in mixed precision: 2 (bf16 weights) + 2 (grads) +
  12 (fp32 master weights, m, v) = 16 B/param (ZeRO paper, Sec. 3); ZeRO-3 divides all of it by
  ``N``, ZeRO-2 only grads and optimizer. LoRA: 2 B/param frozen weights (+ a few trainable).
* **ZeRO-3 working set**: the gathered parameters in flight (``stage3_max_live_parameters``, 1e9
  in our DeepSpeed config) = 2 GB in bf16.
* **LM activations** with gradient checkpointing: one ``T x hidden`` bf16 tensor per layer kept,
  plus one layer recomputed in backward (q/k/v/o and the MLP's 3 ``T x intermediate`` tensors,
  flash attention holds no ``T x T`` matrix). Without checkpointing ~16 such tensors per layer.
* **logits**: TRL 1.16 never materializes them: ``add_fused_lm_head`` scores the completion in
  ``[4096 tokens x 32768 vocab]`` tiles and recomputes them in backward, so only the tiles and a
  few floats per token are held (materialized, 45k x 152k bf16 logits alone would be ~14 GB per
  copy, and log-softmax plus gradients hold several copies).
* **vision tower**: every screenshot's patches (4 per visual token, 2x2 merge) through the ViT,
  checkpointed per block like the LM.
* **vLLM colocated**: ``vllm_gpu_memory_utilization x GPU`` while it holds weights and KV cache.
  With
  sleep mode it releases both after each generate call (level 2), so training does not share the
  GPU with it; rollouts then share it with the (partitioned) model states only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs to know about a Qwen2.5-VL-like model."""

    params: float  # all parameters, vision tower included
    hidden: int
    layers: int
    intermediate: int
    vocab: int
    vision_hidden: int
    vision_layers: int


#: Shapes of models the recipe names, from their published ``config.json`` (offline: no hub access).
KNOWN_SHAPES = {
    # UI-TARS-1.5-7B is a Qwen2.5-VL-7B fine-tune: 8.29e9 parameters (0.68e9 in the ViT)
    "qwen2.5-vl-7b": ModelShape(8.29e9, 3584, 28, 18944, 152064, 1280, 32),
    "qwen2.5-vl-3b": ModelShape(3.75e9, 2048, 36, 11008, 151936, 1280, 32),
}
_ALIASES = {
    "bytedance-seed/ui-tars-1.5-7b": "qwen2.5-vl-7b",
    "qwen/qwen2.5-vl-7b-instruct": "qwen2.5-vl-7b",
    "qwen/qwen2.5-vl-3b-instruct": "qwen2.5-vl-3b",
}


def model_shape(name_or_path: str) -> ModelShape | None:
    """The shape of a known model name or of a local checkpoint (its ``config.json``); else None."""
    key = _ALIASES.get(name_or_path.lower(), name_or_path.lower())
    if key in KNOWN_SHAPES:
        return KNOWN_SHAPES[key]
    config = Path(name_or_path) / "config.json"
    if not config.is_file():
        return None
    cfg = json.loads(config.read_text())
    text = cfg.get("text_config") or cfg
    vision = cfg.get("vision_config") or {}
    hidden, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
    inter, vocab = int(text["intermediate_size"]), int(text.get("vocab_size") or cfg["vocab_size"])
    v_hidden, v_layers = int(vision.get("hidden_size", 0)), int(vision.get("depth", 0))
    index = Path(name_or_path) / "model.safetensors.index.json"
    if index.is_file():  # exact: bytes of the stored weights (bf16: 2 per parameter)
        params = json.loads(index.read_text())["metadata"]["total_size"] / 2
    else:  # attention + MLP + embeddings, and the ViT alike
        params = layers * (4 * hidden**2 + 3 * hidden * inter) + 2 * vocab * hidden
        params += v_layers * 12 * v_hidden**2
    return ModelShape(float(params), hidden, layers, inter, vocab, v_hidden, v_layers)


@dataclass(frozen=True)
class MemorySettings:
    """The run settings the estimate depends on (see :func:`estimate_memory`)."""

    num_gpus: int = 8
    gpu_gb: float = 80.0
    zero_stage: int = 3
    lora: bool = False
    micro_batch: int = 1
    tokens: int = 45_000  # one trajectory: prompt + screenshots + every turn
    image_tokens: int = 40_365  # of which visual tokens (after the 2x2 merge)
    gradient_checkpointing: bool = True
    vllm_colocate: bool = True
    vllm_gpu_memory_utilization: float = 0.6
    vllm_sleep_mode: bool = True


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak GB per GPU, by term, for the two phases of a step."""

    states: float
    zero3_live: float
    lm_activations: float
    logits: float
    vision: float
    vllm_awake: float
    gpu_gb: float
    vllm_during_training: float

    @property
    def training(self) -> float:
        """Peak while computing the loss (vLLM asleep or still resident)."""
        return (
            self.states
            + self.zero3_live
            + self.lm_activations
            + self.logits
            + self.vision
            + self.vllm_during_training
        )

    @property
    def rollout(self) -> float:
        """Peak while vLLM generates (the model states stay on the GPU)."""
        return self.states + self.zero3_live + self.vllm_awake

    @property
    def fits(self) -> bool:
        return max(self.training, self.rollout) <= self.gpu_gb

    def rows(self) -> list[tuple[str, float]]:
        return [
            ("model states (weights, grads, AdamW)", self.states),
            ("ZeRO-3 gathered parameters", self.zero3_live),
            ("LM activations", self.lm_activations),
            ("logits (fused LM head tiles)", self.logits),
            ("vision tower activations", self.vision),
            ("vLLM during training", self.vllm_during_training),
            ("= training peak", self.training),
            ("vLLM while generating", self.vllm_awake),
            ("= rollout peak", self.rollout),
        ]


def estimate_memory(shape: ModelShape, s: MemorySettings) -> MemoryEstimate:
    """Peak memory per GPU in GB (module docstring: the rule behind each term).

    >>> e = estimate_memory(KNOWN_SHAPES["qwen2.5-vl-7b"], MemorySettings())
    >>> round(e.states, 1), round(e.logits, 1), e.fits
    (16.6, 1.1, True)
    """
    P, n = shape.params, max(1, s.num_gpus)
    if s.lora:
        states = 2 * P / (n if s.zero_stage == 3 else 1)
    elif s.zero_stage == 3:
        states = 16 * P / n
    elif s.zero_stage == 2:
        states = 4 * P + 12 * P / n
    else:
        states = 16 * P
    zero3_live = 2e9 if s.zero_stage == 3 else 0.0
    T, b = s.tokens, s.micro_batch
    if s.gradient_checkpointing:
        kept = shape.layers * T * shape.hidden * 2
        recompute = T * (6 * shape.hidden + 3 * shape.intermediate) * 2
        lm = b * (kept + recompute)
    else:
        lm = b * shape.layers * T * (10 * shape.hidden + 3 * shape.intermediate) * 2
    tile = min(T, 4096) * min(shape.vocab, 32768) * 4
    logits = 2 * tile + b * T * 4 * 4  # fused LM head tiles (+ backward's) and per-token outputs
    patches = 4 * s.image_tokens
    v_layers_kept = shape.vision_layers if s.gradient_checkpointing else 8 * shape.vision_layers
    vision = b * patches * shape.vision_hidden * 2 * (v_layers_kept + 8)
    vllm = s.vllm_gpu_memory_utilization * s.gpu_gb * GB if s.vllm_colocate else 0.0
    vllm_training = 1.0 * GB if s.vllm_sleep_mode else vllm  # CUDA context / graphs stay
    if not s.vllm_colocate:
        vllm_training = 0.0
    return MemoryEstimate(
        states=states / GB,
        zero3_live=zero3_live / GB,
        lm_activations=lm / GB,
        logits=logits / GB,
        vision=vision / GB,
        vllm_awake=vllm / GB,
        gpu_gb=s.gpu_gb,
        vllm_during_training=vllm_training / GB,
    )


def trajectory_tokens(
    *,
    max_history_images: int,
    max_turns: int,
    tokens_per_image: int,
    turn_tokens: int = 256,
    prompt_tokens: int = 1500,
) -> tuple[int, int]:
    """``(all tokens, visual tokens)`` of a full-length trajectory: the prompt, the kept screenshots
    and ``max_turns`` answers of a typical length (UI-TARS: a thought and one action, ~100-300)."""
    images = min(max_history_images, max_turns) * tokens_per_image
    return prompt_tokens + images + max_turns * (turn_tokens + 8), images


def tokens_per_image(width: int, height: int, max_pixels: int | None) -> int:
    """Visual tokens of one screenshot after Qwen2.5-VL's resize and 2x2 merge (28x28 px each)."""
    from osworld_gym.actions.uitars import MAX_PIXELS, smart_resize

    h, w = smart_resize(height, width, max_pixels=max_pixels or MAX_PIXELS)
    return math.ceil(h / 28) * math.ceil(w / 28)
