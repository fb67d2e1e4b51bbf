"""``accelerate launch`` of 2 CPU processes (gloo) for the trainer's multi-process tests, with a
hang turned into a test failure and the process tree stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tcp_guest import free_port


def launch_two(target: list[str], *, cwd: Path, timeout_s: float, what: str) -> str:
    """Run ``accelerate launch ... <target>`` with 2 processes; its stdout. ``target`` is a script
    and its arguments, or ``["-m", module, ...]``. Fails the test (with the launcher's stderr) on a
    non-zero exit or when the run outlives ``timeout_s``."""
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()),
        *target,
    ]  # fmt: skip
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # torchrun puts each rank in its own session and stops them on SIGTERM; their desktops die
        # with them (bubblewrap --die-with-parent)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=60)
        pytest.fail(f"2-process {what} hung for {timeout_s}s:\n{stderr[-4000:]}")
    assert proc.returncode == 0, stderr[-6000:]
    return stdout
