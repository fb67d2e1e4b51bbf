"""A task-agnostic base policy for the tiny model: behaviour cloning on random valid actions.

ARPO starts from UI-TARS, a policy that already acts and sometimes succeeds. The tiny model starts
random, so it first learns the *grammar* of the UI-TARS action set: a short supervised phase on
episodes whose actions are drawn at random from that grammar (clicks at random points, generic
key chords, generic typed text, scrolls, waits, ``finished()`` and ``call_user()``), in contexts
with generic instructions and synthetic screenshots. Nothing comes from a task: no instruction,
no oracle, no evaluator (``tests/arpo_trainer/test_trainer_noleak.py`` checks the word lists against
every
built-in task). The result writes valid actions, independent of the task, so it solves the tasks a
random valid policy can solve (in practice: declaring an infeasible task infeasible with
``call_user()``) at a low rate, and ``arpo-train select-tasks`` keeps those.

The grounding mix (``--grounding SHARE``, issue 26) replaces a share of those episodes with
generic screens of 1 to 4 plain widgets (colours and words of their own, far from the pixel
family's, at any place and size) where every turn clicks inside one of them, which then
disappears, and ``finished()`` ends the episode once none is left: a policy that aims but knows
no task, what UI-TARS is to the paper. :func:`grounding_hit_rate` measures where a model clicks on
fresh screens of that kind. The tiny model with Qwen2.5-VL's M-RoPE layout (probed at theta
10,000) does not learn to aim from it within 1,000 cloning steps; with height and width
interleaved over the M-RoPE frequencies
(``build_tiny_vlm(rope_theta=100, mrope_section=[0, 1, 1] * 4)``) it does after about 4,000
(docs/learning.md, ``benchmarks/ablation/grounding/probe.py``).

Build one (about a minute on 2 CPU cores)::

    uv run python -m arpo_trainer.testing.base_policy --output runs/base-policy

and train from it with ``--model_name_or_path runs/base-policy``.

>>> import random
>>> rng = random.Random(0)
>>> text = random_action(rng, (448, 252))
>>> text.startswith("Action: ")
True
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arpo_trainer.batch import collate
from arpo_trainer.chat import EncodedSequence, TurnEncoder
from arpo_trainer.tiny import TINY_MAX_PIXELS, TinyVLM, build_tiny_vlm

log = logging.getLogger(__name__)

#: Generic requests for the contexts of the cloned episodes (no built-in task's text).
BC_INSTRUCTIONS: tuple[str, ...] = (
    "Look at the screen and do what is needed.",
    "Use the computer to finish the job you were given.",
    "Help me with something on this desktop.",
    "Carry out the request on this machine.",
    "Please take care of this for me.",
    "Work on the open window until it is done.",
    "Try to complete the request shown here.",
    "Do the thing I asked about earlier.",
)

#: Key chords a generic desktop user presses (single keys and common shortcuts).
BC_KEYS: tuple[str, ...] = (
    "enter",
    "tab",
    "esc",
    "backspace",
    "space",
    "ctrl c",
    "ctrl v",
    "ctrl z",
    "ctrl a",
    "ctrl f",
    "alt tab",
    "alt f4",
    "shift tab",
    "pagedown",
)

#: Generic text typed into whatever has focus (harmless, never a task's command).
BC_COMMANDS: tuple[str, ...] = (
    "hello",
    "ok",
    "yes",
    "test",
    "ls",
    "pwd",
    "whoami",
    "date",
    "echo hi",
    "cd ..",
    "the quick brown fox",
    "thanks",
)

#: Relative weights of the action kinds in a cloned turn (terminal calls: 1 in 5 turns).
ACTION_WEIGHTS: dict[str, float] = {
    "click": 0.22,
    "left_double": 0.05,
    "right_single": 0.05,
    "drag": 0.05,
    "scroll": 0.08,
    "hotkey": 0.12,
    "type": 0.18,
    "wait": 0.05,
    "finished": 0.10,
    "call_user": 0.10,
}
#: A pointer-first user: half its turns are clicks at random points, 1 in 17 a terminal call.
#: Still random (nothing tells it where to click: on the pixel family it succeeds in a few
#: percent of one-step episodes, docs/learning.md), but it gives up far less often than the
#: default mix, which keeps the family's early all-fail groups exploring.
POINTER_WEIGHTS: dict[str, float] = {
    **ACTION_WEIGHTS,
    "click": 0.50,
    "hotkey": 0.06,
    "type": 0.08,
    "finished": 0.03,
    "call_user": 0.03,
}
#: The mixes ``--mix`` names.
MIXES: dict[str, dict[str, float]] = {"default": ACTION_WEIGHTS, "pointer": POINTER_WEIGHTS}
TERMINAL = ("finished", "call_user")

#: Generic requests for the grounding episodes: click whatever widget is shown. None names a
#: colour or a place (``tests/arpo_trainer/test_trainer_noleak.py`` checks them against the
#: pixel family's instructions and colour names).
GROUNDING_INSTRUCTIONS: tuple[str, ...] = (
    "Press the buttons on the screen.",
    "Click every button you see, and stop.",
    "Dismiss the dialogs that pop up.",
    "Hit each box that appears until none is left.",
    "Answer each prompt by pressing it.",
    "Get rid of the boxes on this screen.",
)
#: Words written on the grounding widgets (generic dialog buttons; no colour, no menu).
GROUNDING_LABELS: tuple[str, ...] = ("OK", "Next", "Apply", "Yes", "Go", "Send", "Accept", "")
#: Fills of the grounding widgets, (r, g, b). Generic UI colours chosen far from the pixel
#: family's fills (``test_trainer_noleak.py`` checks the distance), jittered a little.
GROUNDING_FILLS: tuple[tuple[int, int, int], ...] = (
    (32, 201, 201),  # teal
    (150, 235, 255),  # sky
    (240, 101, 190),  # pink
    (150, 230, 60),  # lime
    (130, 140, 255),  # periwinkle
    (160, 110, 70),  # brown
    (190, 190, 150),  # khaki
    (90, 220, 170),  # mint
)
#: Widget sizes at 640x360 (width and height ranges, pixels): larger and smaller than a
#: typical button, at any place on the screen.
GROUNDING_SIZE = ((48, 160), (36, 110))


def _point(rng: random.Random, frame: tuple[int, int]) -> str:
    return f"({rng.randrange(frame[0])},{rng.randrange(frame[1])})"


def random_action(
    rng: random.Random,
    frame: tuple[int, int],
    *,
    kind: str | None = None,
    weights: dict[str, float] | None = None,
) -> str:
    """One valid UI-TARS action of ``kind`` (default: drawn by ``weights``, default
    :data:`ACTION_WEIGHTS`); points in the ``frame`` (width, height) of the screenshot the model
    sees."""
    if kind is None:
        weights = weights or ACTION_WEIGHTS
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    match kind:
        case "click" | "left_double" | "right_single":
            call = f"{kind}(start_box='{_point(rng, frame)}')"
        case "drag":
            call = f"drag(start_box='{_point(rng, frame)}', end_box='{_point(rng, frame)}')"
        case "scroll":
            direction = rng.choice(("up", "down"))
            call = f"scroll(start_box='{_point(rng, frame)}', direction='{direction}')"
        case "hotkey":
            call = f"hotkey(key='{rng.choice(BC_KEYS)}')"
        case "type":
            text = rng.choice(BC_COMMANDS) + ("\\n" if rng.random() < 0.5 else "")
            call = f"type(content='{text}')"
        case "wait":
            call = "wait()"
        case "finished":
            call = "finished(content='')"
        case "call_user":
            call = "call_user()"
        case _:
            raise ValueError(f"unknown action kind {kind!r}; one of {sorted(ACTION_WEIGHTS)}")
    return f"Action: {call}"


def random_episode(
    rng: random.Random,
    frame: tuple[int, int],
    max_turns: int,
    weights: dict[str, float] | None = None,
) -> list[str]:
    """Actions of one cloned episode: it ends at the first terminal call or after ``max_turns``."""
    actions: list[str] = []
    for _ in range(max_turns):
        actions.append(random_action(rng, frame, weights=weights))
        if actions[-1].removeprefix("Action: ").startswith(TERMINAL):
            break
    return actions


def synthetic_screenshot(rng: random.Random, size: tuple[int, int]) -> np.ndarray:
    """A desktop-like frame: a plain background with a few coloured windows."""
    w, h = size
    frame = np.full((h, w, 3), rng.randrange(20, 90), np.uint8)
    for _ in range(rng.randrange(0, 4)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = min(w, x0 + rng.randrange(20, w)), min(h, y0 + rng.randrange(20, h))
        frame[y0:y1, x0:x1] = [rng.randrange(256) for _ in range(3)]
    return frame


def grounding_fill(rng: random.Random) -> tuple[int, int, int]:
    """One of :data:`GROUNDING_FILLS`, each channel moved by up to 8."""
    r, g, b = (min(255, max(0, c + rng.randint(-8, 8))) for c in rng.choice(GROUNDING_FILLS))
    return r, g, b


Box = tuple[int, int, int, int]


def grounding_scene(
    rng: random.Random, size: tuple[int, int], n: int | None = None
) -> list[tuple[Box, tuple[int, int, int], str]]:
    """``n`` (default 1 to 4) non-overlapping widgets ``((x, y, w, h), fill, label)`` at random
    places on a ``size`` screen (any position, any size in :data:`GROUNDING_SIZE`)."""
    n = rng.randint(1, 4) if n is None else n
    widgets: list[tuple[Box, tuple[int, int, int], str]] = []
    for _ in range(200):
        if len(widgets) == n:
            break
        w = rng.randint(*GROUNDING_SIZE[0])
        h = rng.randint(*GROUNDING_SIZE[1])
        x, y = rng.randrange(size[0] - w), rng.randrange(size[1] - h)
        gap = 6
        if any(
            x < bx + bw + gap and bx < x + w + gap and y < by + bh + gap and by < y + h + gap
            for (bx, by, bw, bh), _, _ in widgets
        ):
            continue
        widgets.append(((x, y, w, h), grounding_fill(rng), rng.choice(GROUNDING_LABELS)))
    return widgets


def draw_scene(
    background: int, widgets: list[tuple[Box, tuple[int, int, int], str]], size: tuple[int, int]
) -> np.ndarray:
    """The screenshot of ``widgets`` on a plain grey ``background``."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", size, (background,) * 3)
    draw = ImageDraw.Draw(img)
    for (x, y, w, h), fill, label in widgets:
        draw.rectangle((x, y, x + w - 1, y + h - 1), fill=fill)
        if label:
            draw.text((x + w // 2, y + h // 2), label, fill=(20, 20, 20), anchor="mm")
    return np.asarray(img)


def _inside(rng: random.Random, box: Box, size: tuple[int, int], frame: tuple[int, int]) -> str:
    """A point of the model's ``frame`` that lands in the inner half of ``box`` on the screen."""
    x, y, w, h = box
    sx = x + w / 4 + rng.random() * w / 2
    sy = y + h / 4 + rng.random() * h / 2
    fx = min(frame[0] - 1, int(sx * frame[0] / size[0]))
    fy = min(frame[1] - 1, int(sy * frame[1] / size[1]))
    return f"({fx},{fy})"


def grounding_episode(
    rng: random.Random,
    size: tuple[int, int],
    frame: tuple[int, int],
    max_turns: int,
    widgets: int | None = None,
) -> tuple[list[np.ndarray], list[str]]:
    """Screens and actions of one grounding episode: every turn clicks one of the widgets shown
    (a random one), which then disappears; with none left the episode ends with ``finished()``.
    Task-agnostic: generic widgets, generic instructions, any widget is right."""
    background = rng.randrange(20, 90)
    scene = grounding_scene(rng, size, widgets)
    shots, actions = [], []
    for _ in range(max_turns):
        shots.append(draw_scene(background, scene, size))
        if not scene:
            actions.append("Action: finished(content='')")
            break
        box = scene.pop(rng.randrange(len(scene)))[0]
        verb = rng.choice(("click", "click", "click", "left_double"))
        actions.append(f"Action: {verb}(start_box='{_inside(rng, box, size, frame)}')")
    return shots, actions


@dataclass
class CloneReport:
    """What :func:`behaviour_clone` did."""

    steps: int
    first_loss: float
    last_loss: float
    seconds: float
    losses: list[float] = field(default_factory=list)
    curve: list[dict[str, float]] = field(default_factory=list)


def behaviour_clone(
    vlm: TinyVLM,
    encoder: TurnEncoder,
    *,
    screen_size: tuple[int, int] = (640, 360),
    max_turns: int = 3,
    steps: int = 150,
    batch_size: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
    weights: dict[str, float] | None = None,
    grounding: float = 0.0,
    grounding_widgets: int | None = None,
    eval_every: int = 0,
) -> CloneReport:
    """Supervised next-token training on random grammar episodes (loss on action tokens only).

    A share ``grounding`` of the episodes are :func:`grounding_episode` s (click the widget
    shown) instead. With ``eval_every`` > 0 the grounding hit rate
    (:func:`grounding_hit_rate`, 64 held-out screens) is measured every so many steps and
    kept in the report's ``curve``."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    frame = encoder.image_size(*screen_size)
    model = vlm.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses: list[float] = []
    curve: list[dict[str, float]] = []
    t0 = time.monotonic()
    for step in range(steps):
        if eval_every and step % eval_every == 0:
            curve.append({"step": step, **grounding_hit_rate(vlm, encoder, screen_size, n=64)})
            model.train()
            log.info("step %d: %s", step, curve[-1])
        seqs = []
        for _ in range(batch_size):
            if rng.random() < grounding:
                frames, actions = grounding_episode(
                    rng, screen_size, frame, max_turns, grounding_widgets
                )
                instruction = rng.choice(GROUNDING_INSTRUCTIONS)
            else:
                actions = random_episode(rng, frame, max_turns, weights)
                frames = [synthetic_screenshot(rng, screen_size) for _ in actions]
                instruction = rng.choice(BC_INSTRUCTIONS)
            shots = [encoder.screenshot_png(f) for f in frames]
            seqs.append(
                encoder.encode(instruction, shots, [encoder.action_ids(a) for a in actions])
            )
        losses.append(clone_step(model, encoder, seqs, opt))
        if step % 25 == 0 or step == steps - 1:
            log.info("behaviour cloning step %d/%d: loss %.3f", step + 1, steps, losses[-1])
    if eval_every:
        curve.append({"step": steps, **grounding_hit_rate(vlm, encoder, screen_size, n=64)})
    model.eval()
    return CloneReport(
        steps, losses[0], float(np.mean(losses[-10:])), time.monotonic() - t0, losses, curve
    )


def clone_step(
    model: torch.nn.Module,
    encoder: TurnEncoder,
    seqs: list[EncodedSequence],
    opt: torch.optim.Optimizer,
) -> float:
    """One supervised step on the encoded episodes ``seqs``: the mean next-token loss over their
    action tokens, backpropagated, clipped to norm 1 and applied by ``opt``. Returns the loss."""
    logits, batch = completion_logits(model, encoder, seqs)
    mask = batch["tool_mask"].float()
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        batch["completion_ids"].reshape(-1),
        reduction="none",
    ).view_as(mask)
    loss = (nll * mask).sum() / mask.sum()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def completion_logits(
    model: torch.nn.Module, encoder: TurnEncoder, seqs: list[EncodedSequence]
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The model's logits for every completion token of the encoded episodes ``seqs`` (position
    ``t`` predicts ``completion_ids[:, t]``), one forward over their collated batch, and the
    batch (``completion_ids``, ``tool_mask``...)."""
    batch, _ = collate(
        seqs, pad_id=encoder.tokenizer.pad_token_id, image_token_id=encoder.image_token_id
    )
    out = model(
        input_ids=torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
        attention_mask=torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
        pixel_values=encoder.model_pixels(batch["pixel_values"]),
        image_grid_thw=batch["image_grid_thw"],
        mm_token_type_ids=batch["mm_token_type_ids"],
    )
    n = batch["completion_ids"].size(1)
    return out.logits[:, -n - 1 : -1, :], batch


_POINT = re.compile(r"^Action: (click|left_double|right_single)\(start_box='\((\d+),(\d+)\)'\)")


@torch.no_grad()
def grounding_hit_rate(
    vlm: TinyVLM,
    encoder: TurnEncoder,
    screen_size: tuple[int, int] = (640, 360),
    *,
    n: int = 256,
    seed: int = 10_000,
    widgets: int | None = None,
    max_turn_tokens: int = 24,
    batch: int = 32,
    policy=None,
) -> dict[str, float]:
    """Where the model clicks on ``n`` fresh grounding screens (first turn, one sample each at
    temperature 1 under the action grammar, as the trainer samples).

    Returns the share of turns that are clicks (``click_share``), the share of clicks whose
    point lands in a widget on the screen (``hit``, the environment's own model-to-screen
    mapping), the share a uniformly random point would hit (``floor``: the widgets' area over
    the screen's), the share of all turns that hit (``hit_all``), and the share of clicks that
    land in a widget of the *next* screen instead (``hit_shuffled``: what the same clicks score
    if they ignore the screen; a blind policy has ``hit`` = ``hit_shuffled`` up to noise).
    Screens come from a generator seeded by ``seed`` (the cloning uses ``seed`` 0 and its own
    stream). ``policy`` (anything with ``sample(contexts)``) replaces the model's own sampler."""
    from osworld_gym.actions.uitars import UITarsActionSet

    from arpo_trainer.generation import (
        TransformersPolicy,
        action_constraint,
        turn_generation_config,
    )

    aset = UITarsActionSet(
        screen_size, max_pixels=encoder.max_pixels, min_pixels=encoder.min_pixels
    )
    rng = random.Random(seed)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    if policy is None:
        policy = TransformersPolicy(
            vlm.model,
            encoder,
            turn_generation_config(encoder, max_new_tokens=max_turn_tokens),
            action_constraint(encoder, aset.frame, max_turn_tokens),
        )
    clicks = hits = shuffled = 0
    area = 0.0
    for start in range(0, n, batch):
        scenes, contexts = [], []
        for _ in range(min(batch, n - start)):
            scene = grounding_scene(rng, screen_size, widgets)
            shot = encoder.screenshot_png(draw_scene(rng.randrange(20, 90), scene, screen_size))
            contexts.append(encoder.encode(rng.choice(GROUNDING_INSTRUCTIONS), [shot], []))
            scenes.append(scene)
            area += sum(w * h for (_, _, w, h), _, _ in scene) / (screen_size[0] * screen_size[1])
        turns = policy.sample(contexts)
        for i, (scene, turn) in enumerate(zip(scenes, turns, strict=True)):
            m = _POINT.match(turn.text)
            if not m:
                continue
            clicks += 1
            px, py = aset.point(f"({m[2]},{m[3]})")
            hits += any(x <= px < x + w and y <= py < y + h for (x, y, w, h), _, _ in scene)
            other = scenes[(i + 1) % len(scenes)]
            shuffled += any(x <= px < x + w and y <= py < y + h for (x, y, w, h), _, _ in other)
    torch.random.set_rng_state(torch_state)
    return {
        "click_share": clicks / n,
        "hit": hits / clicks if clicks else 0.0,
        "hit_all": hits / n,
        "hit_shuffled": shuffled / clicks if clicks else 0.0,
        "floor": area / n,
    }


def tiny_encoder(vlm: TinyVLM, *, max_turns: int = 3) -> TurnEncoder:
    """The encoder ``arpo-train`` builds for the tiny model with the UI-TARS prompt."""
    from osworld_gym.actions import make_action_set

    return TurnEncoder(
        vlm.processor,
        make_action_set("uitars", screen_size=(640, 360)).describe(),
        max_history_images=max_turns,
    )


def build_base_policy(
    output: str | Path,
    *,
    seed: int = 0,
    steps: int = 150,
    max_turns: int = 3,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int = 1024,
    fail_weight: float | None = None,
    mix: str = "default",
    grounding: float = 0.0,
    rope_theta: float | None = None,
    mrope_section: list[int] | None = None,
    extra_corpus: tuple[str, ...] = (),
    lr: float = 3e-3,
    eval_every: int = 0,
    max_pixels: int = TINY_MAX_PIXELS,
) -> tuple[Path, CloneReport]:
    """A tiny VLM (grammar tokenizer), behaviour-cloned on random actions (drawn by the ``mix``
    of :data:`MIXES`; a share ``grounding`` of the episodes are :func:`grounding_episode` s
    instead), saved to ``output``. ``rope_theta`` and ``mrope_section`` go to
    :func:`~arpo_trainer.tiny.build_tiny_vlm` (the grounded base of docs/learning.md needs the
    interleaved section); ``extra_corpus`` joins the tokenizer's corpus (the named-colour probe's
    follow-up, benchmarks/ablation/grounding/words_base.py). ``lr`` and ``eval_every`` go to
    :func:`behaviour_clone` (the report's ``curve`` then holds the grounding hit rate).
    ``max_pixels`` is the processor's screenshot budget (at the default a 640x360 screen is 15
    image tokens)."""
    if mix not in MIXES:
        raise ValueError(f"unknown action mix {mix!r}; one of {sorted(MIXES)}")
    vlm = build_tiny_vlm(
        seed=seed,
        hidden_size=hidden_size,
        num_layers=layers,
        vocab_size=vocab_size,
        rope_theta=rope_theta,
        mrope_section=mrope_section,
        extra_corpus=extra_corpus,
        max_pixels=max_pixels,
    )
    weights = dict(MIXES[mix])
    if fail_weight is not None:
        weights["call_user"] = fail_weight
    report = behaviour_clone(
        vlm,
        tiny_encoder(vlm, max_turns=max_turns),
        max_turns=max_turns,
        steps=steps,
        seed=seed,
        weights=weights,
        grounding=grounding,
        lr=lr,
        eval_every=eval_every,
    )
    return vlm.save(output), report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", default="runs/base-policy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--max_turns", type=int, default=3)
    parser.add_argument(
        "--fail_weight",
        type=float,
        default=None,
        help=f"weight of call_user() among the cloned actions (default "
        f"{ACTION_WEIGHTS['call_user']}; lower: a base policy that succeeds more rarely)",
    )
    parser.add_argument(
        "--mix",
        choices=sorted(MIXES),
        default="default",
        help="action kinds to clone: default (ACTION_WEIGHTS) or pointer (POINTER_WEIGHTS: half "
        "clicks, what the pixel-family demo starts from)",
    )
    parser.add_argument(
        "--grounding",
        type=float,
        default=0.0,
        help="share of cloned episodes that click a generic widget shown on the screen "
        "(grounding_episode) instead of a random point; at the default position encoding and "
        "150 steps the tiny model does not learn to aim from it (docs/learning.md: it takes the "
        "interleaved encoding and about 4,000 steps, benchmarks/ablation/grounding/probe.py)",
    )
    parser.add_argument(
        "--rope_theta",
        type=float,
        default=None,
        help="the text model's RoPE base (default: Qwen2.5-VL's 1,000,000)",
    )
    parser.add_argument(
        "--mrope",
        default=None,
        help="the text model's mrope_section, comma-separated, summing to 8 for the tiny model "
        "(default: Qwen2.5-VL's layout, 4,2,2); 0,1,1,0,1,1,0,1,1,0,1,1 interleaves height and "
        "width over every frequency, what the grounded base needs (docs/learning.md: "
        "--grounding 1 --steps 4000 --rope_theta 100 --mix pointer)",
    )
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if not 0.0 <= args.grounding <= 1.0:
        parser.error(f"--grounding must be in [0, 1], got {args.grounding}")
    mrope = None
    if args.mrope is not None:
        try:
            mrope = [int(v) for v in args.mrope.split(",")]
        except ValueError:
            parser.error(f"--mrope takes comma-separated integers, got {args.mrope!r}")
        # the sections split half a head of the CLI's tiny model (width 64, 4 heads): 8
        if any(v < 0 for v in mrope) or sum(mrope) != 8:
            parser.error(f"--mrope takes non-negative integers summing to 8, got {args.mrope!r}")
    if args.rope_theta is not None and args.rope_theta <= 0:
        parser.error(f"--rope_theta must be positive, got {args.rope_theta}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    path, rep = build_base_policy(
        args.output,
        seed=args.seed,
        steps=args.steps,
        max_turns=args.max_turns,
        fail_weight=args.fail_weight,
        mix=args.mix,
        grounding=args.grounding,
        rope_theta=args.rope_theta,
        mrope_section=mrope,
    )
    print(
        f"base policy: {path} ({rep.steps} steps, loss {rep.first_loss:.2f} -> "
        f"{rep.last_loss:.2f}, {rep.seconds:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
