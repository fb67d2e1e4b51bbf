"""Learning curve, sync vs async rollouts at equal episodes (issue 28's "no worse").

Each run is ``arpo-train --config benchmarks/async/learning.yaml --rollout_mode MODE --seed S``:
the earlier study's demo config (docs/learning.md, "The earlier study: four infeasible built-in
tasks": tiny model behaviour-cloned on random valid actions, 4 infeasible built-in tasks, 1 group
of 4 per step, ARPO replay, local desktops) and nothing else changed. A step takes one group in
both modes, so equal steps are equal episodes *taken* (async episodes played ahead and not taken
by the end are not counted; groups dropped as stale are counted separately).

From each run's ``rollouts.jsonl`` (the taken groups, after replay) the per-step own success
(replayed trajectories excluded) is computed as in ``scripts/ablation.py``; from the trainer's
per-step log lines the async figures ``async/staleness_mean``, ``async/staleness_max``,
``async/dropped_stale`` and ``async/groups_taken``. Writes ``<out>/learning.json`` and
``<out>/learning.md`` and prints the table: per run, then per mode the mean over seeds with its
95 % t-interval.

``--recorded`` adds the runs of an earlier ``learning.json`` (their curves and logged figures,
not their run directories) for the (mode, seed) pairs not run or kept here, so new seeds extend a
recorded table without re-running the old ones.

    uv run --frozen python benchmarks/async/learning.py --seeds 0 1 --steps 80 --parallel 2 \\
        --base runs/base-policy --out runs/async-learning
    uv run --frozen python benchmarks/async/learning.py --seeds 3 4 --parallel 2 \\
        --recorded benchmarks/async/learning/learning.json --out runs/async-learning
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).resolve().parent / "learning.yaml"
ENV = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}


def _ablation():
    spec = importlib.util.spec_from_file_location("ablation", ROOT / "scripts/ablation.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_one(mode: str, seed: int, args: argparse.Namespace) -> Path:
    run_dir = args.out / f"{mode}-s{seed}"
    if _ablation().finished_before(run_dir, args.steps):
        print(f"{run_dir.name}: done before, kept", flush=True)
        return run_dir
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    cmd = [
        "nice", "-n", "10", "uv", "run", "--frozen", "arpo-train",
        "--config", str(args.config),
        "--model_name_or_path", args.base,
        "--output_dir", str(run_dir),
        "--rollout_mode", mode,
        "--max_staleness", str(args.max_staleness),
        "--seed", str(seed),
        "--max_steps", str(args.steps),
        # a checkpoint every --save-every steps, all kept (the last one's trainer_state.json
        # holds every step's logged metrics; the others are the learner's intermediate policies)
        "--save_strategy", "steps", "--save_steps", str(args.save_every),
        "--save_total_limit", str(-(-args.steps // args.save_every)),
        "--report_to", "none",
    ]  # fmt: skip
    if args.episodes_per_step:
        cmd += ["--per_device_train_batch_size", str(args.episodes_per_step)]
    if mode == "async" and args.async_desktops:
        cmd += ["--async_desktops", str(args.async_desktops)]
    t0 = time.monotonic()
    print(f"{run_dir.name}: {' '.join(cmd)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / f"{mode}-s{seed}.log", "w") as fh:
        subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=ENV)
    (run_dir / "wall_s.txt").write_text(f"{time.monotonic() - t0:.0f}\n")
    print(f"{run_dir.name}: {time.monotonic() - t0:.0f} s", flush=True)
    return run_dir


def logged_steps(run_dir: Path) -> list[dict[str, float]]:
    """The trainer's per-step metrics (``log_history`` of the final checkpoint's state)."""
    states = sorted(
        run_dir.glob("checkpoint-*/trainer_state.json"),
        key=lambda p: int(p.parent.name.removeprefix("checkpoint-")),
    )
    if not states:
        return []
    history = json.loads(states[-1].read_text())["log_history"]
    return [{k: float(v) for k, v in h.items() if isinstance(v, int | float)} for h in history]


def summarize(results: dict, steps: int) -> str:
    ab = _ablation()
    edges = [0, steps // 4, steps // 2, 3 * steps // 4, steps]
    windows = list(zip(edges[:-1], edges[1:], strict=True))
    head = "| mode | seed | " + " | ".join(f"own success, steps {a}-{b - 1}" for a, b in windows)
    head += " | all-fail groups | injected | staleness mean | staleness max | dropped stale"
    head += " | wall s |"
    lines = [head, "|---|---:|" + "---:|" * (len(windows) + 6)]
    for (mode, seed), r in sorted(results.items()):
        cells = [f"{ab.window_mean(r['curve'], 'own_success', a, b):.2f}" for a, b in windows]
        af = ab.window_mean(r["curve"], "all_fail_groups", 0, steps)
        inj = ab.window_mean(r["curve"], "injected", 0, steps)
        logs = r["logged"]
        st = [x["async/staleness_mean"] for x in logs if "async/staleness_mean" in x]
        smax = max((x.get("async/staleness_max", 0) for x in logs), default=0)
        drop = max((x.get("async/dropped_stale", 0) for x in logs), default=0)
        async_cells = f"{sum(st) / len(st):.2f} | {smax:.0f} | {drop:.0f}" if st else "- | - | -"
        lines.append(
            f"| {mode} | {seed} | " + " | ".join(cells) + f" | {af:.2f} | {inj:.2f} | "
            f"{async_cells} | {r['wall_s']} |"
        )
    for mode in sorted({m for m, _ in results}):
        runs = [r for (m, _), r in results.items() if m == mode]
        cells = []
        for a, b in windows:
            vals = [ab.window_mean(r["curve"], "own_success", a, b) for r in runs]
            mean, lo, hi = ab.mean_ci(vals)
            cells.append(f"{mean:.2f} [{lo:.2f}, {hi:.2f}]")
        lines.append(
            f"| {mode}, mean [95 % t-interval] | {len(runs)} seeds | "
            + " | ".join(cells)
            + " |"
            + " |" * 6
        )
    by_mode = {
        mode: [
            ab.window_mean(r["curve"], "own_success", *windows[-1])
            for (m, _), r in results.items()
            if m == mode
        ]
        for mode in ("sync", "async")
    }
    if all(len(v) >= 2 for v in by_mode.values()):
        d, lo, hi = welch(by_mode["async"], by_mode["sync"], ab.T95)
        lines.append(
            f"\nLast quarter, async minus sync: {d:+.3f}, 95 % Welch interval "
            f"[{lo:+.3f}, {hi:+.3f}] ({len(by_mode['async'])} and {len(by_mode['sync'])} seeds)"
        )
    return "\n".join(lines)


def welch(a: list[float], b: list[float], t95: dict[int, float]) -> tuple[float, float, float]:
    """Difference of means ``mean(a) - mean(b)`` and its 95 % Welch interval (the
    Welch-Satterthwaite degrees of freedom rounded down, t from ``t95``).

    >>> [round(x, 3) for x in welch([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], {3: 3.18, 4: 2.78})]
    [1.0, -1.27, 3.27]
    """
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t95.get(int(df), 1.96) * math.sqrt(va + vb)
    d = statistics.fmean(a) - statistics.fmean(b)
    return d, d - half, d + half


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--config", type=Path, default=CONFIG)
    p.add_argument("--base", default="runs/base-policy", help="base policy checkpoint")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--modes", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument(
        "--save-every",
        type=int,
        default=0,
        help="keep a checkpoint every N steps, for final_policy.py to play the learner's "
        "intermediate policies (0: one, at the last step)",
    )
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument(
        "--episodes-per-step",
        type=int,
        default=0,
        help="episodes a learner step takes, in groups of the config's num_generations (0: the "
        "config's per_device_train_batch_size); sync mode plays one desktop per episode",
    )
    p.add_argument(
        "--async-desktops",
        type=int,
        default=0,
        help="desktops of the async runs (0: the config's, one per row); sync mode always plays "
        "one per row",
    )
    p.add_argument("--out", type=Path, default=ROOT / "runs/async-learning")
    p.add_argument(
        "--recorded",
        type=Path,
        help="an earlier learning.json: its runs join the table where not run or kept here",
    )
    args = p.parse_args()
    for name in ("episodes_per_step", "async_desktops", "save_every"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    args.save_every = args.save_every or args.steps
    args.out = args.out.resolve()
    jobs = [(m, s) for s in args.seeds for m in args.modes]  # sync and async side by side
    with ThreadPoolExecutor(args.parallel) as ex:
        dirs = dict(zip(jobs, ex.map(lambda j: run_one(*j, args), jobs), strict=True))
    ab = _ablation()
    results = {}
    if args.recorded:
        for name, r in json.loads(args.recorded.read_text()).items():
            mode, seed = name.rsplit("-s", 1)
            if len(r["curve"]) < args.steps:
                raise SystemExit(
                    f"{args.recorded}: {name} has {len(r['curve'])} steps, not {args.steps}"
                )
            results[(mode, int(seed))] = r
    for (mode, seed), d in dirs.items():
        results[(mode, seed)] = {
            "curve": ab.step_metrics(d / "rollouts.jsonl"),
            "logged": logged_steps(d),
            "wall_s": wall.read_text().strip() if (wall := d / "wall_s.txt").exists() else "-",
        }
    table = summarize(results, args.steps)
    (args.out / "learning.json").write_text(
        json.dumps({f"{m}-s{s}": r for (m, s), r in results.items()}, indent=1) + "\n"
    )
    (args.out / "learning.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
