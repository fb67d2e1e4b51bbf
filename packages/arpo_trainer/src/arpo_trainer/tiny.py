"""Tiny, randomly initialised Qwen2.5-VL models built entirely offline (no hub, no downloads).

Used by the CPU demo (``--model tiny``), the ``tiny`` eval agent and the tests. Three parts,
each built in code:

* a byte-level BPE tokenizer whose merges are learned (with the ``tokenizers`` library) from the
  UI-TARS action grammar and generic English (never from a task's instruction, oracle or
  evaluator), so an action like ``hotkey(key='ctrl alt t')`` is a handful of tokens, and which
  carries Qwen's special tokens (``<|im_start|>``, ``<|im_end|>``,
  ``<|image_pad|>``, ``<|vision_start|>``, ...);
* an image-only Qwen2.5-VL processor (no torchvision: the PIL image processor, no video
  processor) with a small ``max_pixels`` so a screenshot is a few dozen image tokens;
* a ``Qwen2_5_VLForConditionalGeneration`` from a tiny config with the token ids mirrored.

>>> bundle = build_tiny_vlm(seed=0)
>>> bundle.processor.tokenizer.convert_ids_to_tokens(bundle.model.config.image_token_id)
'<|image_pad|>'
>>> sum(p.numel() for p in bundle.model.parameters()) < 1_000_000
True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.processing_utils import ProcessorMixin

from arpo_trainer.model_shapes import token_attributes
from arpo_trainer.modeling import (
    ImageOnlyQwen2_5_VLProcessor,
    load_processor,
    qwen2_5_vl_chat_template,
    weight_io_bars_off,
)

log = logging.getLogger(__name__)

#: Qwen2.5-VL's special tokens, in the order they get ids after the learned vocabulary.
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|box_start|>",
    "<|box_end|>",
)

#: Text the BPE merges are learned from: the *grammar* of the UI-TARS action set (call names,
#: keyword arguments, quoting, key names one by one) and generic English. Nothing here comes from
#: a task: no instruction, no oracle, no evaluator. A whole action, or a multi-word argument like a
#: key chord or a shell command, is never one entry, so it cannot become one token
#: (``tests/arpo_trainer/test_trainer_noleak.py`` checks both against every built-in task).
ACTION_CORPUS: tuple[str, ...] = (
    # output format
    "Thought: ",
    "Action: ",
    # calls and their keyword arguments, as separate pieces
    "click(",
    "left_double(",
    "right_single(",
    "left_single(",
    "drag(",
    "select(",
    "hover(",
    "hotkey(",
    "press(",
    "keydown(",
    "keyup(",
    "type(",
    "scroll(",
    "wait()",
    "finished(",
    "call_user()",
    "error_env()",
    "start_box='",
    "end_box='",
    "key='",
    "content='",
    "direction='",
    "')",
    "', ",
    "'(",
    ")'",
    "up",
    "down",
    "left",
    "right",
    # key names, one at a time (chords are learned by the policy, not given by the tokenizer)
    "ctrl",
    "alt",
    "shift",
    "super",
    "enter",
    "tab",
    "esc",
    "backspace",
    "delete",
    "space",
    "home",
    "end",
    "pageup",
    "pagedown",
    # numbers and punctuation of coordinates and escapes
    "0123456789",
    "(12,34)",
    "\\n",
    "\\'",
    # generic English
    "the",
    "a",
    "and",
    "to",
    "of",
    "in",
    "on",
    "with",
    "is",
    "it",
    "file",
    "folder",
    "window",
    "button",
    "menu",
    "text",
    "open",
    "close",
    "save",
    "screen",
    "click on",
    "next",
    "task",
    "done",
    "User Instruction",
    "You are a helpful assistant.",
    "screenshot",
)


def grammar_corpus() -> tuple[str, ...]:
    """:data:`ACTION_CORPUS` and the UI-TARS action set's own prompt (its action space and output
    format, with an empty ``{instruction}`` slot): grammar only, so a prompt is a few dozen tokens
    instead of hundreds, and still nothing from a task."""
    from osworld_gym.actions import make_action_set

    return (*ACTION_CORPUS, make_action_set("uitars", screen_size=(1920, 1080)).describe())


#: Pixel budget of one screenshot for the tiny processor: 28*28*16 -> at most 16 image tokens.
TINY_MAX_PIXELS = 28 * 28 * 16
TINY_MIN_PIXELS = 28 * 28 * 4


@dataclass
class TinyVLM:
    """A tiny model and the processor that goes with it."""

    model: Qwen2_5_VLForConditionalGeneration
    processor: ProcessorMixin

    def save(self, path: str | Path) -> Path:
        """``save_pretrained`` both into ``path`` (reload with :func:`load_tiny_vlm`), without
        transformers' "Writing model shards" bar."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with weight_io_bars_off():
            self.model.save_pretrained(path)
        self.processor.save_pretrained(path)
        return path


def build_tokenizer(
    vocab_size: int = 600, extra_corpus: tuple[str, ...] = ()
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer learned from :func:`grammar_corpus` (+ ``extra_corpus``).

    Every byte is in the base alphabet, so any text encodes; the learned merges make the
    action syntax short. Deterministic for a given corpus.

    >>> tok = build_tokenizer()
    >>> tok.decode(tok.encode("hotkey(key='ctrl alt t')"))
    "hotkey(key='ctrl alt t')"
    >>> 3 < len(tok.encode("hotkey(key='ctrl alt t')")) < 12
    True
    """
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    corpus = [*grammar_corpus(), *extra_corpus]
    # Repeat so that whole phrases get merged, not only their most frequent pairs.
    backend.train_from_iterator(corpus * 4, trainer=trainer)
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        model_max_length=32768,
    )
    tok.chat_template = qwen2_5_vl_chat_template()
    return tok


def build_processor(
    tokenizer: PreTrainedTokenizerFast | None = None,
    *,
    max_pixels: int = TINY_MAX_PIXELS,
    min_pixels: int = TINY_MIN_PIXELS,
) -> ImageOnlyQwen2_5_VLProcessor:
    """Image-only Qwen2.5-VL processor around :func:`build_tokenizer` (patch 14, merge 2)."""
    tokenizer = tokenizer or build_tokenizer()
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=14,
        temporal_patch_size=2,
        merge_size=2,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
    )
    return ImageOnlyQwen2_5_VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )


def build_tiny_vlm(
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    max_pixels: int = TINY_MAX_PIXELS,
    vocab_size: int = 600,
    extra_corpus: tuple[str, ...] = (),
    rope_theta: float | None = None,
    mrope_section: list[int] | None = None,
) -> TinyVLM:
    """A random Qwen2.5-VL with ``num_layers`` text layers of width ``hidden_size``.

    The text model has 4 attention heads and 2 KV heads; the vision tower is 2 blocks of width
    32 merging 2x2 patches into one token of width ``hidden_size``.

    ``rope_theta`` (default: Qwen2.5-VL's, 1,000,000) and ``mrope_section`` set the text
    model's multimodal RoPE: by default Qwen2.5-VL's layout, where an image token's height and
    width take the lowest frequencies (at ``hidden_size`` 64: at most 0.001 radians per row and
    0.00003 per column; 0.01 and 0.001 at theta 10,000), so attention barely tells the image's
    rows and columns apart; a section like ``[0, 1, 1] * 4`` interleaves height and width over
    every frequency (as Qwen3-VL does).
    """
    tokenizer = build_tokenizer(vocab_size, extra_corpus)
    processor = build_processor(tokenizer, max_pixels=max_pixels)
    ids = {
        name: _token_id(tokenizer, tok)
        for name, tok in (
            ("image", "<|image_pad|>"),
            ("video", "<|video_pad|>"),
            ("vstart", "<|vision_start|>"),
            ("vend", "<|vision_end|>"),
            ("eos", "<|im_end|>"),
            ("pad", "<|endoftext|>"),
        )
    }
    head_dim = hidden_size // 4
    half = head_dim // 2
    mrope = mrope_section or [half - 2 * (half // 3), half // 3, half // 3]
    if sum(mrope) != half:
        raise ValueError(f"mrope_section {mrope} must sum to head_dim / 2 = {half}")
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden_size,
            "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": num_layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            **({} if rope_theta is None else {"rope_theta": rope_theta}),
            "rope_scaling": {"type": "default", "mrope_section": mrope, "rope_type": "default"},
            "bos_token_id": None,
            "eos_token_id": ids["eos"],
            "pad_token_id": ids["pad"],
            "tie_word_embeddings": True,
            "layer_types": None,
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 4,
            "out_hidden_size": hidden_size,
            "fullatt_block_indexes": [1],
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 56,
        },
        image_token_id=ids["image"],
        video_token_id=ids["video"],
        vision_start_token_id=ids["vstart"],
        vision_end_token_id=ids["vend"],
        tie_word_embeddings=True,
        **token_attributes(eos=ids["eos"], pad=ids["pad"]),
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["eos"]
    model.generation_config.pad_token_id = ids["pad"]
    model.generation_config.bos_token_id = None
    log.info(
        "built a tiny Qwen2.5-VL: %d parameters, vocabulary %d",
        sum(p.numel() for p in model.parameters()),
        len(tokenizer),
    )
    return TinyVLM(model=model, processor=processor)


def _token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    tid = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(tid, int):
        raise ValueError(f"the tokenizer has no single id for {token!r}: {tid!r}")
    return tid


def load_tiny_vlm(path: str | Path) -> TinyVLM:
    """Reload a :class:`TinyVLM` written by :meth:`TinyVLM.save`."""
    with weight_io_bars_off():  # a local directory: nothing to download, no bar to show
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
    return TinyVLM(model=model, processor=load_processor(path))
