"""The ``>>>`` examples in the benchmark scripts (``benchmarks/``, ``scripts/``) run and hold.

The scripts are not a package, so the trainer's doctest sweep does not reach them; the
statistics and naming they print tables with are checked here.
"""

from __future__ import annotations

import doctest

import pytest
from repo_paths import ROOT, load_script

SCRIPTS = sorted(
    p
    for p in [*(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    if ">>>" in p.read_text(encoding="utf-8")
)


def test_the_sweep_finds_the_scripts_with_examples():
    names = {p.relative_to(ROOT).as_posix() for p in SCRIPTS}
    assert {
        "benchmarks/async/learning.py",
        "benchmarks/async/end_to_end.py",
        "benchmarks/async/final_policy.py",
        "scripts/ablation.py",
        "scripts/demo_report.py",
    } <= names


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_examples(path):
    module = load_script(path.relative_to(ROOT).as_posix())
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"no example ran in {path}"
    assert result.failed == 0, f"{result.failed} example(s) failed in {path}"
