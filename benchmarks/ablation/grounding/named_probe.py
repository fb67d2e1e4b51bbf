"""Can the tiny model learn *which* widget to click from the instruction, given the strongest
signal there is (supervised cloning)? Issue 26's capacity question, asked before more RL.

    uv run --frozen python benchmarks/ablation/grounding/named_probe.py --base runs/base-grounded \
        --steps 1500 --out benchmarks/ablation/grounding/named-probe.json

RL from the grounded base on ``click`` (docs/learning.md, "RL on `click` from the grounded
base") kept its aim but never learnt the named colour. This probe asks whether the model can
learn that mapping at all: it clones the grounded base further on *named* grounding screens,
2 to 4 generic widgets of distinct generic fills (the base policy's own eight, none a pixel-family
colour), the instruction naming one of them ("Click the teal box."), the target clicked in its
inner half and then ``finished()``. Every ``--eval_every`` steps it samples the first turn on 128
fresh named screens (temperature 1, under the action grammar, as the trainer samples) and
counts, of the clicks, the share inside the named widget (``target``), inside any widget
(``any``), and what ``any`` would give if the click ignored the instruction (``blind``: each
hit weighted by 1 / widgets on its screen). Following the instruction is ``target`` above
``blind``. Writes the curve as JSON and prints a table.

``--fixed-colour teal`` is the control that needs no reading: teal is on every screen and
always the target. If the model learns that and not the named probe, it tells the colours apart
and fails at binding the word to one.

``--word-only`` is the control that needs no image read: the palette's colours in the same
places on every screen, so only the word says which to click. If the model learns that too, it
reads the word, and what it fails at is the composition: looking for the colour the word names.
``--mix-word-only 0.5`` draws half the training episodes that way (evaluation stays named).

The probe's models are not a base policy for the family (it saves none): its colour words are
generic, and the question is only whether 64-wide, 2-layer text can condition a point on a
word.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path

import torch
from arpo_trainer.testing.base_policy import (
    _POINT,
    GROUNDING_FILLS,
    GROUNDING_SIZE,
    _inside,
    clone_step,
    draw_scene,
    tiny_encoder,
)
from arpo_trainer.tiny import load_tiny_vlm

#: The names of :data:`GROUNDING_FILLS`, in its order (its comments name them).
NAMES = ("teal", "sky", "pink", "lime", "periwinkle", "brown", "khaki", "mint")
Widget = tuple[tuple[int, int, int, int], tuple[int, int, int], str]


def named_scene(
    rng: random.Random,
    size: tuple[int, int],
    fixed: str | None = None,
    palette: tuple[str, ...] = NAMES,
    word_only: bool = False,
) -> tuple[list[Widget], int, str]:
    """2 to 4 non-overlapping widgets of distinct fills, one of them named: (widgets, index of
    the named one, instruction). With ``fixed`` (a name of :data:`NAMES`) that colour is on
    every screen and always the one named: the control that needs no word read. ``palette``
    narrows the colours drawn (and so the words to tell apart) to those names.

    ``word_only`` is the other control, the one that needs no image read: every colour of the
    palette is on every screen, each always in the same place, so the screens are alike and
    only the word says which to click.

    >>> alike = [named_scene(random.Random(s), (640, 360), None, ("teal", "pink"), True)
    ...          for s in range(8)]
    >>> all(w == alike[0][0] for w, _, _ in alike), sorted({i for _, i, _ in alike})
    (True, [0, 1])
    >>> alike[0][2] == f"Click the {('teal', 'pink')[alike[0][1]]} box."
    True
    """
    if word_only:
        gap = size[0] // len(palette)
        widgets = [
            (
                (i * gap + (gap - 80) // 2, size[1] // 2 - 40, 80, 80),
                GROUNDING_FILLS[NAMES.index(c)],
                "",
            )
            for i, c in enumerate(palette)
        ]
        target = rng.randrange(len(palette))
        return widgets, target, f"Click the {palette[target]} box."
    n = rng.randint(2, min(4, len(palette)))
    colours = [NAMES.index(c) for c in rng.sample(palette, n)]
    if fixed is not None:
        f = NAMES.index(fixed)
        if f not in colours:
            colours[rng.randrange(n)] = f
    widgets: list[Widget] = []
    while len(widgets) < n:
        w, h = rng.randint(*GROUNDING_SIZE[0]), rng.randint(*GROUNDING_SIZE[1])
        x, y = rng.randrange(size[0] - w), rng.randrange(size[1] - h)
        if any(
            x < bx + bw + 6 and bx < x + w + 6 and y < by + bh + 6 and by < y + h + 6
            for (bx, by, bw, bh), _, _ in widgets
        ):
            continue
        fill = GROUNDING_FILLS[colours[len(widgets)]]
        widgets.append(((x, y, w, h), fill, ""))
    target = rng.randrange(n) if fixed is None else colours.index(NAMES.index(fixed))
    return widgets, target, f"Click the {NAMES[colours[target]]} box."


@torch.no_grad()
def evaluate(
    vlm,
    enc,
    size,
    aset,
    n: int,
    seed: int,
    fixed: str | None,
    palette: tuple[str, ...],
    word_only: bool = False,
) -> dict[str, float]:
    from arpo_trainer.generation import (
        TransformersPolicy,
        action_constraint,
        turn_generation_config,
    )

    rng = random.Random(seed)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    vlm.model.eval()
    policy = TransformersPolicy(
        vlm.model,
        enc,
        turn_generation_config(enc, max_new_tokens=24),
        action_constraint(enc, aset.frame, 24),
    )
    clicks = target = anyw = 0
    blind = 0.0
    for start in range(0, n, 32):
        scenes, contexts = [], []
        for _ in range(min(32, n - start)):
            widgets, t, instruction = named_scene(rng, size, fixed, palette, word_only)
            shot = enc.screenshot_png(draw_scene(rng.randrange(20, 90), widgets, size))
            contexts.append(enc.encode(instruction, [shot], []))
            scenes.append((widgets, t))
        for (widgets, t), turn in zip(scenes, policy.sample(contexts), strict=True):
            m = _POINT.match(turn.text)
            if not m:
                continue
            clicks += 1
            px, py = aset.point(f"({m[2]},{m[3]})")
            inside = [x <= px < x + w and y <= py < y + h for (x, y, w, h), _, _ in widgets]
            target += inside[t]
            if any(inside):
                anyw += 1
                blind += 1 / len(widgets)
    torch.random.set_rng_state(torch_state)
    vlm.model.train()
    c = max(clicks, 1)
    return {"clicks": clicks / n, "target": target / c, "any": anyw / c, "blind": blind / c}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="runs/base-grounded")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--eval_every", type=int, default=250)
    ap.add_argument("--eval_n", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=8, help="episodes per cloning step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--palette", default=None, help="comma list of the colours drawn (default all)")
    ap.add_argument(
        "--fixed-colour",
        choices=NAMES,
        default=None,
        help="the control: this colour is on every screen and always the target (no word to read)",
    )
    ap.add_argument(
        "--word-only",
        action="store_true",
        help="the control that needs no image read: the palette's widgets in fixed places on "
        "every screen, only the word says which (at most 4 colours)",
    )
    ap.add_argument(
        "--mix-word-only",
        type=float,
        default=0.0,
        help="share of training episodes drawn as the word-only control, the rest named at "
        "random places (a curriculum toward the composition; evaluation stays named)",
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    palette = tuple(args.palette.split(",")) if args.palette else NAMES
    if not set(palette) <= set(NAMES) or len(palette) < 2:
        ap.error(f"--palette: two or more of {','.join(NAMES)}")
    if args.word_only and (args.fixed_colour or len(palette) > 4):
        ap.error("--word-only: a --palette of 2 to 4 colours, no --fixed-colour")
    if not 0.0 <= args.mix_word_only <= 1.0 or (args.mix_word_only and len(palette) > 4):
        ap.error("--mix-word-only: a share in [0, 1], with a --palette of 2 to 4 colours")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    from osworld_gym.actions.uitars import UITarsActionSet

    size = (640, 360)
    vlm = load_tiny_vlm(args.base)
    enc = tiny_encoder(vlm)
    aset = UITarsActionSet(size, max_pixels=enc.max_pixels, min_pixels=enc.min_pixels)
    frame = enc.image_size(*size)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    model = vlm.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    curve, losses, t0 = [], [], time.monotonic()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0:
            curve.append(
                {
                    "step": step,
                    **evaluate(
                        vlm,
                        enc,
                        size,
                        aset,
                        args.eval_n,
                        10_000,
                        args.fixed_colour,
                        palette,
                        args.word_only,
                    ),
                }
            )
            curve[-1]["loss"] = sum(losses[-50:]) / len(losses[-50:]) if losses else None
            logging.info("%s", curve[-1])
        if step == args.steps:
            break
        seqs = []
        for _ in range(args.batch):
            # no draw without a mix: the recorded runs' screens stay what they were
            word_only = args.word_only or (
                args.mix_word_only > 0 and rng.random() < args.mix_word_only
            )
            widgets, t, instruction = named_scene(rng, size, args.fixed_colour, palette, word_only)
            background = rng.randrange(20, 90)
            shots = [draw_scene(background, widgets, size)]
            box = widgets.pop(t)[0]
            shots.append(draw_scene(background, widgets, size))
            actions = [
                f"Action: click(start_box='{_inside(rng, box, size, frame)}')",
                "Action: finished(content='')",
            ]
            pngs = [enc.screenshot_png(s) for s in shots]
            seqs.append(enc.encode(instruction, pngs, [enc.action_ids(a) for a in actions]))
        losses.append(clone_step(model, enc, seqs, opt))
    out = {"args": vars(args), "seconds": time.monotonic() - t0, "curve": curve}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("| step | loss | clicks | in the named widget | in any widget | blind to the name |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in curve:
        loss = "-" if r["loss"] is None else f"{r['loss']:.3f}"
        print(
            f"| {r['step']} | {loss} | {r['clicks']:.2f} | {r['target']:.3f} | "
            f"{r['any']:.3f} | {r['blind']:.3f} |"
        )


if __name__ == "__main__":
    main()
