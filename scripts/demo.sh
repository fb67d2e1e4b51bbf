#!/usr/bin/env bash
# The main job on the embedded default: ARPO trains a tiny vision-language model (built offline)
# on local sandboxed desktops, from reward alone (no oracle, no task text in its tokenizer).
# Installs what it needs first, then
#   1. builds the task-agnostic base policy (behaviour cloning on random valid UI-TARS actions),
#      runs/base-policy, unless it exists;
#   2. trains it with ARPO on the built-in tasks the base policy solves at least once.
# Extra arguments go to arpo-train (e.g. --max_steps 60 --seed 1). Output: runs/arpo-demo/
# (success_curve.png, rollouts.jsonl, checkpoints); the curve is also printed as text.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
# one torch thread: the desktops need the other core, and on a busy machine threads spin
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ ! -f runs/base-policy/config.json ]; then
    uv run --frozen python -m arpo_trainer.testing.base_policy --output runs/base-policy
fi
exec uv run --frozen arpo-train --config packages/arpo_trainer/configs/demo.yaml "$@"
