"""Conditional formatting applied to cell styles, as OSWorld's ``style`` rule applies it.

OSWorld's ``load_xlsx_styles`` reads every cell's style, then, for each conditional format
rule of the sheet in order, finds the cells the rule is active on and replaces their styles
with the rule's differential style (a later active rule wins). We do the same, with these
rules of OSWorld's kept for parity:

* **Which rules count.** ``cellIs`` (the cell's value against the rule's formulas, each
  evaluated alone: a formula with a reference cannot be, and the rule is skipped) and the
  formula types ``expression``, ``containsText``, ``notContainsText``, ``beginsWith``,
  ``endsWith``, ``containsErrors``, ``notContainsErrors``. Any other type (``top10``,
  ``aboveAverage``, ``duplicateValues``, colour scales, data bars, icon sets) is active on no
  cell.
* **How a formula is bound.** Its references, in order of first appearance, receive the
  tested cell's value, then the values of the formula's absolute references (``$B$2`` or
  ``$B$2:$B$9``, in the order written). So ``B2=MAX($B$2:$B$9)`` tests each cell against the
  column's maximum, whatever cell ``B2`` is; a formula whose references do not bind that way
  is active on no cell.
* **Errors kept.** A formula with a lone absolute reference (``$B$3``, not a range) raises
  ``ValueError``, and a differential style without the font (number format) a ``font_*``
  (``number_format``) property asks for raises ``AttributeError``, as both do in OSWorld's
  code; :func:`~osworld_gym.evaluators.evaluate` blames them by whose file it was.
* **Values** are read from the sheet's XML (:mod:`.table_cells`: numbers as floats); an empty
  cell is never tested, and after 50 empty cells in a rule each further empty cell ends its
  range.
* **The differential style** gives the number format, font and fill (``bgcolor`` and
  ``fgcolor`` are the fill's *background* colour here, which is the colour a differential
  solid fill shows); ``hyperlink`` and ``merge`` stay the cell's own.

Formulas are evaluated by :mod:`.formula`; one it cannot evaluate raises
:class:`~.formula.UnsupportedFormula` (no honest score), where OSWorld's ``formulas`` package
might have evaluated it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from osworld_gym.evaluators.metrics.formula import XlError, compile_formula
from osworld_gym.evaluators.metrics.table_cells import read_cell_value
from osworld_gym.evaluators.metrics.table_props import cell_style

logger = logging.getLogger(__name__)

#: Rule types whose first formula decides (OSWorld's list).
FORMULA_TYPES = frozenset(
    {
        "expression",
        "containsText",
        "notContainsText",
        "endsWith",
        "beginsWith",
        "containsErrors",
        "notContainsErrors",
    }
)
#: Empty cells a rule passes before each further empty cell ends its range (OSWorld: 50).
EMPTY_RUN = 50

_ABSOLUTE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")


def _cell_operator(op: str | None, value: Any, refs: list[Any]) -> bool:
    """OSWorld's ``cellIs`` comparison (Python's, not Excel's: a type mismatch is false)."""
    try:
        if op == "between":
            return min(refs) <= value <= max(refs)
        if op == "notBetween":
            return value < min(refs) or value > max(refs)
        compare: dict[str | None, Callable[[Any, Any], bool]] = {
            "lessThan": lambda a, b: a < b,
            "lessThanOrEqual": lambda a, b: a <= b,
            "equal": lambda a, b: a == b,
            "notEqual": lambda a, b: a != b,
            "greaterThan": lambda a, b: a > b,
            "greaterThanOrEqual": lambda a, b: a >= b,
        }
        return op in compare and compare[op](value, refs[0])
    except (TypeError, IndexError, ValueError):
        return False


def _absolute_values(path: str, title: str, formula: str) -> list[Any]:
    from openpyxl.utils import column_index_from_string, get_column_letter

    out: list[Any] = []
    for col1, row1, col2, row2 in _ABSOLUTE.findall(formula):
        if not col2:
            # OSWorld's load_xlsx_styles reads a lone absolute reference as the range "B3:",
            # which openpyxl refuses: every such formula raises there, and so here
            raise ValueError(
                f"conditional format formula {formula!r}: OSWorld cannot read its absolute "
                f"reference ${col1}${row1} (a range {col1}{row1}: to openpyxl)"
            )
        c1, c2 = sorted((column_index_from_string(col1), column_index_from_string(col2)))
        r1, r2 = sorted((int(row1), int(row2)))
        out.append(
            [
                read_cell_value(path, title, f"{get_column_letter(c)}{r}")
                for r in range(r1, r2 + 1)
                for c in range(c1, c2 + 1)
            ]
        )
    return out


def _is_active(rule: Any, path: str, title: str) -> Callable[[Any], bool] | None:
    """A test of a cell value for ``rule``, or ``None`` if the rule is skipped."""
    if rule.type == "cellIs":
        refs = []
        for text in rule.formula:
            formula = compile_formula(text)
            if formula.refs:
                return None  # OSWorld calls the compiled formula with no inputs: it fails
            try:
                refs.append(formula())
            except XlError:
                return None
        return lambda v: _cell_operator(rule.operator, v, refs)
    if rule.type in FORMULA_TYPES and rule.formula:
        formula = compile_formula(rule.formula[0])
        extra = _absolute_values(path, title, rule.formula[0])

        def test(v: Any) -> bool:
            try:
                return bool(formula(v, *extra))
            except (XlError, TypeError):
                return False

        return test
    logger.info("conditional format type %r is active on no cell (as in OSWorld)", rule.type)
    return lambda v: False


def dxf_style(prop: str, cell: Any, dxf: Any) -> Any:
    """Style property ``prop`` of ``cell`` under the differential style ``dxf`` (OSWorld's
    ``_read_cell_style`` with ``diff_style``). As there, an unreadable fill is ``None`` but a
    differential style without the font or number format asked for raises
    (``AttributeError``)."""
    if prop in ("hyperlink", "merge"):
        return cell_style(prop, cell)
    if prop in ("fill_type", "bgcolor", "fgcolor"):
        try:
            return dxf.fill.tagname if prop == "fill_type" else dxf.fill.bgColor.rgb
        except AttributeError:
            return None
    if cell.value is None:
        return None
    if prop == "number_format":
        return dxf.numFmt.formatCode if cell.data_type == "n" else None
    if prop == "font_color":
        return dxf.font.color.rgb
    return getattr(dxf.font, prop.removeprefix("font_"))


def apply(ws: Any, path: str, names: list[str], styles: dict[str, list[Any]]) -> None:
    """Replace, in ``styles`` (``{coordinate: props}``), the styles of the cells each of the
    sheet's conditional format rules is active on. ``path`` is the workbook file (values are
    read from its XML), ``ws`` its sheet read with openpyxl.

    Raises:
        UnsupportedFormula: a rule's formula this evaluator cannot evaluate.
    """
    from openpyxl.utils import get_column_letter

    for fmt in ws.conditional_formatting:
        for rule in fmt.rules:
            test = _is_active(rule, path, ws.title)
            if test is None:
                continue
            empties = 0
            active = []
            for cells in fmt.cells.ranges:
                for row, col in cells.cells:
                    coordinate = f"{get_column_letter(col)}{row}"
                    value = read_cell_value(path, ws.title, coordinate)
                    if value is None:
                        empties += 1
                        if empties > EMPTY_RUN:
                            break
                        continue
                    if test(value):
                        active.append(ws.cell(row=row, column=col))
            for cell in active:
                styles[cell.coordinate] = [dxf_style(n, cell, rule.dxf) for n in names]


def style_map(ws: Any, names: list[str], path: str) -> dict[str, list[Any]]:
    """``{coordinate: [props]}`` for every cell from A1 to the sheet's last row and column,
    as OSWorld's ``load_xlsx_styles`` builds it (so two sheets of different extents differ),
    with the sheet's conditional formatting applied (:func:`apply`). ``path`` is
    the workbook ``ws`` was read from.

    Raises:
        UnsupportedFormula: a conditional format formula we cannot evaluate.
        ValueError, AttributeError: one OSWorld's code cannot evaluate either (see the
            module docstring).
    """
    out = {c.coordinate: [cell_style(n, c) for n in names] for col in ws.iter_cols() for c in col}
    apply(ws, path, names, out)
    return out
