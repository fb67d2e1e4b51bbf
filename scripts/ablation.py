"""ARPO vs GRPO in miniature: the same base policy, budget and tasks, replay on vs off, several
seeds, then every final policy on held-out tasks.

Each run is ``arpo-train --config CONFIG`` with ``--replay true`` (ARPO) or ``--replay false``
(GRPO) and its own seed; nothing else differs. From every run's ``rollouts.jsonl`` (one line per
trajectory of each training batch, after replay injection) the script computes per step:

* the policy's own success rate: trajectories it sampled at that step (replayed ones excluded);
  with the evaluator's binary score and no format penalty this is the paper's "trajectory reward";
* the share of all-fail groups: groups in which every trajectory the policy sampled failed
  (these carry no signal in GRPO; ARPO injects a stored success into them when it has one);
* the injected share: replayed trajectories / all trajectories of the batch;
* the share of the policy's episodes that ended in a format error (an unparsable action).

With ``--eval-tasks`` (e.g. ``pixels:heldout:click,click2:32``) the base policy and every final
checkpoint then play those tasks (``arpo-eval run``, ``--eval-trials`` episodes per task, OSWorld's
"hard" protocol), and the tables give, per task kind, each mode's mean success over seeds with a
95 % t-interval (seeds are the unit) and the pooled episodes' Wilson interval.

It writes ``<out>/ablation.json`` (per-run curves, evaluations), ``<out>/ablation.md`` (the
tables) and ``<out>/ablation.png`` (curves: mean and 95 % band over seeds per mode). The config is
copied to ``<out>/config.yaml`` at the first call and every run reads that copy. Runs already
finished (their ``rollouts.jsonl`` holds ``--steps`` steps) and evaluations already written are
not repeated, so the script can be re-run to add seeds.

    uv run --frozen python scripts/ablation.py --provider local --seeds 0 1 2 3 4 --steps 200 \\
        --base runs/base-pointer --train-tasks pixels:train:click,click2:16 \\
        --eval-tasks pixels:heldout:click,click2,click3,menu:32 --out benchmarks/ablation/pixels
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "packages/arpo_trainer/configs/demo.yaml"
MODES = {"arpo": "true", "grpo": "false"}
# One thread per run: on a loaded machine, torch's default threads spin against each other.
ENV = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}
# Student's t quantiles (two-sided 95 %) by degrees of freedom.
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}


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


def train_args(args: argparse.Namespace) -> list[str]:
    """What selects the training tasks: a task spec, or ids of the config's source."""
    if args.train_tasks:
        return ["--tasks", args.train_tasks]
    if args.tasks:
        return ["--tasks", args.source, "--task_ids", *args.tasks]
    return []


def finished_before(run_dir: Path, steps: int) -> bool:
    """Whether ``run_dir``'s rollout log already reaches ``steps`` steps (then it is kept)."""
    log = run_dir / "rollouts.jsonl"
    if not log.exists():
        return False
    return len({json.loads(x)["global_step"] for x in log.read_text().splitlines() if x}) >= steps


def run_one(mode: str, seed: int, args: argparse.Namespace, out: Path) -> Path:
    run_dir = out / f"{mode}-s{seed}"
    if finished_before(run_dir, args.steps):
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
        str(args.config),
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
        *train_args(args),
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


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval over ``values`` (seeds); the interval is the mean alone for one."""
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan"), float("nan")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def wilson(successes: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion.

    >>> [round(x, 3) for x in wilson(0, 100)]
    [0.0, 0.037]
    """
    if n == 0:
        return float("nan"), float("nan")
    z, p = 1.96, successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _fmt_ci(m: float, lo: float, hi: float) -> str:
    return "-" if m != m else f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def summarize(curves: dict[str, dict[int, list[dict]]], steps: int) -> str:
    edges = [0, steps // 4, steps // 2, 3 * steps // 4, steps]
    windows = list(zip(edges[:-1], edges[1:], strict=True))
    head = "| mode | seeds | " + " | ".join(f"own success, steps {a}-{b - 1}" for a, b in windows)
    head += " | all-fail groups | injected | format errors, last quarter |"
    lines = [head, "|" + "---|" * (5 + len(windows))]
    for mode, runs in curves.items():
        cells = []
        for a, b in windows:
            cells.append(
                _fmt_ci(*mean_ci([window_mean(c, "own_success", a, b) for c in runs.values()]))
            )
        af = _fmt_ci(*mean_ci([window_mean(c, "all_fail_groups", 0, steps) for c in runs.values()]))
        inj = _fmt_ci(*mean_ci([window_mean(c, "injected", 0, steps) for c in runs.values()]))
        fmt = _fmt_ci(
            *mean_ci([window_mean(c, "format_errors", edges[3], steps) for c in runs.values()])
        )
        lines.append(
            f"| {mode} | {len(runs)} | " + " | ".join(cells) + f" | {af} | {inj} | {fmt} |"
        )
    return "\n".join(lines)


def smoothed(curve: list[dict], key: str, window: int) -> list[float]:
    ys = [c[key] for c in curve]
    out = []
    for i in range(len(ys)):
        chunk = [v for v in ys[max(0, i - window + 1) : i + 1] if v == v]
        out.append(statistics.fmean(chunk) if chunk else float("nan"))
    return out


def plot(
    curves: dict[str, dict[int, list[dict]]],
    evals: dict[str, dict[str, list[float]]] | None,
    path: Path,
    title: str,
    smooth: int = 10,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("own_success", "trajectory reward (own success)"),
        ("all_fail_groups", "all-fail groups"),
        ("injected", "replayed share of the batch"),
        ("format_errors", "episodes ended by a format error"),
    ]
    ncols = len(panels) + (1 if evals else 0)
    fig, axes = plt.subplots(1, ncols, figsize=(4.2 * ncols, 3.8))
    colors = {"arpo": "tab:blue", "grpo": "tab:orange", "base": "tab:gray"}
    for mode, runs in curves.items():
        for ax, (key, label) in zip(axes, panels, strict=False):
            per_seed = [smoothed(c, key, smooth) for c in runs.values()]
            n = min(len(s) for s in per_seed)
            xs = list(range(n))
            stats = [mean_ci([s[i] for s in per_seed]) for i in xs]
            ax.plot(xs, [m for m, _, _ in stats], color=colors.get(mode),
                    label=f"{mode.upper()} ({len(runs)} seeds)")  # fmt: skip
            ax.fill_between(xs, [lo for _, lo, _ in stats], [hi for _, _, hi in stats],
                            color=colors.get(mode), alpha=0.2)  # fmt: skip
            ax.set_ylabel(f"{label}, {smooth}-step mean")
    for ax in axes[: len(panels)]:
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=-0.02)
    if evals:
        ax = axes[-1]
        kinds = sorted({k for per in evals.values() for k in per})
        width = 0.8 / len(evals)
        for j, (name, per) in enumerate(evals.items()):
            stats = [mean_ci(per.get(k, [])) for k in kinds]
            xs = [i + (j - (len(evals) - 1) / 2) * width for i in range(len(kinds))]
            ms = [m if m == m else 0 for m, _, _ in stats]
            err = [
                [m - lo if m == m else 0 for m, lo, _ in stats],
                [hi - m if m == m else 0 for m, _, hi in stats],
            ]
            ax.bar(xs, ms, width, yerr=err, capsize=3, color=colors.get(name), label=name.upper())
        ax.set_xticks(range(len(kinds)), kinds)
        ax.set_ylabel("held-out success (mean, 95 % CI over seeds)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_eval(name: str, model: str, seed: int, args: argparse.Namespace, cfg: dict) -> Path:
    """``arpo-eval run`` of one checkpoint on the evaluation tasks; returns its summary.json."""
    out = args.out / "eval" / name
    summary = out / "summary.json"
    if summary.exists() and not args.fresh_eval:
        print(f"eval {name}: done before, kept", flush=True)
        return summary
    screen = f"{cfg.get('screen_width', 640)}x{cfg.get('screen_height', 360)}"
    cmd = [
        "uv", "run", "--frozen", "arpo-eval", "run", "--agent", "hf", "--model", model,
        "--name", name, "--tasks", args.eval_tasks, "--provider", args.provider,
        "--num-envs", str(args.eval_envs), "--max-steps", str(cfg.get("max_turns", 3)),
        "--trials", str(args.eval_trials), "--screen", screen,
        "--history-images", str(cfg.get("max_history_images", 3)),
        "--max-tokens", str(cfg.get("max_turn_tokens", 24)),
        "--temperature", str(cfg.get("temperature", 1.0)), "--top-p", "1.0",
        "--seed", str(1000 + seed), "--out", str(out),
        # "hard": an episode that runs out of turns is scored as it stands (under "standard" its
        # last action becomes FAIL, which would score every truncated infeasible episode 1)
        "--protocol", "hard", "--fresh", "--no-progress",
    ]  # fmt: skip
    if cfg.get("action_grammar"):  # sampled under the grammar it was trained with
        cmd.append("--action-grammar")
    for key, value in ((cfg.get("env_kwargs") or {}).get("provider_kwargs") or {}).items():
        cmd += ["--provider-arg", f"{key}={value}"]
    print(f"eval {name}: {' '.join(cmd)}", flush=True)
    with open(args.out / "eval" / f"{name}.log", "w") as fh:
        subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=ENV)
    return summary


def kind_of(task_id: str) -> str:
    """``pixels-click2-h003`` -> ``click2``; other ids -> their domain-less id."""
    parts = task_id.split("-")
    return parts[1] if parts[0] == "pixels" and len(parts) == 3 else task_id


def per_kind(summary: Path) -> dict[str, tuple[int, int]]:
    """(successes, scored episodes) per task kind from an arpo-eval summary."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in json.loads(summary.read_text())["task_results"]:
        scores = [s for s in t["scores"] if s is not None]
        out[kind_of(t["task_id"])][0] += sum(s > 0.5 for s in scores)
        out[kind_of(t["task_id"])][1] += len(scores)
    return {k: (v[0], v[1]) for k, v in out.items()}


def eval_table(results: dict[str, list[dict[str, tuple[int, int]]]], trials: int) -> str:
    kinds = sorted({k for runs in results.values() for r in runs for k in r})
    lines = [
        "| policy | runs | " + " | ".join(
            f"{k}: mean over runs [95 % t-interval] (pooled episodes, Wilson)" for k in kinds
        ) + " |",
        "|---|---|" + "---|" * len(kinds),
    ]  # fmt: skip
    for name, runs in results.items():
        cells = []
        for k in kinds:
            rates = [r[k][0] / r[k][1] for r in runs if k in r and r[k][1]]
            s = sum(r[k][0] for r in runs if k in r)
            n = sum(r[k][1] for r in runs if k in r)
            lo, hi = wilson(s, n)
            cells.append(f"{_fmt_ci(*mean_ci(rates))} ({s}/{n}, [{lo:.3f}, {hi:.3f}])")
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n({trials} episode(s) per held-out task and run.)"


def sign_test(wins: int, n: int) -> float:
    """Two-sided exact sign test: the chance of a split at least this uneven with no effect.

    >>> round(sign_test(5, 5), 4), sign_test(0, 0)
    (0.0625, 1.0)
    """
    if n == 0:
        return 1.0
    k = max(wins, n - wins)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def paired_table(results: dict[str, list[dict[str, tuple[int, int]]]]) -> str | None:
    """ARPO minus GRPO held out, seed by seed (the two modes of a seed share it), per task kind:
    the mean difference with its 95 % t-interval over seeds and how many seeds ARPO led.

    >>> print(paired_table({"arpo": [{"click": (9, 20)}, {"click": (6, 20)}],
    ...                     "grpo": [{"click": (3, 20)}, {"click": (4, 20)}]}))
    | task kind | seeds | ARPO - GRPO: mean [95 % t-interval] | ARPO ahead (sign test p) |
    |---|---|---|---|
    | click | 2 | 0.200 [-1.071, 1.471] | 2 of 2 (p = 0.5) |
    """
    if "arpo" not in results or "grpo" not in results or len(results["arpo"]) < 2:
        return None
    lines = [
        "| task kind | seeds | ARPO - GRPO: mean [95 % t-interval] | ARPO ahead (sign test p) |",
        "|---|---|---|---|",
    ]
    for kind in sorted({k for r in results["arpo"] for k in r}):
        diffs = [
            a[kind][0] / a[kind][1] - g[kind][0] / g[kind][1]
            for a, g in zip(results["arpo"], results["grpo"], strict=True)
            if kind in a and kind in g and a[kind][1] and g[kind][1]
        ]
        ahead = sum(d > 0 for d in diffs)
        untied = sum(d != 0 for d in diffs)
        lines.append(
            f"| {kind} | {len(diffs)} | {_fmt_ci(*mean_ci(diffs))} | {ahead} of {len(diffs)} "
            f"(p = {sign_test(ahead, untied):.2g}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", default="fake", choices=("fake", "local", "docker"))
    p.add_argument("--config", type=Path, default=CONFIG)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    p.add_argument("--base", default="runs/base-policy", help="base policy checkpoint")
    p.add_argument("--train-tasks", default=None, help="a task spec to train on (pixels:train:...)")
    p.add_argument("--tasks", nargs="+", default=None, help="or task ids (of --source)")
    p.add_argument("--source", default="builtin", help="where --tasks ids come from")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/ablation")
    p.add_argument("--note", default="", help="e.g. the machine's load, printed under the plot")
    p.add_argument("--parallel", type=int, default=2, help="training runs at once (1 thread each)")
    p.add_argument("--eval-tasks", default=None, help="held-out task spec (pixels:heldout:...)")
    p.add_argument(
        "--eval-trials",
        type=int,
        default=0,
        help="episodes per evaluation task (0: 1 with --eval-tasks, else no evaluation; with "
        "--tasks ids and no --eval-tasks, those tasks are evaluated)",
    )
    p.add_argument("--eval-envs", type=int, default=4, help="desktops per evaluation")
    p.add_argument("--fresh-eval", action="store_true", help="re-run evaluations already written")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # every run of the study reads one frozen copy of the config: an edit of the config while the
    # study runs (or before seeds are added) cannot make its runs differ
    snapshot = args.out / "config.yaml"
    if not snapshot.exists():
        snapshot.write_text(args.config.read_text())
    elif snapshot.read_text() != args.config.read_text():
        print(f"{snapshot} differs from {args.config}: the study keeps using its copy", flush=True)
    args.config = snapshot
    cfg = yaml.safe_load(args.config.read_text())
    group = int(cfg.get("num_generations", 4))
    t0 = time.monotonic()
    curves: dict[str, dict[int, list[dict]]] = {m: {} for m in args.modes}
    jobs = [(mode, seed) for seed in args.seeds for mode in args.modes]
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        dirs = list(pool.map(lambda job: run_one(*job, args, args.out), jobs))
    for (mode, seed), run_dir in zip(jobs, dirs, strict=True):
        curves[mode][seed] = step_metrics(run_dir / "rollouts.jsonl", group)[: args.steps]
    table = summarize(curves, args.steps)
    evals: dict[str, list[dict[str, tuple[int, int]]]] = {}
    if not args.eval_tasks and args.tasks and args.eval_trials:
        (args.out / "eval").mkdir(exist_ok=True)
        ids = args.out / "eval" / "tasks.json"
        ids.write_text(json.dumps({"kind": "arpo-task-list", "source": args.source,
                                   "task_ids": args.tasks}) + "\n")  # fmt: skip
        args.eval_tasks = str(ids)
    args.eval_trials = args.eval_trials or 1
    if args.eval_tasks:
        (args.out / "eval").mkdir(exist_ok=True)
        evals["base"] = [per_kind(run_eval("base", args.base, 0, args, cfg))]
        for mode in args.modes:
            evals[mode] = [
                per_kind(run_eval(f"{mode}-s{s}", str(args.out / f"{mode}-s{s}"), s, args, cfg))
                for s in args.seeds
            ]
        table += (
            "\n\nHeld-out success ("
            + args.eval_tasks
            + "):\n\n"
            + eval_table(evals, args.eval_trials)
        )
        paired = paired_table(evals)
        if paired:
            table += "\n\nSeed by seed (each seed's ARPO and GRPO runs share it):\n\n" + paired
    rates = {
        name: {k: [r[k][0] / r[k][1] for r in runs if k in r and r[k][1]] for k in runs[0]}
        for name, runs in evals.items()
    }
    (args.out / "ablation.json").write_text(
        json.dumps(
            {
                "provider": args.provider,
                "config": cfg,
                "train_tasks": args.train_tasks or args.tasks,
                "eval_tasks": args.eval_tasks,
                "steps": args.steps,
                "base": args.base,
                "note": args.note,
                "curves": curves,
                "evals": {
                    k: [{kk: list(vv) for kk, vv in r.items()} for r in v] for k, v in evals.items()
                },
            },
            indent=1,
        )
        + "\n"
    )
    (args.out / "ablation.md").write_text(table + "\n")
    title = (
        f"ARPO vs GRPO, {args.provider} desktops, {args.train_tasks or args.tasks}, "
        f"seeds {args.seeds}" + (f"\n{args.note}" if args.note else "")
    )
    plot(curves, rates or None, args.out / "ablation.png", title)
    print(table)
    print(f"ablation: {time.monotonic() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
