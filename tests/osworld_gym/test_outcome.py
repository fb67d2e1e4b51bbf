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
