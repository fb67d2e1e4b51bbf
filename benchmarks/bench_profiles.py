"""Desktop profiles side by side: what the Ubuntu-like look costs over bare openbox.

For each profile (``openbox``, ``ubuntu``), in one run and interleaved so machine load hits both
alike, on real sandboxed 1920x1080 desktops:

* **memory**: PSS and RSS summed over the sandbox's whole process tree (bwrap, guest, Xvfb, WM,
  panels, bus, apps), idle after reset and again with the terminal that Ctrl+Alt+T opens
  (xterm on openbox, GNOME Terminal on ubuntu);
* **startup**: ``LocalProvider.start()`` until the guest answers and the first reset is done;
* **reset**: ``env.reset`` of a built-in task (``info["timings"]["reset_ms"]``) after the
  terminal was opened, so there is something to kill;
* **turn**: ``env.step`` of a key press until the screen settled (wall clock and
  ``info["timings"]``).

    uv run python benchmarks/bench_profiles.py [--n 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
from osworld_gym.providers.local import LocalProvider

PROFILES = ("openbox", "ubuntu")
TASK = "os-mkdir-001"


def tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_bytes()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(b")", 1)[1].split()[1]), []).append(int(entry.name))
    out, todo = [root], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def memory_mib(root: int) -> tuple[float, float]:
    """(PSS, RSS) in MiB summed over the process tree under ``root``."""
    pss = rss = 0
    for pid in tree(root):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            continue
    return pss / 1024, rss / 1024


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def wait_for_terminal(env, marker: str, timeout: float = 30.0) -> None:
    client = env.unwrapped.provider.start()
    deadline = time.monotonic() + timeout
    while marker not in client.execute("wmctrl -lx", shell=True, timeout=10)["output"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {marker} window after {timeout} s")
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5, help="samples per measurement and profile")
    args = ap.parse_args()
    res: dict[str, dict[str, list[float]]] = {p: {} for p in PROFILES}

    def add(profile: str, key: str, value: float) -> None:
        res[profile].setdefault(key, []).append(value)

    for _ in range(args.n):  # startup, interleaved
        for profile in PROFILES:
            p = LocalProvider(profile=profile)
            t0 = time.perf_counter()
            p.start()
            add(profile, "startup_ms", 1000 * (time.perf_counter() - t0))
            p.stop()

    envs = {
        p: gym.make("OSWorld-v0", provider="local", tasks="builtin", provider_kwargs={"profile": p})
        for p in PROFILES
    }
    markers = {"openbox": "xterm.XTerm", "ubuntu": "gnome-terminal-server"}
    try:
        for _ in range(args.n):
            for profile, env in envs.items():
                env.reset(options={"task": TASK})
                time.sleep(1.0)  # let the desktop go idle before sampling memory
                pss, rss = memory_mib(env.unwrapped.provider.pid)
                add(profile, "pss_idle", pss)
                add(profile, "rss_idle", rss)
                for _ in range(5):
                    t0 = time.perf_counter()
                    _, _, _, _, info = env.step("pyautogui.press('shift')")
                    add(profile, "turn_ms", 1000 * (time.perf_counter() - t0))
                    add(profile, "turn_observe_ms", info["timings"].get("observe_ms", 0.0))
                env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
                wait_for_terminal(env, markers[profile])
                time.sleep(1.0)
                pss, rss = memory_mib(env.unwrapped.provider.pid)
                add(profile, "pss_terminal", pss)
                add(profile, "rss_terminal", rss)
                _, info = env.reset(options={"task": TASK})
                add(profile, "reset_ms", info["timings"]["reset_ms"])
    finally:
        for env in envs.values():
            env.close()

    rows = [
        ("memory idle, PSS (MiB)", "pss_idle"),
        ("memory idle, RSS (MiB)", "rss_idle"),
        ("memory with a terminal open, PSS (MiB)", "pss_terminal"),
        ("memory with a terminal open, RSS (MiB)", "rss_terminal"),
        ("startup: start() until ready (ms)", "startup_ms"),
        ("reset: env.reset after a terminal was opened (ms)", "reset_ms"),
        ("turn: env.step of a key press until settled (ms)", "turn_ms"),
        ("turn: of which observe/settle (ms)", "turn_observe_ms"),
    ]
    print(f"medians of {args.n} samples per cell (turn: {5 * args.n}); one run, interleaved\n")
    print("| measurement | openbox | ubuntu | ubuntu / openbox |")
    print("|---|---:|---:|---:|")
    for label, key in rows:
        a, b = med(res["openbox"].get(key, [])), med(res["ubuntu"].get(key, []))
        print(f"| {label} | {a:.1f} | {b:.1f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
