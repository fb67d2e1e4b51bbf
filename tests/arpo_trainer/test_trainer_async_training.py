"""ARPOTrainer with ``rollout_mode="async"`` (issue 28): a short training run whose groups come
from desktops playing on their own against the in-process batching generator."""

from __future__ import annotations

import math
import os
import time
from typing import Any

import pytest
import torch
from arpo_trainer.generation import Policy, SimulatedLatencyPolicy
from arpo_trainer.modeling import lora_config
from arpo_trainer.rollout import Trajectory
from arpo_trainer.tiny import build_tiny_vlm
from arpo_trainer.trainer import ARPOTrainer
from test_trainer_training import make_config

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


class RecordingTrainer(ARPOTrainer):
    """Keeps what each async step took from the loop and what it handed to the loss."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.taken: list[list[Trajectory]] = []
        self.outputs: list[dict[str, Any]] = []
        self.episodes_per_desktop: list[int] = []
        self.max_in_flight = 0  # the async generator's batches-in-flight bound

    def _async_groups(self, rows: int, G: int, step: int):
        out = super()._async_groups(rows, G, step)
        self.taken.append(out[1])
        assert self._async is not None
        self.episodes_per_desktop = list(self._async.collector.episodes_per_desktop)
        self.max_in_flight = self._async.generator.max_in_flight
        return out

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.outputs.append(output)
        return output


def store_the_oracles_success(trainer: ARPOTrainer) -> None:
    """The oracle's success, played on a desktop, in the replay buffer before training."""
    assert trainer.warm_start_replay() == 1
    trainer.close_desktops()  # the demonstrations' lock-step desktops are not the loop's


def train_from_a_stored_success(trainer: ARPOTrainer) -> dict[str, torch.Tensor]:
    """Train after storing the oracle's success, and check the weights moved; the trainable
    weights before training.

    A random policy fails every task: a stored success (the oracle's, played on a desktop) is what
    replay injects into the all-fail groups, as in sync mode, so every step has an advantage."""
    try:
        store_the_oracles_success(trainer)
        before = {
            n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad
        }
        trainer.train()
    finally:
        trainer.close_desktops()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(after[n], p) for n, p in before.items()), "nothing was learned"
    return before


def run_async(tmp_path, **overrides) -> RecordingTrainer:
    args = make_config(
        tmp_path,
        rollout_mode="async",
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=3,
        max_staleness=1,
        **overrides,
    )
    vlm = build_tiny_vlm(seed=0)
    trainer = RecordingTrainer(
        vlm.model, args, vlm.processor, peft_config=lora_config(vlm.model, r=4)
    )
    before = train_from_a_stored_success(trainer)
    # the generator samples with its own copy, which got the learner's weights at the syncs
    generator = trainer._generator_model  # noqa: SLF001 - the copy the async loop samples with
    assert generator is not None and generator is not trainer.model
    copied = dict(generator.named_parameters())
    assert any(not torch.equal(copied[n], p) for n, p in before.items()), "no weights were synced"
    return trainer


def check_async_run(trainer: RecordingTrainer, versions: list[float]) -> None:
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert trainer.state.global_step == 3 and len(history) == 3
    # replay as in sync mode: the all-fail groups got the stored success
    assert any(h["replay/injected_frac"] > 0 for h in history)
    for h in history:
        # the loop's own figures are logged every step, within the staleness bound
        assert {
            "async/dropped_stale", "async/staleness_mean", "async/groups_taken", "async/gated_waits"
        } <= set(h)  # fmt: skip
        assert 0 <= h["async/staleness_max"] <= 1
        assert h["async/dropped_stale"] >= 0
    waits = [h["async/gated_waits"] for h in history]  # cumulative: starts held at the gate
    assert waits == sorted(waits) and waits[0] >= 0
    assert history[-1]["async/groups_taken"] == 3  # one group of 2 per step
    # the generator got the learner's weights every weight_sync_every steps
    assert [h["async/generator_version"] for h in history] == versions
    # every fresh, played turn carries the generator's per-token sampling log-probs ...
    played = [t for step in trainer.taken for t in step if t.turns]
    assert played, "no episode played a turn"
    for t in played:
        for turn in t.turns:
            assert len(turn.action_logps) == len(turn.action_ids) > 0
            assert all(math.isfinite(x) and x <= 0 for x in turn.action_logps)
    # ... which feed the truncated importance-sampling correction of the loss
    assert all("importance_sampling_ratio" in out for out in trainer.outputs)


def test_async_mode_trains_on_the_fake_desktop_with_stale_groups_corrected(tmp_path):
    # weights go to the generator every 2 steps: step 1 trains on groups sampled with version 0,
    # one step behind (allowed by max_staleness=1), and corrects for it
    trainer = run_async(tmp_path, weight_sync_every=2)
    check_async_run(trainer, versions=[0.0, 0.0, 2.0])
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert history[1]["async/staleness_max"] == 1 and history[1]["async/dropped_stale"] == 0
    # the learner moved after step 0: the sampling log-probs of step 1 are not the learner's, so
    # the truncated importance-sampling ratio is not 1 everywhere (it is 1 on replayed rows)
    ratio = trainer.outputs[1]["importance_sampling_ratio"]
    assert not torch.allclose(ratio, torch.ones_like(ratio))
    assert torch.allclose(trainer.outputs[0]["importance_sampling_ratio"][0], torch.ones(1))
    # the transformers generator (one model copy) answers one batch at a time by default
    assert trainer.max_in_flight == 1
    assert all(h["async/requests_in_flight_peak"] == 1 for h in history)


@pytest.mark.desktop
@pytest.mark.slow
def test_async_mode_trains_on_real_local_desktops(tmp_path):
    trainer = run_async(
        tmp_path,
        provider="local",
        settle=True,
        vector_env="async",
        settle_max_s=2.0,
        max_turns=3,
        task_ids=["os-mkdir-001"],
        weight_sync_every=1,
    )
    check_async_run(trainer, versions=[0.0, 1.0, 2.0])
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert all(h["episode/infra_errors"] == 0 for h in history)
    assert all(h["rollout/env_seconds"] > 0 for h in history)  # desktop-seconds, counted


def test_async_desktops_sets_how_many_desktops_play_beside_the_generation_batch(tmp_path):
    # 3 desktops for a generation batch of 2 rows: every desktop gets episodes to play
    trainer = run_async(tmp_path, async_desktops=3, weight_sync_every=1)
    check_async_run(trainer, versions=[0.0, 1.0, 2.0])
    counts = trainer.episodes_per_desktop
    assert len(counts) == 3 and all(n > 0 for n in counts), counts


def _small_async_trainer(tmp_path) -> ARPOTrainer:
    """An async trainer on the tiny model: one group of 2 a step, staleness bound 1."""
    args = make_config(
        tmp_path, rollout_mode="async", per_device_train_batch_size=2, num_generations=2,
        max_staleness=1,
    )  # fmt: skip
    vlm = build_tiny_vlm(seed=0)
    return ARPOTrainer(vlm.model, args, vlm.processor)


def test_reopening_the_lock_step_pool_at_another_size_leaves_the_async_loop_playing(tmp_path):
    """Evaluation and the oracle warm start play on the lock-step pool, which ``collector(n)``
    re-opens when ``n`` changes; that went through ``close_desktops`` and closed the async loop
    too, so an eval batch of another size than the warm start's stopped the loop mid-training:
    its desktops restarted, its row stream began again at the first row, the groups played
    ahead were lost."""
    trainer = _small_async_trainer(tmp_path)
    try:
        trainer.collector(2)  # the warm start's pool
        rows, trajs, _ = trainer._async_groups(2, 2, 0)  # noqa: SLF001 - the loop starts
        assert len(rows) == len(trajs) == 2
        loop = trainer._async  # noqa: SLF001
        assert loop is not None
        trainer.collector(1)  # an eval batch of 1 row: the lock-step pool at another size
        assert trainer._async is loop  # noqa: SLF001
        assert all(t.is_alive() for t in loop.collector._threads)  # noqa: SLF001
        assert len(trainer._async_groups(2, 2, 1)[1]) == 2  # noqa: SLF001 - it plays on
    finally:
        trainer.close_desktops()


def test_a_restarted_async_loop_counts_its_desktop_seconds_from_zero(tmp_path):
    """After close_desktops (a finished train(), then another) the loop starts again with a new
    timeline; the desktop-seconds already reported were those of the old one, so the first step
    of the new loop logged a negative rollout/env_seconds."""
    trainer = _small_async_trainer(tmp_path)
    try:
        for step in range(2):
            _, _, stats = trainer._async_groups(2, 2, step)  # noqa: SLF001
            assert stats.env_seconds > 0  # the fake desktop's resets and steps, counted
        trainer.close_desktops()
        _, _, stats = trainer._async_groups(2, 2, 2)  # noqa: SLF001 - a new loop
        assert stats.env_seconds > 0
    finally:
        trainer.close_desktops()


def test_the_warm_starts_lock_step_desktops_close_when_the_async_loop_starts(tmp_path):
    """The oracle warm start plays on the lock-step pool; in async mode nothing else uses it,
    and its desktops idled beside the loop's own for the whole run."""
    trainer = _small_async_trainer(tmp_path)
    try:
        pool = trainer.collector(2)  # the warm start's pool
        assert trainer._pool is not None  # noqa: SLF001
        lock_step = trainer._pool  # noqa: SLF001
        assert pool is not None
        rows, trajs, _ = trainer._async_groups(2, 2, 0)  # noqa: SLF001 - the loop starts
        assert len(rows) == len(trajs) == 2
        assert trainer._pool is None and lock_step.vec.closed  # noqa: SLF001
        trainer.collector(2)  # an evaluation re-opens it, beside the loop
        assert trainer._pool is not None and trainer._async is not None  # noqa: SLF001
    finally:
        trainer.close_desktops()


class LatencyTrainer(ARPOTrainer):
    """Keeps every policy the trainer wrapped with its simulated generation latency, and the
    async generator's per-request latency."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.wrapped: list[Policy] = []
        self.request_latency: list[float] = []
        self.answered = 0  # requests the async generator answered, at the last step
        self.turns: list[int] = []  # turns of each training step's trajectories
        self.step_seconds: list[float] = []  # wall time of each training_step call

    def _with_simulated_latency(self, policy: Policy) -> Policy:
        out = super()._with_simulated_latency(policy)
        self.wrapped.append(out)
        return out

    def _async_groups(self, rows: int, G: int, step: int):
        out = super()._async_groups(rows, G, step)
        assert self._async is not None
        self.request_latency.append(self._async.generator.request_latency_s)
        self.answered = sum(self._async.generator.batch_sizes)
        return out

    def _record_metrics(self, mode: str, fresh, trajs, *rest) -> None:
        super()._record_metrics(mode, fresh, trajs, *rest)
        if mode == "train":
            self.turns.append(sum(len(t.turns) for t in trajs))

    def training_step(self, model, inputs, num_items_in_batch):
        t0 = time.monotonic()
        out = super().training_step(model, inputs, num_items_in_batch)
        self.step_seconds.append(time.monotonic() - t0)
        return out


def train_recording_latency(tmp_path, warm_start: bool = False, **overrides) -> LatencyTrainer:
    """A short run of the tiny model on the fake desktop, one group of 2 a step (with
    ``warm_start``, after storing the oracle's success for replay to inject)."""
    overrides = {"per_device_train_batch_size": 2, "num_generations": 2, **overrides}
    args = make_config(tmp_path, **overrides)
    vlm = build_tiny_vlm(seed=0)
    trainer = LatencyTrainer(vlm.model, args, vlm.processor)
    try:
        if warm_start:
            store_the_oracles_success(trainer)
        trainer.train()
    finally:
        trainer.close_desktops()
    return trainer


@pytest.mark.parametrize("mode", ["sync", "async", "async-concurrent"])
def test_a_simulated_generation_latency_is_paid_and_logged_in_both_rollout_modes(tmp_path, mode):
    """``simulated_generation_latency_s`` (benchmarks: a CPU run standing in for a large model)
    slows every generation call of the run's own generator, lock-step turns or async batches
    (or, with ``simulated_generation_concurrent``, every async request, concurrently, without
    holding the generator), and every step's log says its timings are partly simulated."""
    concurrent = mode == "async-concurrent"
    latency = 0.5 if concurrent else 0.05
    trainer = train_recording_latency(
        tmp_path, rollout_mode=mode.removesuffix("-concurrent"), max_steps=2,
        simulated_generation_latency_s=latency, simulated_generation_concurrent=concurrent,
    )  # fmt: skip
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 2
    assert all(h["rollout/simulated_latency_s"] == latency for h in history)
    if concurrent:
        # paid per request by the generator, not by a wrapped policy one batch at a time
        assert not trainer.wrapped and trainer.request_latency == [latency, latency]
        assert trainer.answered >= 4  # two steps of two episodes, a turn at least each
        # the first take waited for whole episodes, each with a delayed answer: a lower bound
        # (load only adds), and without the delay the fake desktop's episodes take a fraction
        assert history[0]["rollout/seconds"] >= latency
        assert all(0 <= h["async/staleness_max"] <= 1 for h in history)
        return
    assert trainer.request_latency in ([], [0.0, 0.0])  # sync has no generator; async: none
    assert trainer.wrapped, "the generator was never wrapped"
    assert all(
        isinstance(p, SimulatedLatencyPolicy) and p.latency_s == latency for p in trainer.wrapped
    )
    calls = sum(p.calls for p in trainer.wrapped if isinstance(p, SimulatedLatencyPolicy))
    assert calls >= 2  # at least one batch of turns a step paid it
    if mode == "sync":
        # one wrapped policy per lock-step rollout, each paid inside the step's timed rollout
        # (a lower bound: load only lengthens it)
        assert len(trainer.wrapped) == 2
        assert sum(h["rollout/seconds"] for h in history) >= calls * latency
    else:
        assert len(trainer.wrapped) == 1  # the async generator's one policy, for the whole run


@pytest.mark.parametrize(
    ("mode", "accumulate"), [("sync", 1), ("async", 1), ("sync", 2)], ids=["sync", "async", "ga2"]
)
def test_a_simulated_learner_latency_is_paid_per_turn_after_each_update(tmp_path, mode, accumulate):
    """``simulated_learner_latency_per_turn_s`` (benchmarks: the tiny learner standing in for a
    large model's update) lengthens every optimizer step by that much per turn of the step's
    trajectories, fresh and replayed, slept after TRL's own training step (spread over the
    micro-batches when gradients accumulate), and every step logs what it owed."""
    per_turn = 0.2
    trainer = train_recording_latency(
        tmp_path, rollout_mode=mode, max_steps=2, simulated_learner_latency_per_turn_s=per_turn,
        gradient_accumulation_steps=accumulate, warm_start=True,
        # one group of 2 a step either way: micro-batches of 1 when gradients accumulate over 2
        per_device_train_batch_size=2 // accumulate,
    )  # fmt: skip
    history = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    assert len(history) == 2 and len(trainer.turns) == 2 and all(trainer.turns)
    # the stored success was injected into all-fail groups: replayed turns are charged too
    assert any(h["replay/injected_frac"] > 0 for h in history)
    owed = [per_turn * n for n in trainer.turns]
    assert [h["train/simulated_learner_s"] for h in history] == pytest.approx(owed)
    # TRL's step_time covers its own training_step calls of the optimizer step; what the step's
    # calls took beyond it is the sleep (a lower bound: load only lengthens it). Without the
    # sleep the difference is a few microseconds.
    assert len(trainer.step_seconds) == 2 * accumulate
    for i, h in enumerate(history):
        calls = trainer.step_seconds[i * accumulate : (i + 1) * accumulate]
        assert sum(calls) - h["step_time"] >= owed[i] * 0.999


def test_without_a_simulated_latency_the_generator_is_not_wrapped(tmp_path):
    trainer = train_recording_latency(tmp_path, max_steps=1)
    assert trainer.wrapped and not any(
        isinstance(p, SimulatedLatencyPolicy) for p in trainer.wrapped
    )
    assert not any(
        {"rollout/simulated_latency_s", "train/simulated_learner_s"} & set(h)
        for h in trainer.state.log_history
    )
