#!/usr/bin/env bash
# Rebuild the demo's base policy (models/curriculum-base) from a random tiny model, on CPU, with
# nothing of the pixel family: behaviour cloning only, on generic screens in the base policy's own
# eight colours (teal, sky, pink, lime, periwinkle, brown, khaki, mint) and words ("Click the teal
# box."). The chain of docs/learning.md (sessions 16-18), each stage starting from the last:
#   1. random valid UI-TARS actions, 150 steps           (arpo_trainer.testing.base_policy)
#   2. aim: click any generic widget, 4,000 steps         (benchmarks/ablation/grounding/ground_from.py)
#   3. two colours in two places, order drawn, 4,500 steps: the places held for 500, then moved
#      a little more every step for 3,000, to anywhere    (named_probe.py --word-only --swap --jitter-ramp)
#   4. two colours at random places, 3,000 steps          (named_probe.py)
#   5. four colours, 3,000 steps; 6. all eight, 3,000 steps
# 43 minutes on 2 cores (2026-11-29, partly beside two training runs). Each stage writes its model
# and its probe's curve under OUT/stages/; OUT itself ends as the last stage's model. On this
# project's machine the rebuild gave the checked-in weights byte for byte (the sha256 digests of
# models/curriculum-base/README.md); another CPU's kernels may round differently.
#
#   bash scripts/build-curriculum-base.sh runs/curriculum-base
#   DEMO_BASE=runs/curriculum-base bash scripts/demo.sh
#
# CURRICULUM_STEPS=N runs every stage for N steps instead (a check of the chain's plumbing,
# not a base: tests/arpo_trainer/test_curriculum_base.py).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bash scripts/build-curriculum-base.sh OUT_DIR}"
if [ -e "$out" ]; then
  echo "$out exists: pick a new directory (nothing was changed)" >&2
  exit 2
fi
n="${CURRICULUM_STEPS:-}"
if [ -n "$n" ] && ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "CURRICULUM_STEPS must be a positive whole number, got '$n'" >&2
  exit 2
fi
steps() { echo "${n:-$1}"; }
# the probes' own evaluation (first and last step): 128 screens, 8 when only the plumbing runs
evals=128
[ -n "$n" ] && evals=8
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
s="$out/stages"
mkdir -p "$s"
py=(uv run --frozen python)
probe=("${py[@]}" benchmarks/ablation/grounding/named_probe.py --lr 1e-3 --seed 0 --eval_n "$evals")
"${py[@]}" -m arpo_trainer.testing.base_policy --output "$s/1-actions" --steps "$(steps 150)"
ground=$(steps 4000)
"${py[@]}" benchmarks/ablation/grounding/ground_from.py --base "$s/1-actions" \
  --output "$s/2-aim" --lr 1e-3 --steps "$ground" --save_every "$(( ground % 1000 ? ground : 1000 ))"
# a short stage keeps its ramp inside its steps (hold and ramp scale with it)
swap=$(steps 4500)
"${probe[@]}" --base "$s/2-aim/step-$ground" --palette teal,pink --word-only --swap \
  --steps "$swap" --eval_every "$swap" --jitter 110 --jitter-hold "$(( swap / 9 ))" \
  --jitter-ramp "$(( swap * 2 / 3 ))" --save "$s/3-two-places" --out "$s/3-two-places.json"
"${probe[@]}" --base "$s/3-two-places" --palette teal,pink --steps "$(steps 3000)" \
  --eval_every "$(steps 3000)" --save "$s/4-named2" --out "$s/4-named2.json"
"${probe[@]}" --base "$s/4-named2" --palette teal,pink,lime,brown --steps "$(steps 3000)" \
  --eval_every "$(steps 3000)" --save "$s/5-named4" --out "$s/5-named4.json"
"${probe[@]}" --base "$s/5-named4" --steps "$(steps 3000)" --eval_every "$(steps 3000)" \
  --save "$s/6-named8" --out "$s/6-named8.json"
cp "$s/6-named8"/* "$out/"
echo "curriculum base: $out (stages and probe curves under $s)"
