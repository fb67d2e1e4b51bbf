"""``osworld-gym``: run episodes, inspect and check tasks, diagnose the machine.

osworld-gym run [--task ID] [--variation N] [--out DIR]    one oracle episode, screenshots saved
osworld-gym tasks list [--domain D] [--json]
osworld-gym tasks show ID [--variation N]
osworld-gym tasks check [IDS ... | --all] [--num-envs N] [--variations K] [--retries N]
                        [--keep-failures DIR]
osworld-gym tasks coverage PATH [--provider P] [--profile P] [--image TAG] [--json|--markdown]
                          [--write-meta F]
osworld-gym doctor [--root DIR] [--json]                    what the desktop and its tasks need
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

from osworld_gym.errors import MissingDependencyError, OSWorldGymError


def cmd_run(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from PIL import Image

    import osworld_gym  # noqa: F401 - registers OSWorld-v0
    from osworld_gym.env import osworld_env

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = gym.make("OSWorld-v0", provider=args.provider, tasks=args.tasks, max_steps=200)
    try:
        t0 = time.monotonic()
        obs, info = env.reset(options={"task": args.task, "variation": args.variation})
        task = osworld_env(env).task
        if task is None:  # reset returned, so it chose one
            raise OSWorldGymError("the env has no current task after reset")
        print(
            f"task {task.id} ({task.domain}), desktop ready in {info['timings']['reset_ms']:.0f} ms"
        )
        print(f"instruction: {task.instruction}")
        Image.fromarray(obs["screenshot"]).save(out / "step_0.png")
        actions = list(task.oracle or [])
        actions += (
            []
            if actions and actions[-1] in ("DONE", "FAIL")
            else ["FAIL" if task.is_infeasible else "DONE"]
        )
        reward, info = 0.0, {}
        for n, action in enumerate(actions, 1):
            obs, reward, terminated, truncated, info = env.step(action)
            Image.fromarray(obs["screenshot"]).save(out / f"step_{n}.png")
            note = info["action_error"] or info["infra_error"] or ""
            print(
                f"  step {n:>2}: {action[:70]:<70} "
                f"{info['timings'].get('observe_ms', 0):6.0f} ms {note}"
            )
            if terminated or truncated:
                break
        status = (
            f"infra error: {info['infra_error']}"
            if info.get("infra_error")
            else f"reward {reward:g}"
        )
        print(f"{status}; {n} steps in {time.monotonic() - t0:.1f} s; screenshots in {out}/")
        return 0 if not info.get("infra_error") else 2
    finally:
        env.close()


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from osworld_gym.support import resolve_tasks

    tasks = resolve_tasks(args.tasks, domains=args.domain)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": t.id,
                        "domain": t.domain,
                        "instruction": t.instruction,
                        "infeasible": t.is_infeasible,
                        "variables": sorted(t.variables),
                        "oracle_steps": len(t.oracle or []),
                    }
                    for t in tasks
                ],
                indent=2,
            )
        )
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
    from osworld_gym.support import resolve_tasks

    task = resolve_tasks(args.tasks)[args.id].instantiate(args.variation)
    print(json.dumps(task.to_dict(), indent=2, ensure_ascii=False))
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    from osworld_gym.episodes.check import check_tasks, format_table
    from osworld_gym.support import resolve_tasks

    tasks = resolve_tasks(args.tasks, domains=args.domain)
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
        print(
            f"[{done}/{total}] {res.task_id} {mark} ({res.oracle_s + res.noop_s:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    t0 = time.monotonic()
    results = check_tasks(
        tasks,
        num_envs=args.num_envs,
        variations=variations,
        on_result=progress,
        retries=args.retries,
        keep_failures=args.keep_failures,
    )
    print(format_table(results))
    for r in results:
        for kept in r.details.get("kept", []):
            print(f"kept: {kept}")
    print(f"wall time {time.monotonic() - t0:.0f} s on {args.num_envs} desktops")
    return 0 if all(r.ok for r in results) else 1


def cmd_tasks_coverage(args: argparse.Namespace) -> int:
    from osworld_gym.support.coverage import coverage

    kwargs = {
        k: v
        for k, v in (("image", args.image), ("vm_path", args.vm_path), ("network", args.network))
        if v is not None
    }
    if kwargs and args.provider != "docker":
        print("tasks coverage: --image, --vm-path and --network are docker's", file=sys.stderr)
        return 2
    try:
        cov = coverage(
            args.path,
            provider=args.provider,
            meta=args.meta,
            profile=args.profile,
            provider_kwargs=kwargs,
        )
    except (MissingDependencyError, ValueError) as e:
        print(f"tasks coverage: {e}", file=sys.stderr)
        return 2
    if args.write_meta:
        Path(args.write_meta).write_text(json.dumps(cov.supported_ids(), indent=2) + "\n")
    if args.json:
        print(json.dumps(cov.to_json(), indent=2))
    elif args.markdown:
        print(cov.markdown())
    else:
        print(cov.format())
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from osworld_gym.doctor import diagnose

    report = diagnose(root=args.root)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "missing_packages": report.missing_packages,
                    "checks": [vars(c) for c in report.checks],
                },
                indent=2,
            )
        )
    else:
        print(report.format())
    return 0 if report.ok else 1


TASKS_HELP = (
    "task spec: builtin, builtin:DOMAIN, pixels[:SPLIT], an id list, a task file or folder "
    "(default: builtin)"
)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="osworld-gym",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one oracle episode on a desktop and save screenshots")
    run.add_argument("--task", default="os-mkdir-001")
    run.add_argument("--variation", type=int, default=None)
    run.add_argument(
        "--tasks",
        default="builtin",
        help=TASKS_HELP,
    )
    run.add_argument("--provider", default="local")
    run.add_argument("--out", default="runs/demo")
    run.set_defaults(func=cmd_run)

    tasks = sub.add_parser("tasks", help="list, show and check tasks").add_subparsers(
        dest="tasks_command", required=True
    )
    for name, func, help_ in [
        ("list", cmd_tasks_list, "list tasks"),
        ("show", cmd_tasks_show, "print one task's JSON"),
        ("check", cmd_tasks_check, "oracle scores 1, no-op scores 0"),
    ]:
        sp = tasks.add_parser(name, help=help_)
        sp.add_argument(
            "--tasks",
            default="builtin",
            help=TASKS_HELP,
        )
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
            sp.add_argument(
                "--variations",
                type=int,
                default=1,
                help="check the default instance plus K-1 seeded variations",
            )
            sp.add_argument(
                "--retries",
                type=_non_negative_int,
                default=0,
                help="replay an oracle that scored below 1 up to N more times, on a fresh reset "
                "(its fixed waits can fall short on a loaded machine); the table lists each try",
            )
            sp.add_argument(
                "--keep-failures",
                type=Path,
                default=None,
                metavar="DIR",
                help="write the screens each oracle try that scored below 1 saw, and its "
                "actions, under DIR (one folder per try)",
            )

    cov = tasks.add_parser(
        "coverage", help="per domain of an OSWorld task set: tasks, supported here, and why not"
    )
    cov.add_argument("path", help="OSWorld's evaluation_examples folder or a meta file")
    cov.add_argument("--meta", default=None, help="meta file in PATH (default test_all.json)")
    cov.add_argument(
        "--provider",
        default="local",
        help="classify for this provider (local: this machine's sandbox; docker: the image "
        "named by --image, default the minimal build, as its manifest describes it)",
    )
    cov.add_argument("--image", help="docker: our image to classify for (its manifest)")
    cov.add_argument(
        "--vm-path", help="docker: OSWorld's Ubuntu.qcow2 (classify for OSWorld's VM image)"
    )
    cov.add_argument("--network", help="docker: the containers' network (default none: no website)")
    cov.add_argument(
        "--profile",
        choices=("openbox", "ubuntu"),
        default=None,
        help="local desktop profile (default: $OSWORLD_GYM_PROFILE, else ubuntu); "
        "gsettings/dconf tasks run on ubuntu only",
    )
    cov.add_argument("--json", action="store_true", help="every unsupported task with reasons")
    cov.add_argument("--markdown", action="store_true", help="a README table")
    cov.add_argument(
        "--write-meta",
        metavar="FILE",
        help="also write a meta file of the supported tasks (for --meta)",
    )
    cov.set_defaults(func=cmd_tasks_coverage)

    from osworld_gym.image.cli import add_image_commands

    add_image_commands(sub)

    doctor = sub.add_parser(
        "doctor",
        help="check the programs the local desktop and its tasks "
        "need, and the default apps of the file types tasks open",
    )
    doctor.add_argument(
        "--root",
        default=None,
        help="check another root file system (a chroot) instead of this machine",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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
