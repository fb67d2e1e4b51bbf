"""Count metric (``func``) and getter (``type``) uses in OSWorld's official task set, and mark
which ones osworld-gym's evaluator registry implements.

Why: issue 11 asks for every metric and getter an offline-runnable official task names. This
script is the work list (most-used missing names first) and the coverage figure for the report.
Tasks needing something no offline sandbox has (a live website, installs from the network,
VS Code, a Google account, GNOME, systemd) are counted separately; the reason comes from
:func:`osworld_gym.support.classify`.

Usage::

    uv run --frozen python benchmarks/evaluator_coverage.py [EXAMPLES_DIR]

``EXAMPLES_DIR`` defaults to ``$OSWORLD_EXAMPLES`` or ``../shared/osworld/evaluation_examples``.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from osworld_gym.support.classifier import classify
from osworld_gym.tasks import evaluator_registry as registry

_EXTERNAL = (
    "needs a live website",
    "needs the network",
    "needs VS Code",
    "needs a Google account",
    "needs GNOME",
    "needs systemd",
)


def _entries(value: object) -> list[dict]:
    return [e for e in (value if isinstance(value, list) else [value]) if isinstance(e, dict)]


def _external(raw: dict) -> bool:
    try:
        support = classify(raw, "local")
    except Exception:  # noqa: BLE001 - an invalid task is not "external"; count it
        return False
    return any(r.startswith(_EXTERNAL) for r in support.reasons)


def main(argv: list[str]) -> int:
    root = Path(
        argv[1]
        if len(argv) > 1
        else os.environ.get("OSWORLD_EXAMPLES", "../shared/osworld/evaluation_examples")
    )
    index = json.loads((root / "test_all.json").read_text())
    metrics: Counter[str] = Counter()
    getters: Counter[str] = Counter()
    all_metrics: Counter[str] = Counter()
    all_getters: Counter[str] = Counter()
    tasks = offline = complete = 0
    for domain, ids in index.items():
        for task_id in ids:
            raw = json.loads((root / "examples" / domain / f"{task_id}.json").read_text())
            raw.setdefault("domain", domain)
            tasks += 1
            ev = raw.get("evaluator") or {}
            funcs = ev.get("func")
            funcs = [funcs] if isinstance(funcs, str) else list(funcs or [])
            types = [g.get("type") for k in ("result", "expected") for g in _entries(ev.get(k))]
            all_metrics.update(funcs)
            all_getters.update(t for t in types if t)
            if _external(raw):
                continue
            offline += 1
            complete += all(registry.has_metric(f) for f in funcs) and all(
                registry.has_getter(t) for t in types if t
            )
            metrics.update(funcs)
            getters.update(t for t in types if t)

    def report(title: str, counts: Counter[str], known) -> None:
        uses = sum(counts.values())
        done = sum(n for name, n in counts.items() if known(name))
        names_done = sum(1 for name in counts if known(name))
        print(
            f"\n{title}: {names_done}/{len(counts)} names, {done}/{uses} uses "
            f"({100 * done / max(uses, 1):.1f} %) implemented"
        )
        for name, n in counts.most_common():
            print(f"  {'ok ' if known(name) else '-- '}{n:4d}  {name}")

    print(
        f"{tasks} tasks, {offline} need nothing external; {complete} of those name only "
        "implemented metrics and getters"
    )
    report("metrics (offline tasks)", metrics, registry.has_metric)
    report("getters (offline tasks)", getters, registry.has_getter)
    for title, counts, known in (
        ("metrics (all tasks)", all_metrics, registry.has_metric),
        ("getters (all tasks)", all_getters, registry.has_getter),
    ):
        uses = sum(counts.values())
        done = sum(n for name, n in counts.items() if known(name))
        print(
            f"{title}: {sum(1 for n in counts if known(n))}/{len(counts)} names, "
            f"{done}/{uses} uses ({100 * done / max(uses, 1):.1f} %)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
