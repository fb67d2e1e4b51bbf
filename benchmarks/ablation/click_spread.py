"""Where a policy clicks on the pixel family, and whether that depends on the screen.

    uv run --frozen python benchmarks/ablation/click_spread.py RUN_OR_EVAL_DIR [...] [--last 20]

A run directory (with ``rollouts.jsonl``) is read over its last ``--last`` training steps, the
policy's own trajectories only; an ``arpo-eval run`` directory over all its episodes. Points are
in the model's image frame (140x84 for the tiny model at 640x360) and are mapped to the family's
5x3 grid of 128x120 screen cells. For each directory it prints:

- the click points per cell (rows top to bottom), and the share of the busiest column;
- for the first click of each ``click`` episode: the share that lands in the target's cell and
  in any button's cell, against the same shares with the clicks shuffled among the episodes
  (mean over 200 shuffles);
- for the ``click`` episodes: their success, the success their left clicks replay to on their
  own layout (the app's rule: the buttons pressed, each once, must be exactly the target; this
  checks the replay against the real score), and the success the same click sequences reach on
  the other episodes' layouts (shuffled, mean over 200 shuffles), and the share of shuffles that
  score at least as many as the replay on their own layouts (a one-sided permutation p-value).

A policy blind to the screen clicks where it would anyway, so its hit rates and its success
equal the shuffled ones; a policy that reads the screen beats them.

Reading the screen is not reading the instruction: a policy could press the right number of
buttons, in an order that depends only on where they are, and ignore which colours the
instruction names. So for each button kind (``click``, ``click2``, ``click3``) it also prints
the instruction test: the episodes' left clicks are replayed on their own layouts, giving the
distinct buttons pressed in order. Had the instruction been any other one the layout allows
(every ordered choice of k of its n buttons, equally likely), that press sequence solves it only
if it is exactly k buttons long, and then for 1 instruction in n!/(n-k)!. The sum of those
chances over the episodes is the success an instruction-blind policy with the same clicks would
expect; the tail probability of the replayed successes under it (exact, a Poisson-binomial) says
whether the policy reads the instruction.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from math import perm
from pathlib import Path

from arpo_trainer.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS
from osworld_gym.actions.uitars import UITarsActionSet
from osworld_gym.errors import ActionError
from osworld_gym.outcome import read_score
from osworld_gym.tasks.pixels.layout import CANVAS, CELL, GRID, make_layout

#: The action set the tiny model's clicks went through: its image frame at 640x360 (140x84)
#: and the model-to-screen rounding are the environment's own.
ACTIONS = UITarsActionSet(CANVAS, max_pixels=TINY_MAX_PIXELS, min_pixels=TINY_MIN_PIXELS)
FRAME = ACTIONS.frame
POINT = re.compile(r"^Action: (?:click|left_double|right_single)\(start_box='\((\d+),(\d+)\)'\)")
LEFT = re.compile(r"^Action: (?:click|left_double)\(start_box='\((\d+),(\d+)\)'\)")
SPLIT = {"t": "train", "h": "heldout"}


def to_screen(x: int, y: int) -> tuple[int, int]:
    """The screen pixel of a model-frame point (the uitars action set's own mapping)."""
    return ACTIONS.point(f"({x},{y})")


def in_frame(x: int, y: int) -> bool:
    """Whether the point is a click at all (outside the frame the action set refuses it)."""
    try:
        to_screen(x, y)
    except ActionError:
        return False
    return True


def cell_of(x: int, y: int) -> tuple[int, int]:
    """The grid cell under a model-frame point."""
    sx, sy = to_screen(x, y)
    return min(sx // CELL[0], GRID[0] - 1), min(sy // CELL[1], GRID[1] - 1)


def left_clicks(actions: list[str]) -> list[tuple[int, int]]:
    """The model-frame points of an episode's left clicks that are clicks at all (in frame)."""
    points = [(int(m[1]), int(m[2])) for a in actions if (m := LEFT.match(a))]
    return [p for p in points if in_frame(*p)]


def pressed_by(lefts: list[tuple[int, int]], lay) -> list[str]:
    """The buttons these left clicks (model frame, inside it) press on a button layout, in
    order, each once (a pressed button greys out and ignores further clicks)."""
    pressed: list[str] = []
    for x, y in lefts:
        sx, sy = to_screen(x, y)
        for b in lay.buttons:
            if b.x <= sx < b.x + b.w and b.y <= sy < b.y + b.h and b.name not in pressed:
                pressed.append(b.name)
    return pressed


def replay_score(lefts: list[tuple[int, int]], lay) -> bool:
    """Whether these left clicks solve a button layout (``click``, ``click2``, ``click3``): the
    buttons they press are exactly the targets, in order."""
    return pressed_by(lefts, lay) == list(lay.targets)


def tail_at_least(chances: list[float], k: int) -> float:
    """P(at least ``k`` successes) among independent trials with these success chances."""
    dist = [1.0]  # dist[j]: probability of j successes so far
    for q in chances:
        nxt = [0.0] * (len(dist) + 1)
        for j, pj in enumerate(dist):
            nxt[j] += pj * (1 - q)
            nxt[j + 1] += pj * q
        dist = nxt
    return min(1.0, sum(dist[k:]))


BUTTON_KINDS = ("click", "click2", "click3")


def instruction_test(eps: list[tuple[str, list[str], float]]) -> dict[str, dict]:
    """Per button kind: success, replayed success, and what an instruction-blind policy with the
    same clicks would expect (module doc)."""
    out: dict[str, dict] = {}
    for kind in BUTTON_KINDS:
        rows = [(t, a, sc) for t, a, sc in eps if t.startswith(f"pixels-{kind}-")]
        if not rows:
            continue
        steps = len(layout_of(rows[0][0]).targets)
        chances: list[float] = []
        solved = exact = 0
        for task, actions, _ in rows:
            lay = layout_of(task)
            pressed = pressed_by(left_clicks(actions), lay)
            exact += len(pressed) == steps
            solved += pressed == list(lay.targets)
            chances.append(1 / perm(len(lay.buttons), steps) if len(pressed) == steps else 0.0)
        out[kind] = {
            "episodes": len(rows),
            "successes": sum(sc > 0.5 for _, _, sc in rows),
            "replayed_successes": solved,
            "pressed_exactly_k": exact,
            "instruction_blind_expected": sum(chances),
            "p_value": tail_at_least(chances, solved),
        }
    return out


def episodes(path: Path, last: int) -> list[tuple[str, list[str], float]]:
    """(task id, actions, score) per episode."""
    log = path / "rollouts.jsonl"
    if log.exists():
        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        rows = [r for r in rows if r.get("source") == "policy" and not r.get("infra_error")]
        steps = sorted({r["global_step"] for r in rows})[-last:]
        keep = set(steps)
        return [
            (r["task_id"], [t["action"] for t in r["turns"]], float(r["score"]))
            for r in rows
            if r["global_step"] in keep
        ]
    out = []
    for traj in sorted(path.rglob("traj.jsonl")):
        task = next((p for p in reversed(traj.parts) if p.startswith("pixels-")), None)
        if task is None:
            continue
        steps = [json.loads(x) for x in traj.read_text().splitlines() if x.strip()]
        score = read_score(traj.parent) or 0.0  # unscored counts as a failure here
        out.append((task, [str(s.get("action", "")) for s in steps], score))
    if not out:
        raise SystemExit(f"{path}: neither rollouts.jsonl nor traj.jsonl files with pixels tasks")
    return out


def layout_of(task_id: str):
    _, kind, rest = task_id.split("-")
    return make_layout(kind, SPLIT[rest[0]], int(rest[1:]))


def spread(path: Path, last: int, shuffles: int = 200) -> dict:
    eps = episodes(path, last)
    cells: Counter[tuple[int, int]] = Counter()
    first: list[tuple[tuple[int, int], object]] = []  # (first click's cell, layout) on `click`
    plays: list[tuple[list[tuple[int, int]], object, float]] = []  # (left clicks, layout, score)
    for task, actions, score in eps:
        points = [(int(m[1]), int(m[2])) for a in actions if (m := POINT.match(a))]
        pts = [cell_of(x, y) for x, y in points if in_frame(x, y)]
        cells.update(pts)
        if task.startswith("pixels-click-"):
            lay = layout_of(task)
            plays.append((left_clicks(actions), lay, score))
            if pts:
                first.append((pts[0], lay))

    def hits(pairs: list[tuple[tuple[int, int], object]]) -> tuple[float, float]:
        target = button = 0
        for c, lay in pairs:
            by_name = {b.name: b.cell for b in lay.buttons}
            target += c == by_name[lay.targets[0]]
            button += c in by_name.values()
        return target / max(1, len(pairs)), button / max(1, len(pairs))

    rng = random.Random(0)
    clicked = [c for c, _ in first]
    layouts = [lay for _, lay in first]
    shuffled = []
    for _ in range(shuffles):
        rng.shuffle(clicked)
        shuffled.append(hits(list(zip(clicked, layouts, strict=True))))
    sequences = [p[0] for p in plays]
    replayed = [replay_score(seq, lay) for seq, lay, _ in plays]
    shuffled_success = 0.0
    as_good = 0  # shuffles that score at least the episodes' own replayed successes
    for _ in range(shuffles):
        rng.shuffle(sequences)
        won = sum(replay_score(seq, lay) for seq, (_, lay, _) in zip(sequences, plays, strict=True))
        shuffled_success += won / max(1, len(plays))
        as_good += won >= sum(replayed)
    total = sum(cells.values())
    columns = [sum(cells[(c, r)] for r in range(GRID[1])) for c in range(GRID[0])]
    return {
        "dir": str(path),
        "episodes": len(eps),
        "points": total,
        "grid": [[cells[(c, r)] for c in range(GRID[0])] for r in range(GRID[1])],
        "busiest_column": columns.index(max(columns)),
        "busiest_column_share": max(columns) / max(1, total),
        "first_clicks": len(first),
        "target_cell": hits(first)[0],
        "target_cell_shuffled": sum(s[0] for s in shuffled) / shuffles,
        "button_cell": hits(first)[1],
        "button_cell_shuffled": sum(s[1] for s in shuffled) / shuffles,
        "click_episodes": len(plays),
        "successes": sum(sc > 0.5 for _, _, sc in plays),
        "replayed_successes": sum(replayed),
        "replay_agrees": sum(
            r == (sc > 0.5) for r, (_, _, sc) in zip(replayed, plays, strict=True)
        ),
        "shuffled_success": shuffled_success / shuffles,
        "shuffled_as_good": as_good / shuffles,
        "instruction": instruction_test(eps),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path)
    p.add_argument("--last", type=int, default=20, help="training steps read from a run's log")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    results = [spread(d, args.last) for d in args.dirs]
    print(
        "| dir | episodes | click points | busiest column (share) | first clicks on `click` "
        "| in the target's cell (shuffled) | in a button's cell (shuffled) "
        "| `click` success (replayed; shuffled; shuffles as good) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in results:
        print(
            f"| {s['dir']} | {s['episodes']} | {s['points']} | {s['busiest_column'] + 1} of 5 "
            f"({s['busiest_column_share']:.0%}) | {s['first_clicks']} | {s['target_cell']:.1%} "
            f"({s['target_cell_shuffled']:.1%}) | {s['button_cell']:.1%} "
            f"({s['button_cell_shuffled']:.1%}) | {s['successes']}/{s['click_episodes']} "
            f"({s['replayed_successes']}, agreeing on {s['replay_agrees']}; "
            f"{s['shuffled_success'] * s['click_episodes']:.1f}; {s['shuffled_as_good']:.0%}) |"
        )
    print(
        "\nThe instruction test: replayed on its own layout, an episode's clicks press the "
        "named buttons in order, against the successes the same presses expect whatever the "
        "instruction (module doc)\n"
    )
    print(
        "| dir | kind | episodes | success | replayed | pressed exactly k buttons "
        "| instruction-blind expectation | P(at least as many, blind) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in results:
        for kind, t in s["instruction"].items():
            print(
                f"| {s['dir']} | `{kind}` | {t['episodes']} | {t['successes']} "
                f"| {t['replayed_successes']} | {t['pressed_exactly_k']} "
                f"| {t['instruction_blind_expected']:.2f} | {t['p_value']:.2g} |"
            )
    for s in results:
        print(f"\n{s['dir']}: click points per cell (5 columns x 3 rows)")
        for row in s["grid"]:
            print("  " + " ".join(f"{n:4d}" for n in row))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
