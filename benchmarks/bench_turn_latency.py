"""Turn latency: action to settled observation, three ways, side by side in one run.

For every step of a corpus of actions across the built-in suite's apps (terminal, mousepad,
LibreOffice Writer, Chromium, VLC; menus, dialogs, app launches (Ctrl+Alt+T, and LibreOffice
and Chromium typed into a terminal), a file open) the script
measures the time from sending the action to holding the observation:

* **signal**: the guest waits until the X server reported no drawing (XDamage) and the
  desktop's processes were idle for a moment, then captures (what ``env.step`` does now);
* **polling**: screenshots until the picture has been still for 0.3 s, or 1 s when nothing
  changed (``wait_until_settled``; the fallback for desktops without our guest);
* **fixed**: OSWorld's pause, 2 s after each step, then a screenshot.

Each scenario runs once per way on a freshly reset desktop, interleaved, so load hits all three
alike. Stale frames: after the *signal* and *polling* observations the script waits 2 s more
and captures again; a difference that is not a blinking caret (or, on the ``ubuntu`` profile,
the top bar's clock, whose rows are masked) counts as stale, and is listed.

    uv run python benchmarks/bench_turn_latency.py [--profile openbox|ubuntu] \
        [--apps xterm,mousepad]

``--env-steps N`` instead times ``env.step`` itself for the issue's six terminal actions (a
launch, two commands typed, three that change nothing), N episodes per way.

The machine's load (``/proc/loadavg``) is printed with the table: absolute numbers on a loaded
machine are worse than idle, and the settle signal waits longer under load by design.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from osworld_gym.client import GuestClient
from osworld_gym.protocol.primitives import (
    Click,
    Hotkey,
    MoveTo,
    Press,
    Primitive,
    Scroll,
    TypeText,
)
from osworld_gym.providers.local import LocalProvider
from osworld_gym.settle import SettleConfig, compare_later, wait_until_settled
from PIL import Image

LATER_S = 2.0
FIXED_PAUSE_S = 2.0
#: Rows of the ubuntu profile's top bar (its clock ticks each minute); masked in the stale check.
TOPBAR_ROWS = 40


@dataclass
class Step:
    kind: str
    prims: Callable[[tuple[int, int, int, int]], list[Primitive]]  # window geometry -> actions


@dataclass
class Scenario:
    name: str
    launch: list[str]
    wm_class: str
    steps: list[Step]
    ready_timeout: float = 60.0


def center(g):
    x, y, w, h = g
    return x + w // 2, y + h // 2


def scenarios() -> list[Scenario]:
    c = center
    return [
        Scenario(
            "xterm",
            ["xterm"],
            "xterm",
            [
                Step("click, no change", lambda g: [Click(*c(g))]),
                Step("type: xterm", lambda g: [TypeText("echo hi\n")]),
                Step("type: xterm", lambda g: [TypeText("ls -la /usr/bin | head\n")]),
                Step("move, no change", lambda g: [MoveTo(c(g)[0] + 40, c(g)[1] + 20)]),
                Step("scroll, no change", lambda g: [Scroll(dy=-3, x=c(g)[0], y=c(g)[1])]),
                Step("type: xterm", lambda g: [TypeText("clear\n")]),
                Step("app launch", lambda g: [Hotkey(("ctrl", "alt", "t"))]),
                Step("type: xterm", lambda g: [TypeText("exit\n")]),
                Step("file open", lambda g: [TypeText("mousepad /etc/os-release &\n")]),
            ],
        ),
        # launches of the heavy apps, typed into a terminal as an agent would
        Scenario(
            "launch-libreoffice",
            ["xterm"],
            "xterm",
            [Step("app launch: soffice", lambda g: [TypeText("soffice --writer --norestore &\n")])],
        ),
        Scenario(
            "launch-chromium",
            ["xterm"],
            "xterm",
            [
                Step(
                    "app launch: chrome",
                    lambda g: [TypeText("google-chrome 'data:text/html,<h1>Hi</h1>' &\n")],
                )
            ],
        ),
        Scenario(
            "mousepad",
            ["mousepad"],
            "mousepad",
            [
                Step("click, no change", lambda g: [Click(*c(g))]),
                Step("type: mousepad", lambda g: [TypeText("hello world")]),
                Step("type: mousepad", lambda g: [TypeText("\nsecond line")]),
                Step("hotkey", lambda g: [Hotkey(("ctrl", "a"))]),
                Step("move, no change", lambda g: [MoveTo(c(g)[0] + 40, c(g)[1] + 20)]),
                Step("dialog open", lambda g: [Hotkey(("ctrl", "o"))]),
                Step("dialog close", lambda g: [Press("escape")]),
                Step("menu open", lambda g: [Press("f10")]),
                Step("menu close", lambda g: [Press("escape")]),
            ],
        ),
        Scenario(
            "libreoffice",
            ["soffice", "--writer", "--norestore"],
            "libreoffice",
            [
                Step("type: libreoffice", lambda g: [TypeText("Hello world")]),
                Step("hotkey", lambda g: [Hotkey(("ctrl", "b"))]),
                Step("type: libreoffice", lambda g: [TypeText(" bold")]),
                Step("dialog open", lambda g: [Hotkey(("ctrl", "o"))]),
                Step("dialog close", lambda g: [Press("escape")]),
                Step("menu open", lambda g: [Hotkey(("alt", "f"))]),
                Step("menu close", lambda g: [Press("escape")]),
            ],
            ready_timeout=180,
        ),
        Scenario(
            "chromium",
            [
                "google-chrome",
                "--start-maximized",
                "data:text/html,<h1>Start</h1><input autofocus>",
            ],
            "chrom",
            [
                Step("type: chromium", lambda g: [TypeText("hello")]),
                Step(
                    "page load",
                    lambda g: [
                        Hotkey(("ctrl", "l")),
                        TypeText("data:text/html,<h2>Second page</h2>\n"),
                    ],
                ),
                Step("hotkey", lambda g: [Hotkey(("ctrl", "t"))]),
                Step("hotkey", lambda g: [Hotkey(("ctrl", "w"))]),
                Step("move, no change", lambda g: [MoveTo(c(g)[0] + 40, c(g)[1] + 20)]),
            ],
            ready_timeout=120,
        ),
        Scenario(
            "vlc",
            ["vlc", "--no-qt-privacy-ask"],
            "vlc",
            [
                Step("dialog open", lambda g: [Hotkey(("ctrl", "o"))]),
                Step("dialog close", lambda g: [Press("escape")]),
                Step("menu open", lambda g: [Hotkey(("alt", "m"))]),
                Step("menu close", lambda g: [Press("escape")]),
            ],
            ready_timeout=120,
        ),
    ]


def window_geometry(client: GuestClient, wm_class: str) -> tuple[int, int, int, int] | None:
    out = client.execute(["wmctrl", "-lxG"], setup=True).get("output") or ""
    for line in out.splitlines():
        parts = line.split(None, 7)
        if len(parts) >= 7 and wm_class in parts[6].lower():
            x, y, w, h = (int(v) for v in parts[2:6])
            return x, y, w, h
    return None


def prepare(client: GuestClient, sc: Scenario) -> tuple[int, int, int, int]:
    """Fresh desktop, the scenario's app up, its window focused, the screen idle."""
    client.reset_desktop()
    client.launch(sc.launch)
    deadline = time.monotonic() + sc.ready_timeout
    while (g := window_geometry(client, sc.wm_class)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{sc.name}: no {sc.wm_class} window after {sc.ready_timeout} s")
        time.sleep(0.5)
    time.sleep(2.0)  # first paint, fonts, session restore prompts
    client.settled_screenshot_array(10.0)
    return window_geometry(client, sc.wm_class) or g


@dataclass
class Record:
    scenario: str
    kind: str
    method: str
    ms: float
    stale: str = ""
    capped: bool = False
    extra: dict = field(default_factory=dict)


def observe(client: GuestClient, method: str, previous: np.ndarray) -> tuple[np.ndarray, dict]:
    """The observation after an action, the way ``method`` gets it, and its settle facts."""
    if method == "signal":
        got = client.settled_screenshot_array(3.0)
        if got is None:
            raise RuntimeError("the guest has no settle signal (no DAMAGE extension?)")
        return got
    if method == "polling":
        return wait_until_settled(client.screenshot_array, SettleConfig(), previous)
    time.sleep(FIXED_PAUSE_S)
    return client.screenshot_array(), {}


def run(
    client: GuestClient,
    scs: list[Scenario],
    methods: list[str],
    ignore_top: int,
    save: Path | None = None,
    show_why: bool = False,
) -> list[Record]:
    """Every scenario once per method; ``save``: a folder for the frame pairs of stale turns;
    ``show_why``: print what kept each signal wait going (the guest's trace)."""
    records: list[Record] = []
    for sc in scs:
        for method in methods:
            try:
                geom = prepare(client, sc)
            except RuntimeError as e:
                print(f"skipped {sc.name}/{method}: {e}", flush=True)
                continue
            frame = client.screenshot_array()
            for step in sc.steps:
                prims = step.prims(geom)
                t0 = time.perf_counter()
                client.run_actions(prims)
                frame_new, facts = observe(client, method, frame)
                rec = Record(
                    sc.name,
                    step.kind,
                    method,
                    1000 * (time.perf_counter() - t0),
                    capped=bool(facts.get("settle_capped")),
                )
                timers = int(facts.get("settle_timers", 0))
                why = client.last_settle_why if method == "signal" else ""
                if "since_input_ms" in facts:  # the guest's own wait, without the transfers
                    why = f"guest {facts['since_input_ms']:.0f} ms: {why}"
                if method != "fixed":
                    time.sleep(LATER_S)
                    later = client.screenshot_array()
                    d = compare_later(frame_new, later, ignore_top=ignore_top)
                    rec.stale = d.kind
                    rec.extra = {"box": d.box, "pixels": d.pixels, "why": why}
                    if save is not None and not d.explained:
                        save.mkdir(parents=True, exist_ok=True)
                        stem = f"{sc.name}-{method}-{len(records):03d}"
                        Image.fromarray(frame_new).save(save / f"{stem}-observed.png")
                        Image.fromarray(later).save(save / f"{stem}-later.png")
                    frame = later
                else:
                    frame = frame_new
                records.append(rec)
                print(
                    f"{sc.name:12s} {method:8s} {step.kind:20s} {rec.ms:7.0f} ms "
                    f"{rec.stale}{' capped' if rec.capped else ''}"
                    f"{f' timers={timers}' if timers else ''} {rec.extra.get('box') or ''}"
                    f"{f'  why: {why}' if why and show_why else ''}",
                    flush=True,
                )
    return records


def table(records: list[Record], methods: list[str]) -> str:
    kinds = list(dict.fromkeys(r.kind for r in records))
    head = (
        "| action kind | n | "
        + " | ".join(f"{m} p50 ms" for m in methods)
        + " | stale (signal) | stale (polling) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def cell(kind: str | None, m: str) -> str:
        xs = [r.ms for r in records if r.method == m and (kind is None or r.kind == kind)]
        return f"{statistics.median(xs):.0f}" if xs else "-"

    def stale(kind: str | None, m: str) -> str:
        rs = [r for r in records if r.method == m and (kind is None or r.kind == kind)]
        bad = sum(r.stale == "changed" for r in rs)
        return f"{bad}/{len(rs)}" if rs else "-"

    for kind in [*kinds, None]:
        n = len([r for r in records if r.method == methods[0] and (kind is None or r.kind == kind)])
        lines.append(
            f"| {kind or '**all**'} | {n} | "
            + " | ".join(cell(kind, m) for m in methods)
            + f" | {stale(kind, 'signal')} | {stale(kind, 'polling')} |"
        )
    return "\n".join(lines)


ENV_ACTIONS = [
    ("hotkey ctrl+alt+t", "pyautogui.hotkey('ctrl', 'alt', 't')"),
    ("write 'ls -la /usr/bin | head\\n'", "pyautogui.write('ls -la /usr/bin | head\\n')"),
    ("write 'echo hi\\n'", "pyautogui.write('echo hi\\n')"),
    ("click on the terminal", "pyautogui.click(300, 300)"),
    ("scroll", "pyautogui.scroll(-3)"),
    ("moveTo", "pyautogui.moveTo(500, 400)"),
]


def env_steps(profile: str, reps: int) -> str:
    """The issue's measurement: ``env.step`` wall time per action on a terminal desktop, the
    settle signal against polling, alternating episodes of task os-mkdir-001."""
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    times: dict[tuple[str, bool], list[float]] = {}
    env = gym.make(
        "OSWorld-v0",
        provider="local",
        tasks="builtin",
        max_steps=50,
        provider_kwargs={"profile": profile},
    )
    try:
        for _ in range(reps):
            for signal in (True, False):
                env.unwrapped.settle = SettleConfig(signal=signal)
                env.reset(options={"task": "os-mkdir-001"})
                for name, action in ENV_ACTIONS:
                    t0 = time.perf_counter()
                    env.step(action)
                    times.setdefault((name, signal), []).append(1000 * (time.perf_counter() - t0))
    finally:
        env.close()
    lines = ["| env.step action | signal p50 ms | polling p50 ms |", "|---|---:|---:|"]
    for name, _ in ENV_ACTIONS:
        lines.append(
            f"| {name.replace('|', chr(92) + '|')} | "
            f"{statistics.median(times[(name, True)]):.0f} | "
            f"{statistics.median(times[(name, False)]):.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="openbox", choices=["openbox", "ubuntu"])
    ap.add_argument(
        "--apps",
        default="xterm,launch-libreoffice,launch-chromium,mousepad,libreoffice,chromium,vlc",
    )
    ap.add_argument("--methods", default="signal,polling,fixed")
    ap.add_argument(
        "--why",
        action="store_true",
        help="print what kept each signal wait going (the guest's trace)",
    )
    ap.add_argument("--json", help="also write every measurement to this file")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the corpus N times (the table's n counts every run)",
    )
    ap.add_argument("--save-stale", type=Path, help="folder for the frame pairs of stale turns")
    ap.add_argument(
        "--env-steps",
        type=int,
        metavar="REPS",
        help="instead: time env.step per action on a terminal desktop, REPS episodes",
    )
    args = ap.parse_args()
    if args.env_steps:
        load = open("/proc/loadavg").read().split()[:3]
        table_text = env_steps(args.profile, args.env_steps)
        print(f"profile {args.profile}, load average {' '.join(load)} at start\n\n{table_text}")
        return
    wanted = args.apps.split(",")
    scs = [s for s in scenarios() if s.name in wanted]
    methods = args.methods.split(",")
    load0 = open("/proc/loadavg").read().split()[:3]
    provider = LocalProvider(profile=args.profile)
    client = provider.start()
    try:
        records = [
            r
            for _ in range(args.repeat)
            for r in run(
                client,
                scs,
                methods,
                TOPBAR_ROWS if args.profile == "ubuntu" else 0,
                args.save_stale,
                args.why,
            )
        ]
    finally:
        provider.stop()
    load1 = open("/proc/loadavg").read().split()[:3]
    print(
        f"\nprofile {args.profile}, load average at start {' '.join(load0)}, at end "
        f"{' '.join(load1)} ({len(records)} turns)\n"
    )
    print(table(records, methods))
    stale = [r for r in records if r.stale == "changed"]
    for r in stale:
        print(
            f"stale: {r.scenario} {r.method} {r.kind} box={r.extra.get('box')} "
            f"pixels={r.extra.get('pixels')}{' (capped)' if r.capped else ''}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.__dict__ for r in records], f, indent=1)


if __name__ == "__main__":
    main()
