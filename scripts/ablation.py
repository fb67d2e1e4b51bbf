"""ARPO vs GRPO in miniature: the same base policy, budget and tasks, replay on vs off, several
seeds.

Each run is ``arpo-train --config packages/arpo_trainer/configs/demo.yaml`` with ``--replay true``
(ARPO) or ``--replay false`` (GRPO) and its own seed; nothing else differs. From every run's
``rollouts.jsonl`` (one line per trajectory of each training batch, after replay injection) the
script computes per step:

* the policy's own success rate: trajectories it sampled at that step (replayed ones excluded);
* the share of all-fail groups: groups in which every trajectory the policy sampled failed
  (these carry no signal in GRPO; ARPO injects a stored success into them when it has one);
* the injected share: replayed trajectories / all trajectories of the batch.

It writes ``<out>/ablation.json`` (per-run curves), ``<out>/ablation.md`` (a table: mean and
spread over seeds of the success over step windows) and ``<out>/ablation.png`` (mean curve with
min-max band per mode). Runs already finished (their ``rollouts.jsonl`` holds ``--steps`` steps) are
not repeated, so the script can be re-run to add seeds.

    uv run --frozen python scripts/ablation.py --provider fake --seeds 0 1 2 --steps 60 \\
        --out benchmarks/ablation/fake
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "packages/arpo_trainer/configs/demo.yaml"
MODES = {"arpo": "true", "grpo": "false"}
# One thread per run: on a loaded machine, torch's default threads spin against each other.
ENV = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}


def step_metrics(rollouts: Path, group_size: int = 4) -> list[dict[str, float]]:
    """Per-step policy success, all-fail group share and injected share from a rollout log."""
    by_step: dict[int, list[dict]] = defaultdict(list)
    for line in rollouts.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_step[int(row["global_step"])].append(row)
    out = []
    for step in sorted(by_step):
        rows = by_step[step]
        own = [r for r in rows if r.get("source") == "policy" and not r.get("infra_error")]
        groups = [rows[i : i + group_size] for i in range(0, len(rows), group_size)]
        all_fail = 0
        for g in groups:
            fresh = [r for r in g if r.get("source") == "policy" and not r.get("infra_error")]
            if fresh and all(r["score"] <= 0.1 for r in fresh):
                all_fail += 1
        out.append(
            {
                "step": step,
                "own_success": sum(r["score"] > 0.1 for r in own) / len(own)
                if own
                else float("nan"),
                "all_fail_groups": all_fail / len(groups),
                "injected": sum(r.get("source") != "policy" for r in rows) / len(rows),
                "format_errors": sum(r.get("format_errors", 0) > 0 for r in own) / max(1, len(own)),
                "infra_errors": sum(bool(r.get("infra_error")) for r in rows),
            }
        )
    return out


def run_one(mode: str, seed: int, args: argparse.Namespace, out: Path) -> Path:
    run_dir = out / f"{mode}-s{seed}"
    log = run_dir / "rollouts.jsonl"
    if (
        log.exists()
        and len({json.loads(x)["global_step"] for x in log.read_text().splitlines() if x})
        >= args.steps
    ):
        print(f"{run_dir.name}: done before, kept", flush=True)
        return run_dir
    if run_dir.exists():
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    cmd = [
        "uv",
        "run",
        "--frozen",
        "arpo-train",
        "--config",
        str(CONFIG),
        "--model_name_or_path",
        args.base,
        "--output_dir",
        str(run_dir),
        "--replay",
        MODES[mode],
        "--seed",
        str(seed),
        "--max_steps",
        str(args.steps),
        "--provider",
        args.provider,
        "--task_ids",
        *args.tasks,
        "--save_strategy",
        "no",
        "--report_to",
        "none",
    ]
    if args.provider == "fake":
        cmd += ["--vector_env", "sync", "--settle", "false"]
    t0 = time.monotonic()
    print(f"{run_dir.name}: {' '.join(cmd)}", flush=True)
    with open(out / f"{mode}-s{seed}.log", "w") as fh:
        subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=ENV)
    (run_dir / "wall_s.txt").write_text(f"{time.monotonic() - t0:.0f}\n")
    print(f"{run_dir.name}: {time.monotonic() - t0:.0f} s", flush=True)
    return run_dir


def window_mean(curve: list[dict], key: str, lo: int, hi: int) -> float:
    vals = [c[key] for c in curve if lo <= c["step"] < hi and c[key] == c[key]]
    return sum(vals) / len(vals) if vals else float("nan")


def summarize(curves: dict[str, dict[int, list[dict]]], steps: int) -> str:
    edges = [0, steps // 4, steps // 2, 3 * steps // 4, steps]
    windows = list(zip(edges[:-1], edges[1:], strict=True))
    head = "| mode | seeds | " + " | ".join(f"own success, steps {a}-{b - 1}" for a, b in windows)
    head += " | all-fail groups | injected |"
    lines = [head, "|" + "---|" * (4 + len(windows))]
    for mode, runs in curves.items():
        cells = []
        for a, b in windows:
            per_seed = [window_mean(c, "own_success", a, b) for c in runs.values()]
            cells.append(_spread(per_seed))
        af = _spread([window_mean(c, "all_fail_groups", 0, steps) for c in runs.values()])
        inj = _spread([window_mean(c, "injected", 0, steps) for c in runs.values()])
        lines.append(f"| {mode} | {len(runs)} | " + " | ".join(cells) + f" | {af} | {inj} |")
    return "\n".join(lines)


def hold_table(curves: dict[str, dict[int, list[dict]]], smooth: int = 5, tail: int = 20) -> str:
    """Per run: the peak of the policy's own success (``smooth``-step mean), the mean of the last
    ``tail`` steps, and their ratio (the demo's "holds" criterion: >= 0.8)."""
    lines = [
        f"| run | peak ({smooth}-step mean) | mean of the last {tail} steps | last / peak |",
        "|---|---|---|---|",
    ]
    for mode, runs in curves.items():
        for seed, curve in sorted(runs.items()):
            ys = [c["own_success"] for c in curve]
            avg = [statistics.fmean(ys[max(0, i - smooth + 1) : i + 1]) for i in range(len(ys))]
            peak, last = max(avg), statistics.fmean(ys[-tail:])
            lines.append(f"| {mode} seed {seed} | {peak:.2f} | {last:.2f} | {last / peak:.2f} |")
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "-"
    mean = statistics.fmean(values)
    return f"{mean:.2f} [{min(values):.2f}, {max(values):.2f}]"


def plot(curves: dict[str, dict[int, list[dict]]], path: Path, title: str, smooth: int = 5) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"arpo": "tab:blue", "grpo": "tab:orange"}
    for mode, runs in curves.items():
        for ax, key in zip(axes, ("own_success", "all_fail_groups"), strict=True):
            per_seed = []
            for curve in runs.values():
                ys = [c[key] for c in curve]
                per_seed.append(
                    [
                        statistics.fmean(v for v in ys[max(0, i - smooth + 1) : i + 1] if v == v)
                        for i in range(len(ys))
                    ]
                )
            n = min(len(s) for s in per_seed)
            xs = list(range(n))
            mean = [statistics.fmean(s[i] for s in per_seed) for i in xs]
            lo = [min(s[i] for s in per_seed) for i in xs]
            hi = [max(s[i] for s in per_seed) for i in xs]
            ax.plot(
                xs,
                mean,
                color=colors.get(mode),
                label=f"{mode.upper()} (mean of {len(runs)} seeds)",
            )
            ax.fill_between(xs, lo, hi, color=colors.get(mode), alpha=0.2)
    axes[0].set_ylabel(f"policy's own success ({smooth}-step mean)")
    axes[1].set_ylabel(f"all-fail groups ({smooth}-step mean)")
    for ax in axes:
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_eval(name: str, model: str, seed: int, args: argparse.Namespace, task_list: Path) -> float:
    """``arpo-eval run`` of one checkpoint on the selected tasks; returns its mean success."""
    out = args.out / "eval" / name
    cmd = [
        "uv",
        "run",
        "--frozen",
        "arpo-eval",
        "run",
        "--agent",
        "hf",
        "--model",
        model,
        "--name",
        name,
        "--tasks",
        str(task_list),
        "--provider",
        args.provider,
        "--num-envs",
        "4",
        "--max-steps",
        "3",
        "--trials",
        str(args.eval_trials),
        "--screen",
        "640x360",
        "--history-images",
        "3",
        "--max-tokens",
        "24",
        "--temperature",
        "1.0",
        "--top-p",
        "1.0",
        "--seed",
        str(1000 + seed),
        "--out",
        str(out),
        # "hard": an episode that runs out of turns is scored as it stands. Under "standard"
        # (OSWorld's runner) its last action becomes FAIL, which scores every truncated episode of
        # an infeasible task 1: the random base policy got 0.88 that way.
        "--protocol",
        "hard",
        "--fresh",
    ]
    print(f"eval {name}: {' '.join(cmd)}", flush=True)
    with open(args.out / "eval" / f"{name}.log", "w") as fh:
        subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=ENV)
    summary = json.loads((out / "summary.json").read_text())
    return float(summary["overall"]["mean_at_k"])


def eval_table(scores: dict[str, list[float]], trials: int, n_tasks: int) -> str:
    lines = [
        f"| checkpoint | seeds | success on the {n_tasks} selected tasks ({trials} trials each, "
        "mean [min, max] over seeds) |",
        "|---|---|---|",
    ]
    for name, vals in scores.items():
        lines.append(f"| {name} | {len(vals)} | {_spread(vals)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", default="fake", choices=("fake", "local", "docker"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    p.add_argument("--base", default="runs/base-policy", help="base policy checkpoint")
    p.add_argument(
        "--tasks",
        nargs="+",
        default=[
            "os-infeasible-001",
            "os-infeasible-002",
            "terminal-infeasible-001",
            "multi_apps-infeasible-001",
        ],
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/ablation")
    p.add_argument("--note", default="", help="e.g. the machine's load, printed under the plot")
    p.add_argument(
        "--parallel", type=int, default=2, help="training runs at once (one thread each)"
    )
    p.add_argument(
        "--eval-trials",
        type=int,
        default=0,
        help="then arpo-eval the base policy and every final checkpoint on the tasks, "
        "this many trials per task (0: no evaluation)",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    curves: dict[str, dict[int, list[dict]]] = {m: {} for m in args.modes}
    jobs = [(mode, seed) for seed in args.seeds for mode in args.modes]
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        dirs = list(pool.map(lambda job: run_one(*job, args, args.out), jobs))
    for (mode, seed), run_dir in zip(jobs, dirs, strict=True):
        curves[mode][seed] = step_metrics(run_dir / "rollouts.jsonl")[: args.steps]
    (args.out / "ablation.json").write_text(
        json.dumps(
            {
                "provider": args.provider,
                "tasks": args.tasks,
                "steps": args.steps,
                "base": args.base,
                "note": args.note,
                "curves": curves,
            },
            indent=1,
        )
        + "\n"
    )
    table = summarize(curves, args.steps) + "\n\n" + hold_table(curves)
    (args.out / "ablation.md").write_text(table + "\n")
    title = (
        f"ARPO vs GRPO, {args.provider} desktops, {len(args.tasks)} tasks, seeds {args.seeds}"
        + (f"\n{args.note}" if args.note else "")
    )
    plot(curves, args.out / "ablation.png", title)
    print(table)
    if args.eval_trials:
        (args.out / "eval").mkdir(exist_ok=True)
        task_list = args.out / "eval" / "tasks.json"
        task_list.write_text(
            json.dumps({"kind": "arpo-task-list", "source": "builtin", "task_ids": args.tasks})
            + "\n"
        )
        scores: dict[str, list[float]] = {"base": [], "grpo": [], "arpo": []}
        for seed in args.seeds:
            scores["base"].append(run_eval(f"base-s{seed}", args.base, seed, args, task_list))
            for mode in args.modes:
                run_dir = args.out / f"{mode}-s{seed}"
                scores[mode].append(
                    run_eval(f"{mode}-s{seed}", str(run_dir), seed, args, task_list)
                )
        etable = eval_table(
            {k: v for k, v in scores.items() if v}, args.eval_trials, len(args.tasks)
        )
        (args.out / "eval.md").write_text(etable + "\n")
        (args.out / "eval.json").write_text(json.dumps(scores, indent=1) + "\n")
        print(etable)
    print(f"ablation: {time.monotonic() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
