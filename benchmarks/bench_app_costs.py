"""What the apps as OSWorld's VM shows them cost (issue 25): two code trees side by side.

Each *arm* is a checkout with its own Python environment, e.g. ``main`` (LibreOffice on the X11
``gen`` widgets, Chromium's old profile, no vlcrc in the home template) against this branch
(GTK3 LibreOffice with Elementary icons, the google-chrome profile seeded with Google, VLC's
vlcrc). For every arm, on the ``ubuntu`` profile's real sandboxed 1920x1080 desktop:

* **startup**: ``LocalProvider.start()`` until the guest answers and the first reset is done;
* per app (Writer, Calc and Impress with a generated document, Chromium on a blank page, VLC
  with a WAV file, Thunderbird): **open**, ``env.reset`` of a task that starts the app and
  waits for its window (``info["timings"]["reset_ms"]``); **memory**, PSS and RSS summed over
  the sandbox's process tree once the screen settled and 2 s more passed; **reset**, the next
  ``env.reset`` (of a task with no steps), which kills the app and restores the home directory.

The arms run as separate processes (each imports its own ``osworld_gym``), interleaved round by
round with the order alternating, so load hits both alike; medians are printed with the load
average seen during the run. The widget toolkit LibreOffice really loaded is read from its
memory map and printed, so the table says what was compared.

    uv run python benchmarks/bench_app_costs.py --arm main=/work/main \\
        --arm branch=. [--env main:SAL_USE_VCLPLUGIN=gen] [--rounds 3]

``--env ARM:NAME=VALUE`` sets a variable for that arm's LibreOffice (a launch through ``env``):
main's desktop lets LibreOffice choose, which on a machine with ``libreoffice-gtk3`` installed
is GTK3 too, so the *before* arm names ``gen`` to be what main shipped for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

APPS = ("writer", "calc", "impress", "chrome", "vlc", "thunderbird")

_DOCS = {
    "writer": ("builtin-asset://office_docx?doc=report&seed=1&paras=6", "report.docx"),
    "calc": ("builtin-asset://office_xlsx?data=sales&seed=1&rows=20", "sales.xlsx"),
    "impress": ("builtin-asset://office_pptx?deck=travel&seed=1&slides=5", "travel.pptx"),
}
#: What each app's window title contains once it is up (``wmctrl -l``).
_TITLES = {
    "writer": "LibreOffice Writer",
    "calc": "LibreOffice Calc",
    "impress": "LibreOffice Impress",
    "chrome": "Chromium",
    "vlc": "VLC media player",
    "thunderbird": "Thunderbird",
}


def _until_window(title: str) -> dict:
    return {
        "type": "execute",
        "parameters": {
            "command": ["bash", "-c", f"wmctrl -l | grep -qi -- {title!r} && echo ready"],
            "until": {"stdout": "ready"},
        },
    }


def app_task(app: str, lo_env: list[str]) -> dict:
    """A task that starts ``app`` and returns once its window is up."""
    config: list[dict] = []
    if app in _DOCS:
        url, name = _DOCS[app]
        path = f"/home/user/Desktop/{name}"
        config.append({"type": "download", "parameters": {"files": [{"url": url, "path": path}]}})
        command = ["env", *lo_env, "soffice", "--norestore", path] if lo_env else None
        command = command or ["soffice", "--norestore", path]
    elif app == "chrome":
        command = ["google-chrome", "--start-maximized", "about:blank"]
    elif app == "vlc":
        path = "/home/user/Music/tone.wav"
        url = "builtin-asset://wav_tone?freq=440&seconds=300"
        config.append({"type": "download", "parameters": {"files": [{"url": url, "path": path}]}})
        command = ["vlc", path]
    else:
        command = ["thunderbird"]
    config += [{"type": "launch", "parameters": {"command": command}}, _until_window(_TITLES[app])]
    return {
        "id": f"cost-{app}",
        "instruction": "measure",
        "related_apps": [],
        "config": config,
        "evaluator": {"func": "infeasible"},
    }


EMPTY = {
    "id": "cost-empty",
    "instruction": "measure",
    "config": [],
    "evaluator": {"func": "infeasible"},
}


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


def vcl_plugin(root: int) -> str:
    """Which LibreOffice widget plugin (``gen``, ``gtk3``) soffice.bin below ``root`` loaded."""
    for pid in tree(root):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "soffice.bin":
                continue
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for name in ("gtk3", "gen", "kf5", "qt5"):
            if f"libvclplug_{name}lo.so" in maps:
                return name
    return "?"


def sample(lo_env: list[str]) -> dict:
    """One arm's measurements, in this process (its own osworld_gym)."""
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0
    from osworld_gym.providers.local import LocalProvider

    out: dict = {}
    p = LocalProvider(profile="ubuntu")
    t0 = time.perf_counter()
    p.start()
    out["startup_ms"] = 1000 * (time.perf_counter() - t0)
    p.stop()
    env = gym.make(
        "OSWorld-v0", provider="local", tasks=None, provider_kwargs={"profile": "ubuntu"}
    )
    try:
        env.reset(options={"task": EMPTY})
        time.sleep(2.0)
        root = env.unwrapped.provider.pid
        out["idle_pss"], out["idle_rss"] = memory_mib(root)
        for app in APPS:
            _, info = env.reset(options={"task": app_task(app, lo_env)})
            out[f"{app}_open_ms"] = info["timings"]["reset_ms"]
            env.step("WAIT")  # the settled screen
            time.sleep(2.0)
            out[f"{app}_pss"], out[f"{app}_rss"] = memory_mib(root)
            if app in _DOCS:
                out[f"{app}_vcl"] = vcl_plugin(root)
            _, info = env.reset(options={"task": EMPTY})
            out[f"{app}_reset_ms"] = info["timings"]["reset_ms"]
    finally:
        env.close()
    return out


def python_of(tree_dir: Path) -> str:
    py = tree_dir / ".venv" / "bin" / "python"
    if not py.is_file():
        raise SystemExit(f"{tree_dir}: no .venv (run 'uv sync --frozen' there)")
    return str(py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", default=[], help="NAME=DIR (a checkout with .venv)")
    ap.add_argument("--env", action="append", default=[], help="ARM:NAME=VALUE for LibreOffice")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write every sample to this file")
    ap.add_argument("--table", type=Path, help="print the table of a --json file, run nothing")
    ap.add_argument("--sample", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lo-env", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sample:
        print(json.dumps(sample(args.lo_env)))
        return
    if args.table:
        saved = json.loads(args.table.read_text())
        table(saved["samples"], saved["loads"])
        return
    arms = dict(a.split("=", 1) for a in args.arm)
    if len(arms) != 2:
        raise SystemExit("give two arms: --arm before=DIR --arm after=DIR")
    lo_env: dict[str, list[str]] = {name: [] for name in arms}
    for e in args.env:
        name, var = e.split(":", 1)
        if name not in arms or "=" not in var:
            raise SystemExit(f"--env {e!r}: want ARM:NAME=VALUE with ARM one of {list(arms)}")
        lo_env[name].append(var)
    samples: dict[str, list[dict]] = {name: [] for name in arms}
    loads: list[float] = []
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            cwd = Path(arms[name]).resolve()
            cmd = [python_of(cwd), str(Path(__file__).resolve()), "--sample"]
            cmd += [f"--lo-env={v}" for v in lo_env[name]]
            loads.append(os.getloadavg()[0])
            proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr[-3000:])
                raise SystemExit(f"arm {name} failed (round {r + 1})")
            samples[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} {name} done", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"samples": samples, "loads": loads}, indent=1))
    table(samples, loads)


def table(samples: dict[str, list[dict]], loads: list[float]) -> None:
    """Medians per arm, [min-max] beside them, and the ratio of the medians."""
    a, b = list(samples)
    rounds = len(samples[a])

    def cell(name: str, key: str) -> tuple[float, str]:
        xs = [s[key] for s in samples[name]]
        m = statistics.median(xs)
        return m, f"{m:.0f} [{min(xs):.0f}-{max(xs):.0f}]"

    def plugins(name: str) -> str:
        got = {s[f"{app}_vcl"] for s in samples[name] for app in _DOCS}
        return "/".join(sorted(got))

    print(
        f"medians [min-max] of {rounds} rounds per arm, interleaved; load average (1 min) "
        f"{min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}, on "
        f"{os.cpu_count()} cores; LibreOffice widgets: {a} {plugins(a)}, {b} {plugins(b)}\n"
    )
    print(f"| measurement | {a} | {b} | {b} / {a} |")
    print("|---|---:|---:|---:|")
    rows = [("startup: start() until ready (ms)", "startup_ms")]
    rows += [("desktop idle, PSS (MiB)", "idle_pss"), ("desktop idle, RSS (MiB)", "idle_rss")]
    for app in APPS:
        rows += [
            (f"{app}: open, reset until its window (ms)", f"{app}_open_ms"),
            (f"{app}: desktop PSS with it open (MiB)", f"{app}_pss"),
            (f"{app}: reset that closes it (ms)", f"{app}_reset_ms"),
        ]
    for label, key in rows:
        (x, xs), (y, ys) = cell(a, key), cell(b, key)
        print(f"| {label} | {xs} | {ys} | {y / x:.2f}x |")


if __name__ == "__main__":
    main()
