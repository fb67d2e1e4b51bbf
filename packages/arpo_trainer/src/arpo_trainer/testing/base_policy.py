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
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from arpo_trainer.batch import collate
from arpo_trainer.chat import TurnEncoder
from arpo_trainer.tiny import TinyVLM, build_tiny_vlm

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


@dataclass
class CloneReport:
    """What :func:`behaviour_clone` did."""

    steps: int
    first_loss: float
    last_loss: float
    seconds: float


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
) -> CloneReport:
    """Supervised next-token training on random grammar episodes (loss on action tokens only)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    frame = encoder.image_size(*screen_size)
    model = vlm.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses: list[float] = []
    t0 = time.monotonic()
    for step in range(steps):
        seqs = []
        for _ in range(batch_size):
            actions = random_episode(rng, frame, max_turns, weights)
            shots = [
                encoder.screenshot_png(synthetic_screenshot(rng, screen_size)) for _ in actions
            ]
            seqs.append(
                encoder.encode(
                    rng.choice(BC_INSTRUCTIONS), shots, [encoder.action_ids(a) for a in actions]
                )
            )
        batch, _ = collate(
            seqs, pad_id=encoder.tokenizer.pad_token_id, image_token_id=encoder.image_token_id
        )
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            pixel_values=encoder.model_pixels(batch["pixel_values"]),
            image_grid_thw=batch["image_grid_thw"],
            mm_token_type_ids=batch["mm_token_type_ids"],
        )
        n = batch["completion_ids"].size(1)
        logits = out.logits[:, -n - 1 : -1, :]
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
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            log.info("behaviour cloning step %d/%d: loss %.3f", step + 1, steps, losses[-1])
    model.eval()
    return CloneReport(steps, losses[0], float(np.mean(losses[-10:])), time.monotonic() - t0)


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
) -> tuple[Path, CloneReport]:
    """A tiny VLM (grammar tokenizer), behaviour-cloned on random actions (drawn by the ``mix``
    of :data:`MIXES`), saved to ``output``."""
    if mix not in MIXES:
        raise ValueError(f"unknown action mix {mix!r}; one of {sorted(MIXES)}")
    vlm = build_tiny_vlm(
        seed=seed, hidden_size=hidden_size, num_layers=layers, vocab_size=vocab_size
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    path, rep = build_base_policy(
        args.output,
        seed=args.seed,
        steps=args.steps,
        max_turns=args.max_turns,
        fail_weight=args.fail_weight,
        mix=args.mix,
    )
    print(
        f"base policy: {path} ({rep.steps} steps, loss {rep.first_loss:.2f} -> "
        f"{rep.last_loss:.2f}, {rep.seconds:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
