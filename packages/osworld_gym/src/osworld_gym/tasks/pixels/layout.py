"""Seeded layouts of the pixel family: where each coloured button is, and which ones to click.

A layout is plain data (JSON-able), drawn by the desktop app (:mod:`.app`) and read by the task
builder (:mod:`osworld_gym.tasks.pixels`) for the instruction, the evaluator's expected answer
and the oracle's clicks. The canvas is 640x360 at the screen's top-left corner, cut into a 5x3
grid of 128x120 cells: exactly the patch a tiny Qwen2.5-VL turns into one image token when it
sees a 640x360 screenshot (140x84 pixels, 5x3 tokens after the 2x2 merge). A button sits inside
one cell, at a seeded offset, so which token holds which colour is all the picture says.

>>> lay = make_layout("click", "train", 0)
>>> lay.kind, len(lay.targets), lay.targets[0] in [b.name for b in lay.buttons]
('click', 1, True)
>>> make_layout("click", "train", 0) == lay   # a pure function of (kind, split, index)
True
>>> x, y = lay.target_points()[0]
>>> lay.hit(x, y).name == lay.targets[0]
True
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

#: The canvas the app draws (pixels, at the screen's top-left corner).
CANVAS = (640, 360)
#: Columns and rows of cells; a button occupies one cell.
GRID = (5, 3)
CELL = (CANVAS[0] // GRID[0], CANVAS[1] // GRID[1])
#: Button size (pixels); centred in its cell up to a seeded offset of at most ``JITTER`` each way.
BUTTON = (88, 72)
JITTER = (12, 14)

#: Colour names and their fills (distinct in hue and brightness at 140x84).
PALETTE: dict[str, str] = {
    "red": "#e03131",
    "green": "#2f9e44",
    "blue": "#1c6fd6",
    "yellow": "#f5d21e",
    "purple": "#9c36b5",
    "orange": "#f7801a",
}
BACKGROUND = "#2b2f36"
#: A button already clicked turns this colour (and ignores further clicks).
SPENT = "#5c636a"
MENU_FILL = "#dee2e6"
PANEL_FILL = "#f8f9fa"

#: What each kind asks: how many buttons, how many clicks in order, or a menu.
KINDS: dict[str, dict[str, Any]] = {
    "click": {"buttons": (2, 4), "steps": 1},
    "click2": {"buttons": (3, 4), "steps": 2},
    "click3": {"buttons": (4, 4), "steps": 3},
    "menu": {"items": 3, "steps": 2},
}
SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class Button:
    """A clickable rectangle: ``name`` is what a click records."""

    name: str
    fill: str
    x: int
    y: int
    w: int
    h: int
    cell: tuple[int, int]
    label: str = ""

    def contains(self, px: float, py: float) -> bool:
        return self.x <= px < self.x + self.w and self.y <= py < self.y + self.h

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.w // 2, self.y + self.h // 2


@dataclass(frozen=True)
class Layout:
    """One task instance: what is drawn, and the clicks (by name, in order) that solve it.

    ``buttons`` are shown from the start; for ``menu`` they hold only the menu button, and
    ``items`` appear in ``panel`` (x, y, w, h) once it is clicked.
    """

    kind: str
    split: str
    index: int
    buttons: tuple[Button, ...]
    targets: tuple[str, ...]
    items: tuple[Button, ...] = ()
    panel: tuple[int, int, int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def instruction(self) -> str:
        if self.kind == "menu":
            return f"Open the menu and choose the {self.targets[0]} item."
        clicks = [f"the {t} button" for t in self.targets]
        return "Click " + ", then ".join(clicks) + "."

    @property
    def expected_events(self) -> list[str]:
        """What the app must have recorded, in order, for a success."""
        return ["menu", *self.targets] if self.kind == "menu" else list(self.targets)

    def target_points(self) -> list[tuple[int, int]]:
        """Screen points of the clicks that solve the task (the oracle's)."""
        by_name = {b.name: b for b in (*self.buttons, *self.items)}
        return [by_name[name].centre for name in self.expected_events]

    def hit(self, x: float, y: float, *, menu_open: bool = False) -> Button | None:
        """The widget under a click (``items`` only while the menu is open)."""
        for b in (*self.items,) if menu_open else ():
            if b.contains(x, y):
                return b
        for b in self.buttons:
            if b.contains(x, y):
                return b
        return None

    def signature(self) -> tuple:
        """What makes two instances the same task (offsets aside): cells, colours, targets."""
        return (
            self.kind,
            tuple(sorted((b.name, b.cell) for b in (*self.buttons, *self.items))),
            self.targets,
        )

    def to_json(self) -> dict[str, Any]:
        """The app's argument: the canvas and every widget."""
        return {
            "canvas": list(CANVAS),
            "background": BACKGROUND,
            "spent": SPENT,
            "buttons": [_widget(b) for b in self.buttons],
            "items": [_widget(b) for b in self.items],
            "panel": list(self.panel) if self.panel else None,
            "panel_fill": PANEL_FILL,
        }


def _widget(b: Button) -> dict[str, Any]:
    d = asdict(b)
    d.pop("cell")
    return d


def _button(rng: random.Random, name: str, fill: str, cell: tuple[int, int], label: str) -> Button:
    col, row = cell
    x = col * CELL[0] + (CELL[0] - BUTTON[0]) // 2 + rng.randint(-JITTER[0], JITTER[0])
    y = row * CELL[1] + (CELL[1] - BUTTON[1]) // 2 + rng.randint(-JITTER[1], JITTER[1])
    return Button(name, fill, x, y, BUTTON[0], BUTTON[1], cell, label)


def _cells() -> list[tuple[int, int]]:
    return [(c, r) for r in range(GRID[1]) for c in range(GRID[0])]


def make_layout(kind: str, split: str, index: int) -> Layout:
    """The ``index``-th instance of ``kind`` in ``split``, drawn from a generator seeded by all
    three (no other state). Held-out instances are not guaranteed distinct from training ones
    here; :func:`osworld_gym.tasks.pixels.family_layouts` skips those that coincide."""
    if kind not in KINDS:
        raise ValueError(f"unknown pixel task kind {kind!r}; one of {sorted(KINDS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"index must be a non-negative int, got {index!r}")
    rng = random.Random(f"pixels/{kind}/{split}/{index}")
    spec = KINDS[kind]
    if kind == "menu":
        col, row = rng.randrange(GRID[0]), rng.randrange(GRID[1] - 1)
        menu = _button(rng, "menu", MENU_FILL, (col, row), "Menu")
        names = rng.sample(sorted(PALETTE), spec["items"])
        first = min(max(col - 1, 0), GRID[0] - spec["items"])
        cells = [(first + i, row + 1) for i in range(spec["items"])]
        items = tuple(_button(rng, n, PALETTE[n], c, n) for n, c in zip(names, cells, strict=True))
        panel = (first * CELL[0] + 4, (row + 1) * CELL[1] + 2, spec["items"] * CELL[0] - 8,
                 CELL[1] - 4)  # fmt: skip
        return Layout(kind, split, index, (menu,), (rng.choice(names),), items, panel)
    n = rng.randint(*spec["buttons"])
    names = rng.sample(sorted(PALETTE), n)
    cells = rng.sample(_cells(), n)
    buttons = tuple(
        _button(rng, nm, PALETTE[nm], c, nm) for nm, c in zip(names, cells, strict=True)
    )
    targets = tuple(rng.sample(names, spec["steps"]))
    return Layout(kind, split, index, buttons, targets)
