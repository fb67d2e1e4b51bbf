"""arpo-eval needs the trainer (torch, transformers, TRL) only for ``--agent hf``.

``arpo-eval run --agent noop`` on a real local desktop must not import them (checked with
``-X importtime``, which lists every module the process imported), and ``--agent hf`` without
them must say which extra to install.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from arpo_eval.agents import HF_EXTRA, AgentSpec, build_agent
from arpo_eval.layout import read_run
from osworld_gym.errors import MissingDependencyError

HEAVY = ("torch", "transformers", "trl", "arpo_trainer")


def imported_modules(stderr: str) -> set[str]:
    """Top-level module names from ``-X importtime`` output (``import time: ... | name``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.desktop
def test_arpo_eval_noop_on_a_real_desktop_imports_no_trainer_torch_or_transformers(tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("os/os-mkdir-001\n")
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "arpo_eval.cli",
            "run",
            "--agent",
            "noop",
            "--tasks",
            str(ids),
            "--provider",
            "local",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = imported_modules(proc.stderr)
    assert "gymnasium" in modules and "arpo_eval" in modules  # the listing is real
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    _, records = read_run(out)
    assert [(r.task_id, r.score, r.infra_error) for r in records] == [("os-mkdir-001", 0.0, None)]
    assert (
        out / "pyautogui" / "screenshot" / "noop" / "os" / "os-mkdir-001" / "result.txt"
    ).is_file()


@pytest.mark.parametrize("missing", ["torch", "arpo_trainer.agent"])
def test_the_hf_agent_without_the_trainer_names_the_extra(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # what an install without the extra sees
    with pytest.raises(MissingDependencyError, match=r"arpo-eval\[hf\]") as err:
        build_agent(AgentSpec("hf", model="tiny"))
    assert HF_EXTRA == "arpo-eval[hf]" and missing.split(".")[0] in str(err.value)
