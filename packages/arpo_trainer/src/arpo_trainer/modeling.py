"""Loading the policy: model, processor, and the LoRA configuration for its language model.

>>> from arpo_trainer.tiny import build_tiny_vlm
>>> vlm = build_tiny_vlm()
>>> cfg = lora_config(vlm.model, r=4)
>>> sorted(language_linear_names(vlm.model))
['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj']
>>> import re
>>> bool(re.fullmatch(cfg.target_modules, "model.language_model.layers.0.self_attn.q_proj"))
True
>>> bool(re.fullmatch(cfg.target_modules, "model.visual.blocks.0.mlp.gate_proj"))
False
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig
from transformers import (
    AutoImageProcessor,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
)
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
from transformers.processing_utils import ProcessorMixin
from transformers.utils import logging as hf_logging

log = logging.getLogger(__name__)

#: Module-name fragments that belong to a VLM's vision tower (Qwen: ``visual``).
VISION_MARKERS = (
    "visual",
    "vision_tower",
    "vision_model",
    "image_encoder",
    "multi_modal_projector",
)


@dataclass
class ModelArguments:
    """Which policy to train and how (LoRA by default)."""

    model_name_or_path: str = field(
        default="tiny",
        metadata={
            "help": "A Qwen-VL checkpoint (hub id or local directory, e.g. "
            "ByteDance-Seed/UI-TARS-1.5-7B) "
            "or 'tiny': a random tiny Qwen2.5-VL built offline, for CPU demos and tests."
        },
    )
    dtype: str = field(
        default="auto", metadata={"help": "Weights dtype: auto, float32, bfloat16, float16."}
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "Attention kernel, e.g. sdpa or flash_attention_2 (default: transformers')."
        },
    )
    use_lora: bool = field(
        default=True,
        metadata={"help": "Train LoRA adapters (default). False: full fine-tune, as ARPO did."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={
            "help": "Linear layer names to adapt (default: every Linear of the language model, "
            "q/k/v/o and MLP projections; never lm_head)."
        },
    )
    lora_include_vision: bool = field(
        default=False,
        metadata={"help": "Also adapt the vision tower's Linear layers (excluded by default)."},
    )
    tiny_hidden_size: int = field(default=64, metadata={"help": "Width of the 'tiny' model."})
    tiny_layers: int = field(default=2, metadata={"help": "Text layers of the 'tiny' model."})
    tiny_max_pixels: int = field(
        default=28 * 28 * 16,
        metadata={"help": "Screenshot pixel budget of the 'tiny' model's processor."},
    )
    tiny_corpus_from_tasks: bool = field(
        default=False,
        metadata={
            "help": "Learn the 'tiny' tokenizer's merges also from the task instructions and their "
            "oracle scripts. Off by default: it leaks the solutions into the tokenizer (each "
            "oracle action becomes one token), so a run with it on shows imitation, not RL."
        },
    )
    save_merged: bool = field(
        default=True,
        metadata={
            "help": "After LoRA training, also save the adapter merged into the base model (with "
            "the "
            "processor) under <output_dir>/merged, loadable without peft (e.g. by arpo-eval)."
        },
    )
    seed_model: int = field(
        default=0, metadata={"help": "Seed of the 'tiny' model's random weights."}
    )


def is_vision_module(name: str) -> bool:
    return any(m in name.split(".") or name.startswith(m) for m in VISION_MARKERS)


def language_linear_names(model: torch.nn.Module) -> set[str]:
    """Short names of the ``nn.Linear`` layers of the language model (vision tower and lm_head
    excluded)."""
    names = set()
    for full, module in model.named_modules():
        if (
            isinstance(module, torch.nn.Linear)
            and not is_vision_module(full)
            and not full.endswith("lm_head")
        ):
            names.add(full.rsplit(".", 1)[-1])
    return names


def lora_config(
    model: torch.nn.Module,
    *,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: list[str] | None = None,
    include_vision: bool = False,
) -> LoraConfig:
    """LoRA on the language model's Linear layers (as a full-name regex, so the vision tower's
    identically named MLP projections are left alone unless ``include_vision``)."""
    names = sorted(target_modules or language_linear_names(model))
    if not names:
        raise ValueError("found no Linear layers to adapt; pass lora_target_modules")
    alternatives = "|".join(re.escape(n) for n in names)
    if include_vision:
        pattern = rf".*\.({alternatives})"
    else:
        vision = "|".join(VISION_MARKERS)
        pattern = rf"^(?!.*\b({vision})\b).*\.({alternatives})$"
    return LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=pattern, bias="none"
    )


class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    """``Qwen2_5_VLProcessor`` without a video processor, so it needs no torchvision."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        if tokenizer is None:
            raise ValueError("ImageOnlyQwen2_5_VLProcessor needs a tokenizer")
        self.image_token = "<|image_pad|>"
        self.video_token = "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def qwen2_5_vl_chat_template() -> str:
    """The Qwen2.5-VL chat template shipped inside the TRL wheel."""
    return (importlib.resources.files("trl") / "chat_templates" / "qwen2_5_vl.jinja").read_text()


def load_processor(path: str | Path, **kwargs: Any):
    """``AutoProcessor``, or (no torchvision, hence no video processor; or a processor class
    transformers does not know, like the tiny model's) an image-only Qwen-VL processor built from
    the checkpoint's tokenizer and image processor."""
    try:
        proc = AutoProcessor.from_pretrained(path, **kwargs)
        if hasattr(proc, "image_processor") and hasattr(proc, "tokenizer"):
            return proc
        log.info(
            "AutoProcessor gave a %s, not a processor; building an image-only one",
            type(proc).__name__,
        )
    except (ImportError, AttributeError, ValueError, OSError) as e:
        log.info("AutoProcessor failed (%s); building an image-only processor", e)
    tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    image_processor = AutoImageProcessor.from_pretrained(path, **kwargs)
    return ImageOnlyQwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=getattr(tokenizer, "chat_template", None) or qwen2_5_vl_chat_template(),
    )


@contextlib.contextmanager
def weight_io_bars_off() -> Iterator[None]:
    """Without transformers' own progress bars (\"Writing model shards\" on every save,
    \"Loading weights\" on every load): inside a training run they are stray bars under its one
    progress bar. The previous setting is restored afterwards."""
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def load_model(path: str, *, dtype: str = "auto", attn_implementation: str | None = None):
    """A pretrained VLM for image-text-to-text (e.g. UI-TARS-1.5 = Qwen2.5-VL); from a local
    directory without the weight-loading bar (a hub download keeps its bars)."""
    kwargs: dict[str, Any] = {"dtype": dtype if dtype == "auto" else getattr(torch, dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    quiet = weight_io_bars_off() if Path(path).is_dir() else contextlib.nullcontext()
    with quiet:
        return AutoModelForImageTextToText.from_pretrained(path, **kwargs)
