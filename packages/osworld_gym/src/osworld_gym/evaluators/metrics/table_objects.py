"""Charts, pivot tables and sparklines of a sheet, read straight from the ``.xlsx`` XML parts.

``compare_table``'s ``chart``, ``pivot_table`` and ``sparkline`` rules compare these. openpyxl
loses sparklines and skips charts it cannot parse, so we read the package ourselves:
``xl/workbook.xml`` names the sheets; relationships lead from a sheet to its drawing (and on to
``xl/charts/chartN.xml``) and to its pivot tables (``xl/pivotTables/pivotTableN.xml``, whose
cache definition, with the source range, the workbook lists); a sheet's ``extLst`` holds its
``x14:sparklineGroups``.

Each reader returns, for the same file, the values OSWorld's readers return
(``desktop_env/evaluators/metrics/utils.py`` in xlang-ai/OSWorld: ``load_charts``,
``load_pivot_tables``, ``load_sparklines``, which see the file through openpyxl's object model,
so openpyxl's defaults for absent attributes apply here too). Two sheets match when the results
are equal. A sheet that is not in the workbook gives ``None``.
"""

from __future__ import annotations

import logging
import posixpath
import zipfile
from collections.abc import Iterable
from functools import cached_property
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "pr": "http://schemas.openxmlformats.org/package/2006/relationships",
    "xdr": "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "x14": "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main",
    "xm": "http://schemas.microsoft.com/office/excel/2006/main",
}
_RID = f"{{{NS['r']}}}id"

#: ``chart_props`` names (OSWorld's). ``width``/``height``: OSWorld reads charts through
#: openpyxl, which never loads a chart's size and reports its defaults (15 x 7.5 cm) for every
#: chart; we report the same, so, as in OSWorld, these two never differ.
CHART_PROPS = frozenset(
    {"title", "legend", "anchor", "width", "height", "type", "direction"}
    | {"xtitle", "ytitle", "ztitle"}
)
#: ``pivot_props`` names (OSWorld's); ``ordered``, ``data_fields_name`` and
#: ``ignore_special_fields`` modify ``selection``/``filter``, ``data_fields`` and the field lists.
PIVOT_PROPS = frozenset(
    {"name", "show_total", "show_empty_row", "show_empty_col", "show_headers", "location"}
    | {"filter", "selection", "ordered", "col_fields", "row_fields", "data_fields"}
    | {"data_fields_name", "ignore_special_fields"}
)
_OPENPYXL_CHART_SIZE = (15, 7.5)


class Package:
    """The XML parts of one ``.xlsx`` file, each parsed on first use."""

    def __init__(self, path: str):
        self.path = path
        self._parts: dict[str, Any] = {}

    def xml(self, part: str) -> Any:
        """The parsed part (``xl/workbook.xml``), or ``None`` if the package lacks it."""
        if part not in self._parts:
            with zipfile.ZipFile(self.path) as package:
                try:
                    data = package.read(part)
                except KeyError:
                    data = None
            self._parts[part] = None if data is None else _parse(data)
        return self._parts[part]

    def related(self, part: str, kind: str) -> dict[str, str]:
        """``{relationship id: target part}`` of ``part``'s internal relationships whose type
        ends in ``kind`` (``"drawing"``, ``"chart"``, ``"pivotTable"``...), in file order."""
        folder, name = posixpath.split(part)
        rels = self.xml(posixpath.join(folder, "_rels", f"{name}.rels"))
        out: dict[str, str] = {}
        for rel in [] if rels is None else rels.iterfind("pr:Relationship", NS):
            if rel.get("TargetMode") == "External" or rel.get("Type", "").split("/")[-1] != kind:
                continue
            target = rel.get("Target", "")
            path = target[1:] if target.startswith("/") else posixpath.join(folder, target)
            out[rel.get("Id", "")] = posixpath.normpath(path)
        return out

    @cached_property
    def workbook_part(self) -> str:
        return next(iter(self.related("", "officeDocument").values()), "xl/workbook.xml")

    @cached_property
    def sheet_parts(self) -> dict[str, str]:
        """``{sheet name: part}`` for every sheet (worksheets and chart sheets)."""
        targets = self.related(self.workbook_part, "worksheet")
        targets.update(self.related(self.workbook_part, "chartsheet"))
        book = self.xml(self.workbook_part)
        sheets = [] if book is None else book.iterfind("m:sheets/m:sheet", NS)
        return {s.get("name"): targets[s.get(_RID)] for s in sheets if s.get(_RID) in targets}


# -- sparklines -------------------------------------------------------------------------------


def sparklines(pkg: Package, sheet: str) -> dict[str | None, str | None] | None:
    """``{location: data range}`` of the sheet's sparklines, e.g. ``{"F3": "Sheet1!C3:E3"}``.

    Like OSWorld, only where each sparkline sits and what it plots count (not its group's type or
    colours). We find the sheet's part through the workbook's relationships; OSWorld assumes
    ``sheet<sheetId>.xml``, which is another sheet's part once sheets were added and removed.
    """
    part = pkg.sheet_parts.get(sheet)
    if part is None:
        return None
    root = pkg.xml(part)
    found = [] if root is None else root.iter(f"{{{NS['x14']}}}sparkline")
    return {sp.findtext("xm:sqref", None, NS): sp.findtext("xm:f", None, NS) for sp in found}


# -- charts -----------------------------------------------------------------------------------


def charts(pkg: Package, sheet: str, props: Iterable[str]) -> dict[str, dict[str, Any]] | None:
    """The sheet's charts as ``{data source: {prop: value}}`` for the ``chart_props`` ``props``.

    A chart's data source is its series' value and category references,
    ``"<values>,<categories>;..."`` (what OSWorld keys charts by), so two sheets match only if
    they chart the same ranges. A chart that combines types is described by its first one.
    ``anchor`` is ``[editAs, from column, from row, to column, to row]`` (0-based cells), the
    list OSWorld documents (its code reads the end row in place of the start row).

    Raises:
        NotImplementedError: a property we do not know.
    """
    props = set(props)
    _check_props("chart_props", props, CHART_PROPS)
    part = pkg.sheet_parts.get(sheet)
    if part is None:
        return None
    out: dict[str, dict[str, Any]] = {}
    for drawing in pkg.related(part, "drawing").values():
        root = pkg.xml(drawing)
        if root is None:
            continue
        targets = pkg.related(drawing, "chart")
        # openpyxl's order, which decides which of two charts of the same data is kept
        anchors = [
            *root.iterfind("xdr:absoluteAnchor", NS),
            *root.iterfind("xdr:oneCellAnchor", NS),
            *root.iterfind("xdr:twoCellAnchor", NS),
        ]
        for anchor in anchors:
            ref = anchor.find("xdr:graphicFrame/a:graphic/a:graphicData/c:chart", NS)
            space = None if ref is None else pkg.xml(targets.get(ref.get(_RID), ""))
            described = None if space is None else _chart(space, anchor)
            if described is not None:
                source, info = described
                out[source] = {k: v for k, v in info.items() if k in props}
    return out


_VALUES = ("c:val/c:numRef/c:f",)
_CATEGORIES = ("c:cat/c:numRef/c:f", "c:cat/c:strRef/c:f")


def _chart(space: Any, anchor: Any) -> tuple[str, dict[str, Any]] | None:
    chart = space.find("c:chart", NS)
    plot = None if chart is None else chart.find("c:plotArea", NS)
    kinds = [] if plot is None else [el for el in plot if _local(el).endswith("Chart")]
    if chart is None or plot is None or not kinds:
        logger.info("chart without a plot: skipped")
        return None
    first = kinds[0]
    series = sorted(first.iterfind("c:ser", NS), key=lambda s: _int(s, "c:order/@val", 0))
    source = ";".join(f"{_ref(s, _VALUES)},{_ref(s, _CATEGORIES)}" for s in series)
    legend = chart.find("c:legend", NS)
    kind = _local(first)
    direction = None
    if kind in ("barChart", "bar3DChart"):
        direction = _attr(first, "c:barDir", "val") or "col"
    x, y, z = _axes(plot, first)
    width, height = _OPENPYXL_CHART_SIZE
    info = {
        "title": _rich_text(chart.find("c:title", NS)),
        "legend": None if legend is None else _attr(legend, "c:legendPos", "val") or "r",
        "anchor": [anchor.get("editAs"), *_marker(anchor, "from"), *_marker(anchor, "to")],
        "width": width,
        "height": height,
        "type": kind,
        "direction": direction,
        "xtitle": _axis_title(x),
        "ytitle": _axis_title(y),
        "ztitle": _axis_title(z),
    }
    return source, info


def _axes(plot: Any, chart: Any) -> tuple[Any, Any, Any]:
    """The chart's x, y and z axes as openpyxl assigns them (``None`` where it has none)."""
    axes = {_attr(ax, "c:axId", "val"): ax for ax in plot if _local(ax).endswith("Ax")}
    ids = [ax.get("val") for ax in chart.iterfind("c:axId", NS)]
    if _local(chart) in ("scatterChart", "bubbleChart"):  # two value axes, in order
        return axes.get(ids[0]) if ids else None, axes.get(ids[1]) if len(ids) > 1 else None, None
    x = y = z = None
    for ax in (axes[i] for i in ids if i in axes):
        kind = _local(ax)
        if kind in ("catAx", "dateAx"):
            x = ax
        elif kind == "valAx":
            y = ax
        elif kind == "serAx":
            z = ax
    return x, y, z


def _axis_title(axis: Any) -> str | None:
    return None if axis is None else _rich_text(axis.find("c:title", NS))


def _rich_text(title: Any) -> str | None:
    """The text of a title's first run of its first paragraph (what OSWorld reads), else None."""
    para = None if title is None else title.find("c:tx/c:rich/a:p", NS)
    run = None if para is None else para.find("a:r", NS)
    return None if run is None else run.findtext("a:t", None, NS)


def _marker(anchor: Any, which: str) -> tuple[int | None, int | None]:
    marker = anchor.find(f"xdr:{which}", NS)
    if marker is None:
        return None, None
    return _int(marker, "xdr:col", None), _int(marker, "xdr:row", None)


def _ref(series: Any, paths: tuple[str, ...]) -> str:
    for path in paths:
        el = series.find(path, NS)
        if el is not None:
            return el.text or ""
    return ""


# -- pivot tables -----------------------------------------------------------------------------


def pivot_tables(
    pkg: Package, sheet: str, props: Iterable[str]
) -> dict[Any, dict[str, Any]] | None:
    """The sheet's pivot tables as ``{source: {prop: value}}`` for the ``pivot_props`` ``props``.

    The source is the cache's type, sheet and range, narrowed (as OSWorld does) to the columns
    from the first to the last field that has items, so a table matches the gold one only if it
    summarises the same data. Field numbers are counted from that first column.

    Raises:
        NotImplementedError: a property we do not know.
    """
    props = set(props)
    _check_props("pivot_props", props, PIVOT_PROPS)
    part = pkg.sheet_parts.get(sheet)
    if part is None:
        return None
    caches = _pivot_caches(pkg)
    out: dict[Any, dict[str, Any]] = {}
    for table_part in pkg.related(part, "pivotTable").values():
        table = pkg.xml(table_part)
        if table is None:
            continue
        cache_part = caches.get(table.get("cacheId")) or next(
            iter(pkg.related(table_part, "pivotCacheDefinition").values()), ""
        )
        source, info = _pivot(table, pkg.xml(cache_part), props)
        out[source] = info
    return out


def _pivot_caches(pkg: Package) -> dict[str | None, str]:
    book = pkg.xml(pkg.workbook_part)
    targets = pkg.related(pkg.workbook_part, "pivotCacheDefinition")
    caches = [] if book is None else book.iterfind("m:pivotCaches/m:pivotCache", NS)
    return {c.get("cacheId"): targets[c.get(_RID)] for c in caches if c.get(_RID) in targets}


def _pivot(table: Any, cache: Any, props: set[str]) -> tuple[Any, dict[str, Any]]:
    fields = table.findall("m:pivotFields/m:pivotField", NS)
    raw = [
        [
            (_bool(item.get("h")), int(item.get("x")))
            for item in f.iterfind("m:items/m:item", NS)
            if item.get("x") is not None
        ]
        for f in fields
    ]
    left = next((i for i, items in enumerate(raw) if items), len(raw))
    kept = raw[left:]
    right = next((i for i, items in enumerate(reversed(kept)) if items), len(kept))
    selection = kept[: len(kept) - right]

    info: dict[str, Any] = {}
    if "name" in props:
        info["name"] = table.get("name")
    for prop, attr, default in (
        ("show_total", "visualTotals", True),
        ("show_empty_row", "showEmptyRow", False),
        ("show_empty_col", "showEmptyCol", False),
        ("show_headers", "showHeaders", True),
    ):
        if prop in props:
            value = _bool(table.get(attr))
            info[prop] = default if value is None else value
    if "location" in props:
        loc = table.find("m:location", NS)
        info["location"] = (
            None
            if loc is None
            else {k: int(v) if v.lstrip("-").isdigit() else v for k, v in loc.attrib.items()}
        )
    if "filter" in props or "selection" in props:
        info["selection"] = selection if "ordered" in props else [set(s) for s in selection]
    if "filter" in props:
        info["filter_fields"] = {
            int(f.get("fld", -1)) for f in table.iterfind("m:pageFields/m:pageField", NS)
        }
    for prop, path in (
        ("col_fields", "m:colFields/m:field"),
        ("row_fields", "m:rowFields/m:field"),
    ):
        if prop in props:
            numbers = [int(f.get("x", 0)) - left for f in table.iterfind(path, NS)]
            if "ignore_special_fields" in props:  # e.g. -2, the "Values" pseudo-field
                numbers = [n for n in numbers if n >= 0]
            info[prop] = numbers
    if "data_fields" in props:
        named = "data_fields_name" in props
        info["data_fields"] = [
            f"{int(f.get('fld', 0)) - left};{f.get('name') if named else ''};"
            f"{f.get('subtotal', 'sum')};{f.get('showDataAs', 'normal')}"
            for f in table.iterfind("m:dataFields/m:dataField", NS)
        ]
    return _pivot_source(cache, left, right), info


def _pivot_source(cache: Any, left: int, right: int) -> tuple[Any, ...]:
    src = None if cache is None else cache.find("m:cacheSource", NS)
    if src is None:
        return (None,)
    ws = src.find("m:worksheetSource", NS)
    if ws is None:
        return (src.get("type"),)
    ref = ws.get("ref")
    if ref is None or ":" not in ref:  # a named range
        return (src.get("type"), ref or ws.get("name"), ws.get("sheet"))
    from openpyxl.utils.cell import range_boundaries

    min_col, min_row, max_col, max_row = range_boundaries(ref)
    if min_col is None or min_row is None or max_col is None or max_row is None:
        raise ValueError(f"pivot cache source {ref!r} is a whole row or column, not a cell range")
    return (src.get("type"), (min_row, min_col + left), (max_row, max_col - right), ws.get("sheet"))


# -- small helpers ----------------------------------------------------------------------------


def _check_props(key: str, props: set[str], known: frozenset[str]) -> None:
    unknown = sorted(props - known)
    if unknown:
        raise NotImplementedError(
            f"compare_table {key} {unknown[0]!r} is not implemented in osworld-gym "
            f"(known: {', '.join(sorted(known))})"
        )


def _parse(data: bytes) -> Any:
    from lxml import etree

    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))


def _local(el: Any) -> str:
    """An element's tag without its namespace (``""`` for comments)."""
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def _attr(el: Any, path: str, name: str) -> str | None:
    child = el.find(path, NS)
    return None if child is None else child.get(name)


_Default = TypeVar("_Default", int, None)


def _int(el: Any, path: str, default: _Default) -> int | _Default:
    if path.endswith("/@val"):
        text = _attr(el, path[: -len("/@val")], "val")
    else:
        text = el.findtext(path, None, NS)
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _bool(text: str | None) -> bool | None:
    """An XML boolean attribute (``1``/``true``/``0``/``false``); ``None`` when absent."""
    return None if text is None else text.strip().lower() in ("1", "true")
