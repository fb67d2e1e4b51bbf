"""The README's notebook example runs as written, on a real desktop."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_block(heading: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.desktop
def test_the_notebook_example_solves_its_task():
    code = readme_block("## In a notebook")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "(1080, 1920, 3)" in lines[0]
    assert lines[-1].startswith("1.0 None {"), lines[-1]


def test_the_two_readme_commands_exist_and_ci_runs_the_test_one():
    text = README.read_text()
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci
    for script in ("demo.sh", "test.sh", "install.sh"):
        assert (README.parent / "scripts" / script).is_file()
