#!/usr/bin/env bash
# The main job on the embedded default: ARPO teaches a tiny vision-language model (built offline)
# a desktop skill from pixels and reward alone, on local sandboxed desktops: click the coloured
# buttons the instruction names, where the screenshot shows them (the pixel task family,
# docs/learning.md). Installs what it needs first, then
#   1. builds the task-agnostic base policy (behaviour cloning on random valid UI-TARS actions,
#      half of them clicks at random points), runs/base-pointer, unless it exists;
#   2. trains it with ARPO on the family's training instances (configs/demo.yaml), every turn
#      sampled under the UI-TARS action grammar (action_grammar: true);
#   3. plays held-out instances it never trained on and prints its success there.
# Extra arguments go to arpo-train (e.g. --max_steps 60 --seed 1 --output_dir runs/x). Output:
# runs/arpo-demo/ (success_curve.png, rollouts.jsonl, the model, heldout/summary.json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
# one torch thread: the desktops need the other core, and on a busy machine threads spin
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
config=packages/arpo_trainer/configs/demo.yaml
heldout="${DEMO_HELDOUT:-pixels:heldout:click,click2:32}"
out=runs/arpo-demo
# the held-out episodes are sampled the way training sampled them: under the action grammar when
# the config (or --action_grammar) turns it on
grammar=false
grep -Eq '^action_grammar:[[:space:]]*true' "$config" && grammar=true
prev=""
for arg in "$@"; do
  case "$arg" in
    --output_dir=*) out="${arg#--output_dir=}" ;;
    --action_grammar=*) grammar="${arg#--action_grammar=}" ;;
    *)
      [ "$prev" = "--output_dir" ] && out="$arg"
      [ "$prev" = "--action_grammar" ] && grammar="$arg"
      ;;
  esac
  prev="$arg"
done
grammar_flag=()
case "$grammar" in true|True|1|yes) grammar_flag=(--action-grammar) ;; esac
t0=$(date +%s)
if [ ! -f runs/base-pointer/config.json ]; then
  uv run --frozen python -m arpo_trainer.testing.base_policy --mix pointer --output runs/base-pointer
fi
uv run --frozen arpo-train --config "$config" "$@"
# the held-out instances, played as in training (3 turns, temperature 1, 640x360, openbox)
uv run --frozen arpo-eval run --agent hf --model "$out" --name arpo-demo --tasks "$heldout" \
  --num-envs 4 --max-steps 3 --trials 1 --screen 640x360 --history-images 3 --max-tokens 24 \
  --temperature 1.0 --protocol hard --provider-arg profile=openbox --seed 1000 \
  --out "$out/heldout" --fresh --no-progress "${grammar_flag[@]}" > "$out/heldout.log" 2>&1 \
  || { tail -n 20 "$out/heldout.log"; exit 1; }
uv run --frozen python - "$out/heldout/summary.json" "$heldout" "$(( $(date +%s) - t0 ))" <<'EOF'
import json, sys
from collections import defaultdict
summary, spec, seconds = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
kinds = defaultdict(list)
for t in summary["task_results"]:
    kinds[t["task_id"].split("-")[1]] += [s > 0.5 for s in t["scores"] if s is not None]
every = [s for v in kinds.values() for s in v]
print(f"held-out success ({spec}, never trained on): {sum(every)}/{len(every)} = "
      f"{sum(every) / max(1, len(every)):.3f}; "
      + ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in sorted(kinds.items()))
      + f"  ({seconds} s for the whole demo)")
EOF
