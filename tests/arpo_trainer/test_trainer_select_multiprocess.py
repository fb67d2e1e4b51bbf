"""``arpo-train select-tasks`` at scale: ``accelerate launch`` over 2 processes (gloo on CPU), each
playing its share of the attempts on its own real local desktops with the trainer's generation
path (the tiny model, transformers ``generate``; vLLM's path is the recipe rehearsal's).

5 attempts of one task over 2 processes of 2 desktops: process 0 plays attempts 0, 2, 4 (two
batches), process 1 attempts 1 and 3 (one batch), then joins process 0's second batch turn by
turn. Every turn is an all-reduce across the processes, so a process that stopped answering would
hang the run (the subprocess timeout turns that into a failure).
"""

from __future__ import annotations

import json

import pytest
from accelerate_launch import launch_two
from repo_paths import ROOT

LAUNCH_TIMEOUT_S = 420


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)
def test_two_processes_split_the_attempts_on_their_own_desktops_and_merge_the_counts(tmp_path):
    out = tmp_path / "selected.json"
    args = [
        "-m", "arpo_trainer.cli", "select-tasks",
        "--output_dir", str(tmp_path / "run"), "--model_name_or_path", "tiny",
        "--provider", "local", "--vector_env", "async", "--settle", "false",
        "--task_ids", "os-infeasible-001", "--k", "5",
        "--per_device_train_batch_size", "2", "--num_generations", "2",
        "--steps_per_generation", "1", "--gradient_accumulation_steps", "1",
        "--max_turns", "2", "--max_turn_tokens", "6",
        "--screen_width", "640", "--screen_height", "360",
        "--use_cpu", "true", "--bf16", "false", "--report_to", "none",
        "--gradient_checkpointing", "false", "--selection_output", str(out),
    ]  # fmt: skip
    stdout = launch_two(args, cwd=ROOT, timeout_s=LAUNCH_TIMEOUT_S, what="select-tasks")

    doc = json.loads(out.read_text())
    assert doc["k"] == 5 and doc["processes"] == 2 and doc["desktops_per_process"] == 2
    assert doc["generation"] == "transformers"
    [stats] = json.loads(out.with_name("selected_stats.json").read_text())
    assert stats["task_id"] == "os-infeasible-001"
    # every attempt scored once, by the process it was dealt to (a desktop failure is retried,
    # and then counted as an infra error, never as an attempt)
    assert stats["attempts"] == 5, stats
    assert stats["by_rank"] == {"0": 3, "1": 2}, stats
    assert "| os-infeasible-001 | os | yes |" in out.with_suffix(".md").read_text()
    assert "on 2 process(es) x 2 desktops" in stdout
