"""The grounded base again, with colour words as whole tokens (the named-colour probe's follow-up).

    uv run --frozen python benchmarks/ablation/grounding/words_base.py \
        --output runs/base-grounded-words
    # the wider, deeper text model the probe asked for next (about 25 min on 2 threads)
    uv run --frozen python benchmarks/ablation/grounding/words_base.py \
        --output runs/base-grounded-words-128x4 --hidden_size 128 --layers 4 --threads 2

The named-colour probe (docs/learning.md) found the tiny model does not bind a colour word to a
colour even from labels, and its tokenizer splits every colour word into letter fragments. This
builds the grounded base exactly as ``base_policy --mix pointer --grounding 1 --steps 4000
--rope_theta 100 --mrope 0,1,1,0,...`` does, but learns the tokenizer with an extra corpus of
the probe's eight generic colour words (none a pixel-family colour), so each
becomes a token of its own; then ``named_probe.py --base`` on the output asks the question again.
"""

from __future__ import annotations

import argparse
import logging

import torch
from arpo_trainer.testing.base_policy import build_base_policy
from arpo_trainer.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS, load_tiny_vlm

NAMES = ("teal", "sky", "pink", "lime", "periwinkle", "brown", "khaki", "mint")


def interleaved(hidden_size: int) -> list[int]:
    """The interleaved ``mrope_section`` the grounded base needs, for a text width: ``[0, 1, 1]``
    repeated until it sums to half a head's dimension (4 heads), so height and width take turns
    over every frequency."""
    return [0, 1, 1] * (hidden_size // 16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=40, help="times each colour word is repeated")
    ap.add_argument("--hidden_size", type=int, default=64, help="the text model's width")
    ap.add_argument("--layers", type=int, default=2, help="the text model's layers")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--lr", type=float, default=3e-3, help="the cloning's learning rate")
    ap.add_argument(
        "--eval_every",
        type=int,
        default=0,
        help="log the grounding hit rate (64 fresh screens) every so many steps (0: never)",
    )
    ap.add_argument(
        "--max_pixels",
        type=int,
        default=TINY_MAX_PIXELS,
        help="the screenshot budget of the processor (default 28*28*16: a 640x360 screen is "
        "15 image tokens, 3 rows of 5; 28*28*64 gives 60)",
    )
    args = ap.parse_args()
    if args.hidden_size <= 0 or args.hidden_size % 16:
        ap.error(f"--hidden_size must be a positive multiple of 16, got {args.hidden_size}")
    if args.layers <= 0:
        ap.error(f"--layers must be positive, got {args.layers}")
    if args.lr <= 0:
        ap.error(f"--lr must be positive, got {args.lr}")
    if args.max_pixels < TINY_MIN_PIXELS:
        ap.error(f"--max_pixels must be at least {TINY_MIN_PIXELS} (the processor's minimum)")
    if args.eval_every < 0:
        ap.error(f"--eval_every must be >= 0, got {args.eval_every}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    out, report = build_base_policy(
        args.output,
        steps=args.steps,
        mix="pointer",
        grounding=1.0,
        rope_theta=100,
        mrope_section=interleaved(args.hidden_size),
        hidden_size=args.hidden_size,
        layers=args.layers,
        extra_corpus=NAMES * args.repeat,
        lr=args.lr,
        eval_every=args.eval_every,
        max_pixels=args.max_pixels,
    )
    logging.info(
        "cloned %d steps, loss %.3f -> %.3f", report.steps, report.first_loss, report.last_loss
    )
    tok = load_tiny_vlm(out).processor.tokenizer
    for n in NAMES:
        logging.info("%s -> %s", n, tok.convert_ids_to_tokens(tok.encode(f"Click the {n} box.")))


if __name__ == "__main__":
    main()
