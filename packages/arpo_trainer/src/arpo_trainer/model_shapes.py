"""Architectures the recipe trains, as config values only (no weights, no hub access).

:data:`QWEN2_5_VL_7B` is the architecture of UI-TARS-1.5-7B, a fine-tune of Qwen2.5-VL-7B-Instruct.
Its values are those of the model's published ``config.json`` (``Qwen/Qwen2.5-VL-7B-Instruct`` on
the Hugging Face hub; ``ByteDance-Seed/UI-TARS-1.5-7B`` ships the same architecture fields), which
also appear in transformers' ``Qwen2_5_VLVisionConfig`` defaults for the vision tower. Token ids are
left out: a model built here takes them from the tokenizer it is used with.

:func:`qwen2_5_vl_config` builds a ``Qwen2_5_VLConfig`` from such values, optionally with fewer
layers or narrower widths (the GPU check's reduced depth, the CPU memory tests' small models).

>>> cfg = qwen2_5_vl_config(QWEN2_5_VL_7B)
>>> cfg.text_config.num_hidden_layers, cfg.vision_config.depth, cfg.text_config.vocab_size
(28, 32, 152064)
>>> round(parameter_count(cfg) / 1e9, 2)  # UI-TARS-1.5-7B: 8.29e9 (0.68e9 in the vision tower)
8.29
"""

from __future__ import annotations

import copy
from typing import Any

from transformers import Qwen2_5_VLConfig

#: Qwen2.5-VL-7B-Instruct / UI-TARS-1.5-7B (see the module docstring for the source).
QWEN2_5_VL_7B: dict[str, Any] = {
    "text": {
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 128000,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "mrope_section": [16, 24, 24],
        "tie_word_embeddings": False,
    },
    "vision": {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
        "hidden_act": "silu",
    },
}


def scaled_shape(
    base: dict[str, Any],
    *,
    layers: int | None = None,
    vision_depth: int | None = None,
    hidden: int | None = None,
    intermediate: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    vocab: int | None = None,
    vision_hidden: int | None = None,
    vision_intermediate: int | None = None,
    vision_heads: int | None = None,
) -> dict[str, Any]:
    """A copy of ``base`` with the given sizes changed (the rest, e.g. patch and window sizes,
    kept). Fewer vision blocks keep the full-attention blocks that still exist, and at least the
    last block is one."""
    out = copy.deepcopy(base)
    t, v = out["text"], out["vision"]
    for key, value in (
        ("num_hidden_layers", layers),
        ("hidden_size", hidden),
        ("intermediate_size", intermediate),
        ("num_attention_heads", heads),
        ("num_key_value_heads", kv_heads),
        ("vocab_size", vocab),
    ):
        if value is not None:
            t[key] = value
    if hidden is not None or heads is not None:
        head_dim = t["hidden_size"] // t["num_attention_heads"]
        half = head_dim // 2
        t["mrope_section"] = [half - 2 * (half // 3), half // 3, half // 3]
    for key, value in (
        ("depth", vision_depth),
        ("hidden_size", vision_hidden),
        ("intermediate_size", vision_intermediate),
        ("num_heads", vision_heads),
    ):
        if value is not None:
            v[key] = value
    v["out_hidden_size"] = t["hidden_size"]
    full = [i for i in v["fullatt_block_indexes"] if i < v["depth"]]
    v["fullatt_block_indexes"] = full or [v["depth"] - 1]
    return out


def token_attributes(*, eos: int, pad: int) -> dict[str, Any]:
    """The outer config's ``bos/eos/pad_token_id``: not fields of transformers 5's
    ``Qwen2_5_VLConfig`` (they live in ``text_config``), so passed as extra keyword arguments,
    which the config keeps as attributes (and in ``config.json``), as Qwen's own configs have
    them."""
    return {"bos_token_id": None, "eos_token_id": eos, "pad_token_id": pad}


def qwen2_5_vl_config(shape: dict[str, Any], token_ids: dict[str, int] | None = None):
    """A ``Qwen2_5_VLConfig`` of ``shape``; ``token_ids`` (``image``, ``video``, ``vision_start``,
    ``vision_end``, ``eos``, ``pad``) from the tokenizer the model is used with."""
    ids = {"image": 151655, "video": 151656, "vision_start": 151652, "vision_end": 151653}
    ids |= {"eos": 151645, "pad": 151643}
    ids |= token_ids or {}
    t, v = dict(shape["text"]), dict(shape["vision"])
    section = t.pop("mrope_section")
    tie = t.pop("tie_word_embeddings")
    text_config = {
        **t,
        "rope_scaling": {"type": "mrope", "mrope_section": section, "rope_type": "default"},
        "bos_token_id": None,
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["pad"],
        "tie_word_embeddings": tie,
        "layer_types": None,
    }
    return Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=v,
        image_token_id=ids["image"],
        video_token_id=ids["video"],
        vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"],
        tie_word_embeddings=tie,
        **token_attributes(eos=ids["eos"], pad=ids["pad"]),
    )


def parameter_count(config) -> int:
    """Parameters of a model of ``config``, counted on the meta device (nothing allocated)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(config)
    return sum(p.numel() for p in model.parameters())
