#!/usr/bin/env bash
# The code-quality guards CI runs before the tests: lint, formatting, types at the seams, the
# import floors, and the documentation site's strict build (links and anchors). Each runs even
# when an earlier one failed, so one run reports them all.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
run() {
  echo "lint.sh: $*"
  "$@" || { echo "lint.sh: FAILED: $*" >&2; rc=1; }
}
run uv run --frozen ruff check .
run uv run --frozen ruff format --check .
run uv run --frozen basedpyright
run uv run --frozen lint-imports
run bash scripts/docs.sh
exit "$rc"
