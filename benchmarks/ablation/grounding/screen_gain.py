"""Does a cloned model use the screenshot to place its click? A likelihood test.

    uv run --frozen python benchmarks/ablation/grounding/screen_gain.py MODEL_DIR [...]

For ``--n`` held-out grounding screens (one click on a widget, :mod:`arpo_trainer.testing.
base_policy`'s mix, seed 20000), it scores the target click's coordinate tokens (the digits and
the comma) under the model twice: with the screenshot the click belongs to, and with another
episode's screenshot (a fixed derangement). A model blind to the screen gives both the same
log-likelihood; one that reads the widget's place gives the true screen a higher one. Prints
nats per coordinate token for both and their difference with a paired 95 % interval. Far more
sensitive than the hit rate: it sees a small shift of probability mass towards the widget.

Two more columns: whether the model ends an episode with ``finished()`` more often when the
next screen is empty than when it shows a new widget (it sees *whether* something is there),
and where its sampled clicks land (``grounding_hit_rate``: in a widget of the screen they were
sampled on, of the next screen, and the random-point floor).
"""

from __future__ import annotations

import argparse
import math
import random
import re

import torch
from arpo_trainer.testing.base_policy import (
    GROUNDING_INSTRUCTIONS,
    completion_logits,
    draw_scene,
    grounding_episode,
    grounding_hit_rate,
    grounding_scene,
    tiny_encoder,
)
from arpo_trainer.tiny import load_tiny_vlm

DIGITS = re.compile(r"^[0-9,]+$")


@torch.no_grad()
def finish_share(vlm, enc, n: int, *, empty: bool) -> float:
    """Share of second turns that are ``finished(...)`` after one click on a one-widget screen,
    when the next screen is empty (``empty``: every widget gone, what the cloned episodes end
    on) or shows a new widget. Sampled at temperature 1 under the action grammar. A model that
    sees whether anything is left finishes more often on the empty screen."""
    from arpo_trainer.generation import (
        TransformersPolicy,
        action_constraint,
        turn_generation_config,
    )

    frame = enc.image_size(640, 360)
    rng = random.Random(30_000)
    torch.manual_seed(30_000)
    policy = TransformersPolicy(
        vlm.model,
        enc,
        turn_generation_config(enc, max_new_tokens=24),
        action_constraint(enc, frame, 24),
    )
    finished = 0
    for start in range(0, n, 32):
        ctxs = []
        for _ in range(min(32, n - start)):
            frames, actions = grounding_episode(rng, (640, 360), frame, 2, 1)
            second = frames[1]
            if not empty:
                bg = int(second[0, 0, 0])
                second = draw_scene(bg, grounding_scene(rng, (640, 360), 1), (640, 360))
            shots = [enc.screenshot_png(frames[0]), enc.screenshot_png(second)]
            ctxs.append(
                enc.encode(rng.choice(GROUNDING_INSTRUCTIONS), shots, [enc.action_ids(actions[0])])
            )
        finished += sum(t.text.startswith("Action: finished(") for t in policy.sample(ctxs))
    return finished / n


@torch.no_grad()
def coordinate_nll(vlm, enc, instructions, shots, actions) -> list[float]:
    """Mean NLL (nats) of each episode's coordinate tokens."""
    seqs = [
        enc.encode(i, [s], [enc.action_ids(a)])
        for i, s, a in zip(instructions, shots, actions, strict=True)
    ]
    logits, batch = completion_logits(vlm.model, enc, seqs)
    n = batch["completion_ids"].size(1)
    logp = torch.log_softmax(logits.float(), -1)
    comp = batch["completion_ids"]
    toks = [enc.tokenizer.convert_ids_to_tokens(row.tolist()) for row in comp]
    res = []
    for b in range(comp.size(0)):
        picks = [
            -logp[b, t, comp[b, t]].item()
            for t in range(n)
            if batch["tool_mask"][b, t] and DIGITS.match(toks[b][t] or "")
        ]
        res.append(sum(picks) / len(picks))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--widgets", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        "| model | screens | NLL, own screen | NLL, another screen | gain (nats/token) [95 %] "
        "| finished(), 2nd screen empty | finished(), 2nd screen a new widget "
        "| clicks in a widget: own screen | next screen's | random point |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in args.models:
        vlm = load_tiny_vlm(path)
        vlm.model.eval()
        enc = tiny_encoder(vlm)
        frame = enc.image_size(640, 360)
        rng = random.Random(20_000)
        instr, shots, acts = [], [], []
        while len(acts) < args.n:
            frames, actions = grounding_episode(rng, (640, 360), frame, 1, args.widgets)
            if "start_box" not in actions[0]:
                continue
            instr.append(rng.choice(GROUNDING_INSTRUCTIONS))
            shots.append(enc.screenshot_png(frames[0]))
            acts.append(actions[0])
        other = shots[1:] + shots[:1]  # every episode gets its neighbour's screen
        own, swapped = [], []
        for s in range(0, args.n, 32):
            sl = slice(s, s + 32)
            own += coordinate_nll(vlm, enc, instr[sl], shots[sl], acts[sl])
            swapped += coordinate_nll(vlm, enc, instr[sl], other[sl], acts[sl])
        d = [b - a for a, b in zip(own, swapped, strict=True)]
        mean = sum(d) / len(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
        half = 1.96 * sd / math.sqrt(len(d))
        hits = grounding_hit_rate(vlm, enc, n=args.n, widgets=args.widgets)
        print(
            f"| {path} | {args.n} | {sum(own) / len(own):.3f} | {sum(swapped) / len(swapped):.3f}"
            f" | {mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}] "
            f"| {finish_share(vlm, enc, args.n, empty=True):.3f} "
            f"| {finish_share(vlm, enc, args.n, empty=False):.3f} "
            f"| {hits['hit']:.3f} | {hits['hit_shuffled']:.3f} | {hits['floor']:.3f} |"
        )


if __name__ == "__main__":
    main()
