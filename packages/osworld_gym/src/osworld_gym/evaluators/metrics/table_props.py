"""Worksheet properties ``compare_table`` compares: cell styles, auto-filters, row/column dims.

All readers take openpyxl worksheets loaded with formulas kept (``data_only=False``), as OSWorld
reads styles.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

#: Style property names of OSWorld's ``check_cell`` and ``style`` rules.
STYLE_PROPS = frozenset(
    {
        "number_format",
        "font_name",
        "font_family",
        "font_color",
        "font_bold",
        "font_italic",
        "font_underline",
        "font_size",
        "fill_type",
        "bgcolor",
        "fgcolor",
        "hyperlink",
        "merge",
    }
)


def color(c: Any) -> str | None:
    """An openpyxl colour as text: ``"FFFF0000"`` (rgb), ``"theme:1:0.0"``, ``"indexed:8"``."""
    if c is None:
        return None
    kind = getattr(c, "type", None)
    if kind == "rgb":
        return c.rgb
    if kind == "theme":
        return f"theme:{c.theme}:{c.tint}"
    if kind == "indexed":
        return f"indexed:{c.indexed}"
    return f"{kind}:{getattr(c, 'auto', None)}"


def cell_style(prop: str, cell: Any) -> Any:
    """OSWorld's style property ``prop`` of ``cell``; ``None`` for an empty cell.

    Raises:
        ValueError: an unknown property name.
    """
    from openpyxl.cell.cell import MergedCell

    if prop == "merge":
        return isinstance(cell, MergedCell)
    if prop not in STYLE_PROPS:
        known = ", ".join(sorted(STYLE_PROPS))
        raise ValueError(f"unknown cell style property {prop!r} (known: {known})")
    if cell.value is None:
        return None
    font, fill = cell.font, cell.fill
    if prop == "number_format":
        return cell.number_format if cell.data_type == "n" else None
    if prop == "font_name":
        return font.name
    if prop == "font_family":
        return font.family
    if prop == "font_color":
        return color(font.color)
    if prop == "font_bold":
        return font.bold
    if prop == "font_italic":
        return font.italic
    if prop == "font_underline":
        return font.underline
    if prop == "font_size":
        return font.size
    if prop == "fill_type":
        return getattr(fill, "tagname", None)
    if prop == "bgcolor":
        return color(getattr(fill, "bgColor", None))
    if prop == "fgcolor":
        return color(getattr(fill, "fgColor", None))
    link = cell.hyperlink  # prop == "hyperlink"
    return (link.target or link.location or "") if link is not None else ""


def _coordinates(ws: Any) -> set[tuple[int, int]]:
    if ws.max_row == 1 and ws.max_column == 1 and ws.cell(1, 1).value is None:
        return set()
    return {
        (r, c)
        for r in range(ws.min_row, ws.max_row + 1)
        for c in range(ws.min_column, ws.max_column + 1)
    }


def styles(a: Any, b: Any, names: list[str]) -> bool:
    """Whether every cell of either sheet has equal style props ``names`` in both."""
    for row, col in sorted(_coordinates(a) | _coordinates(b)):
        ca, cb = a.cell(row=row, column=col), b.cell(row=row, column=col)
        for name in names:
            va, vb = cell_style(name, ca), cell_style(name, cb)
            if va != vb:
                logger.info("style %s of %s: %r vs %r", name, ca.coordinate, va, vb)
                return False
    return True


def auto_filter(ws: Any) -> dict[str, Any]:
    """The sheet's auto-filter: range, per-column filters (by column id) and sort state."""
    af = ws.auto_filter
    columns = []
    for fc in af.filterColumn:
        entry: dict[str, Any] = {
            "col_id": fc.colId,
            "hidden_button": bool(fc.hiddenButton),
            "show_button": fc.showButton is not False,
        }
        if fc.filters is not None:
            entry["blank"] = bool(fc.filters.blank)
            entry["values"] = sorted(fc.filters.filter or [])
        if fc.customFilters is not None:
            entry["custom_and"] = bool(fc.customFilters._and)
            entry["custom"] = sorted(
                (f.operator or "equal", str(f.val)) for f in fc.customFilters.customFilter
            )
        columns.append(entry)
    out: dict[str, Any] = {"ref": af.ref, "columns": sorted(columns, key=lambda d: d["col_id"])}
    state = af.sortState
    if state is not None:
        out["sort"] = {
            "ref": state.ref,
            "case_sensitive": bool(state.caseSensitive),
            "conditions": [(c.ref, bool(c.descending)) for c in state.sortCondition],
        }
    return out


def _dims(ws: Any, obj: str, names: list[str]) -> dict[int, dict[str, Any]]:
    from openpyxl.utils import column_index_from_string

    out: dict[int, dict[str, Any]] = {}
    table = ws.row_dimensions if obj == "row" else ws.column_dimensions
    for key, dim in table.items():
        values = {n: _falsy_none(getattr(dim, n, None)) for n in names}
        if obj == "row":
            out[int(key)] = values
            continue
        first = getattr(dim, "min", None) or column_index_from_string(key)
        last = getattr(dim, "max", None) or first
        for index in range(first, last + 1):
            out[index] = values
    return out


def _falsy_none(value: Any) -> Any:
    return None if value is False or value == 0 else value


def dimensions(a: Any, b: Any, obj: str, names: list[str]) -> bool:
    """Whether rows (``obj="row"``) or columns have equal properties ``names`` in both sheets.

    A row/column without a dimension record has all properties ``None``; ``False``/``0`` count
    as ``None`` (a file may or may not spell out the default).
    """
    da, db = _dims(a, obj, names), _dims(b, obj, names)
    blank = dict.fromkeys(names)
    for key in sorted(set(da) | set(db)):
        if da.get(key, blank) != db.get(key, blank):
            logger.info("%s %s: %r vs %r", obj, key, da.get(key, blank), db.get(key, blank))
            return False
    return True
