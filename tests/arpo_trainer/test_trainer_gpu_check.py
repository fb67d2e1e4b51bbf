"""``scripts/gpu-check.sh``'s CPU version: the code path it runs on a GPU (a random Qwen2.5-VL of
the 7B's layout, one ``generate`` turn after the longest context, two updates through the
trainer's loss), one narrow language layer, run as CI runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_runs_on_cpu_and_matches_its_plan(tmp_path):
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts/gpu-check.sh"),
            "--device",
            "cpu",
            "--tiny",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "gpu-check: done" in proc.stdout
    for row in ("model states", "activations of one update", "update tokens/s",
                "rollout turn tokens/s"):  # fmt: skip
        assert row in proc.stdout
    (m,) = json.loads(out.read_text())
    assert m["depth"] == 1 and not m["errors"]
    assert m["update_peak_bytes"] > m["states_bytes"] > 0
    assert m["rollout_new_tokens"] == 16 and m["rollout_seconds"] > 0
    assert m["host_batch_bytes"] == m["patches"] * 588 + 2 * 24
    # the plan's row next to the measured one (the printed table holds both)
    states = next(line for line in proc.stdout.splitlines() if "model states" in line).split()
    assert states[-2:] == states[-4:-2]  # plan and measured states agree to the printed digit


def test_without_a_gpu_the_gpu_version_says_so():
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu-check.sh"), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert proc.returncode == 2
    assert "no CUDA device here" in proc.stdout
