#!/usr/bin/env bash
# A larger held-out draw for the 256-instance study: 256 held-out `click` instances (the 64 of
# ablation.md among them), one episode each, for the base policy and both final policies, with
# the settings scripts/ablation.py uses (evaluation seed 1000, under the grammar).
#   bash benchmarks/ablation/pixels-grammar-256/eval256.sh [NAME ...]   (default: all five)
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=benchmarks/ablation/pixels-grammar-256
names=("$@")
[ $# -gt 0 ] || names=(base arpo-s0 grpo-s0 arpo-s1 grpo-s1)
for name in "${names[@]}"; do
  model=$O/$name; [ "$name" = base ] && model=runs/base-pointer
  OMP_NUM_THREADS=1 nice -n 10 uv run --frozen arpo-eval run --agent hf --model "$model" --name "$name" \
    --tasks pixels:heldout:click:256 --provider local --num-envs 4 --max-steps 3 --trials 1 \
    --screen 640x360 --history-images 3 --max-tokens 24 --temperature 1.0 --top-p 1.0 --seed 1000 \
    --out "$O/eval256/$name" --protocol hard --fresh --no-progress --action-grammar \
    --provider-arg profile=openbox > "$O/eval256/$name.log" 2>&1
done
