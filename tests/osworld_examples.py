"""Where OSWorld's official task JSON is: ``$OSWORLD_EXAMPLES``, else
``../shared/osworld/evaluation_examples`` from the repository root (from the main checkout's
root when this is a git worktree). Tests that need it skip with :data:`SKIP_REASON` when absent.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_RELATIVE = Path("..") / "shared" / "osworld" / "evaluation_examples"


def _main_checkout() -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    common = Path(out.stdout.strip())
    return (ROOT / common).resolve().parent if out.stdout.strip() else None


def official_examples() -> Path:
    if env := os.environ.get("OSWORLD_EXAMPLES"):
        return Path(env)
    for base in (ROOT, _main_checkout()):
        if base is not None and (base / _RELATIVE / "test_all.json").is_file():
            return (base / _RELATIVE).resolve()
    return (ROOT / _RELATIVE).resolve()


OFFICIAL = official_examples()
SKIP_REASON = (
    f"OSWorld's task JSON is not at {OFFICIAL} (set OSWORLD_EXAMPLES to an "
    "evaluation_examples folder with test_all.json)"
)
PRESENT = (OFFICIAL / "test_all.json").is_file()
