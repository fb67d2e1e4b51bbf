#!/usr/bin/env bash
# One GPU, at most 10 minutes: one rollout turn and one update of a randomly initialized model of
# UI-TARS-1.5-7B's shape (Qwen2.5-VL-7B's widths, vocabulary and full vision tower; 2 and 4 of its
# 28 language layers, scaled to 28 by the measured per-layer slope) at the recipe's sequence
# lengths (15 screenshots of 1092x1932, 15 turns: ~45.8k tokens), printing peak memory and tokens
# per second next to the plan's figures (arpo_trainer.memory). No weights, no hub access.
# docs/recipe-memory.md says what each figure means and why the check cannot hold the whole 7B
# model on one GPU.
#
#   bash scripts/gpu-check.sh                      # on a GPU machine (uv sync --frozen)
#   bash scripts/gpu-check.sh --json gpu-check.json
#   bash scripts/gpu-check.sh --device cpu --tiny  # the CPU smoke version CI runs (~1 min)
#
# Needs the project's environment (uv sync --frozen; add --extra gpu for flash-attn, which the
# check uses when it is installed: the recipe's attention). A GPU with 80 GB holds depth 4 at
# ~55 GB (the plan); exit status 1 if a phase failed, 2 if no GPU was found.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/uv-venv/bin:$PATH" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout 600 uv run --frozen python -m arpo_trainer.gpu_check "$@"
