"""Fuzz every metric spec the built-in and official tasks use with malformed agent files.

For each distinct metric spec (function, getters, the type of the agent's file, options) of the
built-in tasks and OSWorld's official tasks, :func:`run` evaluates the spec once per malformed
variant (:mod:`malformed`) of what the agent could leave: the result file, a command's output,
Chrome's profile JSON, the accessibility tree. Gold files are stand-ins (:mod:`standins`) or the
built-in tasks' generated assets, so the judge's own inputs are well-formed. What must hold:

* nothing raises out of :func:`~osworld_gym.evaluators.evaluate` but an
  :class:`~osworld_gym.errors.EvaluatorError` that blames the judge (and with well-formed gold
  there is none);
* no case uses more than :data:`CPU_BUDGET_S` seconds of CPU (``ITIMER_PROF``: CPU time, so a
  loaded machine does not fail it) or grows the process's peak memory by more than
  :data:`MEMORY_BUDGET` bytes (``VmHWM``, reset per case through ``/proc/self/clear_refs``); the
  whole run sits under an address-space limit so a bomb cannot take the machine.

Run by hand (every spec x every kind, a table at the end)::

    uv run --frozen python tests/fuzz_evaluators.py --full

CI runs a sample (``test_evaluators_fuzz.py``): every spec with a few kinds, rotating.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import logging
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import malformed  # noqa: E402
import standins  # noqa: E402
from osworld_examples import OFFICIAL, PRESENT  # noqa: E402

#: CPU seconds one case may use (generous: the slowest well-formed case takes about 2 s).
CPU_BUDGET_S = 60.0
#: Peak memory (bytes) one case may add to the process.
MEMORY_BUDGET = 1536 << 20
#: Address-space limit of the whole fuzzing process.
ADDRESS_SPACE = 6 << 30

_PROBES = ("cdp_probe", "_STATUS_PROGRAM")


@dataclass
class Spec:
    source: str
    task_id: str
    index: int
    raw: dict[str, Any]
    evaluator: dict[str, Any]
    suffix: str
    key: str
    uses: int = 1


@dataclass
class Outcome:
    spec: str
    kind: str
    #: "score" | "judge" (EvaluatorError) | "raised" | "budget" | "standin_gold" (the judge
    #: found the stand-in gold unusable for the metric: a limit of the stand-ins, not a finding)
    verdict: str
    score: float | None = None
    note: str | None = None
    error: str | None = None
    cpu_s: float = 0.0
    peak_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _desktop_getter(cfg: dict[str, Any] | None) -> bool:
    return bool(cfg) and cfg["type"] not in (
        "rule",
        "rule_relativeTime",
        "cloud_file",
        "cache_file",
    )


def _suffix_of(cfg: dict[str, Any] | None) -> str:
    if not cfg:
        return ""
    for key in ("ppt_file_path", "path", "dest", "file_name"):
        value = cfg.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, str) and "." in Path(value).name:
            return standins._suffix(Path(value).name)
    return ""


def _tasks() -> list[tuple[str, dict[str, Any]]]:
    from osworld_gym.support import builtin_tasks

    out = [("builtin", t.instantiate(None).raw) for t in builtin_tasks()]
    if PRESENT:
        index = json.loads((OFFICIAL / "test_all.json").read_text())
        for domain, ids in index.items():
            for task_id in ids:
                raw = json.loads((OFFICIAL / "examples" / domain / f"{task_id}.json").read_text())
                out.append(("official", raw))
    return out


def metric_specs() -> list[Spec]:
    """One :class:`Spec` per distinct metric spec of the built-in and official tasks."""
    from osworld_gym.errors import TaskError
    from osworld_gym.tasks.evaluator_spec import plan

    by_key: dict[str, Spec] = {}
    for source, raw in _tasks():
        ev = raw.get("evaluator") or {}
        try:
            p = plan(ev, task_id=raw["id"])
        except TaskError:
            continue  # names a metric or getter we do not implement (the coverage test lists)
        if p.infeasible:
            continue
        for i, m in enumerate(p.metrics):
            agent = next((g for g in (m.result, m.expected) if _desktop_getter(g)), None) or next(
                (g for g in (m.result, m.expected) if g and g["type"] == "cache_file"), None
            )
            suffix = _suffix_of(agent)
            key = json.dumps(
                [
                    m.func,
                    m.result and m.result["type"],
                    m.expected and m.expected["type"],
                    suffix,
                    m.options,
                ],
                sort_keys=True,
            )
            if key in by_key:
                by_key[key].uses += 1
                continue
            evaluator = {
                "func": m.func,
                "result": m.result,
                **({"expected": m.expected} if m.expected else {}),
                **({"options": m.options} if m.options else {}),
                **({"postconfig": ev["postconfig"]} if ev.get("postconfig") else {}),
            }
            by_key[key] = Spec(source, raw["id"], i, raw, evaluator, suffix, key)
    return sorted(by_key.values(), key=lambda s: (s.source, s.task_id, s.index))


class FuzzClient:
    """Serves ``data`` wherever a getter reads the desktop: files, command output (inside the
    JSON our in-desktop probes print, where only the content is the agent's), the
    accessibility tree, the terminal. Everything else (windows, launches, uploads) succeeds."""

    def __init__(self, data: bytes):
        self.data = data
        self.text = data.decode("utf-8", "replace")

    # files
    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        return self.data

    def download_file(self, path: str, dest: Path, max_bytes: int | None = None) -> int | None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.data)
        return len(self.data)

    def upload(self, path: str, data: Any) -> None:
        return None

    # commands
    def execute(self, command: Any, shell: bool = False, timeout: float = 120.0, setup=False):
        text = " ".join(command) if isinstance(command, list) else str(command)
        if "DevTools" in text or "Target.getTargets" in text or "remote-debugging" in text:
            t = self.text
            out = json.dumps(
                {
                    "port": 1337,
                    "tab": {"id": "1", "title": t, "url": t, "content": t},
                    "tabs": [{"id": "1", "title": t, "url": t}],
                }
            )
        elif "requests/status.xml" in text:
            out = json.dumps({"status": 200, "body": self.text})
        elif "_NET_CLIENT_LIST" in text:
            out = json.dumps({"width": 1920, "height": 1080})
        else:
            out = self.text
        return {"status": "success", "output": out, "error": "", "returncode": 0}

    def launch(self, command: Any, shell: bool = False) -> None:
        return None

    def open_file(self, path: str, timeout: float = 60.0) -> None:
        return None

    def activate_window(self, window_name: str, strict=False, by_class=False) -> None:
        return None

    def close_window(self, window_name: str, strict=False, by_class=False) -> None:
        return None

    # desktop state
    def accessibility(self) -> str:
        return self.text

    def terminal(self) -> str:
        return self.text

    def list_directory(self, path: str) -> Any:
        try:
            return json.loads(self.data)
        except (ValueError, RecursionError):
            return {"type": "directory", "name": self.text[:100], "children": []}

    def screen_size(self) -> tuple[int, int]:
        return (1920, 1080)


def valid_file(suffix: str, seed: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"valid{suffix or '.txt'}"
        standins.write_standin(path, seed)
        return path.read_bytes()


def _gold(spec: Spec, cache_root: Path) -> None:
    """Stand-ins for the spec's gold files: cloud files (and downloads) as the official
    tests make them, cache files (setup commands' outputs) of the agent file's type."""
    standins.fill_cache(spec.raw, cache_root)
    made_by_postconfig = {
        (s.get("parameters") or {}).get("stdout") for s in spec.evaluator.get("postconfig", [])
    }
    for key in ("result", "expected"):
        for cfg in _entries(spec.evaluator.get(key)):
            if cfg and cfg["type"] == "cache_file" and cfg["path"] not in made_by_postconfig:
                path = cfg["path"]
                if "://" in path:
                    continue
                dest = cache_root / spec.task_id / path
                if not dest.exists():
                    standins.write_standin(dest, f"gold {path}")


class _Budget(BaseException):
    """The case used up its CPU budget (a BaseException: no ``except Exception`` swallows it)."""


def _on_prof(signum, frame):  # noqa: ARG001
    raise _Budget()


def _reset_peak() -> int:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    return _hwm()


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_case(spec: Spec, case: malformed.Case, cache_root: Path, work: Path) -> Outcome:
    from osworld_gym.errors import EvaluatorError
    from osworld_gym.evaluators import EvalContext, evaluate
    from osworld_gym.tasks import SetupRunner, Task

    task = Task.from_dict(
        {
            "id": spec.task_id,
            "instruction": "fuzz",
            "config": [],
            "evaluator": spec.evaluator,
        },
        domain="fuzz",
        validate=False,
    )
    client = FuzzClient(case.data)
    ctx = EvalContext(
        client=client, cache_dir=cache_root / spec.task_id, task_id=spec.task_id, work_dir=work
    )
    runner = SetupRunner(
        client,
        cache_dir=cache_root,
        task_id=spec.task_id,
        sleep=lambda s: None,
        work_dir=work,
        until_timeout_s=0.0,
    )
    base = _reset_peak()
    t0 = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, CPU_BUDGET_S)
    out = Outcome(spec.key, case.kind, "score")
    try:
        try:
            r = evaluate(task, ctx, runner)
            out.score = r.score
            notes = [m.get("note") for m in r.details.get("metrics", []) if m.get("note")]
            out.note = (notes or [r.details.get("note")])[0]
            blamed = [m for m in r.details.get("metrics", []) if m.get("raised")]
            if blamed:
                out.extra["raised"] = blamed[0]["raised"]
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _Budget:
        out.verdict = "budget"
    except EvaluatorError as e:
        # the judge blaming its own gold is right when a stand-in is not a gold this metric
        # can score (check_green_background wants a mask at least as tall as wide): counted
        # apart, since the stand-in, not the judge, is at fault
        gold = "gold scored against itself too" in str(e)
        out.verdict, out.error = ("standin_gold" if gold else "judge"), f"{e}"[:400]
    except Exception as e:  # noqa: BLE001 - what escapes evaluate is the finding
        out.verdict = "raised"
        out.error = (
            f"{type(e).__name__}: {e}"[:300]
            + " | "
            + "".join(traceback.format_exception(e)[-3:])[-600:]
        )
    out.cpu_s = time.process_time() - t0
    out.peak_mb = max(0, _hwm() - base) / (1 << 20)
    if out.verdict == "score" and out.peak_mb * (1 << 20) > MEMORY_BUDGET:
        out.verdict = "budget"
    return out


@functools.cache
def corpus(suffix: str) -> dict[str, bytes]:
    """``{kind: bytes}`` for ``suffix``, from one valid file (generated once: stand-ins carry
    timestamps, so two generations differ in their part boundaries)."""
    return {c.kind: c.data for c in malformed.cases(valid_file(suffix, "agent"), suffix)}


def plan_cases(specs: list[Spec], sample: int | None, seed: str) -> list[tuple[Spec, str]]:
    """``[(spec, kind)]``: every kind of every spec, or ``sample`` kinds per spec chosen by a
    hash of (seed, spec, kind), so successive seeds rotate through the kinds."""
    out = []
    for spec in specs:
        kinds = list(corpus(spec.suffix))
        if sample is not None:
            kinds = sorted(
                kinds, key=lambda k: hashlib.sha256(f"{seed}|{spec.key}|{k}".encode()).digest()
            )[:sample]
        out += [(spec, k) for k in kinds]
    return out


def run(sample: int | None = None, seed: str = "0", only: str | None = None) -> list[Outcome]:
    logging.disable(logging.WARNING)
    signal.signal(signal.SIGPROF, _on_prof)
    specs = [s for s in metric_specs() if only is None or only in s.key or only == s.task_id]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        cache_root = Path(tmp) / "cache"
        for spec, kind in plan_cases(specs, sample, seed):
            _gold(spec, cache_root)
            case = malformed.Case(kind, corpus(spec.suffix)[kind])
            with tempfile.TemporaryDirectory(dir=tmp) as work:
                outcomes.append(run_case(spec, case, cache_root, Path(work)))
    return outcomes


def table(outcomes: list[Outcome], specs: int, seconds: float) -> str:
    verdicts = Counter(o.verdict for o in outcomes)
    by_func: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        func = json.loads(o.spec)[0]
        by_func[func][o.verdict] += 1
        if o.extra.get("raised"):
            by_func[func]["blamed_agent_after_raise"] += 1
        if o.score == 1.0:
            by_func[func]["scored_1"] += 1
    lines = [
        f"specs: {specs}, cases: {len(outcomes)}, wall: {seconds:.0f} s, "
        f"cpu max: {max((o.cpu_s for o in outcomes), default=0):.1f} s, "
        f"peak memory max: {max((o.peak_mb for o in outcomes), default=0):.0f} MiB",
        "verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
        "",
        f"| {'metric':40} | cases | scored | judge | raised | budget | raised->0 | scored 1 |",
        f"|{'-' * 42}|------:|-------:|------:|-------:|-------:|----------:|---------:|",
    ]
    for func in sorted(by_func):
        c = by_func[func]
        cases = sum(c[v] for v in ("score", "judge", "raised", "budget", "standin_gold"))
        lines.append(
            f"| {func:40} | {cases:5} | "
            f"{c['score']:6} | {c['judge']:5} | {c['raised']:6} | {c['budget']:6} | "
            f"{c['blamed_agent_after_raise']:9} | {c['scored_1']:8} |"
        )
    bad = [o for o in outcomes if o.verdict != "score"]  # stand-in gold ones listed too
    for o in bad[:60]:
        lines.append(f"- {o.verdict} {json.loads(o.spec)[0]} / {o.kind}: {o.error}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="every kind of every spec")
    ap.add_argument("--sample", type=int, default=3, help="kinds per spec (without --full)")
    ap.add_argument("--seed", default=os.environ.get("OSWORLD_FUZZ_SEED", "0"))
    ap.add_argument("--only", help="specs whose key or task id contains this")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    t0 = time.monotonic()
    outcomes = run(None if args.full else args.sample, args.seed, args.only)
    n_specs = len({o.spec for o in outcomes})
    print(table(outcomes, n_specs, time.monotonic() - t0))
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in outcomes]))
    return 0 if all(o.verdict in ("score", "standin_gold") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
