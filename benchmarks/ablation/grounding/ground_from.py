"""Ground an existing base instead of a fresh model, saving checkpoints on the way (issue 26).

    uv run --frozen python benchmarks/ablation/grounding/ground_from.py --base runs/base-policy \
        --output runs/gfb-lr1e-3 --lr 1e-3 --steps 4000 --save_every 1000

The grounded bases of docs/learning.md were cloned from a fresh model at lr 3e-3 for 4,000
steps. This clones an existing base (or a fresh init saved unchanged) on grounding episodes
only (``base_policy --mix pointer --grounding 1``), so that each checkpoint can be probed for
aim (the grounding hit rate in the log) and for plasticity (the written order of
``named_probe.py --word-only --swap --say-order``). Session 16 asked it whether grounding costs
plasticity: it did not; the words base's tokenizer was what failed that probe.

``--rope grounded`` first writes the grounded base's rotary layout (theta 100, height and width
interleaved: the layout aiming needed) into the copy's ``config.json``; the blind base learns
the written order under that layout too (docs/learning.md), so the layout alone costs no
plasticity. The weights are kept; only the text model's rotary phases change.

The optimizer is made afresh for each ``--save_every`` chunk (``behaviour_clone`` owns it), and
each chunk draws its episodes from its own seed (``--seed`` plus the chunk's index).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from pathlib import Path

import torch
from arpo_trainer.testing.base_policy import (
    POINTER_WEIGHTS,
    behaviour_clone,
    grounding_hit_rate,
    tiny_encoder,
)
from arpo_trainer.tiny import load_tiny_vlm

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (the doctest sweep), not run as a script
    sys.path.insert(0, str(HERE))
from words_base import interleaved  # noqa: E402  (the grounded base's section, one definition)

MAX_TURNS = 3


def grounded_layout(config: dict) -> dict:
    """``config`` (a saved tiny VLM's) with the grounded base's rotary layout: theta 100 and
    ``words_base.interleaved``'s section, so height and width take turns.

    >>> c = {"text_config": {"hidden_size": 64, "num_attention_heads": 4,
    ...      "rope_parameters": {"mrope_section": [4, 2, 2], "rope_theta": 1e6}}}
    >>> grounded_layout(c)["text_config"]["rope_parameters"]
    {'mrope_section': [0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1], 'rope_theta': 100}
    >>> c["text_config"]["rope_parameters"]["rope_theta"]  # the input is not changed
    1000000.0
    """
    text = dict(config["text_config"])
    if text["num_attention_heads"] != 4 or text["hidden_size"] % 16:
        raise ValueError("the interleaved section is for 4 heads and a width divisible by 16")
    rope = dict(text["rope_parameters"])
    rope["mrope_section"] = interleaved(text["hidden_size"])
    rope["rope_theta"] = 100
    text["rope_parameters"] = rope
    return {**config, "text_config": text}


def copy_base(base: Path, output: Path, rope: str) -> None:
    """``base`` copied to ``output`` (which must not exist), its layout set by ``rope``."""
    if output.exists():
        raise SystemExit(f"{output} exists; pick a new --output")
    if not (base / "config.json").is_file():
        raise SystemExit(f"{base} holds no saved model (no config.json)")
    shutil.copytree(base, output)
    if rope == "grounded":
        path = output / "config.json"
        path.write_text(json.dumps(grounded_layout(json.loads(path.read_text())), indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--base", required=True, help="a saved tiny VLM (e.g. runs/base-policy)")
    ap.add_argument("--output", required=True)
    ap.add_argument("--rope", choices=("keep", "grounded"), default="grounded")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--save_every", type=int, default=500)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    if args.steps <= 0 or args.save_every <= 0 or args.steps % args.save_every:
        ap.error("--steps and --save_every must be positive, --steps a multiple of --save_every")
    if args.lr <= 0:
        ap.error(f"--lr must be positive, got {args.lr}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    out = Path(args.output)
    copy_base(Path(args.base), out / "step-0", args.rope)
    vlm = load_tiny_vlm(out / "step-0")
    encoder = tiny_encoder(vlm, max_turns=MAX_TURNS)
    curve = []
    for chunk in range(args.steps // args.save_every):
        report = behaviour_clone(
            vlm,
            encoder,
            max_turns=MAX_TURNS,
            steps=args.save_every,
            seed=args.seed + chunk,
            weights=dict(POINTER_WEIGHTS),
            grounding=1.0,
            lr=args.lr,
            eval_every=args.save_every,  # once, before the chunk's first step
        )
        step = (chunk + 1) * args.save_every
        vlm.save(out / f"step-{step}")
        curve.append({**report.curve[0], "step": step - args.save_every})
        logging.info("saved step %d, loss %.3f", step, report.last_loss)
    # the last checkpoint's hit rate, measured as every other one was
    curve.append({"step": args.steps, **grounding_hit_rate(vlm, encoder, (640, 360), n=64)})
    (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    for row in curve:
        logging.info("%s", row)


if __name__ == "__main__":
    main()
