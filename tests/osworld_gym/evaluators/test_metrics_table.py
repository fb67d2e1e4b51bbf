"""compare_table: OSWorld's spreadsheet rules on real .xlsx files (openpyxl, one LibreOffice)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from openpyxl.styles import Font
from openpyxl.worksheet.datavalidation import DataValidation
from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators import EvalContext, evaluate
from osworld_gym.evaluators.metrics.table import compare_table
from osworld_gym.tasks import Task

Rows = list[list[Any]]
NET_INCOME: Rows = [["Month", "Revenue", "Cost"], ["Jan", 100, 60], ["Feb", 120.5, 70]]


def xlsx(path: Path, sheets: dict[str, Rows], edit: Callable[[Any], None] | None = None) -> str:
    """Write a workbook with ``sheets`` (name -> rows), after ``edit(workbook)``; its path."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    if edit:
        edit(wb)
    wb.save(path)
    return str(path)


def revenue_only(rows: Rows) -> Rows:
    return [[r[1]] for r in rows]


# -- sheet_data / sheet_name -------------------------------------------------------------------


def test_sheet_data_by_name_matches_the_osworld_example(tmp_path):
    """libreoffice_calc 1273e544: copy the Revenue column to a new sheet named Sheet2."""
    gold = xlsx(tmp_path / "gold.xlsx", {"Sheet1": NET_INCOME, "Sheet2": revenue_only(NET_INCOME)})
    good = xlsx(tmp_path / "good.xlsx", {"Sheet1": NET_INCOME, "Sheet2": revenue_only(NET_INCOME)})
    wrong = xlsx(
        tmp_path / "wrong.xlsx", {"Sheet1": NET_INCOME, "Sheet2": [[r[2]] for r in NET_INCOME]}
    )
    misnamed = xlsx(
        tmp_path / "misnamed.xlsx", {"Sheet1": NET_INCOME, "Revenue": revenue_only(NET_INCOME)}
    )
    rules = [{"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}]
    assert compare_table(good, gold, rules=rules) == 1.0
    assert compare_table(wrong, gold, rules=rules) == 0.0
    assert compare_table(misnamed, gold, rules=rules) == 0.0


def test_sheet_indices_int_ri_and_ei(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", {"A": NET_INCOME, "B": [["x"]]})
    mine = xlsx(tmp_path / "mine.xlsx", {"Other": [["x"]], "Data": NET_INCOME})
    assert (
        compare_table(
            mine, gold, rules=[{"type": "sheet_data", "sheet_idx0": 1, "sheet_idx1": "EI0"}]
        )
        == 1.0
    )
    assert (
        compare_table(
            mine, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]
        )
        == 0.0
    )
    assert (
        compare_table(
            mine, gold, rules=[{"type": "sheet_data", "sheet_idx0": 5, "sheet_idx1": "EI0"}]
        )
        == 0.0
    )
    with pytest.raises(ValueError, match="unrecognised sheet index"):
        compare_table(
            mine, gold, rules=[{"type": "sheet_data", "sheet_idx0": "XX0", "sheet_idx1": 0}]
        )


def test_sheet_data_rounds_to_precision_like_osworld(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", {"S": [["Name", "Score"], ["ann", 1.5], ["bob", 2.25]]})
    close = xlsx(
        tmp_path / "close.xlsx", {"S": [["Name", "Score"], ["ann", 1.500001], ["bob", 2.25]]}
    )
    far = xlsx(tmp_path / "far.xlsx", {"S": [["Name", "Score"], ["ann", 1.51], ["bob", 2.25]]})
    rule = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(close, gold, rules=[rule]) == 1.0
    assert compare_table(far, gold, rules=[rule]) == 0.0
    assert compare_table(far, gold, rules=[{**rule, "precision": 1}]) == 1.0


def test_sheet_data_quirks_follow_osworld_pandas_reading(tmp_path):
    """OSWorld reads sheet_data with pandas: these near misses all score 0 there."""
    rule = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    gold = xlsx(tmp_path / "gold.xlsx", {"S": [["Name", "Score"], ["ann", 1.5], ["bob", 2.5]]})
    # ignore_case is not read by OSWorld's sheet_data
    cased = xlsx(tmp_path / "cased.xlsx", {"S": [["Name", "Score"], ["Ann", 1.5], ["Bob", 2.5]]})
    assert compare_table(cased, gold, rules=[{**rule, "ignore_case": True}]) == 0.0
    # a blank row inside the data is a row of NaN, not skipped
    blank = xlsx(
        tmp_path / "blank.xlsx", {"S": [["Name", "Score"], ["ann", 1.5], [], ["bob", 2.5]]}
    )
    assert compare_table(blank, gold, rules=[rule]) == 0.0
    # trailing blank rows are not part of the data
    tail = xlsx(tmp_path / "tail.xlsx", {"S": [["Name", "Score"], ["ann", 1.5], ["bob", 2.5], []]})
    assert compare_table(tail, gold, rules=[rule]) == 1.0
    # a column of ints is not a column of floats (DataFrame.equals compares dtypes)
    ints = xlsx(tmp_path / "ints.xlsx", {"S": [["Name", "Score"], ["ann", 1], ["bob", 2]]})
    floats = xlsx(tmp_path / "floats.xlsx", {"S": [["Name", "Score"], ["ann", 1.5], ["bob", 2]]})
    assert compare_table(ints, floats, rules=[{**rule, "precision": 0}]) == 0.0
    # numbers inside a text column are not rounded
    text_gold = xlsx(tmp_path / "tg.xlsx", {"S": [["Code"], ["x"], [3.25]]})
    text_near = xlsx(tmp_path / "tn.xlsx", {"S": [["Code"], ["x"], [3.2500001]]})
    num_gold = xlsx(tmp_path / "ng.xlsx", {"S": [["Code"], [1], [3.25]]})
    num_near = xlsx(tmp_path / "nn.xlsx", {"S": [["Code"], [1], [3.2500001]]})
    assert compare_table(text_near, text_gold, rules=[rule]) == 0.0
    assert compare_table(num_near, num_gold, rules=[rule]) == 1.0
    # a missing sheet fails the rule
    assert compare_table(gold, gold, rules=[{**rule, "sheet_idx0": "RNnope"}]) == 0.0


def test_sheet_name(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", {"Q1": [[1]], "Q2": [[2]]})
    same = xlsx(tmp_path / "same.xlsx", {"Q1": [[9]], "Q2": [[9]]})
    swapped = xlsx(tmp_path / "swapped.xlsx", {"Q2": [[2]], "Q1": [[1]]})
    assert compare_table(same, gold, rules=[{"type": "sheet_name"}]) == 1.0
    assert compare_table(swapped, gold, rules=[{"type": "sheet_name"}]) == 0.0


# -- sheet_fuzzy -----------------------------------------------------------------------------


def test_sheet_fuzzy_comparisons(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", {"S": [["12 Main Road", "Alice Smith"], ["x", "colour"]]})
    mine = xlsx(tmp_path / "mine.xlsx", {"S": [["+12 main rd", "Alice"], ["x", "color"]]})

    def fuzzy(**sub: Any) -> float:
        rule = {"type": "sheet_fuzzy", "sheet_idx0": "RI0", "sheet_idx1": "EI0", "rules": [sub]}
        return compare_table(mine, gold, rules=[rule])

    assert (
        fuzzy(
            range=["A1"],
            type="exact_match",
            ignore_case=True,
            trim_leadings="+ ",
            normalization=[["Road", "Rd"], ["road", "rd"]],
        )
        == 1.0
    )
    assert fuzzy(range=["A1"], type="exact_match") == 0.0
    assert fuzzy(range=["B1"], type="included_by") == 1.0  # "Alice" in "Alice Smith"
    assert fuzzy(range=["B1"], type="includes") == 0.0
    assert fuzzy(range=["B2"], type="fuzzy_match", threshold=85) == 1.0  # color/colour: 90.9
    assert fuzzy(range=["B2"], type="fuzzy_match", threshold=95) == 0.0
    assert fuzzy(range=["A2:A2"], type="exact_match") == 1.0


# -- check_cell ---------------------------------------------------------------------------------


def test_check_cell_value_and_style(tmp_path):
    def style(wb: Any) -> None:
        ws = wb["S"]
        ws["B2"].font = Font(bold=True, name="Arial", color="FFFF0000")
        ws["B2"].number_format = "0.00%"

    path = xlsx(tmp_path / "r.xlsx", {"S": [["Label", "Rate"], ["Total", 0.25]]}, style)

    def cell(coordinate: str, **props: Any) -> float:
        rule = {"type": "check_cell", "sheet_idx": "RNS", "coordinate": coordinate, "props": props}
        return compare_table(path, rules=[rule])

    assert cell("B2", value={"method": "approx:0.001", "ref": 0.2501}) == 1.0
    assert cell("B2", value={"method": "eq", "ref": 0.3}) == 0.0
    assert cell("A2", value={"method": "re.I", "ref": "^total$"}) == 1.0
    assert (
        cell(
            "B2",
            font_bold={"method": "eq", "ref": True},
            font_name={"method": "eq", "ref": "Arial"},
            font_color={"method": "eq", "ref": "FFFF0000"},
            number_format={"method": "eq", "ref": "0.00%"},
        )
        == 1.0
    )
    assert cell("A2", font_bold={"method": "eq", "ref": True}) == 0.0
    assert cell("Z9", value={"method": "eq", "ref": 1}) == 0.0


# -- style, freeze, zoom, data validation, filter, row/col props ------------------------------


def test_style_rule(tmp_path):
    def bold_header(wb: Any) -> None:
        for c in wb["S"][1]:
            c.font = Font(bold=True)

    gold = xlsx(tmp_path / "gold.xlsx", {"S": NET_INCOME}, bold_header)
    good = xlsx(tmp_path / "good.xlsx", {"S": NET_INCOME}, bold_header)
    plain = xlsx(tmp_path / "plain.xlsx", {"S": NET_INCOME})
    rule = {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_bold"]}
    assert compare_table(good, gold, rules=[rule]) == 1.0
    assert compare_table(plain, gold, rules=[rule]) == 0.0


def test_freeze_and_zoom(tmp_path):
    def freeze_and_zoom(wb: Any) -> None:
        wb["S"].freeze_panes = "B2"
        wb["S"].sheet_view.zoomScale = 150

    gold = xlsx(tmp_path / "gold.xlsx", {"S": NET_INCOME}, freeze_and_zoom)
    good = xlsx(tmp_path / "good.xlsx", {"S": NET_INCOME}, freeze_and_zoom)
    plain = xlsx(tmp_path / "plain.xlsx", {"S": NET_INCOME})
    freeze = {"type": "freeze", "sheet_idx0": "RNS", "sheet_idx1": "ENS"}
    zoom = {"type": "zoom", "sheet_idx": 0, "method": "ge", "ref": 120}
    assert compare_table(good, gold, rules=[freeze, zoom]) == 1.0
    assert compare_table(plain, gold, rules=[freeze]) == 0.0
    assert compare_table(plain, gold, rules=[zoom]) == 0.0  # no zoom means 100


def test_data_validation(tmp_path):
    def validated(wb: Any) -> None:
        dv = DataValidation(type="list", formula1='"Yes,No"', allow_blank=True)
        dv.add("C2:C10")
        wb["S"].add_data_validation(dv)

    good = xlsx(tmp_path / "good.xlsx", {"S": NET_INCOME}, validated)
    plain = xlsx(tmp_path / "plain.xlsx", {"S": NET_INCOME})
    rule = {
        "type": "data_validation",
        "sheet_idx": 0,
        "dv_props": [
            {
                "type": {"method": "eq", "ref": "list"},
                "formula1": {"method": "str_set_eq", "ref": ["Yes", "No"]},
                "ranges": {"method": "spreadsheet_range", "ref": ["C2:C5", "C2:C100"]},
            }
        ],
    }
    assert compare_table(good, rules=[rule]) == 1.0
    assert compare_table(plain, rules=[rule]) == 0.0


def test_filter(tmp_path):
    def filtered(values: list[str]) -> Callable[[Any], None]:
        def edit(wb: Any) -> None:
            ws = wb["S"]
            ws.auto_filter.ref = "A1:C3"
            ws.auto_filter.add_filter_column(0, values)

        return edit

    gold = xlsx(tmp_path / "gold.xlsx", {"S": NET_INCOME}, filtered(["Jan"]))
    good = xlsx(tmp_path / "good.xlsx", {"S": NET_INCOME}, filtered(["Jan"]))
    other = xlsx(tmp_path / "other.xlsx", {"S": NET_INCOME}, filtered(["Feb"]))
    rule = {"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(good, gold, rules=[rule]) == 1.0
    assert compare_table(other, gold, rules=[rule]) == 0.0


def test_row_and_col_props(tmp_path):
    def hide(wb: Any) -> None:
        wb["S"].row_dimensions[3].hidden = True
        wb["S"].column_dimensions["B"].hidden = True

    gold = xlsx(tmp_path / "gold.xlsx", {"S": NET_INCOME}, hide)
    good = xlsx(tmp_path / "good.xlsx", {"S": NET_INCOME}, hide)
    plain = xlsx(tmp_path / "plain.xlsx", {"S": NET_INCOME})
    rows = {"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}
    cols = {"type": "col_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}
    assert compare_table(good, gold, rules=[rows, cols]) == 1.0
    assert compare_table(plain, gold, rules=[rows]) == 0.0
    assert compare_table(plain, gold, rules=[cols]) == 0.0


# -- failures ---------------------------------------------------------------------------------


def test_missing_or_broken_result_scores_zero_but_broken_gold_raises(tmp_path):
    gold = xlsx(tmp_path / "gold.xlsx", {"S": NET_INCOME})
    junk = tmp_path / "junk.xlsx"
    junk.write_text("not a spreadsheet")
    rule = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(None, gold, rules=[rule]) == 0.0
    assert compare_table(str(junk), gold, rules=[rule]) == 0.0
    with pytest.raises(Exception):  # noqa: B017 - any openpyxl error
        compare_table(gold, str(junk), rules=[rule])


def test_unimplemented_rule_is_an_evaluator_error_not_a_zero(tmp_path):
    path = xlsx(tmp_path / "r.xlsx", {"S": NET_INCOME})
    with pytest.raises(NotImplementedError, match="'watermark'"):
        compare_table(
            path, path, rules=[{"type": "watermark", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
        )
    with pytest.raises(NotImplementedError, match="option 'strict'"):
        compare_table(path, path, rules=[], strict=True)


class FakeGuest:
    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        return self.files.get(path)


@pytest.mark.parametrize(
    ("result_rows", "score"), [(revenue_only(NET_INCOME), 1.0), ([["Revenue"], [1]], 0.0)]
)
def test_osworld_task_json_scores_through_evaluate(tmp_path, result_rows, score):
    """The 1273e544 evaluator unchanged: vm_file result, cloud_file gold (pre-cached)."""
    mine = xlsx(tmp_path / "mine.xlsx", {"Sheet1": NET_INCOME, "Sheet2": result_rows})
    cache = tmp_path / "cache" / "1273e544"
    cache.mkdir(parents=True)
    xlsx(cache / "3_NetIncome_gt1.xlsx", {"Sheet1": NET_INCOME, "Sheet2": revenue_only(NET_INCOME)})
    task = Task.from_dict(
        {
            "id": "1273e544",
            "instruction": "Copy the Revenue column to Sheet2",
            "evaluator": {
                "func": "compare_table",
                "result": {
                    "type": "vm_file",
                    "path": "/home/user/NetIncome.xlsx",
                    "dest": "NetIncome.xlsx",
                },
                "expected": {
                    "type": "cloud_file",
                    "path": "https://huggingface.co/x/3_NetIncome_gt1.xlsx",
                    "dest": "3_NetIncome_gt1.xlsx",
                },
                "options": {
                    "rules": [
                        {"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}
                    ]
                },
            },
        }
    )
    guest = FakeGuest({"/home/user/NetIncome.xlsx": Path(mine).read_bytes()})
    ctx = EvalContext(client=guest, cache_dir=cache, task_id="1273e544")
    assert evaluate(task, ctx).score == score


def test_unknown_rule_through_evaluate_is_an_evaluator_error(tmp_path):
    path = xlsx(tmp_path / "r.xlsx", {"S": NET_INCOME})
    task = Task.from_dict(
        {
            "id": "t",
            "instruction": "x",
            "evaluator": {
                "func": "compare_table",
                "result": {"type": "vm_file", "path": "/r.xlsx", "dest": "r.xlsx"},
                "options": {"rules": [{"type": "watermark"}]},
            },
        }
    )
    ctx = EvalContext(
        client=FakeGuest({"/r.xlsx": Path(path).read_bytes()}),
        cache_dir=tmp_path / "c",
        task_id="t",
    )
    with pytest.raises(EvaluatorError, match="watermark"):
        evaluate(task, ctx)


# -- a file LibreOffice wrote ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice is not installed")
def test_libreoffice_saved_formulas_compare_by_their_cached_values(tmp_path):
    """openpyxl writes formulas without results; after LibreOffice recalculates and saves, the
    cached values are what sheet_data compares, as OSWorld's pandas reading does."""
    (tmp_path / "src").mkdir()
    src = xlsx(
        tmp_path / "src" / "calc.xlsx",
        {"S": [["a", "b", "sum"], [1, 2, "=A2+B2"], [3, 4, "=A3+B3"]]},
    )
    out = tmp_path / "out"
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{tmp_path}/lo-profile",
            "--headless",
            "--convert-to",
            "xlsx:Calc MS Excel 2007 XML",
            "--outdir",
            str(out),
            src,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    saved = str(out / "calc.xlsx")
    gold = xlsx(tmp_path / "gold.xlsx", {"S": [["a", "b", "sum"], [1, 2, 3], [3, 4, 7]]})
    wrong = xlsx(tmp_path / "wrong.xlsx", {"S": [["a", "b", "sum"], [1, 2, 3], [3, 4, 8]]})
    rule = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(src, gold, rules=[rule]) == 0.0  # no cached values yet
    assert compare_table(saved, gold, rules=[rule]) == 1.0
    assert compare_table(saved, wrong, rules=[rule]) == 0.0
    check = {
        "type": "check_cell",
        "sheet_idx": 0,
        "coordinate": "C3",
        "props": {"value": {"method": "eq", "ref": 7}},
    }
    assert compare_table(saved, rules=[check]) == 1.0
