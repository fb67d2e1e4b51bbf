#!/usr/bin/env bash
# The main job on the embedded default: ARPO teaches a tiny vision-language model a desktop skill
# from pixels and reward alone, on local sandboxed desktops: click the coloured button the
# instruction names, where the screenshot shows it (the pixel task family, docs/learning.md).
# Installs what it needs first, then
#   1. trains the base policy (models/curriculum-base: cloned on generic colours and words, never
#      on the family; DEMO_BASE=DIR trains another, e.g. one scripts/build-curriculum-base.sh made)
#      with ARPO on 32 training layouts of `click` (configs/demo.yaml: 200 steps of 8 episodes),
#      every turn sampled under the UI-TARS action grammar;
#   2. plays the base and the trained policy on the same 256 held-out instances, none of them a
#      training layout, and prints both successes with 95 % intervals.
# About 9 minutes on a quiet 2-core machine. Extra arguments go to arpo-train (e.g. --max_steps 60
# --seed 1 --output_dir runs/x). Output: runs/arpo-demo/ (success_curve.png, rollouts.jsonl, the
# model; heldout/ and heldout-base/ in OSWorld's result layout; heldout.json, both figures).
set -euo pipefail
cd "$(dirname "$0")/.."
config=packages/arpo_trainer/configs/demo.yaml
heldout="${DEMO_HELDOUT:-pixels:heldout:click:256}"
out=runs/arpo-demo
base="${DEMO_BASE:-models/curriculum-base}"
# the held-out episodes are played the way training played them: the config's turns, under the
# action grammar when the config (or --action_grammar) turns it on
grammar=false
grep -Eq '^action_grammar:[[:space:]]*true' "$config" && grammar=true
turns=$(sed -nE 's/^max_turns:[[:space:]]*([0-9]+).*/\1/p' "$config")
prev=""
for arg in "$@"; do
  case "$arg" in
    --output_dir=*) out="${arg#--output_dir=}" ;;
    --action_grammar=*) grammar="${arg#--action_grammar=}" ;;
    --max_turns=*) turns="${arg#--max_turns=}" ;;
    --model_name_or_path=*) base="${arg#--model_name_or_path=}" ;;
    *)
      [ "$prev" = "--output_dir" ] && out="$arg"
      [ "$prev" = "--action_grammar" ] && grammar="$arg"
      [ "$prev" = "--max_turns" ] && turns="$arg"
      [ "$prev" = "--model_name_or_path" ] && base="$arg"
      ;;
  esac
  prev="$arg"
done
if [ ! -f "$base/config.json" ]; then
  echo "no base policy at '$base' (no config.json): DEMO_BASE names a saved model directory" >&2
  exit 2
fi
source scripts/install.sh
# one torch thread: the desktops need the other core, and on a busy machine threads spin
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
grammar_flag=()
case "$grammar" in true|True|1|yes) grammar_flag=(--action-grammar) ;; esac
t0=$(date +%s)
uv run --frozen arpo-train --config "$config" --model_name_or_path "$base" "$@"
# both policies on the same held-out episodes (evaluation seed 1000: the same instances and
# sampling seeds), temperature 1 as in training, 640x360, openbox
play() {  # MODEL NAME DIR
  uv run --frozen arpo-eval run --agent hf --model "$1" --name "$2" --tasks "$heldout" \
    --num-envs 4 --max-steps "$turns" --trials 1 --screen 640x360 --history-images "$turns" \
    --max-tokens 24 --temperature 1.0 --protocol hard --provider-arg profile=openbox --seed 1000 \
    --out "$3" --fresh --no-progress "${grammar_flag[@]}" > "$3.log" 2>&1 \
    || { tail -n 20 "$3.log"; exit 1; }
}
play "$base" base "$out/heldout-base"
play "$out" arpo-demo "$out/heldout"
uv run --frozen python scripts/demo_report.py "$out" "$heldout" "$(( $(date +%s) - t0 ))"
