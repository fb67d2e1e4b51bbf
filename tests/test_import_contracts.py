"""The floors hold: each import-linter contract of the root ``pyproject.toml`` is kept.

The same check as ``uv run lint-imports``, one contract per test so a broken floor names itself.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contract_ids() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [c["id"] for c in config["tool"]["importlinter"]["contracts"]]


def lint(contract: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--contract", contract, "--no-cache"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("contract", contract_ids())
def test_import_contract_is_kept(contract):
    result = lint(contract)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
