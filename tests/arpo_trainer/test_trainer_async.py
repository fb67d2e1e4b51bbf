"""Asynchronous rollouts (issue 28): the staleness bound, ARPO replay and infra exclusion.

Episodes are played on real desktops of the ``fake`` provider (the env, its evaluator and the
vector plumbing are real; the screen is synthetic), as the trainer's own fast tests do, through the
real batching generator. Task ``os-infeasible-001`` scores the FAIL action (UI-TARS
``call_user()``) 1 and DONE (``finished()``) 0.
"""

from __future__ import annotations

import copy
import os
import tempfile
import threading
import time
import warnings
from fractions import Fraction

import pytest
from arpo_trainer.async_rollout import (
    AsyncCollector,
    BatchingGenerator,
    EpisodeJob,
    GroupAssembler,
    GroupFeed,
    Played,
    Timeline,
    TrainerRollouts,
    row_stream,
    run_async,
    takes_before,
)
from arpo_trainer.config import ARPOConfig
from arpo_trainer.desktops import DesktopPool
from arpo_trainer.envspec import env_kwargs, make_encoder, make_policy_action_set
from arpo_trainer.generation import SimulatedLatencyPolicy, TurnSample
from arpo_trainer.replay import ReplayBuffer
from arpo_trainer.rollout import Trajectory
from arpo_trainer.tasks import resolve_tasks
from arpo_trainer.tiny import build_tiny_vlm

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASK = "os-infeasible-001"
FAIL, DONE = "Action: call_user()", "Action: finished()"


def _traj(score: float, *, infra: bool = False) -> Trajectory:
    t = Trajectory(TASK, "x", score=score)
    if infra:
        t.infra_error, t.end = "desktop died", "infra_error"
    return t


def _played(group: int, index: int, version: int, score: float = 0.0, infra: bool = False):
    return Played(EpisodeJob(TASK, group, index), _traj(score, infra=infra), version)


# -- the assembler, on its own ----------------------------------------------------------------


def test_a_group_is_handed_out_only_when_all_its_members_arrived():
    asm = GroupAssembler(group_size=3, max_staleness=0)
    asm.add(_played(0, 2, 0))
    asm.add(_played(0, 0, 0))
    assert asm.ready == 0 and asm.take(5, 0) == []
    asm.add(_played(0, 1, 0))
    (group,) = asm.take(5, 0)
    assert len(group) == 3 and asm.stats.taken == 1


@pytest.mark.parametrize("max_staleness", [0, 1, 3])
def test_groups_older_than_max_staleness_are_dropped_and_counted(max_staleness):
    asm = GroupAssembler(group_size=2, max_staleness=max_staleness)
    for g, version in enumerate([0, 0]):  # group 0 entirely at v0; group 1 has one v0 member
        asm.add(_played(g, 0, version))
    asm.add(_played(0, 1, 0))
    asm.add(_played(1, 1, 5))  # the oldest member decides: group 1 is also v0
    # exactly at the bound: kept
    assert len(asm.take(1, max_staleness)) == 1 and asm.stats.dropped_stale == 0
    # one version past it: dropped, counted, never returned
    assert asm.take(1, max_staleness + 1) == [] and asm.stats.dropped_stale == 1
    assert asm.ready == 0


@pytest.mark.parametrize("n_rows", [1, 3, 8])
def test_the_processes_split_every_epoch_of_rows_and_one_process_plays_them_all(n_rows):
    import itertools

    processes, epochs = 3, 4
    alone = list(itertools.islice(row_stream(n_rows, 7), n_rows * epochs))
    shares = [row_stream(n_rows, 7, r, processes) for r in range(processes)]
    # position p of the shared stream goes to rank p % processes: interleaving the ranks' rows
    # gives back the one-process stream, so every epoch is played once across the processes
    merged = [next(shares[p % processes]) for p in range(n_rows * epochs)]
    assert merged == alone
    for e in range(epochs):
        assert sorted(alone[e * n_rows : (e + 1) * n_rows]) == list(range(n_rows))
    with pytest.raises(ValueError, match="rank 3 is not one of 3"):
        next(row_stream(4, 0, 3, 3))


def test_a_resumed_loop_goes_on_with_the_rows_after_those_already_trained(setup):
    """The rows of the takes before the resume step were trained on; a resumed run plays on
    from the next one, as sync mode's dataloader skips its consumed batches (it restarted the
    seeded order at its first row)."""
    import itertools

    fresh = list(itertools.islice(row_stream(5, 0, 1, 2), 12))
    assert list(itertools.islice(row_stream(5, 0, 1, 2, skip=7), 5)) == fresh[7:]
    assert takes_before(7, Fraction(3, 2)) == 5  # takes at steps 0, 1, 3, 4, 6
    rows = [{"task_id": f"t{i}", "prompt": "x"} for i in range(5)]
    # 2 groups a take, a take every 3/2 steps, resumed at step 7: 5 takes, 10 rows done
    tr = _trainer_rollouts(
        setup, 1, rows=rows, seed=3, groups_per_step=2, steps_per_take=Fraction(3, 2),
        start_version=7, prefetch_groups=1,
    )  # fmt: skip
    try:
        played = list(itertools.islice(tr._stream, 4))  # noqa: SLF001
    finally:
        tr.close()
    assert played == list(itertools.islice(row_stream(5, 3), 10, 14))
    with pytest.raises(ValueError, match="skip must be 0 or more"):
        next(row_stream(4, 0, skip=-1))


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError, match="max_staleness"):
        GroupAssembler(2, -1)
    with pytest.raises(ValueError, match="group_size"):
        GroupAssembler(0, 1)


def test_replay_injects_into_all_fail_groups_and_takes_the_infra_slot():
    buf = ReplayBuffer(seed=0)
    assert buf.add(_traj(1.0), step=0)
    asm = GroupAssembler(group_size=3, max_staleness=1, replay=buf)
    asm.add(_played(0, 0, 0, score=0.0))
    asm.add(_played(0, 1, 0, infra=True))
    asm.add(_played(0, 2, 0, score=0.0))
    (group,) = asm.take(1, 0)
    # the injected success replaces the member a broken desktop played, not a scored one
    assert [t.source for t in group] == ["policy", "replay", "policy"]
    assert group[1].score == 1.0 and group[1].valid
    assert asm.stats.injection.injected == 1 and asm.stats.infra_members == 1


def test_a_group_with_a_success_is_not_injected_and_its_success_is_stored():
    buf = ReplayBuffer(seed=0)
    asm = GroupAssembler(group_size=2, max_staleness=1, replay=buf)
    asm.add(_played(0, 0, 0, score=1.0))
    asm.add(_played(0, 1, 0, score=0.0))
    (group,) = asm.take(1, 0)
    assert [t.source for t in group] == ["policy", "policy"]
    assert buf.size(TASK) == 1


def test_an_infra_failed_success_is_never_stored():
    buf = ReplayBuffer(seed=0)
    asm = GroupAssembler(group_size=2, max_staleness=1, replay=buf)
    bad = _played(0, 0, 0, score=1.0, infra=True)
    asm.add(bad)
    asm.add(_played(0, 1, 0, score=0.0))
    asm.take(1, 0)
    assert buf.size(TASK) == 0


# -- real desktops, the real generator ----------------------------------------------------------


class _ByEpisode:
    """FAIL for even group members, DONE for odd ones (a scripted policy keyed by episode)."""

    def __init__(self, encoder, collector_ref):
        self.encoder, self.ref = encoder, collector_ref

    def sample(self, contexts, rows):
        out = []
        for r in rows:
            text = FAIL if self.ref[0].episode_of[r].index % 2 == 0 else DONE
            ids = self.encoder.action_ids(text)
            out.append(TurnSample(ids, [0.0] * len(ids), text))
        return out


@pytest.fixture(scope="module")
def setup():
    with tempfile.TemporaryDirectory() as tmp:
        cfg = ARPOConfig(
            output_dir=tmp,
            use_cpu=True,
            bf16=False,
            report_to="none",
            provider="fake",
            settle=False,
            vector_env="sync",
            screen_width=640,
            screen_height=360,
            max_turns=2,
            max_turn_tokens=8,
            task_ids=[TASK],
            per_device_train_batch_size=2,
            num_generations=2,
        )
        vlm = build_tiny_vlm(seed=0)
        encoder = make_encoder(cfg, vlm.processor)
        yield dict(
            encoder=encoder,
            action_set=make_policy_action_set(cfg, encoder),
            env=env_kwargs(cfg, encoder),
            task=resolve_tasks(cfg.tasks, [TASK], provider="fake")[TASK],
        )


def _collector(setup, desktops: int, timeline: Timeline, backend: str = "sync"):
    ref: list[AsyncCollector] = []
    gen = BatchingGenerator(_ByEpisode(setup["encoder"], ref))
    pools = [DesktopPool(1, setup["env"], backend=backend) for _ in range(desktops)]
    col = AsyncCollector(
        pools, setup["encoder"], setup["action_set"], gen, max_turns=2, timeline=timeline
    )
    ref.append(col)
    return col, gen, pools


def _close_all(col: AsyncCollector, gen: BatchingGenerator, pools: list[DesktopPool]) -> None:
    """Stop what :func:`_collector` started: the desktop threads, the generator, the desktops."""
    col.close()
    gen.close()
    for p in pools:
        p.close()


def test_async_run_scores_real_episodes_and_bounds_staleness(setup):
    tl = Timeline()
    col, gen, pools = _collector(setup, 3, tl)
    asm = GroupAssembler(group_size=2, max_staleness=1, replay=ReplayBuffer(seed=0))
    seen: list[tuple[int, list[int]]] = []

    def learn(groups, version):
        seen.append((version, [t.step for g in groups for t in g]))
        for g in groups:  # member 0 said FAIL (score 1), member 1 DONE (score 0)
            assert [t.score for t in g] == [1.0, 0.0]
            assert all(t.valid for t in g)

    try:
        steps = run_async(
            col, asm, lambda g: setup["task"], groups=6, groups_per_step=2, learn=learn
        )
    finally:
        _close_all(col, gen, pools)
    assert steps == len(seen) >= 3
    # the budget is groups handed to the learner: a group dropped as stale was replaced
    assert asm.stats.taken == 6 and sum(len(s) for _, s in seen) == 12
    # every trained trajectory was sampled at most max_staleness versions before its step
    assert all(version - s <= 1 for version, sampled in seen for s in sampled)
    assert tl.episodes == 2 * (6 + asm.stats.dropped_stale) and gen.batches >= 1
    assert asm.replay is not None and asm.replay.size(TASK) >= 1


def test_a_dead_desktop_gives_infra_failed_episodes_that_never_count(setup):
    tl = Timeline()
    col, gen, pools = _collector(setup, 1, tl, backend="async")  # a worker process
    buf = ReplayBuffer(seed=0)
    asm = GroupAssembler(group_size=2, max_staleness=0, replay=buf)
    try:
        pools[0].close()  # its worker process is gone: the episodes fail as infra errors
        col.submit_group(setup["task"], 0, 2)
        for _ in range(2):
            asm.add(col.results.get(timeout=120))
    finally:
        col.close()
        gen.close()
    (group,) = asm.take(1, 0)
    assert asm.stats.infra_members == 2
    assert all(not t.valid and t.end == "infra_error" for t in group)
    assert buf.size(TASK) == 0  # nothing a broken desktop "scored" is stored


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"rollout_mode": "lockstep"}, "rollout_mode must be"),
        # a colocated engine shares the learner's device and sleeps while the learner steps
        ({"rollout_mode": "async", "use_vllm": True}, "needs vllm_mode='server'"),
        (
            {"rollout_mode": "async", "use_vllm": True, "vllm_mode": "colocate"},
            "colocated engine shares the learner's device",
        ),
        (
            {"use_vllm": True, "vllm_mode": "server", "vllm_weight_transfer": "s3"},
            "'nccl' or 'disk'",
        ),
        ({"use_vllm": True, "vllm_weight_transfer": "disk"}, "needs use_vllm=True and vllm_mode"),
        ({"vllm_weight_transfer": "disk"}, "needs use_vllm=True and vllm_mode"),
        ({"max_staleness": -1}, "max_staleness must be >= 0"),
        ({"weight_sync_every": 0}, "weight_sync_every >= 1"),
        (
            {"rollout_mode": "async", "max_staleness": 1, "weight_sync_every": 3},
            "needs max_staleness >= 2",
        ),
        ({"rollout_mode": "async", "async_desktops": -1}, "async_desktops must be >= 0"),
        ({"async_desktops": 4}, "async_desktops=4 is for rollout_mode='async'"),
        ({"async_requests_in_flight": -1}, "async_requests_in_flight must be >= 0"),
        # concurrent batches are requests to a vLLM server; one model copy answers one at a time
        (
            {"rollout_mode": "async", "async_requests_in_flight": 2},
            "async_requests_in_flight=2 sends concurrent requests to a vLLM server",
        ),
        ({"async_requests_in_flight": 2}, "needs rollout_mode='async', use_vllm=True"),
        ({"simulated_generation_latency_s": -0.5}, "finite number of seconds >= 0"),
        ({"simulated_generation_latency_s": float("nan")}, "finite number of seconds >= 0"),
        ({"simulated_generation_latency_s": float("inf")}, "finite number of seconds >= 0"),
        ({"simulated_generation_latency_s": True}, "finite number of seconds >= 0"),
        ({"simulated_learner_latency_per_turn_s": -0.1}, "finite number of seconds >= 0"),
        ({"simulated_learner_latency_per_turn_s": float("nan")}, "finite number of seconds >= 0"),
        ({"simulated_learner_latency_per_turn_s": float("inf")}, "finite number of seconds >= 0"),
        ({"simulated_learner_latency_per_turn_s": True}, "finite number of seconds >= 0"),
        ({"simulated_generation_concurrent": "false"}, "must be true or false"),
        ({"simulated_generation_concurrent": True}, "needs rollout_mode='async' and simulated"),
        (
            {"simulated_generation_concurrent": True, "simulated_generation_latency_s": 1.0},
            "needs rollout_mode='async' and simulated",
        ),
        # a vLLM engine's latency is real: a simulated one on top would count it twice
        (
            {"simulated_generation_latency_s": 1.0, "use_vllm": True, "vllm_mode": "colocate"},
            "with use_vllm the generation latency is real",
        ),
    ],
)
def test_config_refuses_what_the_trainer_cannot_run(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        ARPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **overrides)


def test_config_warns_when_stale_async_samples_would_train_uncorrected(tmp_path):
    base = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": "none"}
    with pytest.warns(UserWarning, match="trained as if on-policy"):
        ARPOConfig(**base, rollout_mode="async", vllm_importance_sampling_correction=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*as if on-policy.*")
        ARPOConfig(**base, rollout_mode="async")  # corrected: the default
        never_stale = {"max_staleness": 0, "weight_sync_every": 1}
        ARPOConfig(
            **base, **never_stale, rollout_mode="async", vllm_importance_sampling_correction=False
        )
        ARPOConfig(**base, vllm_importance_sampling_correction=False)  # sync: nothing stale


def test_the_driver_refills_the_desktops_queue_before_each_learner_step(setup):
    """While the learner steps, the desktops have ``prefetch_groups`` groups to play (or what is
    left of the budget), not ``prefetch_groups - groups_per_step``: the refill happens right after
    groups are taken."""
    tl = Timeline()
    col, gen, pools = _collector(setup, 2, tl)
    asm = GroupAssembler(group_size=2, max_staleness=3)
    budget, prefetch, outstanding = 8, 4, []

    def learn(groups, version):
        submitted = col._uid // 2  # noqa: SLF001 - episodes submitted so far / group size
        outstanding.append(submitted - asm.stats.taken - asm.stats.dropped_stale)

    try:
        run_async(
            col,
            asm,
            lambda g: setup["task"],
            groups=budget,
            groups_per_step=2,
            learn=learn,
            prefetch_groups=prefetch,
        )
    finally:
        _close_all(col, gen, pools)
    assert asm.stats.dropped_stale == 0  # 4 steps, staleness 3 allowed: nothing dropped
    assert outstanding == [4, 4, 2, 0]  # min(prefetch, budget - taken) at each step


def _trainer_rollouts(setup, desktops: int, *, wrap=None, policy=None, **kw) -> TrainerRollouts:
    """The trainer's async rollouts over ``desktops`` fake desktops (each passed through
    ``wrap``), one training row of ``TASK``, groups of 2, 2 turns, ``_ByEpisode``'s scripted
    episodes (or ``policy``)."""
    ref: list[AsyncCollector] = []
    tr = TrainerRollouts(
        [
            (wrap or (lambda p: p))(DesktopPool(1, setup["env"], backend="sync"))
            for _ in range(desktops)
        ],
        setup["encoder"],
        setup["action_set"],
        policy or _ByEpisode(setup["encoder"], ref),
        **{"rows": [{"task_id": TASK, "prompt": "x"}], "seed": 0, **kw},
        task_of=lambda row: setup["task"],
        group_size=2,
        max_staleness=1,
        max_turns=2,
        end_on_format_error=True,
    )
    ref.append(tr.collector)
    return tr


def test_trainer_rollouts_refill_the_queue_when_a_step_takes_its_groups(setup):
    tr = _trainer_rollouts(setup, desktops=2, prefetch_groups=3)
    try:
        for step in range(2):
            taken = tr.take(1, step)
            assert len(taken) == 1 and [t.score for t in taken[0][1]] == [1.0, 0.0]
            stats = tr.assembler.stats
            # what the desktops play during the learner step: the full prefetch depth
            assert tr.submitted - stats.taken - stats.dropped_stale == 3
    finally:
        tr.close()


class _ClickAndBumpVersion:
    """Never ends an episode (a click every turn); after its ``bump_after``-th answer the
    generator's version jumps by 2, as if the learner had stepped twice meanwhile."""

    def __init__(self, encoder, gen_ref, bump_after: int):
        self.encoder, self.ref, self.bump_after, self.calls = encoder, gen_ref, bump_after, 0

    def sample(self, contexts, rows):
        self.calls += 1
        if self.calls == self.bump_after:
            self.ref[0].version += 2  # read by the next answer (this one carries the old version)
        text = "Action: click(start_box='(10,10)')"
        ids = self.encoder.action_ids(text)
        return [TurnSample(ids, [0.0] * len(ids), text) for _ in rows]


@pytest.mark.parametrize(("max_staleness", "turns"), [(1, 1), (None, 2), (2, 2)])
def test_an_episode_too_stale_to_train_on_is_abandoned_not_played_on(setup, max_staleness, turns):
    ref: list[BatchingGenerator] = []
    gen = BatchingGenerator(_ClickAndBumpVersion(setup["encoder"], ref, bump_after=1))
    ref.append(gen)
    pool = DesktopPool(1, setup["env"], backend="sync")
    col = AsyncCollector(
        [pool], setup["encoder"], setup["action_set"], gen, max_turns=2,
        end_on_format_error=True, max_staleness=max_staleness,
    )  # fmt: skip
    asm = GroupAssembler(group_size=1, max_staleness=max_staleness or 0)
    try:
        col.submit_group(setup["task"], 0, 1)
        played = col.results.get(timeout=120)
    finally:
        col.close()
        gen.close()
        pool.close()
    # answer 1 carries version 0, answer 2 version 2: with a bound of 1 the episode stops there
    # (its 1 played turn, no score); without a bound or with 2 it plays both turns (the env ends
    # it, truncated, at max_turns)
    assert len(played.trajectory.turns) == turns and played.version == 0
    assert (played.trajectory.end == "stale") == (turns == 1)
    assert col.abandoned_stale == (1 if turns == 1 else 0)
    if max_staleness == 1:
        asm.add(played)
        assert asm.take(1, gen.version) == [] and asm.stats.dropped_stale == 1


class _FailThenClickAndBump:
    """Member 0 of a group answers FAIL (its episode ends after 1 turn), every later answer is a
    click; after answer ``k`` the generator's version grows by ``bumps[k]`` (as if the learner
    had stepped meanwhile)."""

    def __init__(self, encoder, gen_ref, bumps: dict[int, int]):
        self.encoder, self.ref, self.bumps, self.calls = encoder, gen_ref, bumps, 0

    def sample(self, contexts, rows):
        self.calls += 1
        self.ref[0].version += self.bumps.get(self.calls, 0)  # read by the next answer
        text = FAIL if self.calls == 1 else "Action: click(start_box='(10,10)')"
        ids = self.encoder.action_ids(text)
        return [TurnSample(ids, [0.0] * len(ids), text) for _ in rows]


@pytest.mark.parametrize(
    ("bumps", "member1_turns", "answers"),
    [
        # member 1 starts at version 1, its 2nd answer carries 2: 2 past member 0's first (0)
        ({1: 1, 2: 1}, 1, 3),
        # the generator is at 2 before member 1 starts: it is not started at all
        ({1: 2}, 0, 1),
    ],
)
def test_a_member_whose_group_is_already_too_stale_is_abandoned_or_never_started(
    setup, bumps, member1_turns, answers
):
    """The bound is on the group's oldest answer: member 1's own answers are within 1 version of
    each other, yet its group (member 0 answered at version 0) can only be dropped at version 2,
    so the desktop stops playing it (or never resets for it)."""
    ref: list[BatchingGenerator] = []
    policy = _FailThenClickAndBump(setup["encoder"], ref, bumps)
    gen = BatchingGenerator(policy)
    ref.append(gen)
    pool = DesktopPool(1, setup["env"], backend="sync")  # one desktop: member 0 plays first
    col = AsyncCollector(
        [pool], setup["encoder"], setup["action_set"], gen, max_turns=2,
        end_on_format_error=True, max_staleness=1,
    )  # fmt: skip
    asm = GroupAssembler(group_size=2, max_staleness=1)
    try:
        col.submit_group(setup["task"], 0, 2)
        played = sorted((col.results.get(timeout=120) for _ in range(2)), key=lambda p: p.job.index)
    finally:
        col.close()
        gen.close()
        pool.close()
    first, second = (p.trajectory for p in played)
    assert len(first.turns) == 1 and first.score == 1.0 and played[0].version == 0
    assert len(second.turns) == member1_turns and second.end == "stale"
    assert col.abandoned_stale == 1 and policy.calls == answers
    assert col._group_first == {} and col._group_left == {}  # noqa: SLF001 - no entry kept
    for p in played:
        asm.add(p)
    assert asm.take(1, gen.version) == [] and asm.stats.dropped_stale == 1


def test_config_takes_async_rollouts_from_a_vllm_server(tmp_path):
    cfg = ARPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        rollout_mode="async",
        use_vllm=True,
        vllm_mode="server",
        vllm_weight_transfer="disk",
    )
    assert (cfg.rollout_mode, cfg.vllm_mode, cfg.vllm_weight_transfer) == (
        "async",
        "server",
        "disk",
    )


# -- the version gate -------------------------------------------------------------------------


class _HeldPool:
    """A one-slot desktop pool whose episodes of ``held`` (a task object) do not take their first
    action until ``release()`` is true: an adversarially long episode whose length is set by what
    the rest of the loop does, not by a clock."""

    n = 1

    def __init__(self, pool, held, release):
        self.pool, self.held, self.release = pool, held, release
        self.resets, self._holding = 0, False

    def reset(self, tasks):
        self.resets += 1
        self._holding = tasks[0] is self.held
        return self.pool.reset(tasks)

    def step(self, actions):
        for _ in range(12000):  # a guard against a hung test (2 min), not a timing assertion
            if not self._holding or self.release():
                break
            threading.Event().wait(0.01)
        else:
            raise AssertionError("the held episode was never released")
        self._holding = False
        return self.pool.step(actions)

    def close(self):
        self.pool.close()


@pytest.mark.parametrize("gate", [True, False])
def test_the_version_gate_keeps_the_bound_with_no_group_played_and_dropped(setup, gate):
    """Group 0's members hold their first action until the learner has stepped twice (what a
    15-turn episode does next to 1-turn ones) or the gate holds a desktop back. Without the gate
    the learner takes the later groups first, steps past group 0, and the desktops' work on it is
    thrown away; with it group 0 is taken at its own step, every group within the bound, none
    dropped or abandoned."""
    held = copy.copy(setup["task"])
    ref: list[AsyncCollector] = []
    gen = BatchingGenerator(_ByEpisode(setup["encoder"], ref))
    col_box: list[AsyncCollector] = []

    def release() -> bool:
        return gen.version >= 2 or col_box[0].gated_waits > 0

    pools = [
        _HeldPool(DesktopPool(1, setup["env"], backend="sync"), held, release) for _ in range(3)
    ]
    tl = Timeline()
    col = AsyncCollector(
        pools, setup["encoder"], setup["action_set"], gen, max_turns=2, timeline=tl,
        max_staleness=1,
    )  # fmt: skip
    ref.append(col)
    col_box.append(col)
    asm = GroupAssembler(group_size=2, max_staleness=1)
    taken: list[tuple[int, list[int]]] = []  # (learner version, each member's sampled version)

    def learn(groups, version):
        taken.append((version, [t.step for g in groups for t in g]))

    try:
        run_async(
            col, asm, lambda g: held if g == 0 else setup["task"], groups=4, groups_per_step=1,
            learn=learn, gate=gate, prefetch_groups=3,
        )  # fmt: skip
    finally:
        _close_all(col, gen, pools)
    assert asm.stats.taken == 4
    assert all(version - s <= 1 for version, sampled in taken for s in sampled)
    if gate:
        assert asm.stats.dropped_stale == 0 and col.abandoned_stale == 0
        assert col.gated_waits >= 1  # a desktop waited rather than start group 2 early
        assert taken[0] == (0, [0, 0])  # group 0 at its own step
    else:  # the earlier loop played group 0 and threw it away
        assert asm.stats.dropped_stale >= 1


def test_the_gate_holds_a_start_that_could_not_be_taken_within_the_bound(setup):
    """At max_staleness 1 with the learner starting at step 1, the group meant for step 3 may not
    start (no reset, no turn) while the generator is at version 1; it starts once the weights of
    version 2 arrive, so its oldest turn is 1 version behind step 3."""
    ref: list[AsyncCollector] = []
    gen = BatchingGenerator(_ByEpisode(setup["encoder"], ref), version=1)
    pool = _HeldPool(DesktopPool(1, setup["env"], backend="sync"), None, lambda: True)
    col = AsyncCollector(
        [pool], setup["encoder"], setup["action_set"], gen, max_turns=2, max_staleness=1
    )
    ref.append(col)
    asm = GroupAssembler(group_size=1, max_staleness=1)
    feed = GroupFeed(
        col, asm, lambda g: setup["task"], groups_per_step=1, prefetch=3, start_version=1
    )
    assert [feed.target(i) - 1 for i in range(3)] == [0, 1, 2]  # the gates of groups 0-2
    try:
        feed.top_up()
        played = [col.results.get(timeout=120) for _ in range(2)]
        for _ in range(3000):  # until the desktop took group 2's job and stopped at the gate
            if col.gated_waits:
                break
            threading.Event().wait(0.01)
        assert col.gated_waits == 1 and pool.resets == 2 and col.results.empty()
        gen.sync(None, 2)
        played.append(col.results.get(timeout=120))
    finally:
        col.close()
        gen.close()
        pool.close()
    assert [p.job.group for p in played] == [0, 1, 2] and pool.resets == 3
    assert [p.version for p in played] == [1, 1, 2]
    for p in played:
        asm.add(p)
    # each group at its target step is within the bound; none is dropped
    assert [len(asm.take(1, v)) for v in (1, 2, 3)] == [1, 1, 1]
    assert asm.stats.staleness == [0, 1, 1] and asm.stats.dropped_stale == 0


def test_an_infra_failed_member_does_not_stall_the_gated_learner(setup):
    """One of two desktops is dead: its episodes come back at once as infra failures. The gated
    learner still gets every group (infra members as invalid rows, never in the replay buffer)
    and finishes; nothing is dropped."""
    tl = Timeline()
    col, gen, pools = _collector(setup, 2, tl, backend="async")
    buf = ReplayBuffer(seed=0)
    asm = GroupAssembler(group_size=2, max_staleness=1, replay=buf)
    seen: list[list[Trajectory]] = []
    try:
        pools[0].close()
        steps = run_async(
            col, asm, lambda g: setup["task"], groups=6, groups_per_step=2,
            learn=lambda groups, v: seen.extend(groups), weight_sync_every=2,
        )  # fmt: skip
    finally:
        col.close()
        gen.close()
        pools[1].close()
    assert steps == 3 and len(seen) == 6 and asm.stats.dropped_stale == 0
    assert asm.stats.infra_members >= 1
    assert all(t.valid == (t.infra_error is None) for g in seen for t in g)
    assert max(asm.stats.staleness) <= 1  # weight_sync_every 2 = max_staleness + 1: no deadlock


def test_run_async_refuses_a_weight_sync_the_gate_could_never_open_for(setup):
    tl = Timeline()
    col, gen, pools = _collector(setup, 1, tl)
    try:
        with pytest.raises(ValueError, match="weight_sync_every=3 needs max_staleness >= 2"):
            run_async(
                col, GroupAssembler(2, 1), lambda g: setup["task"], groups=2,
                groups_per_step=1, learn=lambda groups, v: None, weight_sync_every=3,
            )  # fmt: skip
    finally:
        _close_all(col, gen, pools)


def test_trainer_rollouts_play_a_step_of_more_episodes_than_desktops_through_the_gate(
    setup, tmp_path
):
    """One desktop, steps of 2 groups of 2 (4 episodes), the learner starting at step 5 as a
    resumed run does: every step gets its 4 episodes, each group within the bound, none dropped;
    the config lets async_desktops be fewer than a generation batch's rows."""
    cfg = ARPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", rollout_mode="async",
        async_desktops=1, per_device_train_batch_size=4, num_generations=2,
    )  # fmt: skip
    assert cfg.desktops_per_process == 1
    tr = _trainer_rollouts(setup, desktops=1, prefetch_groups=4, groups_per_step=2, start_version=5)
    try:
        for step in (5, 6, 7):
            taken = tr.take(2, step)
            assert len(taken) == 2 and all(len(g) == 2 for _, g in taken)
            assert all(step - t.step <= 1 for _, g in taken for t in g)
            tr.sync(step + 1, lambda: None)
    finally:
        tr.close()
    assert tr.assembler.stats.dropped_stale == 0 and tr.collector.abandoned_stale == 0
    st = tr.assembler.stats.staleness
    assert len(st) == 6 and max(st) <= 1


@pytest.mark.parametrize("planned", [1, 0])
def test_a_learner_behind_the_gates_schedule_moves_it_instead_of_waiting_for_ever(setup, planned):
    """The gates' schedule comes from the trainer's optimizer steps per generation batch; a
    learner that arrives at a step earlier than planned (steps_per_take wrong, or the groups
    after a drop) must not find its groups' gates shut for ever: the feed moves the schedule to
    the learner's version and re-sets the gates of the jobs not yet started. At max_staleness 0
    a gate one step too high never opens while the learner waits (the old feed hung here)."""
    tl = Timeline()
    col, gen, pools = _collector(setup, 2, tl)
    asm = GroupAssembler(group_size=2, max_staleness=0)
    feed = GroupFeed(
        col, asm, lambda g: setup["task"], groups_per_step=1, prefetch=2, start_version=planned
    )
    out: list = []
    try:
        feed.top_up()  # group 0's gate: the planned step, 1 (shut) or 0
        worker = threading.Thread(target=lambda: out.append(feed.take(1, 0)), daemon=True)
        worker.start()
        worker.join(timeout=120)  # a guard against a hung test, not a timing assertion
        assert not worker.is_alive(), "the learner waited for a gate that never opens"
        assert len(out[0]) == 1 and asm.stats.staleness == [0]
        assert feed.rebased == planned  # moved only when off the schedule
        gen.sync(None, 1)
        assert len(feed.take(1, 1)) == 1 and feed.rebased == planned  # on schedule since
    finally:
        _close_all(col, gen, pools)


def test_the_gates_follow_a_learner_whose_steps_per_take_is_not_whole(setup):
    """steps_per_generation 3 over gradient_accumulation_steps 2: TRL generates every 3
    micro-batches, the optimizer steps every 2, so the takes come at learner steps
    floor(3k / 2) = 0, 1, 3, 4, 6. With steps_per_take rounded down to 1 the group for step 3
    was gated for step 2 and played at version 1 while the learner stepped, then dropped at
    step 3 (each such jump threw a played group away). A fractional steps_per_take keeps every
    group on its step: none dropped, the schedule never moved."""
    col, gen, pools = _collector(setup, 2, Timeline())
    asm = GroupAssembler(group_size=2, max_staleness=1)
    feed = GroupFeed(
        col, asm, lambda g: setup["task"], groups_per_step=1, prefetch=3,
        steps_per_take=Fraction(3, 2),
    )  # fmt: skip
    versions = [0, 1, 3, 4, 6, 7]
    assert [feed.target(i) for i in range(len(versions))] == versions
    try:
        for i, v in enumerate(versions):
            gen.sync(None, v)  # weight_sync_every 1: the generator at the learner's step
            assert len(feed.take(1, v)) == 1
            if feed.target(i + 1) - 1 > v:  # the next group's gate is shut during this step
                continue
            for _ in range(12000):  # the learner step lasts until the next group was played
                if col.results.qsize() >= 2:
                    break
                threading.Event().wait(0.01)
    finally:
        _close_all(col, gen, pools)
    assert asm.stats.dropped_stale == 0 and feed.rebased == 0
    assert max(asm.stats.staleness) <= 1


def test_closing_the_collector_stops_each_desktop_after_its_current_episode(setup):
    """close() promises to stop the desktop threads after their current episode; they went on
    taking jobs already queued (the stop sentinels come after them) and played the whole
    backlog first: here 3 more episodes on one desktop, up to a full prefetch on a real run."""
    ref: list[AsyncCollector] = []
    gen = BatchingGenerator(_ByEpisode(setup["encoder"], ref))
    col_box: list[AsyncCollector] = []
    # the first episode holds its first action until close() was called
    pool = _HeldPool(
        DesktopPool(1, setup["env"], backend="sync"), setup["task"],
        lambda: col_box[0]._stop.is_set(),  # noqa: SLF001 - the moment close() begins
    )  # fmt: skip
    col = AsyncCollector([pool], setup["encoder"], setup["action_set"], gen, max_turns=2)
    ref.append(col)
    col_box.append(col)
    try:
        col.submit_group(setup["task"], 0, 2)
        col.submit_group(setup["task"], 1, 2)
        for _ in range(12000):  # until the desktop is inside episode 1 (a guard, not timing)
            if pool.resets:
                break
            threading.Event().wait(0.01)
        col.close()
    finally:
        gen.close()
        pool.close()
    assert pool.resets == 1 and col.results.qsize() == 1


# -- what stops the whole loop, not one episode ------------------------------------------------


class _Unseparated:
    """A one-slot desktop pool whose resets say the agent runs with the judge's identity
    (``separated: False``, what a non-root host reports); counts the actions it is sent."""

    n = 1

    def __init__(self, pool):
        self.pool, self.steps = pool, 0

    def reset(self, tasks):
        frames, infos = self.pool.reset(tasks)
        return frames, [{**info, "separated": False} for info in infos]

    def step(self, actions):
        self.steps += 1
        return self.pool.step(actions)

    def close(self):
        self.pool.close()


@pytest.mark.parametrize("allowed", [False, True])
def test_async_rollouts_refuse_a_desktop_whose_agent_is_the_judge(setup, allowed):
    """As the synchronous collector does (allow_unseparated_desktops, default off): on a desktop
    where the policy could forge its own scores no action is played and the learner's take
    raises, instead of training on it."""
    wrapped: list[_Unseparated] = []

    def wrap(pool):
        wrapped.append(_Unseparated(pool))
        return wrapped[-1]

    tr = _trainer_rollouts(
        setup, desktops=1, wrap=wrap, prefetch_groups=1, allow_unseparated=allowed
    )
    try:
        if allowed:
            (taken,) = tr.take(1, 0)
            assert [t.score for t in taken[1]] == [1.0, 0.0]
        else:
            with pytest.raises(RuntimeError, match="judge's identity"):
                tr.take(1, 0)
            assert wrapped[0].steps == 0  # not one action on that desktop
    finally:
        tr.close()


class _Broken:
    """A generator whose every batch fails (a lost GPU, an unreachable vLLM server)."""

    def sample(self, contexts, rows):
        raise RuntimeError("the generator's device is gone")


def test_a_failing_generator_stops_the_async_loop_instead_of_giving_infra_failed_groups(setup):
    """The sync collector's rollout raises what the policy raised; the async loop turned it into
    an infra-failed episode per member, so the learner went on taking groups of nothing but
    invalid rows for ever. The learner's take raises it now."""
    _first_take_raises(
        _trainer_rollouts(setup, desktops=2, policy=_Broken(), prefetch_groups=2), "device is gone"
    )


def _first_take_raises(tr: TrainerRollouts, match: str) -> None:
    """The learner's first take raises what stopped the loop, with no group taken."""
    try:
        with pytest.raises(RuntimeError, match=match):
            tr.take(1, 0)
        assert tr.assembler.stats.taken == 0
    finally:
        tr.close()


class _EncoderBug:
    """The real encoder, except that turning an episode into a model context raises (a bug of
    ours, not a desktop's failure)."""

    def __init__(self, encoder):
        self._encoder = encoder

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode(self, *args, **kwargs):
        raise RuntimeError("a bug in the encoder")


def test_a_bug_outside_the_desktop_stops_the_async_loop_instead_of_giving_infra_failures(setup):
    """Only the desktop's own failures (its reset or step raising) end just their episode as
    infra failures; anything else raised while playing (here the encoder) is the loop's, raised
    by a sync rollout and now by the learner's take, not turned into invalid rows for ever."""
    tr = _trainer_rollouts(setup, desktops=1, prefetch_groups=1)
    tr.collector.encoder = _EncoderBug(setup["encoder"])
    _first_take_raises(tr, "a bug in the encoder")


class _OneShort:
    """Answers its first batch with one sample fewer than asked, later ones in full."""

    def __init__(self):
        self.calls = 0

    def sample(self, contexts, rows):
        self.calls += 1
        n = len(rows) - (1 if self.calls == 1 else 0)
        return [TurnSample([1], [0.0], "x") for _ in range(n)]


def test_a_policy_answering_the_wrong_number_of_rows_fails_its_requests_not_the_server():
    """The mismatch was raised on the server thread outside its error handling: the thread
    died, every desktop waited for an answer for ever and the learner with them (the desktop
    threads stayed alive, so take never gave up)."""
    gen = BatchingGenerator(_OneShort(), max_batch=1)
    try:
        bad = gen.submit(None, 0)  # pyright: ignore[reportArgumentType] - the policy ignores it
        # the timeouts guard against a hung test; they are not timing assertions
        assert isinstance(bad.exception(timeout=60), ValueError)
        sample, version = gen.submit(None, 1).result(timeout=60)  # pyright: ignore[reportArgumentType]
        assert (sample.text, version) == ("x", 0)
    finally:
        gen.close()


def test_a_simulated_latency_is_paid_once_per_call_that_samples():
    inner = _OneShort()
    inner.calls = 1  # answers every batch in full
    policy = SimulatedLatencyPolicy(inner, 0.05)
    t0 = time.monotonic()
    out = policy.sample([None, None], [0, 1])  # pyright: ignore[reportArgumentType]
    assert [s.text for s in out] == ["x", "x"]  # the wrapped policy's answer, untouched
    policy.sample([None], [2])  # pyright: ignore[reportArgumentType]
    assert policy.sample([], []) == []  # nothing sampled, nothing paid
    # a lower bound only: load can make a sleep longer, never shorter
    assert time.monotonic() - t0 >= 2 * 0.05
    assert (policy.calls, inner.calls) == (2, 4)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite number > 0"):
            SimulatedLatencyPolicy(inner, bad)


# -- several generation batches in flight (async_requests_in_flight) --------------------------


class _Held:
    """Each ``sample`` call blocks until the test releases it; records what was in flight."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started: list[list[int]] = []  # rows of each call, in call order
        self.release: list[threading.Event] = []
        self.running = 0
        self.most_running = 0
        self.arrived = threading.Semaphore(0)

    def sample(self, contexts, rows):
        done = threading.Event()
        with self.lock:
            self.started.append(list(rows))
            self.release.append(done)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        self.arrived.release()
        assert done.wait(60), "the test never released this batch"
        with self.lock:
            self.running -= 1
        return [TurnSample([r], [0.0], f"row {r}") for r in rows]

    def wait_calls(self, n: int) -> None:
        for _ in range(n):
            assert self.arrived.acquire(timeout=60), "a batch the test waited for never started"


def _submit(gen: BatchingGenerator, row: int):
    return gen.submit(None, row)  # pyright: ignore[reportArgumentType] - the policy ignores it


def _until(cond, what: str) -> None:
    deadline = threading.Event()
    for _ in range(600):  # a bound on waiting for another thread, not a timing assertion
        if cond():
            return
        deadline.wait(0.1)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.parametrize("in_flight", [1, 2])
def test_a_turn_waiting_behind_a_batch_goes_out_at_once_only_with_requests_in_flight(in_flight):
    policy = _Held()
    gen = BatchingGenerator(policy, max_in_flight=in_flight)
    try:
        first = _submit(gen, 0)
        policy.wait_calls(1)  # batch 1 is being sampled
        second = _submit(gen, 1)
        if in_flight == 1:
            # the server holds the turn until batch 1 is answered
            assert not policy.arrived.acquire(timeout=1.0)
            assert policy.started == [[0]]
            policy.release[0].set()
            policy.wait_calls(1)
        else:
            policy.wait_calls(1)  # sent while batch 1 is still out
            assert policy.most_running == 2 and gen.peak_in_flight == 2
        assert policy.started == [[0], [1]]
        for ev in policy.release:
            ev.set()
        assert first.result(timeout=60)[0].text == "row 0"
        assert second.result(timeout=60)[0].text == "row 1"
        assert gen.peak_in_flight == in_flight
    finally:
        for ev in policy.release:
            ev.set()
        gen.close()


def test_a_weight_swap_waits_for_every_batch_in_flight_and_holds_new_ones_back():
    """Each answer carries the version whose weights sampled it: the swap (``update``) runs only
    once no batch is in flight, and a turn submitted while the swap waits is sampled after it,
    with the new version."""
    policy = _Held()
    gen = BatchingGenerator(policy, max_in_flight=3, max_batch=1)
    swapped = threading.Event()
    in_flight_at_swap: list[int] = []

    def update():
        in_flight_at_swap.append(policy.running)
        swapped.set()

    try:
        old = [_submit(gen, r) for r in (0, 1)]
        policy.wait_calls(2)  # two batches of one row, both in flight
        syncer = threading.Thread(target=gen.sync, args=(None, 7, update))
        syncer.start()
        _until(lambda: gen._swapping, "the swap began waiting")  # noqa: SLF001
        new = _submit(gen, 9)  # arrives while the swap waits: must not start before it
        assert not policy.arrived.acquire(timeout=1.0)
        assert not swapped.is_set()
        policy.release[0].set()
        assert not swapped.wait(1.0)  # one batch is still in flight
        for ev in policy.release:
            ev.set()
        syncer.join(60)
        assert swapped.is_set() and in_flight_at_swap == [0]
        policy.wait_calls(1)
        policy.release[-1].set()
        assert [f.result(timeout=60)[1] for f in old] == [0] * len(old)
        sample, version = new.result(timeout=60)
        assert (sample.text, version) == ("row 9", 7)
    finally:
        for ev in policy.release:
            ev.set()
        gen.close()


def test_a_failing_batch_in_flight_fails_its_own_requests_only():
    class FailsRowZero(_Held):
        def sample(self, contexts, rows):
            out = super().sample(contexts, rows)
            if 0 in rows:
                raise RuntimeError("the server answered 500")
            return out

    policy = FailsRowZero()
    gen = BatchingGenerator(policy, max_in_flight=2, max_batch=1)
    try:
        bad = _submit(gen, 0)
        policy.wait_calls(1)
        good = _submit(gen, 1)
        policy.wait_calls(1)
        for ev in policy.release:
            ev.set()
        assert "500" in str(bad.exception(timeout=60))
        assert good.result(timeout=60)[0].text == "row 1"
        again = _submit(gen, 2)  # the generator still serves
        policy.wait_calls(1)
        policy.release[-1].set()
        assert again.result(timeout=60)[0].text == "row 2"
        assert gen.batches == 2  # answered batches; the failed one is not counted
    finally:
        for ev in policy.release:
            ev.set()
        gen.close()
