"""benchmarks/ablation/click_spread.py, the measure docs/learning.md uses to tell a policy that
reads the screen from one that clicks the same place whatever it shows: a policy that clicks each
target's centre hits its cell every time and beats the shuffled baseline; one that always clicks
the same point hits no more often than the shuffled baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from osworld_gym.tasks.pixels import family_layouts, task_id
from repo_paths import load_script

click_spread = load_script("benchmarks/ablation/click_spread.py")


def _log(tmp_path: Path, point_of, score=lambda lay: 0.0) -> Path:
    """A run directory whose rollout log holds one episode per training instance of `click`."""
    rows = []
    for step, lay in enumerate(family_layouts("train", "click", 64)):
        x, y = point_of(lay)
        rows.append(
            {
                "task_id": task_id(lay),
                "turns": [{"action": f"Action: click(start_box='({x},{y})')"}],
                "score": score(lay),
                "source": "policy",
                "infra_error": None,
                "global_step": step,
            }
        )
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _target_centre(lay) -> tuple[int, int]:
    b = next(b for b in lay.buttons if b.name == lay.targets[0])
    fx, fy = click_spread.FRAME
    return (b.x + b.w // 2) * fx // 640, (b.y + b.h // 2) * fy // 360


def test_a_policy_that_reads_the_screen_beats_the_shuffled_baseline(tmp_path: Path) -> None:
    s = click_spread.spread(_log(tmp_path, _target_centre, lambda lay: 1.0), last=64)
    assert s["first_clicks"] == 64 and s["points"] == 64
    assert s["target_cell"] == 1.0 and s["button_cell"] == 1.0
    assert s["target_cell_shuffled"] < 0.3
    # the app's rule replayed: every centre click solves its own layout, few solve another's
    assert s["successes"] == s["replayed_successes"] == s["replay_agrees"] == 64
    assert s["shuffled_success"] < 0.3


def test_a_click_beside_the_button_or_a_second_button_fails_the_replay() -> None:
    lay = family_layouts("train", "click", 1)[0]
    target = next(b for b in lay.buttons if b.name == lay.targets[0])
    other = next(b for b in lay.buttons if b.name != lay.targets[0])
    fx, fy = click_spread.FRAME

    def frame(b, dx: int = 0) -> tuple[int, int]:
        return (b.x + b.w // 2 + dx) * fx // 640, (b.y + b.h // 2) * fy // 360

    assert click_spread.replay_score([frame(target)], lay)
    assert click_spread.replay_score([frame(target), frame(target)], lay)  # pressed once
    assert not click_spread.replay_score([frame(target), frame(other)], lay)
    assert not click_spread.replay_score([frame(target, dx=target.w)], lay)


def test_a_screen_blind_policy_does_not(tmp_path: Path) -> None:
    s = click_spread.spread(_log(tmp_path, lambda lay: (10, 40)), last=64)
    assert s["grid"][1][0] == 64 and s["busiest_column"] == 0 and s["busiest_column_share"] == 1.0
    assert s["target_cell"] == s["target_cell_shuffled"] < 0.3
    assert s["shuffled_success"] == s["replayed_successes"] / 64  # any layout scores it the same


def test_only_the_last_steps_are_read(tmp_path: Path) -> None:
    assert click_spread.spread(_log(tmp_path, _target_centre), last=20)["episodes"] == 20


def test_an_evaluation_folder_is_read_with_its_scores(tmp_path: Path) -> None:
    # arpo-eval's layout: one folder per episode holding traj.jsonl and the outcome files; an
    # episode left unscored (infra error) counts as a failure, a point outside the model's frame
    # is no click (the action set refuses it)
    from osworld_gym.outcome import write_outcome

    lays = family_layouts("heldout", "click", 3)
    for k, lay in enumerate(lays):
        d = tmp_path / "uitars" / task_id(lay) / "0"
        d.mkdir(parents=True)
        x, y = _target_centre(lay) if k < 2 else (500, 10)
        (d / "traj.jsonl").write_text(
            json.dumps({"action": f"Action: click(start_box='({x},{y})')"}) + "\n"
        )
        if k == 0:
            write_outcome(d, score=1.0)
        elif k == 1:
            write_outcome(d, infra_error="the desktop died")
        else:
            write_outcome(d, score=0.0)
    s = click_spread.spread(tmp_path, last=20)
    assert s["episodes"] == s["click_episodes"] == 3
    assert s["successes"] == 1 and s["replayed_successes"] == 2 and s["replay_agrees"] == 2
    assert s["points"] == s["first_clicks"] == 2  # the out-of-frame point is no click


def _centre(b) -> tuple[int, int]:
    fx, fy = click_spread.FRAME
    return (b.x + b.w // 2) * fx // 640, (b.y + b.h // 2) * fy // 360


def _multi_log(tmp_path: Path, kind: str, order) -> Path:
    """One episode per training instance of ``kind``: left clicks at the centres of the buttons
    ``order(layout)`` names, scored by the app's rule."""
    rows = []
    for step, lay in enumerate(family_layouts("train", kind, 64)):
        names = order(lay)
        by_name = {b.name: b for b in lay.buttons}
        turns = [
            {"action": "Action: click(start_box='({},{})')".format(*_centre(by_name[n]))}
            for n in names
        ]
        rows.append(
            {
                "task_id": task_id(lay),
                "turns": turns,
                "score": float(list(names) == list(lay.targets)),
                "source": "policy",
                "infra_error": None,
                "global_step": step,
            }
        )
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_a_policy_that_reads_the_instruction_passes_the_instruction_test(tmp_path: Path) -> None:
    t = click_spread.spread(_multi_log(tmp_path, "click2", lambda lay: lay.targets), 64)
    t = t["instruction"]["click2"]
    assert t["episodes"] == t["successes"] == t["replayed_successes"] == 64
    assert t["pressed_exactly_k"] == 64
    # 3 or 4 buttons: 1 instruction in 6 or 12 matches any two presses
    assert 64 / 12 <= t["instruction_blind_expected"] <= 64 / 6
    assert t["p_value"] < 1e-30


def test_a_policy_that_reads_only_the_screen_does_not(tmp_path: Path) -> None:
    # it always presses the k leftmost buttons, left to right: it sees where they are, but not
    # which the instruction names
    def leftmost(lay):
        return [b.name for b in sorted(lay.buttons, key=lambda b: (b.x, b.y))][: len(lay.targets)]

    s = click_spread.spread(_multi_log(tmp_path, "click3", leftmost), 64)
    t = s["instruction"]["click3"]
    assert t["pressed_exactly_k"] == 64 and t["successes"] == t["replayed_successes"]
    # 4 buttons, 3 of them named in order: 1 instruction in 24 matches
    assert t["instruction_blind_expected"] == pytest.approx(64 / 24)
    assert abs(t["replayed_successes"] - t["instruction_blind_expected"]) < 4
    assert t["p_value"] > 0.05
    assert s["click_episodes"] == 0  # the `click`-only measures have nothing to read


def test_the_tail_probability_is_exact() -> None:
    assert click_spread.tail_at_least([0.5, 0.5], 1) == 0.75
    assert click_spread.tail_at_least([0.5, 0.5], 0) == 1.0
    assert click_spread.tail_at_least([0.1, 0.0], 2) == 0.0
