"""The pixel family: small procedurally varied desktop tasks a tiny policy can learn from pixels.

MiniWoB++ in miniature, on the real desktop: a small Tk app (:mod:`.app`) shows coloured buttons
at seeded places on a 640x360 canvas, and the instruction names the ones to click. Where to
click depends on the screenshot (where each colour is) *and* on the instruction (which colour):
neither alone tells. Four kinds (:data:`~.layout.KINDS`):

* ``click``: "Click the red button." among 2-4 buttons (one step);
* ``click2`` / ``click3``: "Click the red button, then the blue button[, then ...]." among 3-4
  buttons, in that order (two / three steps; a clicked button turns grey);
* ``menu``: "Open the menu and choose the green item.": click the menu button, then one of the
  three coloured items of the panel it opens below itself (two steps).

Each instance is a task in OSWorld's format with its own id (``pixels-click-t007``: kind, split
``t``\\ rain or ``h``\\ eld-out, index), its oracle (the clicks), and an evaluator that asks the
app, judge-side, what was clicked: ``curl`` on the app's port, which the guest only lets a
listener it trusts answer (the app, launched by setup). Success is the exact sequence: a wrong
button, an extra click or nothing at all scores 0. The held-out split has the same kinds but no
instance whose cells, colours and targets equal a training instance's.

Load them with the spec ``pixels[:SPLIT[:KINDS[:N]]]`` anywhere a task source is taken
(``load_tasks``, ``gym.make(..., tasks=...)``, ``arpo-train --tasks``, ``arpo-eval --tasks``):

>>> from osworld_gym.tasks.pixels import family_tasks, parse_spec
>>> parse_spec("pixels:heldout:click,menu:8")
(('heldout',), ('click', 'menu'), 8)
>>> tasks = family_tasks("pixels:train:click:2")
>>> [t["id"] for t in tasks]
['pixels-click-t000', 'pixels-click-t001']
>>> tasks[0]["instruction"] == make_layout("click", "train", 0).instruction
True
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from osworld_gym.tasks.pixels.layout import KINDS, SPLITS, Layout, make_layout

__all__ = [
    "APP_PATH",
    "DEFAULT_SIZES",
    "KINDS",
    "PORT",
    "SPEC",
    "SPLITS",
    "Layout",
    "app_asset",
    "app_url",
    "family_layouts",
    "family_tasks",
    "is_family_spec",
    "make_layout",
    "parse_spec",
    "task_dict",
]

#: The spec's name (``pixels``, ``pixels:train``, ...).
SPEC = "pixels"
#: Port the app answers the judge on (inside the desktop's own network namespace).
PORT = 7531
#: Where setup writes the app inside the desktop.
APP_PATH = "/home/user/.local/share/pixels/app.py"
#: Instances per kind when a spec gives no count.
DEFAULT_SIZES = {"train": 64, "heldout": 64}
#: Held-out instances are kept distinct from this many training instances per kind.
TRAIN_POOL = 1024


def parse_spec(spec: str) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """``pixels[:SPLIT[:KINDS[:N]]]`` -> (splits, kinds, instances per kind or None).

    SPLIT is ``train``, ``heldout`` or ``all``; KINDS a comma-separated list or ``all``.

    >>> parse_spec("pixels")
    (('train', 'heldout'), ('click', 'click2', 'click3', 'menu'), None)
    >>> parse_spec("pixels:train:nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: pixels spec 'pixels:train:nope': unknown kind 'nope'; one of click, click2, ...
    """
    parts = spec.split(":")
    if parts[0] != SPEC or len(parts) > 4:
        raise ValueError(f"not a pixels spec: {spec!r}; expected pixels[:SPLIT[:KINDS[:N]]]")
    split = parts[1] if len(parts) > 1 and parts[1] else "all"
    if split != "all" and split not in SPLITS:
        raise ValueError(
            f"pixels spec {spec!r}: unknown split {split!r}; one of train, heldout, all"
        )
    splits = SPLITS if split == "all" else (split,)
    kinds_text = parts[2] if len(parts) > 2 and parts[2] else "all"
    kinds = tuple(KINDS) if kinds_text == "all" else tuple(kinds_text.split(","))
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"pixels spec {spec!r}: unknown kind {k!r}; one of {', '.join(KINDS)}")
    n: int | None = None
    if len(parts) > 3:
        if not parts[3].isdigit() or int(parts[3]) < 1:
            raise ValueError(f"pixels spec {spec!r}: N must be a positive integer")
        n = int(parts[3])
    return splits, kinds, n


def is_family_spec(spec: Any) -> bool:
    """Whether ``spec`` is a string naming the pixel family."""
    return isinstance(spec, str) and (spec == SPEC or spec.startswith(SPEC + ":"))


def _distinct(split: str, kind: str, n: int, exclude: frozenset[tuple]) -> list[Layout]:
    out: list[Layout] = []
    seen = set(exclude)
    index = 0
    while len(out) < n:
        lay = make_layout(kind, split, index)
        if lay.signature() not in seen:
            seen.add(lay.signature())
            out.append(lay)
        index += 1
    return out


@cache
def _train_signatures(kind: str) -> frozenset[tuple]:
    return frozenset(lay.signature() for lay in _distinct("train", kind, TRAIN_POOL, frozenset()))


def family_layouts(split: str, kind: str, n: int) -> list[Layout]:
    """The first ``n`` instances of ``kind`` in ``split``, all different (offsets aside: same
    cells, colours and targets is the same task). Held-out ones also differ from each of the
    first :data:`TRAIN_POOL` training instances. Indices that repeat are skipped, so ids may
    have gaps."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    if split == "train":
        if n > TRAIN_POOL:
            raise ValueError(f"at most {TRAIN_POOL} training instances per kind, asked {n}")
        return _distinct(split, kind, n, frozenset())
    return _distinct(split, kind, n, _train_signatures(kind))


def task_id(layout: Layout) -> str:
    return f"pixels-{layout.kind}-{layout.split[0]}{layout.index:03d}"


def task_dict(layout: Layout) -> dict[str, Any]:
    """The OSWorld task JSON of one instance (with its oracle)."""
    expected = "events:" + "".join(" " + e for e in layout.expected_events) + "\n"
    oracle: list[str] = []
    for x, y in layout.target_points():
        oracle += [f"pyautogui.click({x}, {y})", "time.sleep(0.2)"]
    return {
        "id": task_id(layout),
        "snapshot": "pixels",
        "instruction": layout.instruction,
        "source": "osworld-gym pixel family (osworld_gym.tasks.pixels)",
        "config": [
            {
                "type": "download",
                "parameters": {"files": [{"url": app_url(), "path": APP_PATH}]},
            },
            {
                "type": "launch",
                "parameters": {
                    "command": [
                        "python3",
                        "-I",
                        APP_PATH,
                        "--port",
                        str(PORT),
                        "--layout",
                        json.dumps(layout.to_json(), separators=(",", ":")),
                    ]
                },
            },
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "curl",
                        "-sf",
                        "--max-time",
                        "2",
                        f"http://127.0.0.1:{PORT}/ready",
                    ],
                    "until": {"stdout": "ready"},
                },
            },
        ],
        "related_apps": ["pixels"],
        "evaluator": {
            "func": "exact_match",
            "result": {
                "type": "vm_command_line",
                "command": [
                    "bash",
                    "-c",
                    f"curl -s --max-time 5 http://127.0.0.1:{PORT}/state || true",
                ],
                "shell": False,
            },
            "expected": {"type": "rule", "rules": {"expected": expected}},
        },
        "proxy": False,
        "fixed_ip": False,
        "possibility_of_env_change": "low",
        "domain": "pixels",
        "difficulty": {1: "easy", 2: "medium"}.get(len(layout.expected_events), "hard"),
        "oracle": oracle,
        "pixels": {
            "kind": layout.kind,
            "split": layout.split,
            "index": layout.index,
            "targets": list(layout.targets),
            "steps": len(layout.expected_events),
        },
    }


def family_tasks(spec: str = SPEC) -> list[dict[str, Any]]:
    """The task JSON objects a ``pixels...`` spec names, kind by kind, training first."""
    splits, kinds, n = parse_spec(spec)
    out = []
    for split in splits:
        for kind in kinds:
            layouts = family_layouts(split, kind, n or DEFAULT_SIZES[split])
            out += [task_dict(lay) for lay in layouts]
    return out


@cache
def _app_source() -> bytes:
    # this is the package's __init__, so __name__ is the package (__package__ is typed Optional)
    return resources.files(__name__).joinpath("app.py").read_bytes()


def app_url() -> str:
    """The app's asset URL. It names the source's digest: setup downloads are cached by URL, so
    a changed app is a new URL, never a stale cached copy."""
    return f"builtin-asset://pixels_app?v={hashlib.sha256(_app_source()).hexdigest()[:16]}"


def app_asset(params: dict[str, str]) -> bytes:
    """``builtin-asset://pixels_app?v=DIGEST``: the app's source (:mod:`.app`), if ``v`` is its
    digest (a task written for another version of the app is refused, not run with this one)."""
    source = _app_source()
    digest = hashlib.sha256(source).hexdigest()[:16]
    if set(params) != {"v"} or params["v"] != digest:
        raise ValueError(f"pixels_app needs v={digest} (this version of the app), got {params}")
    return source
