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

``--word-only --swap`` keeps the two fixed places but draws which colour is in which: the
composition at its smallest, the target an exclusive-or of the word and the order.
``--say-order`` also writes the order in the instruction ("The pink box is on the left."),
so the same composition can be done from text alone: a base that learns this and not
``--swap`` alone fails at the image's part; one that learns neither cannot bind two tokens.
``--jitter 10`` moves each fixed place by up to 10 pixels per screen: between fixed places
and random ones, it tells a lookup of pixels that never move from a search for the colour.
``--jitter-ramp 1000`` trains a curriculum toward it: the training jitter grows from 0 at the
first step to ``--jitter`` at step 1,000 (evaluation stays at ``--jitter``); with
``--jitter-hold 500`` it stays 0 for the first 500 steps and the ramp starts after them.
``--eval-jitter 0,10`` also evaluates at those jitters (``target@10``, ``blind@10`` in each
row): whether what was learnt at one jitter holds at another.

``--warmup-colour teal --warmup-steps 500`` trains the fixed-colour control first, then the
named screens. On named screens neither the word nor any colour alone says where the target
is (each is as often the target as not), so a model that starts from neither has no
first-order signal toward their product; the warm-up gives it a colour feature to start from.

``--instruction-after-image`` repeats the instruction right after the first screenshot's
tokens, in the same user turn. The encoder's layout puts the instruction before the image, so a
colour word cannot attend to the image: the click has to take the word and then look for its
colour, two hops. After the image, the word itself can look for its colour, and the click need
only read the word's position.

``--image-position`` adds a learnt absolute position (an embedding of the row plus one of the
column, on a merged image token's grid) to every image token the vision tower gives the text
model. The tiny model has positions only as rotary phases (M-RoPE in the text model, 2D RoPE
in the vision tower): they shape *which* token a query attends to, never what it reads, so a
token's value says what it shows and not where. Aiming then needs attention at fixed offsets,
and "the named colour's place" a nonlinear binding per place. With a position in the values, a
word that finds its colour (``--instruction-after-image``) also reads where it is.

``--clicks 2`` clones ordered episodes instead ("Click the teal box, then the pink box.",
3 to 4 widgets): each named widget clicked in turn, greyed after its click and still there,
then ``finished()``; every evaluation also samples each later turn after the oracle's earlier
clicks (``target2``, ``any2``, ``blind2`` and ``clicks2``, the share of those turns that are
clicks at all). It is how the two-click base of the pixel family's ``click2`` is made.

A probe's model is never trained on the family: its colour words are generic, and the question
is whether 64-wide, 2-layer text can condition a point on a word. ``--save`` keeps one as the
next probe's ``--base``; the end of the curriculum chain (docs/learning.md) is also the base
that RL on the family starts from, its words and colours new to it.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections.abc import Callable
from functools import partial
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
    swap: bool = False,
    say_order: bool = False,
    jitter: int = 0,
) -> tuple[list[Widget], int, str]:
    """2 to 4 non-overlapping widgets of distinct fills, one of them named: (widgets, index of
    the named one, instruction). With ``fixed`` (a name of :data:`NAMES`) that colour is on
    every screen and always the one named: the control that needs no word read. ``palette``
    narrows the colours drawn (and so the words to tell apart) to those names.

    ``word_only`` is the other control, the one that needs no image read: every colour of the
    palette is on every screen, each always in the same place, so the screens are alike and
    only the word says which to click. With ``swap`` too, the same places hold the palette's
    colours in a random order: the composition (find the named colour) over only as many
    places as colours. ``say_order`` also writes the order in the instruction, so the same
    composition can be done from text alone. ``jitter`` moves each fixed place by up to that
    many pixels in x and y, drawn per screen (left stays left): between fixed places and random
    ones.

    >>> swapped = [named_scene(random.Random(s), (640, 360), None, ("teal", "pink"), True, True)
    ...            for s in range(16)]
    >>> len({tuple(f for _, f, _ in w) for w, _, _ in swapped})  # both orders drawn
    2
    >>> len({(text, w[i][0]) for w, i, text in swapped})  # each word names either place
    4
    >>> {text for _, _, text in [named_scene(random.Random(s), (640, 360), "pink", ("teal", "pink"),
    ...                                      True, True) for s in range(8)]}
    {'Click the pink box.'}
    >>> named_scene(random.Random(0), (640, 360), None, ("teal", "pink"), True, True, True)[2]
    'The pink box is on the left. Click the pink box.'

    >>> moved = [named_scene(random.Random(s), (640, 360), None, ("teal", "pink"), True, True,
    ...                      jitter=60)[0] for s in range(32)]
    >>> xs = [[x for (x, _, _, _), _, _ in w] for w in moved]
    >>> all(a + 80 < b for a, b in xs), len({tuple(x) for x in xs}) > 16  # apart, and moved
    (True, True)
    >>> min(min(x) for x in xs) >= 0 and max(max(x) for x in xs) + 80 <= 640
    True

    >>> alike = [named_scene(random.Random(s), (640, 360), None, ("teal", "pink"), True)
    ...          for s in range(8)]
    >>> all(w == alike[0][0] for w, _, _ in alike), sorted({i for _, i, _ in alike})
    (True, [0, 1])
    >>> alike[0][2] == f"Click the {('teal', 'pink')[alike[0][1]]} box."
    True
    """
    if word_only:
        gap = size[0] // len(palette)
        order = rng.sample(palette, len(palette)) if swap else palette

        def moved() -> int:  # no draw at jitter 0: earlier runs' screens stay as they were
            return rng.randint(-jitter, jitter) if jitter else 0

        widgets = [
            (
                (i * gap + (gap - 80) // 2 + moved(), size[1] // 2 - 40 + moved(), 80, 80),
                GROUNDING_FILLS[NAMES.index(c)],
                "",
            )
            for i, c in enumerate(order)
        ]
        target = rng.randrange(len(palette)) if fixed is None else order.index(fixed)
        said = f"The {order[0]} box is on the left. " if say_order else ""
        return widgets, target, f"{said}Click the {order[target]} box."
    n = rng.randint(2, min(4, len(palette)))
    colours = [NAMES.index(c) for c in rng.sample(palette, n)]
    if fixed is not None:
        f = NAMES.index(fixed)
        if f not in colours:
            colours[rng.randrange(n)] = f
    widgets = _place(rng, size, colours)
    target = rng.randrange(n) if fixed is None else colours.index(NAMES.index(fixed))
    return widgets, target, f"Click the {NAMES[colours[target]]} box."


def _place(rng: random.Random, size: tuple[int, int], colours: list[int]) -> list[Widget]:
    """Widgets of the fills ``colours`` (indices of :data:`NAMES`), each of random size at a
    random place, 6 pixels apart at least."""
    widgets: list[Widget] = []
    while len(widgets) < len(colours):
        w, h = rng.randint(*GROUNDING_SIZE[0]), rng.randint(*GROUNDING_SIZE[1])
        x, y = rng.randrange(size[0] - w), rng.randrange(size[1] - h)
        if any(
            x < bx + bw + 6 and bx < x + w + 6 and y < by + bh + 6 and by < y + h + 6
            for (bx, by, bw, bh), _, _ in widgets
        ):
            continue
        widgets.append(((x, y, w, h), GROUNDING_FILLS[colours[len(widgets)]], ""))
    return widgets


#: The fill of a widget already clicked in an ordered episode: a neutral grey, not the pixel
#: family's own (the base sees no part of the family).
SPENT_FILL = (128, 128, 128)


def ordered_scene(
    rng: random.Random,
    size: tuple[int, int],
    clicks: int,
    palette: tuple[str, ...] = NAMES,
    **_: object,
) -> tuple[list[Widget], tuple[int, ...], str]:
    """``clicks`` + 1 to 4 widgets of distinct fills at random places, ``clicks`` of them
    named in order: (widgets, indices of the named ones in order, instruction). The pixel
    family's ``click2`` / ``click3`` in the base policy's own colours and words. Other keyword
    options of :func:`named_scene` are taken and ignored (``fixed``, ``word_only``...: the
    probe's controls are one-click only).

    >>> widgets, order, text = ordered_scene(random.Random(0), (640, 360), 2)
    >>> 3 <= len(widgets) <= 4, len(set(order)) == 2, text.count(", then the ")
    (True, True, 1)
    >>> [NAMES[GROUNDING_FILLS.index(widgets[i][1])] for i in order] == [
    ...     w.split()[0] for w in text.split("the ")[1:]]
    True
    """
    if not 1 <= clicks < len(palette) or clicks > 3:
        raise ValueError(
            f"clicks {clicks}: 1 to 3, fewer than the palette's {len(palette)} colours"
        )
    n = rng.randint(clicks + 1, max(clicks + 1, min(4, len(palette))))
    colours = [NAMES.index(c) for c in rng.sample(palette, n)]
    widgets = _place(rng, size, colours)
    order = tuple(rng.sample(range(n), clicks))
    said = ", then ".join(f"the {NAMES[colours[i]]} box" for i in order)
    return widgets, order, f"Click {said}."


def screens(
    background: int, widgets: list[Widget], done: tuple[int, ...], size: tuple[int, int]
) -> list:
    """The screens of an ordered episode up to its clicks ``done`` (indices of ``widgets``):
    the first with every widget, then one after each click, its widget greyed
    (:data:`SPENT_FILL`) and still there.

    >>> w = [((0, 0, 10, 10), (32, 201, 201), ""), ((20, 0, 10, 10), (240, 101, 190), "")]
    >>> shots = screens(50, w, (1,), (40, 20))
    >>> len(shots), [shot[5, 25].tolist() for shot in shots], shots[1][5, 5].tolist()
    (2, [[240, 101, 190], [128, 128, 128]], [32, 201, 201])
    """
    shown = list(widgets)
    shots = [draw_scene(background, shown, size)]
    for i in done:
        shown[i] = (shown[i][0], SPENT_FILL, shown[i][2])
        shots.append(draw_scene(background, shown, size))
    return shots


def ramped(jitter: int, step: int, ramp: int) -> int:
    """The training jitter at ``step`` of a ramp from 0 to ``jitter`` over ``ramp`` steps.

    >>> [ramped(10, s, 1000) for s in (-500, 0, 99, 100, 500, 999, 1000, 5000)]
    [0, 0, 0, 1, 5, 9, 10, 10]
    """
    return jitter * max(0, min(step, ramp)) // ramp


def encode(enc, instruction: str, pngs: list[bytes], actions: list[list[int]], after: bool):
    """``enc.encode``; with ``after`` the instruction is repeated after the first screenshot,
    before its turn closes (``<|im_end|>`` and the assistant header).

    >>> from arpo_trainer.tiny import build_tiny_vlm
    >>> from PIL import Image; import io
    >>> enc = tiny_encoder(build_tiny_vlm())
    >>> buf = io.BytesIO(); Image.new("RGB", (56, 56)).save(buf, format="PNG")
    >>> plain = encode(enc, "Click the teal box.", [buf.getvalue()], [], False)
    >>> after = encode(enc, "Click the teal box.", [buf.getvalue()], [], True)
    >>> text = enc.tokenizer.decode(after.prompt_ids)
    >>> text.count("Click the teal box."), text.split("<|vision_end|>")[1]
    (2, '\\nClick the teal box.<|im_end|>\\n<|im_start|>assistant\\n')
    >>> k = len(enc._obs_tail)  # the same before the repeat, and the same turn end after it
    >>> after.prompt_ids[: len(plain.prompt_ids) - k] == plain.prompt_ids[:-k]
    True
    >>> after.prompt_ids[-k:] == plain.prompt_ids[-k:]
    True
    """
    seq = enc.encode(instruction, pngs, actions)
    if after:
        cut = len(seq.prompt_ids) - len(enc._obs_tail)
        extra = enc._encode("\n" + instruction)
        seq.prompt_ids[cut:cut] = extra
    return seq


class ImagePosition(torch.nn.Module):
    """Learnt row and column embeddings added to the vision tower's merged tokens (a forward
    hook on ``visual``, so training and sampling both see them). Tokens come per image in the
    merge grid's row-major order (the tower undoes its window reordering before it returns)."""

    def __init__(self, visual, hidden: int, rows: int = 64, cols: int = 64, std: float = 0.3):
        super().__init__()
        self.merge = int(visual.spatial_merge_size)
        self.row = torch.nn.Parameter(torch.randn(rows, hidden) * std)
        self.col = torch.nn.Parameter(torch.randn(cols, hidden) * std)
        # the tower's tokens are far larger than word embeddings (std ~26 against ~0.2 in the
        # words base): the embeddings are added in units of the first call's token std, so
        # they start at ``std`` of it and Adam's steps move them at a rate that matters
        self.register_buffer("scale", torch.zeros(()))
        self.handle = visual.register_forward_hook(self._add, with_kwargs=True)

    def index(self, grid_thw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Row and column of every merged token of the images of ``grid_thw``.

        >>> ImagePosition.index(type("P", (), {"merge": 2})(), torch.tensor([[1, 4, 6]]))
        (tensor([0, 0, 0, 1, 1, 1]), tensor([0, 1, 2, 0, 1, 2]))
        """
        rows, cols = [], []
        for t, h, w in grid_thw.tolist():
            h, w = h // self.merge, w // self.merge
            k = torch.arange(t * h * w)
            rows.append(k // w % h)
            cols.append(k % w)
        return torch.cat(rows), torch.cat(cols)

    def _add(self, module, args, kwargs, output):
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        r, c = self.index(grid)
        pooled = output.pooler_output
        if r.numel() != pooled.shape[0]:
            raise RuntimeError(f"{pooled.shape[0]} image tokens, the grids name {r.numel()}")
        if not self.scale:
            self.scale.fill_(float(pooled.detach().float().std()))
        shift = self.scale * (self.row[r] + self.col[c])
        output.pooler_output = pooled + shift.to(pooled)
        return output


@torch.no_grad()
def evaluate(
    vlm,
    enc,
    size,
    aset,
    n: int,
    seed: int,
    draw: Callable[[random.Random], tuple[list[Widget], int | tuple[int, ...], str]],
    after: bool = False,
    turn: int = 0,
) -> dict[str, float]:
    """Clicks of the first turn on ``n`` screens drawn by ``draw`` (``named_scene`` with the
    run's options) from a fixed seed. For an ordered ``draw`` (``ordered_scene``), ``turn`` k
    samples the k-th click (from 0) after the oracle's first k: the widgets already clicked are
    grey, and ``any`` and ``blind`` count only the others.

    >>> from arpo_trainer.tiny import build_tiny_vlm
    >>> from osworld_gym.actions.uitars import UITarsActionSet
    >>> vlm = build_tiny_vlm(); enc = tiny_encoder(vlm)
    >>> aset = UITarsActionSet((640, 360), max_pixels=enc.max_pixels, min_pixels=enc.min_pixels)
    >>> two = partial(ordered_scene, size=(640, 360), clicks=2)
    >>> second = evaluate(vlm, enc, (640, 360), aset, 4, 0, two, turn=1)
    >>> sorted(second), 0 <= second["blind"] <= second["any"] <= 1
    (['any', 'blind', 'clicks', 'target'], True)
    >>> evaluate(vlm, enc, (640, 360), aset, 4, 0, two, turn=2)
    Traceback (most recent call last):
    ValueError: turn 2: the episode has 2 clicks
    """
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
            widgets, t, instruction = draw(rng)
            order = t if isinstance(t, tuple) else (t,)
            if turn >= len(order):
                raise ValueError(f"turn {turn}: the episode has {len(order)} clicks")
            shots = screens(rng.randrange(20, 90), widgets, order[:turn], size)
            pngs = [enc.screenshot_png(shot) for shot in shots]
            done = [  # the oracle's earlier clicks, in the frame the policy samples in
                enc.action_ids(
                    f"Action: click(start_box='{_inside(rng, widgets[i][0], size, aset.frame)}')"
                )
                for i in order[:turn]
            ]
            contexts.append(encode(enc, instruction, pngs, done, after))
            live = [w for i, w in enumerate(widgets) if i not in order[:turn]]
            scenes.append((live, live.index(widgets[order[turn]])))
        for (widgets, t), sample in zip(scenes, policy.sample(contexts), strict=True):
            m = _POINT.match(sample.text)
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
    ap.add_argument(
        "--warmup-colour",
        choices=NAMES,
        default=None,
        help="train the first --warmup-steps as the fixed-colour control of this colour, then "
        "as asked (evaluation unchanged): a colour feature the word can then steer",
    )
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument(
        "--swap",
        action="store_true",
        help="with --word-only: the fixed places hold the colours in a random order, so the word "
        "must be found by colour among as many places as colours (trained and evaluated so)",
    )
    ap.add_argument(
        "--say-order",
        action="store_true",
        help="with --swap: the instruction also says which colour is on the left, so the "
        "composition can be done from text alone (the control for the image's part)",
    )
    ap.add_argument(
        "--jitter",
        type=int,
        default=0,
        help="with --word-only: move each fixed place by up to this many pixels in x and y, "
        "drawn per screen (between fixed places and random ones)",
    )
    ap.add_argument(
        "--jitter-ramp",
        type=int,
        default=0,
        help="with --jitter: the training jitter grows linearly from 0 at step 0 to --jitter "
        "at this step (a curriculum from fixed places)",
    )
    ap.add_argument(
        "--jitter-hold",
        type=int,
        default=0,
        help="with --jitter-ramp: train at jitter 0 for this many steps before the ramp starts",
    )
    ap.add_argument(
        "--eval-jitter",
        default="",
        help="with --word-only: comma list of jitters also evaluated at (target@J, blind@J)",
    )
    ap.add_argument(
        "--instruction-after-image",
        action="store_true",
        help="repeat the instruction after the first screenshot (so the colour word can attend "
        "to the image), in training and evaluation",
    )
    ap.add_argument(
        "--image-position",
        action="store_true",
        help="add a learnt absolute row and column embedding to every image token (the tiny "
        "model has positions only as rotary phases)",
    )
    ap.add_argument(
        "--clicks",
        type=int,
        default=1,
        help="named widgets to click in order per episode (2 or 3: the pixel family's click2 / "
        "click3 in the base's own colours; each clicked widget turns grey), then finished(); "
        "each turn is evaluated after the oracle's earlier clicks (target, target2, ...)",
    )
    ap.add_argument(
        "--save",
        default=None,
        help="save the model here at the end (a base for the next probe: --base DIR)",
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    palette = tuple(args.palette.split(",")) if args.palette else NAMES
    if not set(palette) <= set(NAMES) or len(palette) < 2:
        ap.error(f"--palette: two or more of {','.join(NAMES)}")
    if args.word_only and (args.fixed_colour or len(palette) > 4):
        ap.error("--word-only: a --palette of 2 to 4 colours, no --fixed-colour")
    if (args.warmup_colour is None) != (args.warmup_steps == 0) or args.warmup_steps < 0:
        ap.error("--warmup-colour and --warmup-steps > 0 go together")
    if args.warmup_colour and args.warmup_colour not in palette:
        ap.error(f"--warmup-colour {args.warmup_colour}: not in the palette")
    room = (640 // len(palette) - 80) // 2  # half the gap between two fixed places

    def fits(j: int) -> bool:  # a jitter that keeps the places apart and the boxes on screen
        return 0 <= j <= (360 - 80) // 2 and (j == 0 or j * 2 < 640 // len(palette) - 80)

    if args.jitter and not args.word_only:
        ap.error("--jitter: with --word-only")
    if not fits(args.jitter):
        ap.error(
            f"--jitter {args.jitter}: from 0 to less than half the gap between places "
            f"({room} px for {len(palette)} colours) and at most 140"
        )
    if args.jitter_ramp < 0 or (args.jitter_ramp and not args.jitter):
        ap.error("--jitter-ramp: a step count > 0, with --jitter")
    if args.jitter_hold < 0 or (args.jitter_hold and not args.jitter_ramp):
        ap.error("--jitter-hold: a step count > 0, with --jitter-ramp")
    try:
        eval_jitters = [int(j) for j in args.eval_jitter.split(",") if j.strip()]
    except ValueError:
        ap.error(f"--eval-jitter {args.eval_jitter!r}: a comma list of whole pixels")
    if eval_jitters and not args.word_only:
        ap.error("--eval-jitter: with --word-only")
    if not all(map(fits, eval_jitters)):
        ap.error(
            f"--eval-jitter {args.eval_jitter}: each from 0 to less than half the gap between "
            f"places ({room} px for {len(palette)} colours)"
        )
    if args.save and args.image_position:
        ap.error("--save: not with --image-position (its embeddings are not part of the model)")
    if args.swap and not args.word_only:
        ap.error("--swap: with --word-only")
    if args.say_order and not args.swap:
        ap.error("--say-order: with --swap")
    if not 1 <= args.clicks <= 3 or args.clicks >= len(palette):
        ap.error(f"--clicks {args.clicks}: 1 to 3, fewer than the palette's colours")
    if args.clicks > 1 and (
        args.word_only or args.fixed_colour or args.warmup_colour or args.mix_word_only
    ):
        ap.error("--clicks: named screens only (no --word-only, --fixed-colour or their mixes)")
    if args.clicks > 1 and args.instruction_after_image:
        ap.error("--clicks: not with --instruction-after-image")
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
    if args.image_position:  # a submodule of the tower, so clone_step's clipping covers it
        visual = model.model.visual
        pos = ImagePosition(visual, model.config.text_config.hidden_size)
        visual.add_module("probe_position", pos)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    # one drawing of screens for training and evaluation: only the target rule differs
    draw = partial(
        named_scene,
        size=size,
        palette=palette,
        swap=args.swap,
        say_order=args.say_order,
        jitter=args.jitter,
    )
    if args.clicks > 1:
        draw = partial(ordered_scene, size=size, clicks=args.clicks, palette=palette)
    # every evaluation on the same fixed-seed screens; only the drawing's options differ
    clicks_on = partial(
        evaluate, vlm, enc, size, aset, args.eval_n, 10_000, after=args.instruction_after_image
    )
    curve, losses, t0 = [], [], time.monotonic()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0:
            named = partial(draw, fixed=args.fixed_colour, word_only=args.word_only)
            curve.append({"step": step, **clicks_on(named)})
            for k in range(1, args.clicks):
                later = clicks_on(named, turn=k)
                curve[-1].update({f"{key}{k + 1}": later[key] for key in later})
            for j in eval_jitters:
                other = clicks_on(partial(named, word_only=True, jitter=j))
                curve[-1].update({f"target@{j}": other["target"], f"blind@{j}": other["blind"]})
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
            fixed = args.warmup_colour if step < args.warmup_steps else args.fixed_colour
            jitter = args.jitter
            if args.jitter_ramp:
                jitter = ramped(args.jitter, step - args.jitter_hold, args.jitter_ramp)
            widgets, t, instruction = draw(rng, fixed=fixed, word_only=word_only, jitter=jitter)
            background = rng.randrange(20, 90)
            if isinstance(t, tuple):  # ordered: each clicked widget greyed, still there
                shots = screens(background, widgets, t, size)
                boxes = [widgets[i][0] for i in t]
            else:  # one click, the widget gone after it (the recorded runs' screens)
                shots = [draw_scene(background, widgets, size)]
                boxes = [widgets.pop(t)[0]]
                shots.append(draw_scene(background, widgets, size))
            actions = [
                *(f"Action: click(start_box='{_inside(rng, box, size, frame)}')" for box in boxes),
                "Action: finished(content='')",
            ]
            pngs = [enc.screenshot_png(s) for s in shots]
            ids = [enc.action_ids(a) for a in actions]
            seqs.append(encode(enc, instruction, pngs, ids, args.instruction_after_image))
        losses.append(clone_step(model, enc, seqs, opt))
    out = {"args": vars(args), "seconds": time.monotonic() - t0, "curve": curve}
    if args.save:
        vlm.save(args.save)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    extra = "".join(f" named at jitter {j} | blind at {j} |" for j in eval_jitters)
    turns = range(2, args.clicks + 1)
    extra += "".join(f" click {k}: clicks | named | any | blind |" for k in turns)
    print(
        "| step | loss | clicks | in the named widget | in any widget | blind to the name |" + extra
    )
    print(
        "|---:|---:|---:|---:|---:|---:|"
        + "---:|---:|" * len(eval_jitters)
        + "---:|" * 4 * len(turns)
    )
    for r in curve:
        loss = "-" if r["loss"] is None else f"{r['loss']:.3f}"
        print(
            f"| {r['step']} | {loss} | {r['clicks']:.2f} | {r['target']:.3f} | "
            f"{r['any']:.3f} | {r['blind']:.3f} |"
            + "".join(f" {r[f'target@{j}']:.3f} | {r[f'blind@{j}']:.3f} |" for j in eval_jitters)
            + "".join(
                f" {r[f'clicks{k}']:.2f} | {r[f'target{k}']:.3f} | {r[f'any{k}']:.3f} | "
                f"{r[f'blind{k}']:.3f} |"
                for k in turns
            )
        )


if __name__ == "__main__":
    main()
