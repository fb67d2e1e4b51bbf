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


def cell_style(prop: str, cell: Any) -> Any:
    """OSWorld's style property ``prop`` of ``cell`` (its ``_read_cell_style``).

    Quirks kept for parity: ``bgcolor`` and ``fgcolor`` are both the fill's *foreground*
    colour (the colour a solid fill shows; the background colour of a solid fill is unused and
    must not decide), read as openpyxl's ``.rgb`` (a theme colour reads as openpyxl's
    placeholder text, so any two theme colours are equal); ``font_color`` likewise. Fill
    properties and ``merge`` are read for empty cells too; the others are ``None`` for an
    empty cell. A property that cannot be read (no fill, no font colour) is ``None``.

    Raises:
        ValueError: an unknown property name.
    """
    from openpyxl.cell.cell import MergedCell

    if prop == "merge":
        return isinstance(cell, MergedCell)
    if prop not in STYLE_PROPS:
        known = ", ".join(sorted(STYLE_PROPS))
        raise ValueError(f"unknown cell style property {prop!r} (known: {known})")
    if prop == "fill_type":
        return getattr(cell.fill, "tagname", None)
    if prop in ("bgcolor", "fgcolor"):
        try:
            return cell.fill.fgColor.rgb
        except AttributeError:
            return None
    if cell.value is None:
        return None
    font = cell.font
    if prop == "number_format":
        return cell.number_format if cell.data_type == "n" else None
    if prop == "font_name":
        return font.name
    if prop == "font_family":
        return font.family
    if prop == "font_color":
        return None if font.color is None else font.color.rgb
    if prop == "font_bold":
        return font.bold
    if prop == "font_italic":
        return font.italic
    if prop == "font_underline":
        return font.underline
    if prop == "font_size":
        return font.size
    link = cell.hyperlink  # prop == "hyperlink"
    return (link.target or link.location or "") if link is not None else ""


def freeze_key(ws: Any) -> tuple[Any, ...]:
    """What ``freeze`` compares (OSWorld's ``_freeze_compare_key``): frozen panes by their
    frozen column and row counts (not the scroll-dependent top-left cell); a split or other
    pane by its counts and top-left cell; no pane at all is ``("none",)``.

    >>> import openpyxl
    >>> ws = openpyxl.Workbook().active; ws.freeze_panes = "B3"
    >>> freeze_key(ws)
    ('frozen', 1, 2)
    """
    pane = ws.sheet_view.pane
    if pane is None:
        return ("none",)
    xs = int(pane.xSplit) if pane.xSplit is not None else 0
    ys = int(pane.ySplit) if pane.ySplit is not None else 0
    if (pane.state or "").lower() in ("frozen", "frozensplit"):
        return ("frozen", xs, ys)
    return ("other", xs, ys, pane.topLeftCell)


def auto_filter(ws: Any | None) -> dict[str, Any]:
    """The sheet's auto-filter as OSWorld's ``load_filters`` records it: the range, each
    column's filter (by column id) and the sort state, every attribute as openpyxl reads it.

    Nothing is normalised, for parity: an attribute a file leaves out is ``None`` and differs
    from one written as its default (openpyxl writes ``<filters blank="0">``, LibreOffice
    writes ``<filters>``; LibreOffice adds ``customList=""`` to a sort condition), so a
    workbook made by a script can differ from the same filter saved by LibreOffice, as it
    does on OSWorld. A sheet that does not exist has no filter (``{}``), as in OSWorld.

    >>> import openpyxl
    >>> ws = openpyxl.Workbook().active; ws.auto_filter.ref = "A1:B3"
    >>> ws.auto_filter.add_filter_column(0, ["Jan"], blank=False)
    >>> column = auto_filter(ws)["filter_column"][0]
    >>> column["filters"], column["filters_blank"]
    ({'Jan'}, False)
    """
    if ws is None:
        return {}
    af = ws.auto_filter
    columns = []
    for fc in af.filterColumn:
        entry: dict[str, Any] = {
            "col_id": fc.colId,
            "hidden_button": fc.hiddenButton,
            "show_button": fc.showButton,
        }
        if fc.filters is not None:
            entry["filters_blank"] = fc.filters.blank
            entry["filters"] = set(fc.filters.filter)
        if fc.customFilters is not None:
            entry["custom_filters_op"] = fc.customFilters._and
            entry["custom_filters"] = {(f.operator, f.val) for f in fc.customFilters.customFilter}
        columns.append(entry)
    out: dict[str, Any] = {"ref": af.ref, "filter_column": sorted(columns, key=_col_id)}
    state = af.sortState
    if state is not None:
        out["sort_state"] = {
            "sort": state.columnSort,
            "case": state.caseSensitive,
            "method": state.sortMethod,
            "ref": state.ref,
            "condition": [
                {
                    "descending": c.descending,
                    "key": c.sortBy,
                    "ref": c.ref,
                    "custom_list": c.customList,
                    "dxf_id": c.dxfId,
                    "icon": c.iconSet,
                    "iconid": c.iconId,
                }
                for c in state.sortCondition
            ],
        }
    return out


def _col_id(entry: dict[str, Any]) -> Any:
    return entry["col_id"]


def _dims(ws: Any, obj: str, names: list[str]) -> dict[Any, dict[str, Any]]:
    table = ws.row_dimensions if obj == "row" else ws.column_dimensions
    return {key: {n: getattr(dim, n) for n in names} for key, dim in table.items()}


def dimensions(a: Any, b: Any, obj: str, names: list[str]) -> bool:
    """Whether rows (``obj="row"``) or columns have equal properties ``names`` in both sheets,
    compared as OSWorld's ``load_rows_or_cols`` does: the dimension records openpyxl reads,
    keyed by row number / column letter, must be the same set with equal values. A row one
    file records and the other does not differs even if its values are the defaults (a quirk:
    LibreOffice records every row it saves, openpyxl only rows it was told about).

    Raises:
        AttributeError: a property name dimension records do not have.
    """
    da, db = _dims(a, obj, names), _dims(b, obj, names)
    if da != db:
        keys = sorted(set(da) ^ set(db), key=str) or [k for k in da if da[k] != db[k]]
        logger.info("%s dimensions differ at %s", obj, keys[:5])
    return da == db
