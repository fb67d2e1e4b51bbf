"""ARPO's success replay: what is stored, when it is injected, what is evicted, what survives a
restart."""

from __future__ import annotations

from arpo_trainer.replay import ReplayBuffer, group_scores_fail
from arpo_trainer.rollout import Trajectory, Turn


def traj(
    task: str = "t",
    score: float = 0.0,
    *,
    infra: str | None = None,
    tag: str = "",
    source: str = "policy",
) -> Trajectory:
    turn = Turn(
        screenshot=b"\x89PNG" + tag.encode(),
        action_ids=[1, 2, 3],
        action_logps=[-0.1, -0.2, -0.3],
        action_text=f"Action: {tag}",
    )
    return Trajectory(
        task_id=task,
        instruction="do it",
        turns=[turn],
        score=score,
        infra_error=infra,
        source=source,
    )  # type: ignore[arg-type]


def test_only_valid_trajectories_scoring_above_the_threshold_are_stored():
    buf = ReplayBuffer(capacity=8, success_threshold=0.1)
    stored = buf.update(
        [
            traj(score=1.0),
            traj(score=0.1),
            traj(score=0.0),
            traj(score=1.0, infra="desktop died"),
            traj(score=0.5),
        ],
        step=0,
    )
    assert stored == 2 and buf.size("t") == 2


def test_injected_samples_are_not_stored_again():
    buf = ReplayBuffer()
    assert (
        buf.update([traj(score=1.0, source="replay"), traj(score=1.0, source="demo")], step=0) == 0
    )
    assert len(buf) == 0


def test_fifo_evicts_the_oldest_success_at_capacity():
    buf = ReplayBuffer(capacity=2)
    for i in range(3):
        buf.update([traj(score=1.0, tag=str(i))], step=i)
    assert [e.trajectory.turns[0].action_text for e in buf.entries("t")] == [
        "Action: 1",
        "Action: 2",
    ]
    assert [e.added_step for e in buf.entries("t")] == [1, 2]


def test_capacity_is_per_task():
    buf = ReplayBuffer(capacity=1)
    buf.update([traj("a", 1.0), traj("b", 1.0), traj("a", 1.0, tag="new")], step=0)
    assert buf.size("a") == 1 and buf.size("b") == 1 and buf.task_ids() == ["a", "b"]


def test_all_failure_means_low_spread_and_low_mean():
    assert group_scores_fail([0.0] * 8, fail_std=0.05, fail_mean=0.2)
    assert group_scores_fail([0.1] * 8, fail_std=0.05, fail_mean=0.2)
    assert not group_scores_fail([0.3] * 8, fail_std=0.05, fail_mean=0.2)  # uniform but not failing
    assert not group_scores_fail(
        [1.0] + [0.0] * 7, fail_std=0.05, fail_mean=0.2
    )  # one success already


def test_an_all_fail_group_gets_exactly_one_stored_success():
    buf = ReplayBuffer()
    buf.update([traj(score=1.0, tag="win")], step=2)
    groups, stats = buf.inject([[traj(), traj(), traj(), traj()]], step=7)
    assert [t.source for t in groups[0]] == ["replay", "policy", "policy", "policy"]
    assert groups[0][0].score == 1.0 and groups[0][0].turns[0].action_text == "Action: win"
    assert stats.injected == 1 and stats.all_fail_groups == 1 and stats.ages == (5,)


def test_groups_with_a_success_or_without_stored_successes_are_left_alone():
    buf = ReplayBuffer()
    buf.update([traj("a", 1.0)], step=0)
    mixed = [traj("a", 1.0), traj("a"), traj("a")]
    unknown = [traj("b"), traj("b"), traj("b")]
    groups, stats = buf.inject([mixed, unknown], step=1)
    assert groups == [mixed, unknown] and stats.injected == 0 and stats.all_fail_groups == 1


def test_injection_replaces_a_rollout_whose_desktop_failed_first():
    buf = ReplayBuffer()
    buf.update([traj(score=1.0)], step=0)
    group = [traj(), traj(infra="reset failed"), traj()]
    groups, _ = buf.inject([group], step=1)
    assert [t.source for t in groups[0]] == ["policy", "replay", "policy"]
    assert all(t.valid for t in groups[0])


def test_infra_errors_do_not_count_in_the_failure_test():
    buf = ReplayBuffer()
    buf.update([traj(score=1.0)], step=0)
    # The only valid score is a success: not an all-fail group, even if the rest crashed.
    groups, stats = buf.inject([[traj(score=1.0), traj(infra="x"), traj(infra="y")]], step=1)
    assert stats.injected == 0


def test_a_group_is_never_rescued_by_its_own_fresh_success():
    buf = ReplayBuffer()
    fresh = [traj(), traj(), traj()]
    groups, stats = buf.inject([fresh], step=0)  # ARPO order: inject first ...
    stored = buf.update(fresh + [traj(score=1.0)], step=0)  # ... then store this batch's successes
    assert stats.injected == 0 and stored == 1


def test_the_buffer_round_trips_through_a_file_with_its_random_state(tmp_path):
    buf = ReplayBuffer(capacity=3, success_threshold=0.2, fail_std=0.1, fail_mean=0.3, seed=7)
    buf.update([traj("a", 1.0, tag=str(i)) for i in range(3)] + [traj("b", 0.9, tag="b")], step=4)
    path = buf.save(tmp_path / "replay.zip")
    again = ReplayBuffer.load(path)
    assert (again.capacity, again.success_threshold, again.fail_std, again.fail_mean) == (
        3,
        0.2,
        0.1,
        0.3,
    )
    assert again.task_ids() == ["a", "b"] and len(again) == 4
    a0, b0 = buf.entries("a")[0], again.entries("a")[0]
    assert b0.trajectory.turns == a0.trajectory.turns and b0.added_step == 4
    # The same next draw: injection stays reproducible across a restart.
    pick = [buf.inject([[traj("a")] * 2], step=9)[0][0][0].turns[0].action_text for _ in range(5)]
    pick_again = [
        again.inject([[traj("a")] * 2], step=9)[0][0][0].turns[0].action_text for _ in range(5)
    ]
    assert pick == pick_again


def test_storage_is_compact_png_bytes_and_token_ids(tmp_path):
    buf = ReplayBuffer()
    shared = traj(score=1.0, tag="same")
    buf.update([shared, traj(score=1.0, tag="same")], step=0)
    import zipfile

    names = zipfile.ZipFile(buf.save(tmp_path / "r.zip")).namelist()
    assert names.count("manifest.json") == 1
    assert len([n for n in names if n.endswith(".png")]) == 1  # identical screenshots stored once
