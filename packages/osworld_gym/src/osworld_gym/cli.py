"""``osworld-gym``: run episodes, inspect and check tasks, diagnose the machine.

    osworld-gym run [--task ID] [--variation N] [--out DIR]    one oracle episode, screenshots saved
    osworld-gym tasks list [--domain D] [--json]
    osworld-gym tasks show ID [--variation N]
    osworld-gym tasks check [IDS ... | --all] [--num-envs N] [--variations K]
    osworld-gym doctor                                          what the local desktop needs
    osworld-gym image build|ls|prune                            the docker provider's image
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from osworld_gym.errors import OSWorldGymError


def cmd_run(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from PIL import Image

    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = gym.make("OSWorld-v0", provider=args.provider, tasks=args.tasks, max_steps=200)
    try:
        t0 = time.monotonic()
        obs, info = env.reset(options={"task": args.task, "variation": args.variation})
        task = env.unwrapped.task
        print(f"task {task.id} ({task.domain}), desktop ready in {info['timings']['reset_ms']:.0f} ms")
        print(f"instruction: {task.instruction}")
        Image.fromarray(obs["screenshot"]).save(out / "step_0.png")
        actions = list(task.oracle or [])
        actions += [] if actions and actions[-1] in ("DONE", "FAIL") else ["FAIL" if task.is_infeasible else "DONE"]
        reward, info = 0.0, {}
        for n, action in enumerate(actions, 1):
            obs, reward, terminated, truncated, info = env.step(action)
            Image.fromarray(obs["screenshot"]).save(out / f"step_{n}.png")
            note = info["action_error"] or info["infra_error"] or ""
            print(f"  step {n:>2}: {action[:70]:<70} {info['timings'].get('observe_ms', 0):6.0f} ms {note}")
            if terminated or truncated:
                break
        status = f"infra error: {info['infra_error']}" if info.get("infra_error") else f"reward {reward:g}"
        print(f"{status}; {n} steps in {time.monotonic() - t0:.1f} s; screenshots in {out}/")
        return 0 if not info.get("infra_error") else 2
    finally:
        env.close()


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from osworld_gym.tasks import load_tasks

    tasks = load_tasks(args.tasks, domains=args.domain)
    if args.json:
        print(json.dumps([{"id": t.id, "domain": t.domain, "instruction": t.instruction,
                           "infeasible": t.is_infeasible, "variables": sorted(t.variables),
                           "oracle_steps": len(t.oracle or [])} for t in tasks], indent=2))
        return 0
    for t in tasks:
        flags = ("infeasible " if t.is_infeasible else "") + ("varies" if t.variables else "")
        print(f"{t.id:<44} {t.domain:<20} {flags:<18} {t.instruction[:80]}")
    by_domain: dict[str, int] = {}
    for t in tasks:
        by_domain[t.domain] = by_domain.get(t.domain, 0) + 1
    print(f"{len(tasks)} tasks: " + ", ".join(f"{d} {n}" for d, n in sorted(by_domain.items())))
    return 0


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from osworld_gym.tasks import load_tasks

    task = load_tasks(args.tasks)[args.id].instantiate(args.variation)
    print(json.dumps(task.to_dict(), indent=2, ensure_ascii=False))
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    from osworld_gym.tasks import load_tasks
    from osworld_gym.tasks.check import check_tasks, format_table

    tasks = load_tasks(args.tasks, domains=args.domain)
    if args.ids:
        tasks = [tasks[i] for i in args.ids]
    elif not args.all:
        print("name task ids, or pass --all", file=sys.stderr)
        return 2
    variations: list[int | None] = [None] + list(range(1, args.variations))
    done = 0
    total = len(tasks) * len(variations)

    def progress(res: Any) -> None:
        nonlocal done
        done += 1
        mark = "ok" if res.ok else "FAIL"
        print(f"[{done}/{total}] {res.task_id} {mark} ({res.oracle_s + res.noop_s:.1f} s)",
              file=sys.stderr, flush=True)

    t0 = time.monotonic()
    results = check_tasks(tasks, num_envs=args.num_envs, variations=variations, on_result=progress)
    print(format_table(results))
    print(f"wall time {time.monotonic() - t0:.0f} s on {args.num_envs} desktops")
    return 0 if all(r.ok for r in results) else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    import shutil

    from osworld_gym.providers.local import SANDBOX_PROGRAMS, SYSTEM_PROGRAMS, check_system

    apps = {"xterm": "xterm", "mousepad": "mousepad", "libreoffice": "libreoffice-calc",
            "chromium": "chromium", "vlc": "vlc", "ffmpeg": "ffmpeg"}
    for prog, pkg in {**SYSTEM_PROGRAMS, **SANDBOX_PROGRAMS, **apps}.items():
        where = shutil.which(prog)
        print(f"{prog:<12} {'ok  ' + where if where else 'MISSING (apt-get install -y ' + pkg + ')'}")
    from osworld_gym.guest.profiles import missing_programs

    missing = missing_programs()  # optional: only the "ubuntu" desktop profile needs these
    print(f"{'ubuntu profile':<12} " + ("ok" if not missing else "MISSING (apt-get install -y "
          + " ".join(sorted(set(missing.values()))) + "): " + ", ".join(sorted(missing))))
    try:
        check_system(sandbox=True)
    except OSWorldGymError as e:
        print(e)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="osworld-gym", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one oracle episode on a desktop and save screenshots")
    run.add_argument("--task", default="os-mkdir-001")
    run.add_argument("--variation", type=int, default=None)
    run.add_argument("--tasks", default="builtin", help="task source (default: builtin)")
    run.add_argument("--provider", default="local")
    run.add_argument("--out", default="runs/demo")
    run.set_defaults(func=cmd_run)

    tasks = sub.add_parser("tasks", help="list, show and check tasks").add_subparsers(
        dest="tasks_command", required=True)
    for name, func, help_ in [("list", cmd_tasks_list, "list tasks"),
                              ("show", cmd_tasks_show, "print one task's JSON"),
                              ("check", cmd_tasks_check, "oracle scores 1, no-op scores 0")]:
        sp = tasks.add_parser(name, help=help_)
        sp.add_argument("--tasks", default="builtin", help="task source (default: builtin)")
        sp.set_defaults(func=func)
        if name == "list":
            sp.add_argument("--domain", action="append")
            sp.add_argument("--json", action="store_true")
        elif name == "show":
            sp.add_argument("id")
            sp.add_argument("--variation", type=int, default=None)
        else:
            sp.add_argument("ids", nargs="*")
            sp.add_argument("--all", action="store_true")
            sp.add_argument("--domain", action="append")
            sp.add_argument("--num-envs", type=int, default=2)
            sp.add_argument("--variations", type=int, default=1,
                            help="check the default instance plus K-1 seeded variations")

    from osworld_gym.image.cli import add_image_commands

    add_image_commands(sub)

    doctor = sub.add_parser("doctor", help="check the programs the local desktop needs")
    doctor.set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except OSWorldGymError as e:
        print(f"osworld-gym: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"osworld-gym: unknown task {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
