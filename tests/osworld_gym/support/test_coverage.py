"""``osworld-gym tasks coverage``: per domain, tasks, supported here, and why not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from osworld_examples import OFFICIAL, PRESENT, SKIP_REASON
from osworld_gym.errors import TaskError
from osworld_gym.support.coverage import coverage, official_tasks, reason_kind


def write_layout(root: Path) -> Path:
    tasks = {
        "os": [
            {"id": "ok-1", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}},
            {
                "id": "code-1",
                "instruction": "x",
                "related_apps": ["vscode"],
                "config": [{"type": "launch", "parameters": {"command": ["code"]}}],
                "evaluator": {"func": "infeasible"},
            },
        ],
        "chrome": [
            {
                "id": "web-1",
                "instruction": "x",
                "proxy": True,
                "config": [],
                "evaluator": {"func": "infeasible"},
            }
        ],
    }
    for domain, items in tasks.items():
        (root / "examples" / domain).mkdir(parents=True)
        for t in items:
            (root / "examples" / domain / f"{t['id']}.json").write_text(json.dumps(t))
    (root / "test_all.json").write_text(
        json.dumps({d: [t["id"] for t in v] for d, v in tasks.items()})
    )
    return root


def test_reasons_group_by_kind():
    assert reason_kind("unknown metric: a, b") == ("unknown metric", "a, b")
    assert reason_kind("needs VS Code (code command)") == ("needs VS Code", "code command")
    assert reason_kind("needs apps not installed: gimp (apt-get install gimp)") == (
        "needs apps not installed",
        "gimp (apt-get install gimp)",
    )


def test_coverage_counts_per_domain_and_says_why_not(tmp_path):
    cov = coverage(write_layout(tmp_path))
    assert cov.totals() == (3, 1)
    assert cov.totals("os") == (2, 1)
    assert cov.blockers("chrome") == {"needs a live website": ["proxy: true"]}
    assert cov.supported_ids() == {"os": ["ok-1"], "chrome": []}
    text = cov.format()
    assert "total" in text and "needs VS Code" in text
    assert "| **all** | **3** | **1** |" in cov.markdown()


def test_the_command_prints_json_and_writes_a_meta_file_of_what_runs(tmp_path):
    root = write_layout(tmp_path / "ex")
    meta = tmp_path / "supported.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "osworld_gym.cli",
            "tasks",
            "coverage",
            str(root),
            "--json",
            "--write-meta",
            str(meta),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["total"] == {"tasks": 3, "supported": 1}
    assert data["domains"]["os"]["unsupported"]["code-1"][0].startswith("needs VS Code")
    assert json.loads(meta.read_text()) == {"os": ["ok-1"], "chrome": []}


def test_a_folder_not_in_osworlds_layout_is_a_clear_error(tmp_path):
    with pytest.raises(TaskError, match="not an OSWorld evaluation_examples folder"):
        official_tasks(tmp_path)


@pytest.mark.skipif(not PRESENT, reason=SKIP_REASON)
def test_official_set_every_task_is_classified_with_an_actionable_reason():
    cov = coverage(OFFICIAL)
    total, supported = cov.totals()
    assert total == 369
    assert supported >= 140  # 132 before the exact classifier, python and gimp/thunderbird
    for rows in cov.domains.values():
        for task_id, s in rows:
            assert s.supported or (s.reason and s.reasons[0] == s.reason), task_id
    # what needs things no offline machine has is named as such
    kinds = cov.blockers(every=True)
    assert len(kinds["needs VS Code"]) >= 31
    assert "needs a Google account" in kinds and "needs a live website" in kinds
