"""CPU and RAM of one desktop of our docker image while it runs real apps: what a desktop node of
the paper's recipe must provide per desktop (docs/recipe.md sizes nodes from this table).

N desktops (containers of ``--image``, 1920x1080, the recipe's screen) each play the oracles of
built-in tasks that open LibreOffice Calc, Writer and Impress, Chromium, VLC and a multi-app task,
one episode after another, all N at once, as a desktop node's desktops do during a rollout. A
sampler reads every 0.5 s, per container:

* **CPU**: the container's CPU time (Docker's counter, ``stats(one_shot=True)``): CPU-seconds
  per episode and the mean number of cores it kept busy while playing;
* **RAM**: the proportional set size (PSS: shared pages split between their users) summed over
  the container's processes, so N desktops' sum is what they take together; peak and mean.

Also measured before the episodes: the idle desktop (up, nothing launched). Timings on a loaded
machine stretch the episodes but not their CPU-seconds much; RAM does not depend on load.

    uv run python benchmarks/bench_desktop_footprint.py --image osworld-gym:0.1.0-full --desktops 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
from osworld_gym.image.build import docker_client

TASKS = (
    "libreoffice_calc-total-row-001",
    "chrome-follow-link-001",
    "libreoffice_writer-center-title-001",
    "vlc-pause-001",
    "libreoffice_impress-bold-title-001",
    "multi_apps-staff-csv-001",
)


def container_pids(container_id: str) -> list[int]:
    """The container's processes (its cgroup, v1 or v2), wherever the provider moved their
    memory and pids cgroups."""
    for procs in (
        Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cgroup.procs"),
        Path(f"/sys/fs/cgroup/cpu,cpuacct/docker/{container_id}/cgroup.procs"),
        Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cgroup.procs"),
    ):
        if procs.is_file():
            return [int(p) for p in procs.read_text().split()]
    raise RuntimeError(f"no cgroup found for container {container_id}")


def pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue  # it exited
    return total


class Sampler(threading.Thread):
    def __init__(self, containers: list, interval: float = 0.5):
        super().__init__(daemon=True)
        self.containers, self.interval = containers, interval
        self.samples: list[list[tuple[float, float, int]]] = [[] for _ in containers]
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for i, c in enumerate(self.containers):
                try:
                    cpu = c.stats(stream=False, one_shot=True)["cpu_stats"]["cpu_usage"]
                    pss = pss_bytes(container_pids(c.id))
                except Exception:  # noqa: BLE001 - a container going away at the end
                    continue
                self.samples[i].append((time.monotonic(), cpu["total_usage"] / 1e9, pss))
            self.stop.wait(self.interval)

    def window(self, i: int, t0: float, t1: float) -> tuple[float, float, float]:
        """(CPU-seconds, mean PSS, peak PSS) of container ``i`` between ``t0`` and ``t1``."""
        rows = [s for s in self.samples[i] if t0 <= s[0] <= t1]
        if len(rows) < 2:
            return float("nan"), float("nan"), float("nan")
        pss = [r[2] for r in rows]
        return rows[-1][1] - rows[0][1], statistics.mean(pss), max(pss)


def play(env, tasks: list[str], log: list[dict]) -> None:
    for task_id in tasks:
        t0 = time.monotonic()
        env.reset(options={"task": task_id})
        reward, steps, errors = 0.0, 0, []
        term = trunc = False
        for action in [*env.unwrapped.task.oracle, "DONE"]:
            _, reward, term, trunc, info = env.step(action)
            steps += 1
            errors += [e for e in (info.get("action_error"), info.get("infra_error")) if e]
            if term or trunc:
                break
        log.append({"task": task_id, "start": t0, "end": time.monotonic(), "steps": steps,
                    "reward": reward, "errors": errors})  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image", required=True)
    p.add_argument("--desktops", type=int, default=3)
    p.add_argument("--rounds", type=int, default=1, help="times each desktop plays the tasks")
    p.add_argument("--idle-s", type=float, default=20.0)
    p.add_argument("--json", help="also write the raw figures here")
    args = p.parse_args()

    dk = docker_client()
    envs = [
        gym.make(
            "OSWorld-v0",
            provider="docker",
            tasks="builtin",
            screen_size=(1920, 1080),
            max_steps=30,
            provider_kwargs={"image": args.image},
        )  # fmt: skip
        for _ in range(args.desktops)
    ]
    try:
        for e in envs:
            e.unwrapped.provider.start()
        containers = [dk.containers.get(e.unwrapped.provider.container_id) for e in envs]
        sampler = Sampler(containers)
        sampler.start()
        t_idle = time.monotonic()
        time.sleep(args.idle_s)
        t_play = time.monotonic()
        logs: list[list[dict]] = [[] for _ in envs]
        threads = []
        for i, e in enumerate(envs):
            order = list(TASKS[i % len(TASKS) :] + TASKS[: i % len(TASKS)]) * args.rounds
            threads.append(threading.Thread(target=play, args=(e, order, logs[i])))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_end = time.monotonic()
        time.sleep(1.0)
        sampler.stop.set()
        sampler.join()
    finally:
        for e in envs:
            e.close()

    rows = []
    for i in range(len(envs)):
        idle_cpu, idle_pss, _ = sampler.window(i, t_idle, t_play)
        cpu, mean_pss, peak_pss = sampler.window(i, t_play, t_end)
        episodes = logs[i]
        rows.append({
            "desktop": i, "episodes": len(episodes),
            "solved": sum(1 for x in episodes if x["reward"] >= 1.0),
            "steps": sum(x["steps"] for x in episodes), "wall_s": t_end - t_play,
            "cpu_s": cpu, "cores_busy": cpu / (t_end - t_play),
            "cpu_s_per_episode": cpu / max(1, len(episodes)),
            "idle_cores": idle_cpu / (t_play - t_idle), "idle_pss_mb": idle_pss / 2**20,
            "mean_pss_mb": mean_pss / 2**20, "peak_pss_mb": peak_pss / 2**20,
        })  # fmt: skip
    cols = ["desktop", "episodes", "solved", "wall_s", "cpu_s_per_episode", "cores_busy",
            "idle_cores", "idle_pss_mb", "mean_pss_mb", "peak_pss_mb"]  # fmt: skip
    print(f"image {args.image}, {args.desktops} desktops at once, 1920x1080, tasks: "
          f"{', '.join(TASKS)} x {args.rounds}")  # fmt: skip
    print(" | ".join(f"{c:>17}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>17.2f}" if isinstance(r[c], float) else f"{r[c]:>17}"
                         for c in cols))  # fmt: skip
    both = sum(r["peak_pss_mb"] for r in rows)
    print(f"sum of the desktops' peaks: {both:.0f} MB; mean cores busy per desktop: "
          f"{statistics.mean(r['cores_busy'] for r in rows):.2f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "logs": logs}, indent=2))


if __name__ == "__main__":
    main()
