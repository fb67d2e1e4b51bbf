"""``arpo-train`` itself, sync against async rollouts, side by side in one run (issue 28).

``bench_async_rollout.py`` measures the rollout loop with a simulated learner; this runs the whole
trainer: ``arpo-train --config benchmarks/async/learning.yaml`` (the learning-curve setting: the
tiny model cloned on random valid actions, four infeasible built-in tasks on local desktops, one
to three turns an episode, ARPO replay), with

* ``--gen-latency-s``: ``simulated_generation_latency_s``, the stand-in for a large model's
  per-turn time on a GPU. **Simulated**, and printed as such. ``sync`` pays it once per
  lock-step turn of the batch; ``async`` once per batch of its generator, one batch after the
  other (one model copy); ``async-concurrent`` (``simulated_generation_concurrent``) once per
  request, concurrently, as a continuous-batching vLLM server with a request in flight per
  desktop would (the trainer's GPU setting);
* ``--episodes-per-step`` and ``--async-desktops``: the geometry (sync plays one desktop per
  episode of a step, in lock step; async plays them on ``--async-desktops`` desktops);
* a real learner step of the tiny model on the CPU, plus, with ``--learn-s-per-turn``,
  ``simulated_learner_latency_per_turn_s``: seconds per turn of the step's trajectories, slept
  after each update on the learner's thread (the stand-in for a large model's update; docs/async.md
  derives 0.89 s of one GPU per turn for a 7B update at the plan's speed, so 0.89 / n is n GPUs
  for the step). **Simulated** too, and printed as such.

Rounds (``--rounds``) run the modes (``--modes``) one after the other, in the given order, then
reversed, and so on (ABBA), each a fresh ``arpo-train`` process, so that load from elsewhere falls
on all alike. From each run's per-step log (``trainer_state.json``):

* **episodes per hour**, steady: the episodes of steps ``k0+1 .. N-1`` over the wall time between
  step ``k0``'s and step ``N-1``'s rollouts (``time/minutes``), so model loading and desktop
  starts are left out (``--warmup-steps`` = ``k0``); whole run: every episode over the process's
  wall time, start-up included;
* **learner waiting**: the share of that window the learner spent waiting for rollouts
  (``rollout/seconds``: the whole rollout in sync mode, the wait for complete groups in async);
* **desktops busy**: async: desktop-seconds inside a reset, an action, its settle or scoring,
  over desktops x wall (the loop's timeline); sync: the share of the window spent in lock-step
  desktop calls (an upper bound on its utilisation: each call lasts as long as its slowest
  desktop).

    uv run --frozen python benchmarks/async/end_to_end.py --base runs/base-policy \\
        --gen-latency-s 1.0 --episodes-per-step 16 --async-desktops 8 --steps 20 --rounds 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}


def _learning():
    spec = importlib.util.spec_from_file_location("learning", HERE / "learning.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_one(mode: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One ``arpo-train`` run; its per-step log and wall time."""
    run_dir = args.out / name
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    cmd = [
        "uv", "run", "--frozen", "arpo-train",
        "--config", str(args.config),
        "--model_name_or_path", args.base,
        "--output_dir", str(run_dir),
        "--rollout_mode", mode.removesuffix("-concurrent"),
        "--max_staleness", str(args.max_staleness),
        "--seed", str(args.seed),
        "--max_steps", str(args.steps),
        "--per_device_train_batch_size", str(args.episodes_per_step),
        "--simulated_generation_latency_s", str(args.gen_latency_s),
        "--simulated_learner_latency_per_turn_s", str(args.learn_s_per_turn),
        "--save_strategy", "steps", "--save_steps", str(args.steps), "--save_total_limit", "1",
        "--report_to", "none",
    ]  # fmt: skip
    if args.max_turns:
        cmd += ["--max_turns", str(args.max_turns)]
    if mode != "sync":
        cmd += ["--async_desktops", str(args.async_desktops)]
    if mode == "async-concurrent":
        cmd += ["--simulated_generation_concurrent", "true"]
    print(f"{name}: {' '.join(cmd)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(args.out / f"{name}.log", "w") as fh:
        subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=ENV)
    wall = time.monotonic() - t0
    steps = [h for h in _learning().logged_steps(run_dir) if "time/minutes" in h]
    if len(steps) != args.steps:
        raise SystemExit(f"{name}: {len(steps)} logged steps, not {args.steps}")
    print(f"{name}: {wall:.0f} s", flush=True)
    return {"mode": mode, "wall_s": wall, "steps": steps}


def figures(run: dict[str, Any], episodes_per_step: int, desktops: int, k0: int) -> dict:
    """Steady and whole-run figures of one run (see the module docstring).

    Four steps of 16 episodes on 8 async desktops, their rollouts logged half a minute apart;
    with ``k0 = 1`` the steady window runs from the second step's rollout to the fourth's: 60 s
    in which the learner took two steps and 32 episodes came in:

    >>> logged = [{"time/minutes": m, "rollout/seconds": 3.0, "rollout/env_seconds": 120.0,
    ...            "episode/turns_mean": 2.0} for m in (0.5, 1.0, 1.5, 2.0)]
    >>> f = figures({"mode": "async", "wall_s": 100.0, "steps": logged}, 16, 8, 1)
    >>> round(f["episodes_per_hour"]), round(f["whole_episodes_per_hour"])
    (1920, 2304)
    >>> round(f["learner_waiting"], 2), round(f["desktops_busy"], 2)
    (0.1, 0.5)
    """
    steps = run["steps"]
    window = steps[k0 + 1 :]
    wall = (steps[-1]["time/minutes"] - steps[k0]["time/minutes"]) * 60
    episodes = len(window) * episodes_per_step
    return {
        "episodes_per_hour": episodes / wall * 3600,
        "whole_episodes_per_hour": len(steps) * episodes_per_step / run["wall_s"] * 3600,
        "learner_waiting": sum(s["rollout/seconds"] for s in window) / wall,
        # async: desktop-seconds; sync: wall seconds of lock-step desktop calls (all desktops)
        "desktops_busy": sum(s["rollout/env_seconds"] for s in window)
        / ((desktops if run["mode"] != "sync" else 1) * wall),
        "turns_mean": statistics.fmean(s["episode/turns_mean"] for s in steps),
        "window_s": wall,
        "wall_s": run["wall_s"],
    }


def table(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    desks = {m: args.async_desktops for m in args.modes} | {"sync": args.episodes_per_step}
    rows = {r["name"]: figures(r, args.episodes_per_step, desks[r["mode"]], args.warmup_steps)
            for r in runs}  # fmt: skip
    turns = f" of at most {args.max_turns} turns" if args.max_turns else ""
    learner = "real (tiny model, CPU)" + (
        f" **plus a simulated {args.learn_s_per_turn:g} s per turn trained on**"
        if args.learn_s_per_turn
        else ""
    )
    head = (
        f"arpo-train end to end, {args.steps} steps of {args.episodes_per_step} episodes{turns}, "
        f"**simulated generation latency {args.gen_latency_s:g} s** (sync: per lock-step turn; "
        f"async: per batch, one at a time; async-concurrent: per request, concurrently), learner "
        f"{learner}; sync on {args.episodes_per_step} desktops in lock step, async "
        f"on {args.async_desktops} (max_staleness {args.max_staleness}); steady = from step "
        f"{args.warmup_steps + 1}'s rollout to step {args.steps}'s (steps counted from 1). "
        "Desktops busy: async, measured desktop-seconds; sync, the share of time in lock-step "
        "desktop calls (an upper bound)\n\n"
        "| run | desktops | episodes/h, steady | episodes/h, whole run | learner waiting | "
        "desktops busy | turns/episode | wall s |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in runs:
        f = rows[r["name"]]
        lines.append(
            f"| {r['name']} | {desks[r['mode']]} | {f['episodes_per_hour']:.0f} | "
            f"{f['whole_episodes_per_hour']:.0f} | {f['learner_waiting']:.0%} | "
            f"{f['desktops_busy']:.0%} | {f['turns_mean']:.2f} | {f['wall_s']:.0f} |"
        )
    steady = args.steps - 1 - args.warmup_steps
    pooled = {}
    for mode in args.modes:
        mine = [rows[r["name"]] for r in runs if r["mode"] == mode]
        pooled[mode] = len(mine) * steady * args.episodes_per_step / sum(
            f["window_s"] for f in mine
        ) * 3600  # fmt: skip
    if "sync" in args.modes:
        syncs = [r for r in runs if r["mode"] == "sync"]
        for mode in [m for m in args.modes if m != "sync"]:
            ratios = [
                rows[a["name"]]["episodes_per_hour"] / rows[s["name"]]["episodes_per_hour"]
                for s, a in zip(syncs, [r for r in runs if r["mode"] == mode], strict=True)
            ]
            by_round = ", ".join(f"{x:.2f}x" for x in ratios)
            lines.append(
                f"\n{mode} / sync, steady episodes per hour: by round {by_round}; pooled "
                f"**{pooled[mode] / pooled['sync']:.2f}x** ({pooled[mode]:.0f} against "
                f"{pooled['sync']:.0f})"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--config", type=Path, default=HERE / "learning.yaml")
    p.add_argument("--base", default="runs/base-policy", help="base policy checkpoint")
    p.add_argument("--gen-latency-s", type=float, default=1.0)
    p.add_argument(
        "--learn-s-per-turn",
        type=float,
        default=0.0,
        help="simulated learner seconds per turn trained on, after each real update (0: off)",
    )
    p.add_argument("--episodes-per-step", type=int, default=16)
    p.add_argument("--async-desktops", type=int, default=8)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument(
        "--max-turns",
        type=int,
        default=0,
        help="turns an episode may take (0: the config's 3); the base policy ends most episodes "
        "earlier, unevenly",
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--modes",
        nargs="+",
        default=["sync", "async", "async-concurrent"],
        choices=["sync", "async", "async-concurrent"],
    )
    p.add_argument("--out", type=Path, default=ROOT / "runs/async-end-to-end")
    args = p.parse_args()
    if args.max_turns < 0:
        p.error(f"--max-turns must be >= 0, got {args.max_turns}")
    if args.gen_latency_s == 0 and "async-concurrent" in args.modes:
        p.error("async-concurrent pays the latency per request: it needs --gen-latency-s > 0")
    if min(args.gen_latency_s, args.learn_s_per_turn) < 0:
        p.error("need --gen-latency-s >= 0 and --learn-s-per-turn >= 0")
    if args.episodes_per_step < 1 or args.async_desktops < 1:
        p.error("need --episodes-per-step >= 1 and --async-desktops >= 1")
    if not 0 <= args.warmup_steps < args.steps - 1:
        p.error(f"--warmup-steps must be in [0, {args.steps - 2}] for {args.steps} steps")
    group = int(yaml.safe_load(args.config.read_text()).get("num_generations", 8))
    if args.episodes_per_step % group:
        # one process, steps_per_generation 1: a step's episodes are its batch, in whole groups
        p.error(f"--episodes-per-step must be whole groups of {group} (the config's group size)")
    if args.rounds < 1 or len(set(args.modes)) < len(args.modes):
        p.error("need --rounds >= 1 and each of --modes once")
    args.out = args.out.resolve()
    runs = []
    for r in range(args.rounds):
        for mode in args.modes if r % 2 == 0 else args.modes[::-1]:
            name = f"{mode}-r{r}"
            runs.append({**run_one(mode, name, args), "name": name})
    out = table(runs, args)
    (args.out / "end_to_end.json").write_text(
        json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1)
        + "\n"
    )
    (args.out / "end_to_end.md").write_text(out + "\n")
    print(out)


if __name__ == "__main__":
    main()
