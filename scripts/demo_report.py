"""The demo's last line: the base's and the trained policy's held-out success, side by side.

    uv run --frozen python scripts/demo_report.py runs/arpo-demo pixels:heldout:click:256 540

Reads ``OUT/heldout-base/summary.json`` and ``OUT/heldout/summary.json`` (``arpo-eval run`` of
the base and of the trained policy on the same episodes), prints both successes with 95 % Wilson
intervals and the two-proportion test of their difference, and writes them to
``OUT/heldout.json``. An episode lost to an infrastructure error has no score and counts in
neither column.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
from ablation import per_kind, wilson  # noqa: E402

PLAYS = (("base", "heldout-base"), ("trained", "heldout"))


def successes(summary: Path) -> tuple[int, int]:
    """(successes, scored episodes) of an ``arpo-eval`` summary; a score above 0.5 is a success.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "summary.json"
    >>> results = [{"task_id": "pixels-click-h000", "scores": [1.0, 0.0]},
    ...            {"task_id": "pixels-click2-h000", "scores": [None]}]
    >>> _ = p.write_text(json.dumps({"task_results": results}))
    >>> successes(p)
    (1, 2)
    """
    kinds = per_kind(summary).values()
    return sum(k for k, _ in kinds), sum(n for _, n in kinds)


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p of the pooled two-proportion z-test (1.0 when nothing varies).

    >>> f"{two_proportion_p(40, 256, 80, 256):.1e}"
    '3.0e-05'
    >>> two_proportion_p(0, 10, 0, 10)
    1.0
    """
    if min(n1, n2) == 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (k2 / n2 - k1 / n1) / se
    return math.erfc(abs(z) / math.sqrt(2))


def report(out: Path, spec: str, seconds: int) -> str:
    rows = {name: successes(out / folder / "summary.json") for name, folder in PLAYS}
    (kb, nb), (kt, nt) = rows["base"], rows["trained"]
    p = two_proportion_p(kb, nb, kt, nt)
    figures = {
        name: {"successes": k, "episodes": n, "rate": k / n if n else None}
        | {"wilson95": wilson(k, n)}
        for name, (k, n) in rows.items()
    }
    record = {"tasks": spec, "seconds": seconds, "p_two_sided": p, **figures}
    (out / "heldout.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [f"held-out success ({spec}, layouts never trained on):"]
    for name, (k, n) in rows.items():
        lo, hi = wilson(k, n)
        rate = f"{k / n:6.1%}" if n else "     -"
        lines.append(f"  {name:<8}{k:>4}/{n} = {rate}   95 % Wilson [{lo:.1%}, {hi:.1%}]")
    diff = kt / nt - kb / nb if nb and nt else float("nan")
    lines.append(
        f"  trained minus base: {diff:+.1%} (two-proportion p = {p:.2g})"
        f"   ({seconds} s for the whole demo)"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the demo's output directory")
    ap.add_argument("spec", help="the held-out task spec both policies played")
    ap.add_argument("seconds", type=int, help="the demo's wall time so far")
    args = ap.parse_args()
    print(report(args.out, args.spec, args.seconds))


if __name__ == "__main__":
    main()
