#!/usr/bin/env python3
# Run as root: uv run python scripts/bench_judge_hold.py  (one desktop at a time, 640x480)
"""/execute latency with the freezer hold vs the SIGSTOP fallback, side by side in one run."""

import statistics
import time

from osworld_gym.providers.local import LocalProvider


def run(freezer: bool, n: int = 50) -> list[float]:
    p = LocalProvider(screen_size=(640, 480))
    if not freezer:
        import osworld_gym.providers.local as L

        orig = L.PlayerFreezer.create
        L.PlayerFreezer.create = classmethod(lambda cls, *a: None)
    try:
        c = p.start()
        c.execute("setsid sleep 300 </dev/null >/dev/null 2>&1 &", shell=True, setup=True)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            c.execute(["true"])
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        p.stop()
        if not freezer:
            L.PlayerFreezer.create = orig


rows = []
for mode in (True, False) * 3:
    ms = run(mode)
    rows.append(("freezer" if mode else "sigstop", statistics.median(ms), max(ms)))
print("| hold | median ms | max ms |\n|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} |")
