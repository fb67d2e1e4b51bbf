"""Sampling one turn for a batch of episode contexts, token-in / token-out.

A :class:`Policy` takes encoded contexts (:class:`~arpo_trainer.chat.EncodedSequence` ending in
``assistant\\n``) and returns, per context, the sampled token ids, the log-prob each was sampled
with, and their text. Two implementations:

* :class:`TransformersPolicy`: ``model.generate`` (CPU or GPU), log-probs of the processed
  distribution (after temperature / top-k / top-p), like vLLM's ``processed_logprobs``;
* :class:`TRLGenerationPolicy`: TRL's own generation path, i.e. vLLM colocate/server with
  weight sync when ``use_vllm`` is set;
* :class:`ScriptedPolicy`: written texts (demonstrations, tests);
* :class:`SimulatedLatencyPolicy`: another policy with a *simulated* per-call latency, so that a
  CPU run with a tiny model can stand in for a large model's per-turn time (benchmarks only).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import math
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
from PIL import Image
from transformers import GenerationConfig, LogitsProcessorList

from arpo_trainer.chat import EncodedSequence, TurnEncoder, batch_image_inputs
from arpo_trainer.grammar import ActionGrammar, GrammarLogitsProcessor, TokenConstraint
from arpo_trainer.vllm_rollout import VISION_TOKENS, collapse_image_runs

log = logging.getLogger(__name__)


@dataclass
class TurnSample:
    """One sampled turn: ids (ending in EOS unless cut at the token limit), their log-probs, their
    text."""

    ids: list[int]
    logps: list[float]
    text: str


def served_turns(
    ids: list[list[int]], logps: list[list[float | None]] | None, encoder: TurnEncoder
) -> list[TurnSample]:
    """A vLLM engine's answer as turns: a missing log-prob (none returned, or ``None`` for a
    token) becomes NaN, which the trainer treats as unknown (importance ratio 1)."""
    out = []
    for k, sampled in enumerate(ids):
        sampled = list(sampled)
        lp = logps[k] if logps is not None else [None] * len(sampled)
        lp = [float("nan") if x is None else float(x) for x in lp]
        out.append(TurnSample(ids=sampled, logps=lp, text=encoder.decode_action(sampled)))
    return out


class Policy(Protocol):
    """Anything that can answer a batch of contexts with one turn each."""

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        """One turn per context; ``rows[k]`` names the episode ``contexts[k]`` belongs to
        (stable within one rollout, for stateful or scripted policies)."""
        ...


def special_token_suppression(encoder: TurnEncoder) -> list[int]:
    """Token ids a policy must never sample: image/video placeholders and vision delimiters."""
    tok = encoder.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in VISION_TOKENS]
    return sorted({int(i) for i in ids if i is not None and i != tok.unk_token_id})


#: Logit added to every suppressed token when the trainer scores a sequence: far below any real
#: logit, so its probability is exactly 0 in float32, yet finite (``-inf`` would make TRL's
#: entropy ``0 * -inf = nan``) and representable in bf16.
SUPPRESSED_LOGIT = -1.0e4


@contextlib.contextmanager
def suppressed_tokens_in_loss(model, token_ids: list[int]) -> Iterator[None]:
    """Make TRL's fused LM head score with ``token_ids`` suppressed, as both sampling paths do.

    vLLM masks ``bad_words`` to ``-inf`` before sampling and reports processed log-probs, and
    ``generate`` with ``suppress_tokens`` reports log-probs of the same renormalized
    distribution. The trainer's log-probs must be of that distribution too, or the importance
    ratio ``exp(old - sampling)`` is biased by ``log(1 - p(vision tokens))`` on every token.
    TRL's fused head (``add_fused_lm_head``) reads ``get_output_embeddings()`` on each forward
    and adds its ``bias``; inside this context the model answers with the real head's weight and
    a bias of :data:`SUPPRESSED_LOGIT` on ``token_ids`` (plus the head's own bias, if any). The
    backward pass uses the tensors the forward saved, so the context need only cover the forward.

    Args:
        model: the model TRL patched (the base model under PEFT).
        token_ids: ids to suppress.
    """
    head = model.get_output_embeddings()
    if not token_ids or head is None:
        yield
        return
    weight = head.weight
    vocab = int(getattr(weight, "ds_shape", weight.shape)[0])  # ZeRO-3 partitions keep ds_shape
    bias = torch.zeros(vocab, dtype=torch.float32, device=weight.device)
    if getattr(head, "bias", None) is not None:
        bias += head.bias.detach().float()
    bias[token_ids] = SUPPRESSED_LOGIT
    _mark_gathered(bias)
    proxy = types.SimpleNamespace(weight=weight, bias=bias)
    model.get_output_embeddings = lambda: proxy
    try:
        yield
    finally:
        del model.get_output_embeddings  # the class's method again


def _mark_gathered(t: torch.Tensor) -> None:
    """Under DeepSpeed ZeRO-3, TRL gathers the head's weight and bias before use and reads each
    one's ``ds_status``; a plain tensor is always complete."""
    try:  # DeepSpeed is optional (not installed here): imported by name, Any at this one seam
        zero = importlib.import_module("deepspeed.runtime.zero.partition_parameters")
    except ImportError:
        return
    t.ds_status = zero.ZeroParamStatus.AVAILABLE  # type: ignore[attr-defined]


def turn_generation_config(
    encoder: TurnEncoder,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    do_sample: bool = True,
    base: GenerationConfig | None = None,
) -> GenerationConfig:
    """A generation config for one turn: stops at ``<|im_end|>``, never samples vision tokens."""
    tok = encoder.tokenizer
    cfg = GenerationConfig(**base.to_dict()) if base is not None else GenerationConfig()
    suppress = sorted(set(cfg.suppress_tokens or []) | set(special_token_suppression(encoder)))
    cfg.update(
        max_new_tokens=max_new_tokens,
        do_sample=do_sample,
        eos_token_id=[encoder.eos_token_id],
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        suppress_tokens=suppress,
        temperature=temperature if do_sample else None,
        top_p=top_p if do_sample else None,
        top_k=top_k if do_sample else None,
        output_scores=True,
        return_dict_in_generate=True,
    )
    return cfg


def action_constraint(
    encoder: TurnEncoder, frame: tuple[int, int], max_new_tokens: int
) -> TokenConstraint:
    """The UI-TARS grammar (points inside the model's image ``frame``, the width and height of
    the uitars action set's ``frame``) over ``encoder``'s tokenizer, with a budget of
    ``max_new_tokens`` per turn (:mod:`arpo_trainer.grammar`)."""
    return TokenConstraint(
        ActionGrammar(frame), encoder.tokenizer, encoder.eos_token_id, max_new_tokens
    )


def assistant_header(encoder: TurnEncoder) -> list[int]:
    """The ids every assistant turn follows (``<|im_start|>assistant\\n``)."""
    return list(encoder.tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False))


def pad_left(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([[value] * (width - len(r)) + r for r in rows], dtype=torch.long)


class TransformersPolicy:
    """Samples turns with ``model.generate`` (one batched call per turn).

    Args:
        model: a Qwen-VL ``*ForConditionalGeneration`` (or a PEFT model around one).
        encoder: the :class:`TurnEncoder` the contexts were built with.
        generation_config: see :func:`turn_generation_config`.
        constraint: sample every turn under this grammar (:func:`action_constraint`); the
            log-probs are then those of the constrained distribution. Its budget must be the
            config's ``max_new_tokens``.
    """

    def __init__(
        self,
        model,
        encoder: TurnEncoder,
        generation_config: GenerationConfig,
        constraint: TokenConstraint | None = None,
    ):
        self.model = model
        self.encoder = encoder
        if constraint is not None and constraint.max_new_tokens != generation_config.max_new_tokens:
            raise ValueError(
                f"the grammar's turn budget ({constraint.max_new_tokens} tokens) must be the "
                f"generation config's max_new_tokens ({generation_config.max_new_tokens})"
            )
        self.constraint = constraint
        # per-step scores give the sampled tokens' log-probs
        self.generation_config = GenerationConfig(**generation_config.to_dict())
        self.generation_config.update(output_scores=True, return_dict_in_generate=True)

    @torch.no_grad()
    def sample(
        self, contexts: list[EncodedSequence], rows: list[int] | None = None
    ) -> list[TurnSample]:
        if not contexts:
            return []
        enc = self.encoder
        pad_id = enc.tokenizer.pad_token_id
        ids = [c.input_ids for c in contexts]
        input_ids = pad_left(ids, pad_id)
        attention_mask = pad_left([[1] * len(r) for r in ids], 0)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "mm_token_type_ids": (input_ids == enc.image_token_id).long() * attention_mask,
        }
        inputs.update(batch_image_inputs(contexts))
        param = next(self.model.parameters())
        inputs = {k: v.to(param.device) for k, v in inputs.items()}
        if "pixel_values" in inputs:  # uint8 until here
            inputs["pixel_values"] = enc.model_pixels(inputs["pixel_values"], param.dtype)
        was_training = self.model.training
        self.model.eval()
        try:
            extra = {}
            if self.constraint is not None:  # a fresh processor: it tracks this call's turns
                extra["logits_processor"] = LogitsProcessorList(
                    [GrammarLogitsProcessor(self.constraint)]
                )
            out = self.model.generate(**inputs, generation_config=self.generation_config, **extra)
        finally:
            self.model.train(was_training)
        new = out.sequences[:, input_ids.shape[1] :].cpu()
        # scores[t]: processed logits of step t, (batch, vocab)
        logps = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1).cpu()
        samples = []
        for b in range(len(contexts)):
            ids = new[b].tolist()
            if enc.eos_token_id in ids:
                ids = ids[: ids.index(enc.eos_token_id) + 1]
            lp = [float(logps[b, t, tok]) for t, tok in enumerate(ids)]
            samples.append(TurnSample(ids=ids, logps=lp, text=enc.decode_action(ids)))
        return samples


class ScriptedPolicy:
    """Plays written action texts: episode ``r``'s ``k``-th turn is ``scripts[r][k]``.

    Used for demonstrations (oracles rendered in the policy's syntax) and tests. The texts are
    tokenized as written and closed with ``<|im_end|>``; their log-probs are unknown (NaN).
    Past the end of its script an episode gets ``fallback``.
    """

    def __init__(self, encoder: TurnEncoder, scripts: list[list[str]], fallback: str = ""):
        self.encoder = encoder
        self.scripts = scripts
        self.fallback = fallback
        self._turn: dict[int, int] = {}

    def reset(self) -> None:
        """Start every script again from its first turn."""
        self._turn.clear()

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        out = []
        for r in rows:
            k = self._turn.get(r, 0)
            self._turn[r] = k + 1
            script = self.scripts[r]
            text = script[k] if k < len(script) else self.fallback
            ids = self.encoder.action_ids(text)
            out.append(TurnSample(ids=ids, logps=[float("nan")] * len(ids), text=text))
        return out


class SimulatedLatencyPolicy:
    """``policy`` with ``latency_s`` seconds added to every call that samples at least one turn.

    A stand-in for a large model: on a GPU, one batched turn of a 7B VLM takes about the same time
    whatever the batch size (a few hundred ms to a few s), while the tiny model answers in
    milliseconds; a CPU benchmark of the rollout loop that leaves that time out measures a loop
    that never waits for its generator. The sleep is paid by the calling thread (the lock-step
    collector, or the async loop's generator service, one batch at a time), the way a generator
    that serves one batch at a time would pay it. Figures measured with it are simulated and must
    say so (``arpo-train`` logs ``rollout/simulated_latency_s``).
    """

    def __init__(self, policy: Policy, latency_s: float):
        if not (math.isfinite(latency_s) and latency_s > 0):
            raise ValueError(f"latency_s must be a finite number > 0, got {latency_s!r}")
        self.policy, self.latency_s = policy, float(latency_s)
        self.calls = 0  # calls that paid the latency

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        out = self.policy.sample(contexts, rows)
        if contexts:
            self.calls += 1
            time.sleep(self.latency_s)
        return out


class TRLGenerationPolicy:
    """Samples turns with vLLM through TRL's ``VLLMGeneration`` (token ids in, token ids and
    processed log-probs out), held awake for a whole rollout by the trainer's
    :class:`~arpo_trainer.vllm_rollout.VLLMRolloutEngine`.

    In colocate mode each screenshot's run of ``<|image_pad|>`` is collapsed to one token, since
    vLLM expands it itself (see :mod:`arpo_trainer.vllm_rollout`); the server path locates the
    expanded runs. Stop and suppression tokens come from
    :func:`~arpo_trainer.vllm_rollout.configure_vllm_generation`. Outside the trainer's rollout
    (``ARPOTrainer.policy()``) each call is a rollout of its own (wake, sync if the step changed,
    sample, sleep).
    """

    def __init__(self, trainer, encoder: TurnEncoder):
        self.trainer = trainer
        self.encoder = encoder

    def sample(self, contexts: list[EncodedSequence], rows: list[int]) -> list[TurnSample]:
        if not contexts:
            return []
        engine = self.trainer.vllm_engine
        images = [[Image.open(io.BytesIO(png)).convert("RGB") for png in c.pngs] for c in contexts]
        prompts = [c.input_ids for c in contexts]
        if engine.mode == "colocate":
            prompts = [collapse_image_runs(p, self.encoder.image_token_id) for p in prompts]
        ids, logps = engine.generate(
            prompts, [im or None for im in images], step=self.trainer.state.global_step
        )
        return served_turns(ids, logps, self.encoder)
