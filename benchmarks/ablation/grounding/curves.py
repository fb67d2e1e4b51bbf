"""Tables and a plot of the grounding probes' cloning loss and hit rate (issue 26, step 1).

    O=benchmarks/ablation/grounding
    uv run --frozen python $O/curves.py $O/*.log

Reads the probes' logs (``probe.py``'s INFO lines: the loss every 25 steps, the hit rate on 64
held-out screens every ``--eval_every`` steps), prints one markdown table per probe and writes
``curves.png`` beside the first log.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

LOSS = re.compile(r"behaviour cloning step (\d+)/(\d+): loss ([0-9.]+)")
EVAL = re.compile(r"step (\d+): (\{.*\})")


def read(path: Path) -> tuple[list[tuple[int, float]], list[dict]]:
    losses, evals = [], []
    for line in path.read_text().splitlines():
        if m := LOSS.search(line):
            losses.append((int(m[1]), float(m[3])))
        elif m := EVAL.search(line):
            evals.append(ast.literal_eval(m[2]))
    return losses, evals


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_l, ax_h) = plt.subplots(1, 2, figsize=(11, 4))
    for path in paths:
        losses, evals = read(path)
        print(f"\n{path.stem}\n")
        print("| step | loss (last logged) | clicks | hit / click | floor (random point) |")
        print("|---|---|---|---|---|")
        for e in evals:
            before = [loss for s, loss in losses if s <= e["step"] + 1]
            last = f"{before[-1]:.3f}" if before else "-"
            print(f"| {e['step']} | {last} | {e['click_share']:.2f} | {e['hit']:.3f} "
                  f"| {e['floor']:.3f} |")  # fmt: skip
        ax_l.plot([s for s, _ in losses], [v for _, v in losses], label=path.stem)
        steps = [e["step"] for e in evals]
        ax_h.plot(steps, [e["hit"] / e["floor"] for e in evals], "o-", label=path.stem)
    ax_l.set(xlabel="cloning step", ylabel="loss on action tokens", yscale="log")
    ax_h.axhline(1.0, color="grey", ls="--")
    ax_h.set(xlabel="cloning step", ylabel="hit rate / random-point floor (64 screens)")
    ax_h.legend(fontsize=7)
    fig.tight_layout()
    out = paths[0].parent / "curves.png"
    fig.savefig(out, dpi=90)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
