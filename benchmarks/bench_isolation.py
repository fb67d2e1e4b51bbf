"""What judge/player isolation costs: desktop startup and reset, side by side in one run.

Rows: the default local desktop (two identities, allowlist mounts, cgroup limits, tmpfs home)
and the same desktop with isolation switched off as far as options allow (one identity, no
limits, plain home dir). Run it on a quiet machine; on a shared one the numbers are noisy.

    uv run python benchmarks/bench_isolation.py [--n 5]
"""

from __future__ import annotations

import argparse
import time

from osworld_gym.providers.local import LocalProvider

CONFIGS = {
    "isolated (default)": {},
    "one identity, no limits": {
        "judge_separation": False,
        "memory_limit": None,
        "pids_limit": None,
        "home_size": None,
        "tmp_size": None,
    },
}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5, help="startups per configuration")
    ap.add_argument("--resets", type=int, default=10, help="resets per startup")
    args = ap.parse_args()
    results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in CONFIGS}
    for _ in range(args.n):  # interleaved, so load changes hit both rows alike
        for name, kwargs in CONFIGS.items():
            p = LocalProvider(screen_size=(1920, 1080), **kwargs)
            t0 = time.perf_counter()
            client = p.start()
            results[name][0].append(1000 * (time.perf_counter() - t0))
            try:
                for _ in range(args.resets):
                    client.launch(["xterm"])
                    client.execute(["bash", "-c", "touch ~/Desktop/junk-$RANDOM"], setup=True)
                    t0 = time.perf_counter()
                    p.reset_state()
                    results[name][1].append(1000 * (time.perf_counter() - t0))
            finally:
                p.stop()
    print(f"{'configuration':<28} {'startup p50':>12} {'p95':>8} {'reset p50':>10} {'p95':>8}")
    for name, (starts, resets) in results.items():
        print(
            f"{name:<28} {pct(starts, 0.5):>10.0f}ms {pct(starts, 0.95):>6.0f}ms "
            f"{pct(resets, 0.5):>8.1f}ms {pct(resets, 0.95):>6.1f}ms"
        )


if __name__ == "__main__":
    main()
