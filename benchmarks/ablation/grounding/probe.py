"""Can the tiny model learn to click on a widget by behaviour cloning? (issue 26, step 1)

    uv run --frozen python benchmarks/ablation/grounding/probe.py --steps 2000 --grounding 1.0 \
        --out benchmarks/ablation/grounding/probe-g1.json

Clones a fresh tiny VLM on the base policy's grounding mix (``grounding`` share of episodes
click a generic widget, the rest are the pointer mix's random actions) and measures, every
``--eval_every`` steps, where it clicks on 64 held-out grounding screens under the action grammar
(:func:`arpo_trainer.testing.base_policy.grounding_hit_rate`). Writes the loss and hit-rate
curves as JSON and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import torch
from arpo_trainer.testing.base_policy import (
    POINTER_WEIGHTS,
    behaviour_clone,
    grounding_hit_rate,
    tiny_encoder,
)
from arpo_trainer.tiny import build_tiny_vlm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--grounding", type=float, default=1.0)
    ap.add_argument("--eval_every", type=int, default=250)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=8, help="episodes per cloning step")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rope_theta", type=float, default=None)
    ap.add_argument(
        "--mrope",
        default=None,
        help="comma-separated mrope_section; e.g. 0,1,1,0,1,1,0,1,1,0,1,1 interleaves height "
        "and width over every frequency (the text model's default gives both the lowest ones)",
    )
    ap.add_argument("--widgets", type=int, default=None, help="widgets per cloned screen")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="save the cloned model here")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    kw: dict = {} if args.rope_theta is None else {"rope_theta": args.rope_theta}
    if args.mrope:
        kw["mrope_section"] = [int(v) for v in args.mrope.split(",")]
    vlm = build_tiny_vlm(
        seed=args.seed, hidden_size=args.hidden, num_layers=args.layers, vocab_size=1024, **kw
    )
    enc = tiny_encoder(vlm)
    rep = behaviour_clone(
        vlm,
        enc,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch,
        seed=args.seed,
        weights=POINTER_WEIGHTS,
        grounding=args.grounding,
        grounding_widgets=args.widgets,
        eval_every=args.eval_every,
    )
    final = {
        "n1": grounding_hit_rate(vlm, enc, n=256, widgets=1),
        "n1to4": grounding_hit_rate(vlm, enc, n=256),
    }
    if args.save:
        vlm.save(args.save)
    out = {"args": vars(args), "seconds": rep.seconds, "losses": rep.losses, "curve": rep.curve,
           "final": final}  # fmt: skip
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("| step | loss (mean of 25) | clicks | hit / click | floor |")
    print("|---|---|---|---|---|")
    for c in rep.curve:
        s = int(c["step"])
        window = rep.losses[max(0, s - 25) : s] or rep.losses[:1]
        print(f"| {s} | {sum(window) / len(window):.3f} | {c['click_share']:.2f} | "
              f"{c['hit']:.3f} | {c['floor']:.3f} |")  # fmt: skip
    for name, f in final.items():
        print(f"final {name} (256 screens): {f}")
    print(f"{rep.seconds:.0f} s")


if __name__ == "__main__":
    main()
