#!/usr/bin/env bash
# ARPO with UI-TARS-1.5-7B on one node of 8 x 80 GB GPUs (packages/arpo_trainer/configs/).
# Extra arguments are passed to arpo-train, e.g.
#   scripts/train_arpo_uitars_8gpu.sh --tasks /data/evaluation_examples/test_all.json
# Needs (docs/recipe.md):
#   uv sync --extra recipe      # vLLM, DeepSpeed, flash-attn and wandb (then `wandb login`)
#   the model in the Hugging Face cache (`hf download ByteDance-Seed/UI-TARS-1.5-7B`) or a local path
#   desktop nodes in a Ray cluster, each with Docker and our full image:
#     osworld-gym image build --apps full && ray start --address=HEAD:6379 \
#       --resources='{"osworld_desktop": N}'    (N per node: docs/recipe.md)
#   (or another `desktops` section: --desktops '{"source": "docker", "provider_kwargs": ...}').
# The dry run below checks all of it and names the command for whatever is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIGS=packages/arpo_trainer/configs
RECIPE="${RECIPE:-$CONFIGS/arpo_uitars_osworld.yaml}"
ACCELERATE_CONFIG="${ACCELERATE_CONFIG:-$CONFIGS/accelerate_zero3_8gpu.yaml}"

# The plan first: processes, memory per GPU, desktops, tasks. Stops here on any problem.
uv run --frozen arpo-train --config "$RECIPE" --accelerate_config "$ACCELERATE_CONFIG" --dry_run "$@"

exec uv run --frozen accelerate launch --config_file "$ACCELERATE_CONFIG" \
  -m arpo_trainer.cli --config "$RECIPE" "$@"
