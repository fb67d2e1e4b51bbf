"""The malformed-file fuzzer over every metric spec of the built-in and official tasks (CI sample).

:mod:`fuzz_evaluators` evaluates each distinct metric spec with malformed variants of what the
agent leaves (:mod:`malformed`): truncations at every zip part boundary, bombs, deep nesting,
wrong encodings, encrypted parts, 8-byte files... Nothing may escape ``evaluate`` as anything but
a score (the judge's inputs are well-formed here, so an ``EvaluatorError`` is a finding too --
unless the judge found a stand-in gold file unusable for its metric, which is the stand-in's
limit and counted apart), and
no case may use more than the harness's CPU or memory budget (CPU time and ``VmHWM``: a loaded
machine cannot fail it).

CI runs :data:`SAMPLE` kinds per spec, chosen by a seed that changes daily
(``OSWORLD_FUZZ_SEED`` replays one); every kind of every spec is a run by hand::

    uv run --frozen python tests/fuzz_evaluators.py --full
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SAMPLE = 2
HARNESS = Path(__file__).resolve().parents[2] / "fuzz_evaluators.py"


def test_no_malformed_agent_file_escapes_evaluate_or_its_budget(tmp_path, capsys):
    seed = os.environ.get("OSWORLD_FUZZ_SEED") or datetime.date.today().isoformat()
    out = tmp_path / "outcomes.json"
    res = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(HARNESS),
            "--sample",
            str(SAMPLE),
            "--seed",
            seed,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    with capsys.disabled():
        print(f"\nfuzz seed {seed} (replay: OSWORLD_FUZZ_SEED={seed})\n{res.stdout[:600]}")
    assert out.exists(), res.stderr[-3000:]
    outcomes = json.loads(out.read_text())
    specs = {o["spec"] for o in outcomes}
    assert len(specs) >= 150, len(specs)  # the built-in and official tasks' distinct specs
    bad = [o for o in outcomes if o["verdict"] not in ("score", "standin_gold")]
    assert not bad, "\n".join(
        f"{o['verdict']}: {json.loads(o['spec'])[0]} / {o['kind']}: {o['error']}" for o in bad
    )
    assert res.returncode == 0, res.stdout[-3000:]
