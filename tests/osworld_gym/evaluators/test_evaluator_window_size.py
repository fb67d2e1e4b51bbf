"""The vm_window_size getter on a real local desktop: a window's client size by WM_CLASS."""

from __future__ import annotations

import shutil
import time

import pytest
from osworld_gym.evaluators import EvalContext, getter


@pytest.mark.desktop
@pytest.mark.skipif(shutil.which("xterm") is None, reason="xterm is not installed")
def test_vm_window_size_finds_a_window_by_class_and_none_for_an_absent_one(local_env, tmp_path):
    task = {
        "id": "window-size",
        "instruction": "x",
        "config": [{"type": "launch", "parameters": {"command": ["xterm", "-geometry", "40x10"]}}],
        "evaluator": {"func": "infeasible"},
    }
    local_env.reset(options={"task": task})
    client = local_env.unwrapped.provider.start()
    ctx = EvalContext(client=client, cache_dir=tmp_path, task_id="window-size")
    get = getter("vm_window_size")
    deadline = time.monotonic() + 30
    while (size := get(ctx, {"app_class_name": "XTerm"})) is None:
        assert time.monotonic() < deadline, "xterm's window never appeared"
        time.sleep(0.5)
    width, height = client.screen_size()
    assert 0 < size["width"] < width and 0 < size["height"] < height  # 40x10 cells, not full
    assert get(ctx, {"app_class_name": "xterm"}) == size  # the class matches case-insensitively
    assert get(ctx, {"app_class_name": "no-such-app"}) is None
