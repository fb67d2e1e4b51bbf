#!/usr/bin/env bash
# The main job on the embedded default: ARPO trains a tiny vision-language model (built
# offline) on local sandboxed desktops; the success rate of a built-in task rises from 0 to
# >=50 % within minutes on 2 CPU cores. Installs what it needs first. Extra arguments go to
# arpo-train (e.g. --max_steps 60). Output: runs/arpo-demo/ (success_curve.png, checkpoints).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
exec uv run --frozen arpo-train --config packages/arpo_trainer/configs/demo.yaml "$@"
