"""Metric parity with OSWorld's own code: generated near-miss cases scored by both, side by side.

For the metric kinds issue 25 lists (``sheet_print`` without an export, ``check_list`` with
form feeds and other line separators, ``compare_table`` ``filter`` attributes, conditional
formatting in ``style``, ``is_expected_active_tab`` rule types), this generates cases (files
and arguments), scores each with our metric (in this process) and with OSWorld's (its
``desktop_env/evaluators/metrics`` run unchanged from a checkout, in a Python that has its
dependencies), and prints how many scores are identical and how many reach the same outcome
(1, below 1, or no score: an exception).

    python benchmarks/metric_parity.py --osworld /path/to/OSWorld --osworld-python /venv/bin/python

The OSWorld side needs openpyxl, pandas 2.2, formulas, xmltodict, rapidfuzz, lxml, cssselect,
tldextract and beautifulsoup4 in ``--osworld-python``; modules it imports that these metrics do
not call (PyMuPDF, borb, ...) are stubbed. Nothing of OSWorld's is copied here: it is imported
from the checkout given. To score another version of ours (``main``), put its ``src`` first on
``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import subprocess
import sys
import tempfile
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

Case = dict[str, Any]  # {"kind", "func", "args": [...], "kwargs": {...}}


# -- cases --------------------------------------------------------------------------------


def _book(path: Path, rows: list[list[Any]], edit: Callable[[Any], None] | None = None) -> str:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for row in rows:
        ws.append(row)
    if edit:
        edit(ws)
    wb.save(path)
    return str(path)


def sheet_print_cases(d: Path) -> list[Case]:
    out = []
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    texts = {"same": "ID\n0001234\n", "other": "ID\n1234\n", "upper": "id\n0001234\n"}
    i = 0
    for gold_csv in (True, False):
        for result_csv in ("same", "other", "upper", None):
            for ignore_case in (False, True):
                i += 1
                gold = _book(d / f"sp{i}_gold.xlsx", [["ID"], [1234]])
                mine = _book(d / f"sp{i}.xlsx", [["ID"], [1234]])
                if gold_csv:
                    (d / f"sp{i}_gold-Sheet1.csv").write_text(texts["same"])
                if result_csv:
                    (d / f"sp{i}-Sheet1.csv").write_text(texts[result_csv])
                r = {**rule, "ignore_case": ignore_case}
                out.append(_table_case("sheet_print", mine, gold, [r]))
    return out


def _table_case(kind: str, result: str, gold: str | None, rules: list[dict]) -> Case:
    return {
        "kind": kind,
        "func": "table.compare_table",
        "args": [result, gold],
        "kwargs": {"rules": rules},
    }


def check_list_cases(d: Path) -> list[Case]:
    seps = ["\n", "\r\n", "\r", "\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
    patterns = [
        {"expect": ["^b$"]},
        {"expect": ["^a"], "unexpect": ["^b"]},
        {"unexpect": ["^$"]},
        {"expect": ["a.b"]},
        {"expect": ["b\\s*$"]},
    ]
    out = []
    for i, sep in enumerate(seps):
        path = d / f"cl{i}.txt"
        path.write_bytes(f"a{sep}b\n{sep}\nc".encode())
        for rules in patterns:
            out.append(
                {
                    "kind": "check_list",
                    "func": "general.check_list",
                    "args": [str(path), rules],
                    "kwargs": {},
                }
            )
    return out


def filter_cases(d: Path) -> list[Case]:
    from openpyxl.worksheet.filters import CustomFilter, CustomFilters, FilterColumn

    rows = [["Month", "Amount"], ["Jan", 5], ["Feb", 12], ["Jan", 20]]

    def flt(blank=None, values=("Jan",), custom=None, sort=None, hidden=False):
        def edit(ws):
            ws.auto_filter.ref = "A1:B4"
            ws.auto_filter.add_filter_column(0, list(values), blank=blank)
            if hidden:
                ws.auto_filter.filterColumn[0].hiddenButton = True
            if custom:
                op, val, and_ = custom
                ws.auto_filter.filterColumn.append(
                    FilterColumn(
                        colId=1,
                        customFilters=CustomFilters(
                            _and=and_, customFilter=[CustomFilter(operator=op, val=val)]
                        ),
                    )
                )
            if sort:
                ws.auto_filter.add_sort_condition(sort[0], descending=sort[1])

        return edit

    variants = {
        "plain": flt(),
        "blank0": flt(blank=False),
        "blank1": flt(blank=True),
        "feb": flt(values=("Feb",)),
        "two": flt(values=("Jan", "Feb")),
        "hidden": flt(hidden=True),
        "gt6": flt(custom=("greaterThan", "6", None)),
        "gt6and": flt(custom=("greaterThan", "6", True)),
        "gt7": flt(custom=("greaterThan", "7", None)),
        "sortB": flt(sort=("B2:B4", True)),
        "sortBasc": flt(sort=("B2:B4", False)),
        "none": None,
    }
    paths = {k: _book(d / f"f_{k}.xlsx", rows, v) for k, v in variants.items()}
    out = []
    rule = {"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    for gold in ("plain", "gt6", "sortB"):
        for mine in paths:
            out.append(_table_case("filter", paths[mine], paths[gold], [rule]))
    missing = {"type": "filter", "sheet_idx0": "RNNope", "sheet_idx1": "ENNope"}
    out.append(_table_case("filter", paths["plain"], paths["plain"], [missing]))
    out.append(
        _table_case("filter", paths["plain"], paths["plain"], [{**missing, "sheet_idx1": "EI0"}])
    )
    return out


def conditional_cases(d: Path) -> list[Case]:
    from openpyxl.formatting.rule import CellIsRule, FormulaRule, Rule
    from openpyxl.styles import Font, PatternFill
    from openpyxl.styles.differential import DifferentialStyle

    rows = [["Period", "Rate"], ["Q1", 1.5], ["Q2", 4.25], ["Q3", 2.0], ["Q4", 3.0]]
    green = Font(color="FF00FF00")
    red_fill = PatternFill("solid", bgColor="FFFF0000")

    def by_hand(*cells, fill=False):
        def edit(ws):
            for c in cells:
                if fill:
                    ws[c].fill = PatternFill("solid", fgColor="FFFF0000")
                else:
                    ws[c].font = green

        return edit

    def cf(rule_factory, rng="B2:B5"):
        return lambda ws: ws.conditional_formatting.add(rng, rule_factory())

    results = {
        "max": cf(lambda: FormulaRule(formula=["B2=MAX($B$2:$B$5)"], font=green)),
        "min": cf(lambda: FormulaRule(formula=["B2=MIN($B$2:$B$5)"], font=green)),
        "large1": cf(lambda: FormulaRule(formula=["B2=LARGE($B$2:$B$5,1)"], font=green)),
        "gt4": cf(lambda: CellIsRule(operator="greaterThan", formula=["4"], font=green)),
        "gt2": cf(lambda: CellIsRule(operator="greaterThan", formula=["2"], font=green)),
        "between": cf(lambda: CellIsRule(operator="between", formula=["4", "5"], font=green)),
        "eqref": cf(lambda: CellIsRule(operator="equal", formula=["$B$3"], font=green)),
        "and": cf(lambda: FormulaRule(formula=["AND(B2>4,B2<5)"], font=green)),
        "top1": cf(lambda: Rule(type="top10", rank=1, dxf=DifferentialStyle(font=green))),
        "fillgt4": cf(lambda: CellIsRule(operator="greaterThan", formula=["4"], fill=red_fill)),
        "hand": by_hand("B3"),
        "handfill": by_hand("B3", fill=True),
        "none": None,
    }
    paths = {k: _book(d / f"cf_{k}.xlsx", rows, v) for k, v in results.items()}
    out = []
    for prop, gold in (("font_color", "hand"), ("font_color", "max"), ("bgcolor", "handfill")):
        rule = {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": [prop]}
        for mine in paths:
            out.append(_table_case("conditional formatting", paths[mine], paths[gold], [rule]))
    return out


def active_tab_cases(d: Path) -> list[Case]:
    tab = {"title": "Example Domain", "url": "https://example.com/"}
    rules = [
        {"type": "url", "url": "https://example.com/"},
        {"type": "url", "url": "https://example.org/"},
        {"type": "title", "title": "Example Domain"},
        {"type": "title", "url": "https://example.com/"},
    ]
    out = []
    for func in ("chrome.is_expected_active_tab", "chrome.is_expected_active_tab_approximate"):
        for result in (tab, "https://example.com/", None):
            for r in rules:
                out.append(
                    {
                        "kind": "is_expected_active_tab",
                        "func": func,
                        "args": [result, r],
                        "kwargs": {},
                    }
                )
    return out


GENERATORS = [
    sheet_print_cases,
    check_list_cases,
    filter_cases,
    conditional_cases,
    active_tab_cases,
]


# -- scoring ------------------------------------------------------------------------------

OURS = {
    "table.compare_table": "osworld_gym.evaluators.metrics.table:compare_table",
    "general.check_list": "osworld_gym.evaluators.metrics.text:check_list",
    "chrome.is_expected_active_tab": "osworld_gym.evaluators.metrics.chrome:is_expected_active_tab",
    "chrome.is_expected_active_tab_approximate": (
        "osworld_gym.evaluators.metrics.chrome:is_expected_active_tab_approximate"
    ),
}


def _score(fn: Callable[..., Any], case: Case) -> Any:
    try:
        value = fn(*case["args"], **case["kwargs"])
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome here
        return {"raised": type(exc).__name__}
    return float(value) if value is not None else None


def score_ours(cases: list[Case]) -> list[Any]:
    out = []
    for case in cases:
        module, name = OURS[case["func"]].split(":")
        out.append(_score(getattr(importlib.import_module(module), name), case))
    return out


class _Stub(types.ModuleType):
    """A module OSWorld's metrics import but the cases never call."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


def score_osworld(root: Path, cases: list[Case]) -> list[Any]:
    """Run in the OSWorld Python: import its metric modules without their package __init__."""
    base = root / "desktop_env"
    for name, path in (
        ("desktop_env", base),
        ("desktop_env.evaluators", base / "evaluators"),
        ("desktop_env.evaluators.metrics", base / "evaluators" / "metrics"),
    ):
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(path)]
        sys.modules[name] = pkg
    for optional in ("fitz", "borb", "borb.pdf", "imagehash", "pdfplumber", "yaml", "docx"):
        try:
            importlib.import_module(optional)
        except ImportError:
            sys.modules[optional] = _Stub(optional)
    out = []
    for case in cases:
        module, name = case["func"].split(".")
        fn = getattr(importlib.import_module(f"desktop_env.evaluators.metrics.{module}"), name)
        out.append(_score(fn, case))
    return out


def outcome(score: Any) -> str:
    if isinstance(score, dict):
        return "no score"
    return "1" if score is not None and math.isclose(score, 1.0) else "below 1"


def identical(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict)
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, abs_tol=1e-9)


def pct(n: int, of: int) -> str:
    return f"{100 * n / of:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--osworld", type=Path, required=True, help="an OSWorld checkout")
    parser.add_argument(
        "--osworld-python", default=sys.executable, help="a Python with OSWorld's metric deps"
    )
    parser.add_argument(
        "--osworld-side", type=Path, help=argparse.SUPPRESS
    )  # cases.json: score there
    parser.add_argument("--json", action="store_true", help="print every case's scores")
    args = parser.parse_args()
    if args.osworld_side:
        cases = json.loads(args.osworld_side.read_text())
        json.dump(score_osworld(args.osworld, cases), sys.stdout)
        return
    with tempfile.TemporaryDirectory(prefix="metric-parity-") as tmp:
        d = Path(tmp)
        cases = [c for gen in GENERATORS for c in gen(d)]
        ours = score_ours(cases)
        (d / "cases.json").write_text(json.dumps(cases))
        proc = subprocess.run(
            [
                args.osworld_python,
                __file__,
                "--osworld",
                str(args.osworld),
                "--osworld-side",
                str(d / "cases.json"),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if proc.returncode != 0:
            sys.exit(f"the OSWorld side failed:\n{proc.stderr[-3000:]}")
        theirs = json.loads(proc.stdout)
    rows: dict[str, Counter[str]] = {}
    for case, a, b in zip(cases, ours, theirs, strict=True):
        c = rows.setdefault(case["kind"], Counter())
        c["cases"] += 1
        c["identical"] += identical(a, b)
        c["same outcome"] += outcome(a) == outcome(b)
        if args.json or not identical(a, b):
            print(
                json.dumps(
                    {
                        "kind": case["kind"],
                        "args": case["args"],
                        "kwargs": case["kwargs"],
                        "ours": a,
                        "osworld": b,
                    },
                    default=str,
                ),
                file=sys.stderr,
            )
    total: Counter[str] = sum(rows.values(), Counter())
    print("| kind | cases | identical | same outcome |")
    print("|---|---:|---:|---:|")
    for kind, c in [*rows.items(), ("**all**", total)]:
        print(
            f"| {kind} | {c['cases']} | {c['identical']} ({pct(c['identical'], c['cases'])}) "
            f"| {c['same outcome']} ({pct(c['same outcome'], c['cases'])}) |"
        )


if __name__ == "__main__":
    main()
