"""One home for an episode's outcome files (``result.txt``, ``infra_error.txt``): the rules, and
that no other source file types the names out."""

from __future__ import annotations

import pytest
from osworld_gym.outcome import (
    INFRA_ERROR_FILE,
    RESULT_FILE,
    is_scored,
    read_infra_error,
    read_score,
    write_outcome,
)
from repo_paths import ROOT


def test_a_directory_never_says_both(tmp_path):
    write_outcome(tmp_path, infra_error="guest gone")
    assert not is_scored(tmp_path) and read_infra_error(tmp_path) == "guest gone"
    write_outcome(tmp_path, score=0.5)
    assert (tmp_path / RESULT_FILE).read_text() == "0.5\n"
    assert not (tmp_path / INFRA_ERROR_FILE).exists()
    assert (read_score(tmp_path), read_infra_error(tmp_path)) == (0.5, None)
    write_outcome(tmp_path, infra_error="again")
    assert not (tmp_path / RESULT_FILE).exists() and read_score(tmp_path) is None


def test_an_unparsable_score_is_zero_as_osworld_reads_it(tmp_path):
    (tmp_path / RESULT_FILE).write_text("not a number")
    assert is_scored(tmp_path) and read_score(tmp_path) == 0.0


def test_an_outcome_is_a_score_or_an_infra_error(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        write_outcome(tmp_path)
    with pytest.raises(ValueError, match="exactly one"):
        write_outcome(tmp_path, score=1.0, infra_error="x")


def test_only_the_outcome_module_names_the_files():
    homes = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "packages").rglob("*.py")
        if '"result.txt"' in p.read_text() or '"infra_error.txt"' in p.read_text()
    }
    assert homes == {"packages/osworld_gym/src/osworld_gym/outcome.py"}


CASES = [  # (score, infra_error, counts)
    (1.0, None, True),
    (0.0, None, True),  # a failure the agent caused is a score: it counts
    (None, None, False),  # unscored, unfinished
    (None, "desktop died", False),
    (1.0, "evaluator crashed", False),  # a score beside an infra error never counts
]


@pytest.mark.parametrize(("score", "infra", "expected"), CASES)
def test_every_package_decides_whether_an_episode_counts_by_the_one_rule(score, infra, expected):
    """The environment's episode loop, the trainer's trajectories and arpo-eval's records all
    answer from :func:`osworld_gym.outcome.counts` (they decided by three different rules)."""
    from arpo_eval.layout import EpisodeRecord
    from arpo_trainer.rollout import Trajectory
    from osworld_gym.episodes.loop import EpisodeResult
    from osworld_gym.outcome import counts

    assert counts(score, infra) is expected
    assert EpisodeResult("t", score=score, infra_error=infra).scored is expected
    assert EpisodeRecord("t", "os", score=score, infra_error=infra).scored is expected
    if score is not None:  # a trajectory always carries a score (0.0 until the judge's)
        assert Trajectory("t", "do it", score=score, infra_error=infra).valid is expected
