"""``arpo-eval``: evaluate GUI agents on desktops, and read the results.

Usage::

    arpo-eval run --agent {hf,openai,oracle,noop,fail} [--model M] [--base-url URL]
                  --tasks SPEC --provider {local,docker,remote} --num-envs N --max-steps 15
                  --trials K --protocol {standard,hard} --out DIR
                  [--desktops '{source: remote, token_file: T, urls: [URL1, URL2]}']
    arpo-eval summary DIR [--train-tasks FILE]        # tables as text (and summary.json)
    arpo-eval report DIR [--train-log DIR] [--embed-images] [--train-tasks FILE]
    arpo-eval compare RUN_A RUN_B [--seed 0] [--samples 10000] [--json FILE]
    arpo-eval export DIR --to DATASET_DIR [--min-score X]

``arpo-eval <command> --help`` documents every flag.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from arpo_eval.agent_spec import AGENTS

log = logging.getLogger("arpo_eval")


def _pairs(values: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _desktops(text: str) -> dict[str, Any]:
    """``--desktops``: the trainer's ``desktops`` section, inline (YAML or JSON) or in a file; a
    file whose top level has ``desktops:`` (a trainer config) gives that section."""
    import yaml

    path = Path(text).expanduser()
    is_file = not text.lstrip().startswith(("{", "[")) and path.is_file()
    try:
        section = yaml.safe_load(path.read_text() if is_file else text)
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(f"not a YAML/JSON mapping: {e}") from e
    if isinstance(section, dict) and "source" not in section and "desktops" in section:
        section = section["desktops"]
    if not isinstance(section, dict):
        where = f"{path} holds" if is_file else "got"
        raise argparse.ArgumentTypeError(
            f"expected a mapping such as '{{source: remote, token_file: T, urls: [...]}}' or a "
            f"file holding one; {where} {section!r}"
        )
    return section


def _screen(text: str) -> tuple[int, int]:
    w, sep, h = text.lower().partition("x")
    if not sep:
        raise argparse.ArgumentTypeError(f"screen size must look like 1920x1080, got {text!r}")
    return int(w), int(h)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="arpo-eval",
        description="Evaluate GUI agents on desktops, and read the results.",
        epilog=(__doc__ or "").split("\n\n", 1)[-1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an agent over tasks x trials (resumes by default)")
    r.add_argument("--agent", choices=AGENTS, required=True, help="which agent plays")
    r.add_argument(
        "--model", help="hf: checkpoint dir, hub id or 'tiny'; openai: served model name"
    )
    r.add_argument("--base-url", help="openai: endpoint, e.g. http://127.0.0.1:9000/v1")
    r.add_argument("--api-key", help="openai: bearer token (default $OPENAI_API_KEY or EMPTY)")
    r.add_argument(
        "--name", help="the <model> directory of the result layout (default: from --model/--agent)"
    )
    r.add_argument(
        "--tasks",
        default="builtin",
        help=(
            "builtin | builtin:DOMAIN[,DOMAIN] | id list file | evaluation_examples dir | meta json"
        ),
    )
    r.add_argument(
        "--meta", help="meta file of an evaluation_examples directory (default test_all.json)"
    )
    r.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="drop OSWorld tasks the provider cannot run (osworld_gym.support)",
    )
    r.add_argument(
        "--provider",
        default="local",
        choices=("local", "docker", "remote", "fake"),
        help="desktop backend (fake: canned screens, for tests of the plumbing)",
    )
    r.add_argument(
        "--provider-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider option, repeatable (remote: url=..., token=...; docker: image=...)",
    )
    r.add_argument(
        "--desktops",
        type=_desktops,
        metavar="SECTION",
        help="where the desktops come from, as the trainer's desktops: section (YAML/JSON, or a "
        "file holding it): {source: remote, token_file: T, urls: [URL, ...], reset_hook: CMD} "
        "gives each desktop its own guest (a URL listed twice is refused); also {source: docker, "
        "provider_kwargs: {...}}, {source: local}",
    )
    r.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help="desktops at once (default: one per --desktops URL, else 1)",
    )
    r.add_argument("--max-steps", type=int, default=15, help="turns per episode (OSWorld/ARPO 15)")
    r.add_argument("--trials", type=int, default=1, help="episodes per task (k of mean@k/pass@k)")
    r.add_argument(
        "--protocol",
        choices=("standard", "hard"),
        default="standard",
        help="standard: OSWorld (last answer at the step limit replaced by FAIL); "
        "hard: ARPO's OSWorld Hard (no replacement)",
    )
    r.add_argument("--out", required=True, help="run directory (OSWorld layout + summary.json)")
    r.add_argument("--fresh", action="store_true", help="start the run over instead of resuming")
    r.add_argument(
        "--infra-retries",
        type=int,
        default=1,
        help="re-runs of an episode whose desktop, evaluator or agent backend failed",
    )
    r.add_argument(
        "--action-set", help="override the agent's action set (uitars, pyautogui, computer_13)"
    )
    r.add_argument("--screen", type=_screen, default=(1920, 1080), help="desktop size WxH")
    r.add_argument(
        "--settle-max-s",
        type=float,
        default=3.0,
        help="longest wait for the screen to settle after an action (0: none)",
    )
    r.add_argument("--temperature", type=float, default=0.6)
    r.add_argument("--top-p", type=float, default=0.9)
    r.add_argument("--max-tokens", type=int, default=1024, help="new tokens per turn")
    r.add_argument("--history-images", type=int, default=15, help="screenshots kept in the context")
    r.add_argument(
        "--action-grammar",
        action="store_true",
        help="hf, uitars: grammar-constrained decoding (every turn one well-formed action), as "
        "the trainer's action_grammar",
    )
    r.add_argument("--device", default="cpu", help="hf: torch device")
    r.add_argument("--dtype", default="auto", help="hf: weights dtype")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--request-timeout", type=float, default=120.0, help="openai: seconds per request"
    )
    r.add_argument("--train-tasks", help="training task list: adds in-domain vs held-out tables")
    r.add_argument(
        "--record-video", action="store_true", help="save each episode's screen recording"
    )
    r.add_argument("--report", action="store_true", help="also write DIR/report.html")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")

    s = sub.add_parser("summary", help="print a run's tables (and rewrite summary.json)")
    s.add_argument("dir")
    s.add_argument("--train-tasks", help="training task list: adds in-domain vs held-out rows")
    s.add_argument("--json", action="store_true", help="print summary.json instead of tables")

    rep = sub.add_parser("report", help="write a self-contained report.html for a run")
    rep.add_argument("dir")
    rep.add_argument("--output", help="where to write it (default DIR/report.html)")
    rep.add_argument(
        "--train-log", help="trainer output dir (trainer_state.json): add training curves"
    )
    rep.add_argument("--train-tasks", help="training task list: adds in-domain vs held-out rows")
    rep.add_argument(
        "--embed-images",
        action="store_true",
        help="inline screenshots as data URLs (one movable file; larger)",
    )

    c = sub.add_parser(
        "compare", help="per-task and per-domain deltas B - A with bootstrap intervals"
    )
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    c.add_argument("--samples", type=int, default=10000, help="bootstrap resamples")
    c.add_argument("--confidence", type=float, default=0.95)
    c.add_argument("--json", help="also write the comparison as JSON here")

    e = sub.add_parser("export", help="trajectories as a Hugging Face dataset (save_to_disk)")
    e.add_argument("dir")
    e.add_argument("--to", required=True, help="dataset directory to write")
    e.add_argument(
        "--min-score",
        type=float,
        default=None,
        help="keep only episodes scoring at least this (default: every scored episode)",
    )
    e.add_argument(
        "--max-image-side",
        type=int,
        default=None,
        help="downscale screenshots so their longer side is at most this",
    )
    return p


def _cmd_run(a: argparse.Namespace) -> int:
    from arpo_eval.agent_spec import AgentSpec
    from arpo_eval.run import RunConfig, run
    from arpo_eval.tables import format_summary

    spec = AgentSpec(
        kind=a.agent,
        model=a.model,
        base_url=a.base_url,
        api_key=a.api_key,
        temperature=a.temperature,
        top_p=a.top_p,
        max_tokens=a.max_tokens,
        history_images=a.history_images,
        action_set=a.action_set,
        screen_size=a.screen,
        device=a.device,
        dtype=a.dtype,
        request_timeout=a.request_timeout,
        seed=a.seed,
        name=a.name,
        action_grammar=a.action_grammar,
    )
    cfg = RunConfig(
        agent=spec,
        tasks=a.tasks,
        out=a.out,
        provider=a.provider,
        provider_kwargs=_pairs(a.provider_arg),
        desktops=a.desktops,
        num_envs=a.num_envs,
        max_steps=a.max_steps,
        trials=a.trials,
        protocol=a.protocol,
        meta=a.meta,
        skip_unsupported=a.skip_unsupported,
        settle_max_s=a.settle_max_s,
        resume=not a.fresh,
        infra_retries=a.infra_retries,
        train_tasks=a.train_tasks,
        record_video=a.record_video,
        progress=not a.no_progress,
    )
    summary = run(cfg)
    print(format_summary(summary))
    print(f"results: {a.out} (summary.json; OSWorld: {summary['osworld_show_result']})")
    if a.report:
        from arpo_eval.report import write_report

        print(f"report: {write_report(a.out, train_tasks=a.train_tasks)}")
    return 0


def _cmd_summary(a: argparse.Namespace) -> int:
    from arpo_eval.run import write_summary
    from arpo_eval.tables import format_summary

    summary = write_summary(a.dir, train_tasks=a.train_tasks)
    print(json.dumps(summary, indent=2) if a.json else format_summary(summary))
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from arpo_eval.report import write_report

    path = write_report(
        a.dir,
        output=a.output,
        train_log=a.train_log,
        train_tasks=a.train_tasks,
        embed_images=a.embed_images,
    )
    print(f"report: {path}")
    return 0


def _cmd_compare(a: argparse.Namespace) -> int:
    from arpo_eval.compare import compare_runs, format_comparison

    result = compare_runs(a.run_a, a.run_b, seed=a.seed, samples=a.samples, confidence=a.confidence)
    print(format_comparison(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _cmd_export(a: argparse.Namespace) -> int:
    from arpo_eval.export import export_dataset

    ds = export_dataset(a.dir, a.to, min_score=a.min_score, max_image_side=a.max_image_side)
    print(f"exported {len(ds)} episodes to {a.to} (datasets.load_from_disk)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    commands = {
        "run": _cmd_run,
        "summary": _cmd_summary,
        "report": _cmd_report,
        "compare": _cmd_compare,
        "export": _cmd_export,
    }
    try:
        return commands[args.command](args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"arpo-eval {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
