"""Memory of one training process, estimated from the model's shape and the run's settings.

The numbers the recipe's comments (``configs/arpo_uitars_osworld.yaml``) and ``arpo-train
--dry_run`` are written from. Each term counts the tensors the training code keeps, by shape; the
counts were read off the code (transformers' Qwen2.5-VL, TRL's fused LM head) and checked against
peaks measured with :class:`~arpo_trainer.memtrack.TensorPeak` on small models of several
depths, widths and sequence lengths (``tests/arpo_trainer/test_trainer_memory_model.py``), and,
on a GPU, by ``scripts/gpu-check.sh``. ``docs/recipe-memory.md`` has the measurements.

Per process and GPU (``P`` parameters, ``N`` GPUs, ``T`` tokens of one trajectory, of which ``V``
visual tokens from ``4V`` vision patches, ``C`` scored completion positions; ``a`` bytes per
activation element, 2 in bf16):

* **model states**: full fine-tune with AdamW in mixed precision, 16 B/param (bf16 weights and
  gradients, fp32 master weights, m and v; ZeRO paper, Sec. 3); ZeRO-3 divides all of it by
  ``N``, ZeRO-2 the gradients and optimizer. LoRA: the frozen weights only.
* **ZeRO-3 working set**: the gathered parameters in flight (``stage3_max_live_parameters``,
  1e9 in our DeepSpeed config), 2 GB in bf16.
* **the micro-batch's screenshots**: uint8 patches (588 B each) moved to the device, expanded to
  the processor's values in ``a`` bytes (1176 values a patch) and kept by the patch embedding
  for its backward. The rest of the generation batch stays on the host (below).
* **LM activations** with gradient checkpointing: every layer's input (``T x hidden``) kept, plus
  what recomputing one layer holds in its backward (``LM_RECOMPUTE_*``), plus the embeddings and
  final norm (``LM_FIXED_HIDDEN``). RMSNorm computes in fp32: those copies are 4 B whatever ``a``.
* **fused LM head**: TRL 1.16 never materializes ``[C x vocab]`` logits; it scores in
  ``[4096 x 32768]`` tiles, and its backward accumulates the head's weight gradient in fp32
  (``vocab x hidden x 4`` B: 2.2 GB for Qwen2.5-VL-7B) and the hidden states' in fp32.
* **vision tower**: like the LM, every block's input (``4V x vision_hidden``) kept, one block
  recomputed, and the patch merger.
* **vLLM colocated**: ``vllm_gpu_memory_utilization x GPU`` while it generates. With sleep mode
  it is awake for a whole rollout (every turn) and sleeps (level 2: weights and KV cache freed)
  while the trainer computes the loss and the optimizer runs; asleep it keeps its CUDA context.

And per process on the **host** (:func:`host_memory`): the generation batch TRL buffers until the
next rollout (every trajectory's screenshots as uint8 patches, its token ids and log-probs), and
the encoder's feature cache (bounded by ``feature_cache_mb``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

GB = 1e9

#: Bytes of one vision patch as kept on the host and moved to the device (3 x 14 x 14, uint8).
PATCH_BYTES_UINT8 = 3 * 14 * 14
#: Values of one patch as the vision tower reads it (two temporal frames).
PATCH_VALUES = 2 * PATCH_BYTES_UINT8

# Tensor counts, in units of one [tokens x width] activation, read off transformers' Qwen2.5-VL
# and TRL's fused head and checked against measured peaks (module docstring).
#: Recomputing one decoder layer in its backward holds about this many [T x hidden] tensors in
#: the activation dtype (norm outputs, q and o, rotary copies, attention output, residuals and
#: their gradients; k and v counted at their own width), [T x hidden] fp32 tensors (RMSNorm's
#: upcasts) and [T x intermediate] tensors (gate, up, act, product and gradients).
LM_RECOMPUTE_HIDDEN = 8.0
LM_RECOMPUTE_FP32_HIDDEN = 2.0
LM_RECOMPUTE_INTERMEDIATE = 6.0
#: Kept through the backward besides the layer inputs: token embeddings, the image scatter, the
#: final norm's input and output, the gradient flowing back ([T x hidden] each).
LM_FIXED_HIDDEN = 4.0
#: Recomputing one vision block: [patches x vision_hidden] tensors (qkv counted as 3), fp32 ones
#: (RMSNorm), and [patches x vision_intermediate] ones.
VISION_RECOMPUTE_HIDDEN = 9.0
VISION_RECOMPUTE_FP32_HIDDEN = 2.0
VISION_RECOMPUTE_INTERMEDIATE = 6.0
#: Kept through the vision backward besides the block inputs: patch embedding output, window
#: reordering, the merger's saved inputs ([patches x vision_hidden] each).
VISION_FIXED_HIDDEN = 4.0
#: TRL 1.16's fused head (``trl/kernels/chunked_logprob.py``): a [4096 x 32768] buffer in the
#: compute dtype whatever the vocabulary, and, without Triton (CPU), about this many fp32 copies
#: of each [tokens x vocab chunk] tile in its torch fallback; without Triton it also scores every
#: position, not only the completion's.
HEAD_TOKEN_CHUNK = 4096
HEAD_VOCAB_CHUNK = 32768
HEAD_TILE_COPIES_WITHOUT_TRITON = 7.0


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
    heads: int = 0  # 0: hidden // 128
    kv_heads: int = 0  # 0: heads
    vision_intermediate: int = 0  # 0: 4 x vision_hidden
    vision_heads: int = 16

    @property
    def kv_width(self) -> int:
        heads = self.heads or max(1, self.hidden // 128)
        return self.hidden // heads * (self.kv_heads or heads)

    @property
    def vision_mlp(self) -> int:
        return self.vision_intermediate or 4 * self.vision_hidden


#: Shapes of models the recipe names, from their published ``config.json`` (offline: no hub access;
#: :mod:`arpo_trainer.model_shapes` holds the whole 7B config).
KNOWN_SHAPES = {
    # UI-TARS-1.5-7B is a Qwen2.5-VL-7B fine-tune: 8.29e9 parameters (0.68e9 in the ViT)
    "qwen2.5-vl-7b": ModelShape(
        8.29e9,
        3584,
        28,
        18944,
        152064,
        1280,
        32,
        heads=28,
        kv_heads=4,
        vision_intermediate=3420,
        vision_heads=16,
    ),  # fmt: skip
    "qwen2.5-vl-3b": ModelShape(
        3.75e9,
        2048,
        36,
        11008,
        151936,
        1280,
        32,
        heads=16,
        kv_heads=2,
        vision_intermediate=3420,
        vision_heads=16,
    ),  # fmt: skip
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
    heads = int(text.get("num_attention_heads", 0))
    kv = int(text.get("num_key_value_heads", heads))
    v_inter = int(vision.get("intermediate_size", 4 * v_hidden))
    index = Path(name_or_path) / "model.safetensors.index.json"
    if index.is_file():  # exact: bytes of the stored weights (bf16: 2 per parameter)
        params = json.loads(index.read_text())["metadata"]["total_size"] / 2
    else:  # attention + MLP + embeddings, and the ViT alike
        params = layers * (4 * hidden**2 + 3 * hidden * inter) + 2 * vocab * hidden
        params += v_layers * (4 * v_hidden**2 + 3 * v_hidden * v_inter)
    return ModelShape(
        float(params), hidden, layers, inter, vocab, v_hidden, v_layers,
        heads=heads, kv_heads=kv, vision_intermediate=v_inter,
        vision_heads=int(vision.get("num_heads", 16)),
    )  # fmt: skip


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
    prompt_tokens: int = 0  # not scored by the LM head (0: ~ one screenshot + 1,500 text)
    gradient_checkpointing: bool = True
    activation_bytes: int = 2  # bf16
    state_bytes_per_param: float = 16.0  # mixed-precision AdamW (ZeRO's 2 + 2 + 12)
    triton: bool = True  # the fused head's kernel (GPU); the torch fallback makes tile copies
    head_vocab_chunk: int = HEAD_VOCAB_CHUNK  # TRL's _CHUNKED_LOGPROB_CHUNK_SIZE
    vllm_colocate: bool = True
    vllm_gpu_memory_utilization: float = 0.6
    vllm_sleep_mode: bool = True


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak GB per GPU, by term, for the two phases of a step (see :func:`activation_terms`)."""

    states: float
    zero3_live: float
    inputs: float
    vision_kept: float
    lm_kept: float
    head_work: float
    lm_work: float
    vision_work: float
    vllm_awake: float
    gpu_gb: float
    vllm_during_training: float

    @property
    def activations(self) -> float:
        """The loss's forward and backward beyond the model states: what is kept, plus the
        largest working set of the three backward phases."""
        return max(
            self.inputs + self.vision_kept + self.lm_kept + self.head_work,
            self.inputs + self.vision_kept + self.lm_kept + self.lm_work,
            self.inputs + self.vision_kept + self.vision_work,
        )

    @property
    def training(self) -> float:
        """Peak while computing the loss (vLLM asleep, or still resident without sleep mode)."""
        return self.states + self.zero3_live + self.activations + self.vllm_during_training

    @property
    def rollout(self) -> float:
        """Peak while vLLM generates a rollout (the model states stay on the GPU; the buffered
        batch is on the host)."""
        return self.states + self.zero3_live + self.vllm_awake

    @property
    def fits(self) -> bool:
        return max(self.training, self.rollout) <= self.gpu_gb

    def rows(self) -> list[tuple[str, float]]:
        return [
            ("model states (weights, grads, AdamW)", self.states),
            ("ZeRO-3 gathered parameters", self.zero3_live),
            ("micro-batch screenshots (uint8 + expanded)", self.inputs),
            ("vision tower, kept (checkpoints, merger)", self.vision_kept),
            ("LM, kept (layer inputs, embeddings)", self.lm_kept),
            ("  backward: fused LM head (tiles, fp32 grads)", self.head_work),
            ("  backward: one LM layer recomputed", self.lm_work),
            ("  backward: one vision block recomputed", self.vision_work),
            ("= activations (kept + largest backward)", self.activations),
            ("vLLM asleep during training", self.vllm_during_training),
            ("= training peak", self.training),
            ("vLLM awake for the rollout", self.vllm_awake),
            ("= rollout peak", self.rollout),
        ]


def activation_terms(shape: ModelShape, s: MemorySettings) -> dict[str, float]:
    """Bytes of the loss's forward and backward, by term (module docstring).

    ``*_kept`` terms live from the forward until their part of the backward; ``*_work`` terms are
    the extra working set of one backward phase: the fused head first (everything kept is still
    alive), then the language layers (the vision tower's kept tensors still alive), then the
    vision blocks (the language model's freed).
    """
    a, b = s.activation_bytes, s.micro_batch
    T, V = s.tokens, s.image_tokens
    h, inter, kv = shape.hidden, shape.intermediate, shape.kv_width
    vh, vi = shape.vision_hidden, shape.vision_mlp
    patches = 4 * V
    inputs = b * patches * (PATCH_BYTES_UINT8 + PATCH_VALUES * a)
    lm_layer = T * ((LM_RECOMPUTE_HIDDEN * h + 2 * kv) * a + LM_RECOMPUTE_FP32_HIDDEN * h * 4
                    + LM_RECOMPUTE_INTERMEDIATE * inter * a)  # fmt: skip
    block = patches * ((VISION_RECOMPUTE_HIDDEN * vh + VISION_RECOMPUTE_INTERMEDIATE * vi) * a
                       + VISION_RECOMPUTE_FP32_HIDDEN * vh * 4)  # fmt: skip
    if s.gradient_checkpointing:
        lm_kept = (shape.layers + LM_FIXED_HIDDEN) * T * h * a
        lm_work = lm_layer
        vision_kept = (shape.vision_layers + VISION_FIXED_HIDDEN) * patches * vh * a
        vision_work = block
    else:  # every layer keeps its whole working set until its backward
        lm_kept = shape.layers * lm_layer + LM_FIXED_HIDDEN * T * h * a
        lm_work = 0.0
        vision_kept = shape.vision_layers * block + VISION_FIXED_HIDDEN * patches * vh * a
        vision_work = 0.0
    vision_kept += V * h * a  # the merger's output, scattered into the embeddings
    scored = T - 1 if not s.triton else max(1, T - (s.prompt_tokens or T // 20))
    n = min(scored, HEAD_TOKEN_CHUNK)
    chunk = s.head_vocab_chunk
    head = n * chunk * a + shape.vocab * h * 4 + scored * h * (a + 4)
    if not s.triton:
        head += HEAD_TILE_COPIES_WITHOUT_TRITON * n * min(shape.vocab, chunk) * 4
    return {
        "inputs": inputs,
        "vision_kept": b * vision_kept,
        "lm_kept": b * lm_kept,
        "head_work": b * head,
        "lm_work": b * lm_work,
        "vision_work": b * vision_work,
    }


def estimate_memory(shape: ModelShape, s: MemorySettings) -> MemoryEstimate:
    """Peak memory per GPU in GB (module docstring: the rule behind each term).

    >>> e = estimate_memory(KNOWN_SHAPES["qwen2.5-vl-7b"], MemorySettings())
    >>> round(e.states, 1), e.fits
    (16.6, True)
    """
    P, n = shape.params, max(1, s.num_gpus)
    if s.lora:
        states = s.state_bytes_per_param / 8 * P / (n if s.zero_stage == 3 else 1)
    elif s.zero_stage == 3:
        states = s.state_bytes_per_param * P / n
    elif s.zero_stage == 2:
        states = s.state_bytes_per_param / 4 * P + s.state_bytes_per_param * 3 / 4 * P / n
    else:
        states = s.state_bytes_per_param * P
    zero3_live = 2e9 if s.zero_stage == 3 else 0.0
    terms = activation_terms(shape, s)
    vllm = s.vllm_gpu_memory_utilization * s.gpu_gb * GB if s.vllm_colocate else 0.0
    vllm_training = 1.0 * GB if s.vllm_sleep_mode else vllm  # CUDA context / graphs stay
    if not s.vllm_colocate:
        vllm_training = 0.0
    return MemoryEstimate(
        states=states / GB,
        zero3_live=zero3_live / GB,
        inputs=terms["inputs"] / GB,
        vision_kept=terms["vision_kept"] / GB,
        lm_kept=terms["lm_kept"] / GB,
        head_work=terms["head_work"] / GB,
        lm_work=terms["lm_work"] / GB,
        vision_work=terms["vision_work"] / GB,
        vllm_awake=vllm / GB,
        gpu_gb=s.gpu_gb,
        vllm_during_training=vllm_training / GB,
    )


@dataclass(frozen=True)
class HostEstimate:
    """Host memory per training process, GB."""

    buffered_batch: float
    feature_cache: float

    @property
    def total(self) -> float:
        return self.buffered_batch + self.feature_cache

    def __str__(self) -> str:
        return (
            f"buffered generation batch {self.buffered_batch:.2f} GB + feature cache "
            f"{self.feature_cache:.2f} GB = {self.total:.2f} GB"
        )


def host_memory(
    *,
    rollouts_per_process: int,
    screenshots: int,
    patches_per_screenshot: int,
    tokens: int = 45_000,
    feature_cache_mb: int = 2048,
) -> HostEstimate:
    """Host memory of one process: TRL's buffered generation batch (screenshots as uint8 patches,
    ids, masks and log-probs per token) and the feature cache (at most ``feature_cache_mb``, at
    most one rollout's screenshots).

    >>> str(host_memory(rollouts_per_process=16, screenshots=15, patches_per_screenshot=10764))
    'buffered generation batch 1.56 GB + feature cache 1.52 GB = 3.08 GB'
    """
    shot = patches_per_screenshot * PATCH_BYTES_UINT8 + 24
    per_token = 8 * 6 + 4 * 3  # int64 ids, masks, mm types; fp32 sampling/old/ref log-probs
    batch = rollouts_per_process * (screenshots * shot + tokens * per_token)
    cache = min(feature_cache_mb * 1024**2, rollouts_per_process * screenshots * shot)
    return HostEstimate(buffered_batch=batch / GB, feature_cache=cache / GB)


@dataclass(frozen=True)
class Throughput:
    """Expected speed of one process's GPU (see :func:`estimate_throughput`)."""

    update_flops: float  # one trajectory's forward + recompute + backward
    update_tokens_per_s: float
    decode_tokens_per_s: float  # one sequence, after a context of ``tokens``


def estimate_throughput(
    shape: ModelShape,
    *,
    tokens: int,
    image_tokens: int,
    screenshots: int = 15,
    gradient_checkpointing: bool = True,
    peak_tflops: float = 989.0,
    mfu: float = 0.4,
    bandwidth_tbps: float = 3.35,
    bandwidth_use: float = 0.6,
    weight_bytes: int = 2,
) -> Throughput:
    """Tokens per second of an update and of decoding, from FLOPs and bytes (defaults: an H100
    SXM's dense bf16 peak and HBM bandwidth, at 40% and 60% of them; ``scripts/gpu-check.sh``
    measures what a GPU really does).

    An update runs the forward twice with gradient checkpointing and the backward (2x the
    forward): 4 forwards. A forward is 2 FLOPs per weight per token through the language layers,
    2 per head weight per token, and causal attention ``2 T^2 hidden`` per layer; the vision
    tower 2 per weight per patch and attention over 64-patch windows (each image whole in its 4
    full-attention blocks). Decoding one token reads every weight and the context's KV cache.

    >>> t = estimate_throughput(KNOWN_SHAPES["qwen2.5-vl-7b"], tokens=45_780, image_tokens=40_365)
    >>> round(t.update_flops / 1e15, 1), round(t.update_tokens_per_s), round(t.decode_tokens_per_s)
    (5.2, 3460, 105)
    """
    h, layers, v = shape.hidden, shape.layers, shape.vocab
    kv = shape.kv_width
    layer_weights = 2 * h * h + 2 * h * kv + 3 * h * shape.intermediate
    vh = shape.vision_hidden
    block_weights = 4 * vh * vh + 3 * vh * shape.vision_mlp
    patches = 4 * image_tokens
    per_image = patches / max(1, screenshots)
    full_blocks = min(4, shape.vision_layers)
    fwd = 2 * layers * layer_weights * tokens + 2 * h * v * tokens + 2 * layers * tokens**2 * h
    fwd += 2 * shape.vision_layers * block_weights * patches
    fwd += 4 * vh * patches * (64 * (shape.vision_layers - full_blocks) + per_image * full_blocks)
    passes = 4 if gradient_checkpointing else 3
    flops = passes * fwd
    update = tokens / (flops / (peak_tflops * 1e12 * mfu))
    step_bytes = weight_bytes * shape.params + 2 * layers * tokens * kv * weight_bytes
    decode = bandwidth_tbps * 1e12 * bandwidth_use / step_bytes
    return Throughput(update_flops=flops, update_tokens_per_s=update, decode_tokens_per_s=decode)


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
