"""The learning runs' final policies, played with their weights frozen (issue 28's "no worse").

``learning.py`` compares the episodes each run *trained on*. In async mode those were sampled by
a policy up to ``max_staleness`` versions behind the learner, so at equal episodes its curve
shows an older policy than sync's by construction. This script asks the other question: after
the same number of episodes taken, how good is the policy each run *ends with*?

Each final model (the run directory's top-level weights, written at the run's last step) plays
``--steps`` steps of ``--episodes-per-step`` episodes under the training config's own rollout
(same tasks, turns, temperature, format errors ending the episode), with ``--learning_rate 0``
and replay off, so the weights do not move and every episode is the policy's own. The score of
a run is the share of its episodes that succeed. Per group of runs: the mean over runs with its
95 % t-interval, then the difference of each group from the first with its 95 % Welch interval.

    uv run --frozen python benchmarks/async/final_policy.py --out runs/final-policy \\
        --group sync 'runs/async-learning-8/sync-s*' \\
        --group async 'runs/async-learning-8/async-s*' \\
        --group base runs/base-policy

A group may name checkpoints instead of run directories (``learning.py --save-every 10`` keeps
them): ``--group sync-10 'runs/async-learning-8c/sync-s*/checkpoint-10'`` plays each run's policy
after 10 steps, so one invocation per checkpoint step gives the learner's curve, not only its end.

Writes ``<out>/final_policy.json`` (each run's successes and episodes) and
``<out>/final_policy.md``, and prints the table.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import json
import re
import statistics
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


learning = _load("learning", HERE / "learning.py")
ablation = learning._ablation()


def run_name(model: Path) -> str:
    """``.../async-s7`` -> ``async-s7``; a checkpoint inside a run, ``.../async-s7/checkpoint-10``
    -> ``async-s7-checkpoint-10``, so the checkpoints of different seeds keep apart."""
    if re.fullmatch(r"checkpoint-\d+", model.name):
        return f"{model.parent.name}-{model.name}"
    return model.name


def seed_of(model: Path) -> int:
    """``.../async-s7`` and ``.../async-s7/checkpoint-10`` -> 7; a directory without ``-sN`` (a
    base policy) -> 0.

    >>> seed_of(Path("runs/x/async-s7")), seed_of(Path("runs/x/sync-s3/checkpoint-10"))
    (7, 3)
    >>> seed_of(Path("runs/base-policy"))
    0
    """
    m = re.search(r"-s(\d+)(-checkpoint-\d+)?$", run_name(model))
    return int(m.group(1)) if m else 0


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def play(label: str, model: Path, args: argparse.Namespace) -> tuple[int, int]:
    """Successes and scored episodes of ``model`` played frozen; kept if played before."""
    out = args.out / f"{label}-{run_name(model)}"
    rollouts = out / "rollouts.jsonl"
    if ablation.finished_before(out, args.steps):
        print(f"{out.name}: done before, kept", flush=True)
    else:
        subprocess.run(["rm", "-rf", str(out)], check=True)
        cmd = [
            "nice", "-n", "10", "uv", "run", "--frozen", "arpo-train",
            "--config", str(args.config),
            "--model_name_or_path", str(model),
            "--output_dir", str(out),
            "--rollout_mode", "sync",
            "--learning_rate", "0",
            "--replay", "false",
            # a sampling seed of its own: not the seed the run trained with
            "--seed", str(1000 + seed_of(model)),
            "--max_steps", str(args.steps),
            "--per_device_train_batch_size", str(args.episodes_per_step),
            "--save_strategy", "no", "--report_to", "none",
        ]  # fmt: skip
        args.out.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(args.out / f"{out.name}.log", "w") as fh:
            subprocess.run(
                cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, check=True, env=learning.ENV
            )
        print(f"{out.name}: {time.monotonic() - t0:.0f} s", flush=True)
        if digest(out / "model.safetensors") != digest(model / "model.safetensors"):
            raise SystemExit(f"{out}: the weights moved at learning rate 0")
    rows = [json.loads(line) for line in rollouts.read_text().splitlines() if line.strip()]
    own = [r for r in rows if r.get("source") == "policy" and not r.get("infra_error")]
    if len(own) != len(rows):
        raise SystemExit(f"{rollouts}: {len(rows) - len(own)} episodes not the policy's own")
    return sum(r["score"] > 0.1 for r in own), len(own)


def table(results: dict[str, dict[str, tuple[int, int]]]) -> str:
    lines = [
        "| runs | n | final policy's success, mean [95 % t-interval] | per run |",
        "|---|---:|---:|---|",
    ]
    rates = {g: [s / n for s, n in runs.values()] for g, runs in results.items()}
    for g, vals in rates.items():
        mean, lo, hi = ablation.mean_ci(vals)  # the mean alone for one run
        per_run = ", ".join(f"{v:.2f}" for v in vals)
        lines.append(f"| {g} | {len(vals)} | {mean:.3f} [{lo:.3f}, {hi:.3f}] | {per_run} |")
    first, *rest = rates
    diffs = [
        f"{g} minus {first}: {d:+.3f} [{lo:+.3f}, {hi:+.3f}] (95 % Welch)"
        for g in rest
        if len(rates[g]) > 1 and len(rates[first]) > 1
        for d, lo, hi in [learning.welch(rates[g], rates[first], ablation.T95)]
    ]
    return "\n".join(lines + [""] + diffs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--group",
        nargs=2,
        action="append",
        required=True,
        metavar=("LABEL", "GLOB"),
        help="a label and the run directories (a glob) whose final policies it names, or their "
        "checkpoints ('runs/x/sync-s*/checkpoint-10': the policy after 10 steps); "
        "the first group is the one the others are compared with",
    )
    p.add_argument("--config", type=Path, default=learning.CONFIG)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--episodes-per-step", type=int, default=16)
    p.add_argument("--out", type=Path, default=ROOT / "runs/final-policy")
    args = p.parse_args()
    if args.steps < 1 or args.episodes_per_step < 1:
        p.error("--steps and --episodes-per-step must be >= 1")
    args.out = args.out.resolve()
    groups: dict[str, list[Path]] = {}
    for label, pattern in args.group:
        if label in groups:
            p.error(f"--group {label} given twice")
        dirs = sorted(
            (Path(d) for d in glob.glob(pattern) if (Path(d) / "model.safetensors").exists()),
            key=seed_of,
        )
        if not dirs:
            p.error(f"--group {label}: no run directory with a model.safetensors matches {pattern}")
        groups[label] = dirs
    results = {
        label: {run_name(d): play(label, d, args) for d in dirs} for label, dirs in groups.items()
    }
    text = table(results)
    (args.out / "final_policy.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "final_policy.md").write_text(text + "\n")
    print(text)
    per_run = statistics.fmean(n for runs in results.values() for _, n in runs.values())
    print(f"\n({per_run:.0f} episodes per run on average, weights frozen, replay off.)")


if __name__ == "__main__":
    main()
