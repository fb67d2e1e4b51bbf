"""compare_table near misses scored as OSWorld's implementation scores them (issue 11's parity
list): fills, booleans, numbers read from the XML, panes, validation ranges, row records."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from openpyxl.formatting.rule import Rule
from openpyxl.styles import Font, PatternFill
from openpyxl.styles.differential import DifferentialStyle
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.views import Pane
from osworld_gym.evaluators.metrics.table import compare_table

RULE0 = {"sheet_idx0": 0, "sheet_idx1": "EI0"}


def book(path: Path, rows: list[list[Any]], edit=None) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    for row in rows:
        ws.append(row)
    if edit:
        edit(ws)
    wb.save(path)
    return str(path)


def fill(color: str, bg: str = "FFFFFFFF"):
    def edit(ws):
        ws["A1"].fill = PatternFill("solid", fgColor=color, bgColor=bg)

    return edit


def test_bgcolor_is_the_solid_fill_foreground_colour(tmp_path):
    red = book(tmp_path / "red.xlsx", [["x"]], fill("FFFF0000"))
    # same background colour, wrong visible colour: OSWorld reads fgColor, so this fails
    blue = book(tmp_path / "blue.xlsx", [["x"]], fill("FF0000FF"))
    # different unused background colour, right visible colour: passes
    red2 = book(tmp_path / "red2.xlsx", [["x"]], fill("FFFF0000", bg="FF00FF00"))
    rule = {"type": "style", **RULE0, "props": ["bgcolor"]}
    assert compare_table(red2, red, rules=[rule]) == 1.0
    assert compare_table(blue, red, rules=[rule]) == 0.0
    check = {
        "type": "check_cell",
        "sheet_idx": 0,
        "coordinate": "A1",
        "props": {"bgcolor": {"method": "eq", "ref": "FFFF0000"}},
    }
    assert compare_table(red2, rules=[check]) == 1.0
    assert compare_table(blue, rules=[check]) == 0.0


def test_fills_on_empty_cells_count_in_style(tmp_path):
    gold = book(tmp_path / "g.xlsx", [[None, "y"]], fill("FFFFFF00"))
    bare = book(tmp_path / "b.xlsx", [[None, "y"]])
    rule = {"type": "style", **RULE0, "props": ["bgcolor", "fill_type"]}
    assert compare_table(gold, gold, rules=[rule]) == 1.0
    assert compare_table(bare, gold, rules=[rule]) == 0.0


GREEN = "FF00FF00"


def green_font_cells(*coords: str):
    def edit(ws):
        for c in coords:
            ws[c].font = Font(color=GREEN)

    return edit


def green_font_rule(rule_factory):
    def edit(ws):
        ws.conditional_formatting.add("B2:B5", rule_factory())

    return edit


RATES = [["Period", "Rate"], ["Q1", 1.5], ["Q2", 4.25], ["Q3", 2.0], ["Q4", 3.0]]


def test_style_applies_conditional_formatting_like_osworld(tmp_path):
    """21ab7b40: "highlight the highest result with green font". A conditional format that
    makes the maximum green scores like the same font set by hand; one that makes the wrong
    cell green, or colours a different style, does not (before, any conditional format
    raised: no score at all)."""
    from openpyxl.formatting.rule import CellIsRule, FormulaRule

    rule = {"type": "style", **RULE0, "props": ["font_color"]}
    gold = book(tmp_path / "gold.xlsx", RATES, green_font_cells("B3"))

    def scored(name, edit):
        return compare_table(book(tmp_path / name, RATES, edit), gold, rules=[rule])

    green = DifferentialStyle(font=Font(color=GREEN))
    # an expression bound as OSWorld binds it: the tested cell, then the absolute range
    assert (
        scored(
            "max.xlsx",
            green_font_rule(
                lambda: FormulaRule(formula=["B2=MAX($B$2:$B$5)"], font=Font(color=GREEN))
            ),
        )
        == 1.0
    )
    assert (
        scored(
            "min.xlsx",
            green_font_rule(
                lambda: FormulaRule(formula=["B2=MIN($B$2:$B$5)"], font=Font(color=GREEN))
            ),
        )
        == 0.0
    )
    assert (
        scored(
            "cellis.xlsx",
            green_font_rule(
                lambda: CellIsRule(operator="greaterThan", formula=["4"], font=Font(color=GREEN))
            ),
        )
        == 1.0
    )
    assert (
        scored(
            "cellis2.xlsx",
            green_font_rule(
                lambda: CellIsRule(operator="greaterThan", formula=["2.5"], font=Font(color=GREEN))
            ),
        )
        == 0.0
    )
    # a cellIs formula with a reference cannot be evaluated alone: OSWorld skips the rule
    assert (
        scored(
            "cellref.xlsx",
            green_font_rule(
                lambda: CellIsRule(
                    operator="equal", formula=["MAX($B$2:$B$5)"], font=Font(color=GREEN)
                )
            ),
        )
        == 0.0
    )
    # top-N is a rule type OSWorld does not evaluate: active on no cell
    assert scored("top.xlsx", green_font_rule(lambda: Rule(type="top10", rank=1, dxf=green))) == 0.0
    assert compare_table(gold, gold, rules=[rule]) == 1.0


def test_style_conditional_fill_is_the_differential_background_colour(tmp_path):
    """8b1ce5f2 (weekends red): a conditional solid fill shows its *background* colour, and
    OSWorld reads bgColor from the differential style (fgColor from a cell's own fill)."""
    from openpyxl.formatting.rule import FormulaRule

    days = [["Day"], ["Fri"], ["Sat"], ["Sun"], ["Mon"]]
    rule = {"type": "style", **RULE0, "props": ["bgcolor"]}

    def by_hand(ws):
        for c in ("A3", "A4"):
            ws[c].fill = PatternFill("solid", fgColor="FFFF0000")

    def conditional(colour):
        def edit(ws):
            ws.conditional_formatting.add(
                "A2:A5",
                FormulaRule(
                    formula=['OR(A2="Sat",A2="Sun")'], fill=PatternFill("solid", bgColor=colour)
                ),
            )

        return edit

    gold = book(tmp_path / "gold.xlsx", days, by_hand)
    assert (
        compare_table(book(tmp_path / "r.xlsx", days, conditional("FFFF0000")), gold, rules=[rule])
        == 1.0
    )
    assert (
        compare_table(book(tmp_path / "b.xlsx", days, conditional("FF0000FF")), gold, rules=[rule])
        == 0.0
    )


def test_style_conditional_formula_we_cannot_evaluate(tmp_path):
    """A function our evaluator lacks: the gold's is a judge error (no score), the agent's
    file fails the rule (never an unscored episode)."""
    from openpyxl.formatting.rule import FormulaRule
    from osworld_gym.errors import EvaluatorError

    def cf(ws):
        ws.conditional_formatting.add(
            "B2:B5", FormulaRule(formula=["B2>PERCENTILE($B$2:$B$5,0.9)"], font=Font(color=GREEN))
        )

    exotic = book(tmp_path / "g.xlsx", RATES, cf)
    plain = book(tmp_path / "p.xlsx", RATES, green_font_cells("B3"))
    rule = {"type": "style", **RULE0, "props": ["font_color"]}
    with pytest.raises(EvaluatorError, match="PERCENTILE"):
        compare_table(plain, exotic, rules=[rule])
    assert compare_table(exotic, plain, rules=[rule]) == 0.0


def test_check_cell_reads_booleans_as_none_and_numbers_as_floats(tmp_path):
    path = book(tmp_path / "b.xlsx", [[True, 3, "3"]])

    def check(coord, method, ref):
        return compare_table(
            path,
            rules=[
                {
                    "type": "check_cell",
                    "sheet_idx": 0,
                    "coordinate": coord,
                    "props": {"value": {"method": method, "ref": ref}},
                }
            ],
        )

    assert check("A1", "eq", True) == 0.0  # OSWorld's XML reader returns nothing for t="b"
    assert check("A1", "eq", None) == 1.0
    assert check("B1", "eq", 3) == 1.0  # 3.0 == 3
    assert check("B1", "re", "^3$") == 0.0  # re.search on a float raises: the rule fails
    assert check("C1", "eq", "3") == 1.0


def test_sheet_fuzzy_compares_numbers_as_float_text(tmp_path):
    num = book(tmp_path / "n.xlsx", [[3]])
    text = book(tmp_path / "t.xlsx", [["3"]])
    text_float = book(tmp_path / "tf.xlsx", [["3.0"]])
    rule = {"type": "sheet_fuzzy", **RULE0, "rules": [{"range": ["A1"], "type": "exact_match"}]}
    assert compare_table(num, text_float, rules=[rule]) == 1.0  # "3.0" == "3.0"
    assert compare_table(num, text, rules=[rule]) == 0.0  # "3.0" != "3"


def test_freeze_compares_frozen_counts_not_split_panes(tmp_path):
    def frozen(ws):
        ws.freeze_panes = "B2"

    def split(ws):
        ws.sheet_view.pane = Pane(xSplit=1, ySplit=1, topLeftCell="B2", state="split")

    def frozen_scrolled(ws):
        ws.freeze_panes = "B2"
        ws.sheet_view.pane.topLeftCell = "B40"

    gold = book(tmp_path / "g.xlsx", [["a", "b"]], frozen)
    rule = {"type": "freeze", **RULE0}
    assert (
        compare_table(book(tmp_path / "s.xlsx", [["a", "b"]], frozen_scrolled), gold, rules=[rule])
        == 1.0
    )
    assert compare_table(book(tmp_path / "p.xlsx", [["a", "b"]], split), gold, rules=[rule]) == 0.0


def test_data_validation_range_must_lie_in_one_reference_range(tmp_path):
    def dv(*ranges):
        def edit(ws):
            v = DataValidation(type="list", formula1='"Yes,No"')
            for r in ranges:
                v.add(r)
            ws.add_data_validation(v)

        return edit

    rule = {
        "type": "data_validation",
        "sheet_idx": 0,
        "dv_props": [
            {
                "type": {"method": "eq", "ref": "list"},
                "sqref": {"method": "spreadsheet_range", "ref": ["A2:A5", "A2:A10"]},
            }
        ],
    }
    whole = book(tmp_path / "w.xlsx", [["h"]], dv("A2:A10"))
    pieces = book(tmp_path / "p.xlsx", [["h"]], dv("A2:A3", "A4:A10"))
    assert compare_table(whole, rules=[rule]) == 1.0
    # A2:A5 is not inside either piece: OSWorld's MultiCellRange containment says no
    assert compare_table(pieces, rules=[rule]) == 0.0


def test_row_props_compare_the_recorded_rows(tmp_path):
    def tall(ws):
        ws.row_dimensions[2].height = 30

    def tall_and_default(ws):
        ws.row_dimensions[2].height = 30
        ws.row_dimensions[3].height = None  # a record for row 3, all defaults
        ws.row_dimensions[3].hidden = False
        ws.row_dimensions[3].outlineLevel = 1

    rows = [["a"], ["b"], ["c"]]
    gold = book(tmp_path / "g.xlsx", rows, tall)
    rule = {"type": "row_props", **RULE0, "props": ["height", "hidden"]}
    assert compare_table(book(tmp_path / "s.xlsx", rows, tall), gold, rules=[rule]) == 1.0
    assert (
        compare_table(book(tmp_path / "x.xlsx", rows, tall_and_default), gold, rules=[rule]) == 0.0
    )


needs_libreoffice = pytest.mark.skipif(shutil.which("soffice") is None, reason="needs LibreOffice")


@needs_libreoffice
def test_row_props_after_a_libreoffice_resave_differ_from_an_openpyxl_gold(tmp_path):
    """LibreOffice writes a record for every row it saves; OSWorld compares the records as
    they are, so a re-saved copy of an openpyxl gold with a tall row 2 no longer matches."""

    def tall(ws):
        ws.row_dimensions[2].height = 30

    rows = [["a"], ["b"], ["c"]]
    gold = book(tmp_path / "g.xlsx", rows, tall)
    out = tmp_path / "lo"
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{tmp_path}/profile",
            "--headless",
            "--convert-to",
            "xlsx",
            "--outdir",
            str(out),
            gold,
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    resaved = str(out / "g.xlsx")
    rule = {"type": "row_props", **RULE0, "props": ["height"]}
    ws = openpyxl.load_workbook(resaved).active
    recorded = set(ws.row_dimensions)
    score = compare_table(resaved, gold, rules=[rule])
    assert score == (1.0 if recorded == {2} else 0.0)
    assert compare_table(resaved, resaved, rules=[rule]) == 1.0


def month_filter(blank: bool | None = None, sort: bool = False):
    def edit(ws):
        ws.auto_filter.ref = "A1:B5"
        ws.auto_filter.add_filter_column(0, ["Jan"], blank=blank)
        if sort:
            ws.auto_filter.add_sort_condition("B2:B5", descending=True)

    return edit


MONTHS = [["Month", "Amount"], ["Jan", 5], ["Feb", 12], ["Jan", 20], ["Mar", 7]]


def test_filter_compares_attributes_as_written_like_osworld(tmp_path):
    """``<filters blank="0">`` (openpyxl) and ``<filters>`` (LibreOffice) are the same filter
    to a user, but OSWorld's ``load_filters`` compares the attribute as read (False vs None),
    so they differ there and here."""
    rule = {"type": "filter", **RULE0}
    gold = book(tmp_path / "g.xlsx", MONTHS, month_filter())
    assert compare_table(book(tmp_path / "s.xlsx", MONTHS, month_filter()), gold, rules=[rule])
    explicit = book(tmp_path / "e.xlsx", MONTHS, month_filter(blank=False))
    assert compare_table(explicit, gold, rules=[rule]) == 0.0
    sorted_ = book(tmp_path / "o.xlsx", MONTHS, month_filter(sort=True))
    assert compare_table(sorted_, gold, rules=[rule]) == 0.0
    # a sheet that does not exist has no filter: two missing sheets are equal, as in OSWorld
    missing = {"type": "filter", "sheet_idx0": "RNNope", "sheet_idx1": "ENNope"}
    assert compare_table(gold, gold, rules=[missing]) == 1.0
    assert compare_table(gold, gold, rules=[{**missing, "sheet_idx1": "EI0"}]) == 0.0


@needs_libreoffice
def test_filter_against_a_gold_resaved_by_libreoffice(tmp_path):
    """OSWorld's golds are saved by LibreOffice. The same filter made by openpyxl differs
    from the re-saved gold (LibreOffice drops ``blank="0"`` and rewrites the sort state);
    the result saved by LibreOffice too, as an agent's is, matches it."""
    made = book(tmp_path / "made.xlsx", MONTHS, month_filter(blank=False, sort=True))
    gold_src = book(tmp_path / "gold.xlsx", MONTHS, month_filter(blank=False, sort=True))
    out = tmp_path / "lo"
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{tmp_path}/profile",
            "--headless",
            "--convert-to",
            "xlsx",
            "--outdir",
            str(out),
            gold_src,
            made,
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    gold, resaved = str(out / "gold.xlsx"), str(out / "made.xlsx")
    rule = {"type": "filter", **RULE0}
    assert openpyxl.load_workbook(gold).active.auto_filter.filterColumn[0].filters.blank is None
    assert compare_table(made, gold, rules=[rule]) == 0.0
    assert compare_table(resaved, gold, rules=[rule]) == 1.0


def test_style_conditional_formatting_osworld_cannot_read_fails_the_agent_not_the_judge(tmp_path):
    """OSWorld's code raises on a lone absolute reference (``$B$3`` becomes the range "B3:")
    and on a differential style without the font a font property asks for. In the agent's
    file that is a 0 here (an exception would leave the episode unscored, a way out of a
    failure); in the gold file it is the judge's error."""
    from openpyxl.formatting.rule import CellIsRule, FormulaRule
    from osworld_gym.errors import EvaluatorError

    rule = {"type": "style", **RULE0, "props": ["font_color"]}
    gold = book(tmp_path / "gold.xlsx", RATES, green_font_cells("B3"))

    def cf(factory):
        return lambda ws: ws.conditional_formatting.add("B2:B5", factory())

    lone = book(
        tmp_path / "lone.xlsx",
        RATES,
        cf(lambda: FormulaRule(formula=["B2=$B$3"], font=Font(color=GREEN))),
    )
    fill_only = book(
        tmp_path / "fill.xlsx",
        RATES,
        cf(
            lambda: CellIsRule(
                operator="greaterThan", formula=["4"], fill=PatternFill("solid", bgColor=GREEN)
            )
        ),
    )
    assert compare_table(lone, gold, rules=[rule]) == 0.0
    assert compare_table(fill_only, gold, rules=[rule]) == 0.0
    with pytest.raises(EvaluatorError, match="gold workbook's conditional formatting"):
        compare_table(gold, lone, rules=[rule])
    with pytest.raises(ValueError, match="unknown cell style"):
        compare_table(lone, gold, rules=[{**rule, "props": ["colour"]}])
