"""benchmarks/ablation/visits.py: a training run's success split by how often the episode's layout
had been trained on. A policy that only remembers layouts succeeds on repeat visits and not on
first ones; one that reads the screen and the instruction succeeds on both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from osworld_gym.tasks.pixels import family_layouts, task_id
from repo_paths import load_script

visits = load_script("benchmarks/ablation/visits.py")
FRAME = visits.sys.modules["click_spread"].FRAME  # the tiny model's frame at 640x360

N_TASKS, GROUPS, EPOCHS, MEMBERS = 16, 2, 3, 4


def _centre(lay) -> tuple[int, int]:
    b = next(b for b in lay.buttons if b.name == lay.targets[0])
    fx, fy = FRAME
    return (b.x + b.w // 2) * fx // 640, (b.y + b.h // 2) * fy // 360


def _run(tmp_path: Path, solves) -> Path:
    """Epochs of the 16 training layouts of `click`, two groups of four a step as the trainer
    draws them; ``solves(visit)`` says whether the policy clicks the target's centre then (else it
    clicks the canvas's empty top-left corner). A replayed success and an infra-failed episode are
    logged too, and must be left out."""
    lays = family_layouts("train", "click", N_TASKS)
    rows, step = [], 0
    for epoch in range(EPOCHS):
        order = lays[epoch:] + lays[:epoch]  # a different order each epoch
        for i in range(0, N_TASKS, GROUPS):
            for lay in order[i : i + GROUPS]:
                ok = solves(epoch + 1)
                x, y = _centre(lay) if ok else (1, 1)
                for _ in range(MEMBERS):
                    rows.append(
                        {
                            "task_id": task_id(lay),
                            "turns": [{"action": f"Action: click(start_box='({x},{y})')"}],
                            "score": float(ok),
                            "source": "policy",
                            "infra_error": None,
                            "global_step": step,
                        }
                    )
                rows.append({**rows[-1], "source": "replay", "score": 1.0})
                rows.append({**rows[-2], "infra_error": "the desktop died", "score": 0.0})
            step += 1
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_a_policy_that_remembers_layouts_fails_its_first_visits(tmp_path: Path) -> None:
    rows = visits.by_visit(_run(tmp_path, lambda visit: visit > 1), window=8)
    # 8 steps an epoch: window k holds exactly visit k+1, each row 16 layouts x 4 members
    assert [(r["steps"], r["visit"]) for r in rows] == [([0, 7], 1), ([8, 15], 2), ([16, 23], 3)]
    assert [r["episodes"] for r in rows] == [64, 64, 64]  # replayed and infra-failed left out
    first, *later = rows
    assert first["successes"] == 0 and first["p_value"] == 1.0
    for r in later:
        assert r["successes"] == 64
        assert r["instruction_blind_expected"] < 64 / 2  # 2-4 buttons: at most 1 in 2 blind
        assert r["p_value"] < 1e-10


def test_a_window_across_an_epoch_boundary_holds_two_visits(tmp_path: Path) -> None:
    rows = visits.by_visit(_run(tmp_path, lambda visit: True), window=12)
    assert [(r["steps"], r["visit"], r["episodes"]) for r in rows] == [
        ([0, 11], 1, 64),
        ([0, 11], 2, 32),
        ([12, 23], 2, 32),
        ([12, 23], 3, 64),
    ]
    assert all(r["successes"] == r["episodes"] for r in rows)


def test_bad_input_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no rollouts.jsonl"):
        visits.by_visit(tmp_path, window=10)
    (tmp_path / "rollouts.jsonl").write_text("")
    with pytest.raises(SystemExit, match="no episodes"):
        visits.by_visit(tmp_path, window=10)
    with pytest.raises(SystemExit, match="--window"):
        visits.by_visit(tmp_path, window=0)
