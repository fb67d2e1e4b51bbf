"""compare_table's chart, pivot_table, sparkline and sheet_print rules on real .xlsx files.

Charts are drawn by openpyxl. Pivot tables and sparklines, which openpyxl cannot author, are
written as the XML parts Excel and LibreOffice write, into openpyxl-saved workbooks; slow tests
round-trip such files through LibreOffice, so the rules also see LibreOffice's own XML (what an
agent's Calc saves), and check that our reader agrees with openpyxl's (what OSWorld reads).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from openpyxl.chart import BarChart, BarChart3D, LineChart, PieChart, Reference
from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators import EvalContext, evaluate
from osworld_gym.evaluators.metrics import table_objects
from osworld_gym.evaluators.metrics.table import compare_table
from osworld_gym.tasks import Task

SALES = [["Month", "Sales", "Cost"], ["Jan", 10, 5], ["Feb", 20, 8], ["Mar", 30, 9]]
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
needs_libreoffice = pytest.mark.skipif(
    shutil.which("soffice") is None, reason="LibreOffice is not installed"
)


def xlsx(path: Path, rows: list[list[Any]], edit: Callable[[Any], None] | None = None) -> str:
    """A workbook whose one sheet, ``Sheet1``, holds ``rows``, after ``edit(workbook)``."""
    wb = openpyxl.Workbook()
    wb.active.title = "Sheet1"
    for row in rows:
        wb.active.append(row)
    if edit:
        edit(wb)
    wb.save(path)
    return str(path)


def patch_parts(path: str, edits: dict[str, Callable[[str | None], str]]) -> None:
    """Rewrite parts of the package at ``path``: ``edits[name](old text or None) -> new text``."""
    with zipfile.ZipFile(path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    for name, edit in edits.items():
        old = parts.get(name)
        parts[name] = edit(None if old is None else old.decode()).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in parts.items():
            package.writestr(name, data)


def score(result: str, gold: str, **rule: Any) -> float:
    """compare_table with one rule comparing the result's first sheet with the gold's."""
    return compare_table(result, gold, rules=[{"sheet_idx0": 0, "sheet_idx1": "EI0", **rule}])


def save_with_libreoffice(tmp_path: Path, *paths: str) -> list[str]:
    """The files as LibreOffice saves them (opened and saved as .xlsx), in one run."""
    out = tmp_path / "lo-saved"
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation={(tmp_path / 'lo-profile').as_uri()}",
            "--headless",
            "--convert-to",
            "xlsx:Calc MS Excel 2007 XML",
            "--outdir",
            str(out),
            *paths,
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return [str(out / Path(p).name) for p in paths]


# -- charts ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Chart:
    """A chart of the SALES sheet, as openpyxl draws it."""

    kind: str = "bar"  # bar | bar3d | line | pie
    title: str | None = "Sales"
    xtitle: str | None = "Month"
    ytitle: str | None = "Amount"
    ztitle: str | None = None
    legend: str | None = "b"
    direction: str = "col"
    anchor: str = "E2"
    values: str = "B"  # the column plotted
    width: float = 15

    def draw(self, wb: Any) -> None:
        ws = wb.active
        make = {"bar": BarChart, "bar3d": BarChart3D, "line": LineChart, "pie": PieChart}
        chart = make[self.kind]()
        column = ord(self.values) - ord("A") + 1
        chart.add_data(Reference(ws, min_col=column, min_row=1, max_row=4), titles_from_data=True)
        chart.set_categories(Reference(ws, min_col=1, min_row=2, max_row=4))
        chart.title, chart.width = self.title, self.width
        if self.kind != "pie":
            chart.x_axis.title, chart.y_axis.title = self.xtitle, self.ytitle
        if self.kind.startswith("bar"):
            chart.type = self.direction
        if self.kind == "bar3d":
            chart.z_axis.title = self.ztitle
        if self.legend is None:
            chart.legend = None
        else:
            chart.legend.position = self.legend
        ws.add_chart(chart, self.anchor)


GOLD_CHART = Chart()


def chart_book(path: Path, *charts: Chart) -> str:
    return xlsx(path, SALES, lambda wb: [c.draw(wb) for c in charts])


@pytest.mark.parametrize(
    ("prop", "changed"),
    [
        ("type", Chart(kind="line")),
        ("title", Chart(title="Revenue")),
        ("title", Chart(title=None)),
        ("legend", Chart(legend="r")),
        ("legend", Chart(legend=None)),
        ("xtitle", Chart(xtitle="Period")),
        ("ytitle", Chart(ytitle=None)),
        ("direction", Chart(direction="bar")),
        ("anchor", Chart(anchor="H10")),
    ],
)
def test_each_chart_prop_matches_itself_and_tells_a_change(tmp_path, prop, changed):
    gold = chart_book(tmp_path / "gold.xlsx", GOLD_CHART)
    same = chart_book(tmp_path / "same.xlsx", GOLD_CHART)
    other = chart_book(tmp_path / "other.xlsx", changed)
    assert score(same, gold, type="chart", chart_props=[prop]) == 1.0
    assert score(other, gold, type="chart", chart_props=[prop]) == 0.0
    unrelated = "anchor" if prop != "anchor" else "title"
    assert score(other, gold, type="chart", chart_props=[unrelated]) == 1.0  # only `prop` changed


def test_ztitle_of_a_3d_chart(tmp_path):
    gold = chart_book(tmp_path / "gold.xlsx", Chart(kind="bar3d", ztitle="Series"))
    same = chart_book(tmp_path / "same.xlsx", Chart(kind="bar3d", ztitle="Series"))
    other = chart_book(tmp_path / "other.xlsx", Chart(kind="bar3d", ztitle="Kinds"))
    props = ["type", "ztitle", "xtitle", "ytitle"]
    assert score(same, gold, type="chart", chart_props=props) == 1.0
    assert score(other, gold, type="chart", chart_props=props) == 0.0


def test_pie_chart_has_no_axis_titles(tmp_path):
    gold = chart_book(tmp_path / "gold.xlsx", Chart(kind="pie"))
    same = chart_book(tmp_path / "same.xlsx", Chart(kind="pie", xtitle="ignored"))
    bar = chart_book(tmp_path / "bar.xlsx", Chart())
    assert score(same, gold, type="chart", chart_props=["type", "xtitle", "ytitle"]) == 1.0
    assert score(bar, gold, type="chart", chart_props=["type"]) == 0.0


def test_charts_are_matched_by_the_data_they_plot(tmp_path):
    """As in OSWorld, a chart of other cells is another chart, whatever chart_props asks."""
    gold = chart_book(tmp_path / "gold.xlsx", GOLD_CHART)
    cost = chart_book(tmp_path / "cost.xlsx", Chart(values="C"))
    both = chart_book(tmp_path / "both.xlsx", GOLD_CHART, Chart(values="C", anchor="E20"))
    none = chart_book(tmp_path / "none.xlsx")
    assert score(cost, gold, type="chart", chart_props=[]) == 0.0
    assert score(both, gold, type="chart", chart_props=["type"]) == 0.0  # one chart too many
    assert score(none, gold, type="chart", chart_props=["type"]) == 0.0
    assert score(none, none, type="chart", chart_props=["type"]) == 1.0  # no charts on either


def test_chart_size_never_differs_as_in_osworld(tmp_path):
    """OSWorld reads charts through openpyxl, which does not load a chart's size; it compares
    openpyxl's defaults, so ``width``/``height`` always agree. We score the same way."""
    gold = chart_book(tmp_path / "gold.xlsx", GOLD_CHART)
    wide = chart_book(tmp_path / "wide.xlsx", Chart(width=30))
    assert score(wide, gold, type="chart", chart_props=["width", "height"]) == 1.0


def test_chart_rule_errors(tmp_path):
    gold = chart_book(tmp_path / "gold.xlsx", GOLD_CHART)
    with pytest.raises(NotImplementedError, match="chart_props 'colour'"):
        score(gold, gold, type="chart", chart_props=["title", "colour"])
    rule = {"type": "chart", "sheet_idx0": "RNMissing", "sheet_idx1": "EI0", "chart_props": []}
    assert compare_table(gold, gold, rules=[rule]) == 0.0


# -- pivot tables -------------------------------------------------------------------------------

PIVOT_DATA = [
    ["Region", "Product", "Sales", "Units"],
    ["East", "Pen", 10, 1],
    ["West", "Pen", 20, 2],
    ["East", "Ink", 30, 3],
    ["West", "Ink", 40, 4],
]
MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
CONTENT = "application/vnd.openxmlformats-officedocument.spreadsheetml"
HIDDEN = ' h="1"'


@dataclasses.dataclass(frozen=True)
class Pivot:
    """A pivot table on sheet ``Pivot`` of the PIVOT_DATA in sheet ``Data``."""

    name: str = "PivotTable1"
    source: str = "A1:D5"
    fields: int = 4  # columns of the source
    location: str = "A3:B6"
    rows: tuple[int, ...] = (0,)
    cols: tuple[int, ...] = ()
    pages: tuple[int, ...] = (1,)
    # per field: its items as (cache item, hidden); a field without items has none here
    items: tuple[tuple[tuple[int, bool], ...], ...] = (
        ((0, False), (1, False)),
        ((0, False), (1, True)),
    )
    data: tuple[tuple[int, str, str], ...] = ((2, "sum", "Sum - Sales"),)  # field, subtotal, name
    attrs: tuple[tuple[str, str], ...] = ()  # more pivotTableDefinition attributes

    def table_xml(self) -> str:
        fields = []
        for i in range(self.fields):
            axis = (
                ' axis="axisRow"'
                if i in self.rows
                else ' axis="axisCol"'
                if i in self.cols
                else ' axis="axisPage"'
                if i in self.pages
                else ""
            )
            data = ' dataField="1"' if any(d[0] == i for d in self.data) else ""
            own = self.items[i] if i < len(self.items) else ()
            items = "".join(f'<item{HIDDEN if h else ""} x="{x}"/>' for x, h in own)
            inner = (
                f'<items count="{len(own) + 1}">{items}<item t="default"/></items>' if own else ""
            )
            fields.append(f'<pivotField{axis}{data} showAll="0">{inner}</pivotField>')

        def listed(tag: str, child: str, values: tuple[int, ...]) -> str:
            if not values:
                return ""
            inner = "".join(f'<{child}="{v}"/>' for v in values)
            return f'<{tag} count="{len(values)}">{inner}</{tag}>'

        attrs = "".join(f' {k}="{v}"' for k, v in self.attrs)
        data = "".join(
            f'<dataField name="{n}" fld="{f}" subtotal="{s}" baseField="0" baseItem="0"/>'
            for f, s, n in self.data
        )
        return (
            f'<pivotTableDefinition xmlns="{MAIN}" name="{self.name}" cacheId="1" '
            f'dataCaption="Values" outline="1" outlineData="1"{attrs}>'
            f'<location ref="{self.location}" firstHeaderRow="1" firstDataRow="1" '
            f'firstDataCol="1"/>'
            f'<pivotFields count="{self.fields}">{"".join(fields)}</pivotFields>'
            + listed("rowFields", "field x", self.rows)
            + listed("colFields", "field x", self.cols)
            + listed("pageFields", 'pageField hier="-1" fld', self.pages)
            + f'<dataFields count="{len(self.data)}">{data}</dataFields>'
            "</pivotTableDefinition>"
        )

    def cache_xml(self) -> str:
        def text(name: str, values: list[str]) -> str:
            items = "".join(f'<s v="{v}"/>' for v in values)
            return (
                f'<cacheField name="{name}" numFmtId="0">'
                f'<sharedItems count="{len(values)}">{items}</sharedItems></cacheField>'
            )

        def number(name: str, low: int, high: int) -> str:
            return (
                f'<cacheField name="{name}" numFmtId="0"><sharedItems containsSemiMixedTypes="0" '
                f'containsString="0" containsNumber="1" minValue="{low}" maxValue="{high}"/>'
                "</cacheField>"
            )

        cache_fields = [
            text("Region", ["East", "West"]),
            text("Product", ["Pen", "Ink"]),
            number("Sales", 10, 40),
            number("Units", 1, 4),
        ][: self.fields]
        return (
            f'<pivotCacheDefinition xmlns="{MAIN}" refreshOnLoad="1" recordCount="0">'
            f'<cacheSource type="worksheet"><worksheetSource ref="{self.source}" sheet="Data"/>'
            f'</cacheSource><cacheFields count="{self.fields}">{"".join(cache_fields)}'
            "</cacheFields></pivotCacheDefinition>"
        )


GOLD_PIVOT = Pivot()


def relationships(*rels: tuple[str, str, str]) -> str:
    inner = "".join(f'<Relationship Id="{i}" Type="{R}/{t}" Target="{g}"/>' for i, t, g in rels)
    return f'<Relationships xmlns="{PACKAGE_RELS}">{inner}</Relationships>'


def pivot_book(path: Path, pivot: Pivot | None) -> str:
    """Sheets ``Pivot`` (first; holding ``pivot``) and ``Data`` (its source)."""

    def sheets(wb: Any) -> None:
        wb.active.title = "Pivot"
        data = wb.create_sheet("Data")
        for row in PIVOT_DATA:
            data.append(row)

    out = xlsx(path, [], sheets)
    if pivot is None:
        return out
    cache = "pivotCache/pivotCacheDefinition1.xml"
    patch_parts(
        out,
        {
            f"xl/{cache}": lambda _: pivot.cache_xml(),
            "xl/pivotTables/pivotTable1.xml": lambda _: pivot.table_xml(),
            "xl/pivotTables/_rels/pivotTable1.xml.rels": lambda _: relationships(
                ("rId1", "pivotCacheDefinition", f"../{cache}")
            ),
            "xl/worksheets/_rels/sheet1.xml.rels": lambda _: relationships(
                ("rId1", "pivotTable", "../pivotTables/pivotTable1.xml")
            ),
            "xl/_rels/workbook.xml.rels": lambda s: s.replace(
                "</Relationships>",
                f'<Relationship Id="rIdPC1" Type="{R}/pivotCacheDefinition" Target="{cache}"/>'
                "</Relationships>",
            ),
            "xl/workbook.xml": lambda s: s.replace(
                "</workbook>",
                f'<pivotCaches><pivotCache xmlns:r="{R}" cacheId="1" r:id="rIdPC1"/>'
                "</pivotCaches></workbook>",
            ),
            "[Content_Types].xml": lambda s: s.replace(
                "</Types>",
                f'<Override PartName="/xl/pivotTables/pivotTable1.xml" '
                f'ContentType="{CONTENT}.pivotTable+xml"/>'
                f'<Override PartName="/xl/{cache}" '
                f'ContentType="{CONTENT}.pivotCacheDefinition+xml"/></Types>',
            ),
        },
    )
    return out


@pytest.mark.parametrize(
    ("props", "changed"),
    [
        (["name"], Pivot(name="Sales by region")),
        (["show_total"], Pivot(attrs=(("visualTotals", "0"),))),
        (["show_empty_row"], Pivot(attrs=(("showEmptyRow", "1"),))),
        (["show_empty_col"], Pivot(attrs=(("showEmptyCol", "true"),))),
        (["show_headers"], Pivot(attrs=(("showHeaders", "0"),))),
        (["location"], Pivot(location="D3:E6")),
        (["filter"], Pivot(pages=(), rows=(0, 1))),  # Product a row field, not a filter
        (["filter"], Pivot(items=(((0, False), (1, False)), ((0, True), (1, False))))),
        (["selection"], Pivot(items=(((0, False), (1, True)), ((0, False), (1, True))))),
        (
            ["selection", "ordered"],
            Pivot(items=(((1, False), (0, False)), ((0, False), (1, True)))),
        ),
        (["row_fields"], Pivot(rows=(1,), pages=(0,))),
        (["col_fields"], Pivot(cols=(1,), pages=())),
        (["data_fields"], Pivot(data=((2, "average", "Sum - Sales"),))),
        (["data_fields"], Pivot(data=((3, "sum", "Sum - Sales"),))),
        (["data_fields", "data_fields_name"], Pivot(data=((2, "sum", "Total sales"),))),
    ],
)
def test_each_pivot_prop_matches_itself_and_tells_a_change(tmp_path, props, changed):
    gold = pivot_book(tmp_path / "gold.xlsx", GOLD_PIVOT)
    same = pivot_book(tmp_path / "same.xlsx", GOLD_PIVOT)
    other = pivot_book(tmp_path / "other.xlsx", changed)
    assert score(same, gold, type="pivot_table", pivot_props=props) == 1.0
    assert score(other, gold, type="pivot_table", pivot_props=props) == 0.0
    assert score(other, other, type="pivot_table", pivot_props=props) == 1.0


def test_pivot_modifiers_loosen_or_tighten_a_prop(tmp_path):
    gold = pivot_book(tmp_path / "gold.xlsx", GOLD_PIVOT)

    def check(changed: Pivot, loose: list[str], strict: list[str]) -> None:
        path = pivot_book(tmp_path / "other.xlsx", changed)
        assert score(path, gold, type="pivot_table", pivot_props=loose) == 1.0
        assert score(path, gold, type="pivot_table", pivot_props=strict) == 0.0

    # items in another order: the same selection unless "ordered"
    reordered = Pivot(items=(((1, False), (0, False)), ((1, True), (0, False))))
    check(reordered, ["selection"], ["selection", "ordered"])
    # a data field renamed: equal unless "data_fields_name"
    check(Pivot(data=((2, "sum", "Total"),)), ["data_fields"], ["data_fields", "data_fields_name"])
    # the "Values" pseudo-field (-2) among the column fields: ignored on request
    check(
        Pivot(cols=(-2,)),
        ["col_fields", "ignore_special_fields"],
        ["col_fields"],
    )


def test_pivots_are_matched_by_their_source_data(tmp_path):
    gold = pivot_book(tmp_path / "gold.xlsx", GOLD_PIVOT)
    fewer_rows = pivot_book(tmp_path / "fewer.xlsx", Pivot(source="A1:D4"))
    none = pivot_book(tmp_path / "none.xlsx", None)
    assert score(fewer_rows, gold, type="pivot_table", pivot_props=[]) == 0.0
    assert score(none, gold, type="pivot_table", pivot_props=[]) == 0.0
    assert score(none, none, type="pivot_table", pivot_props=["name"]) == 1.0


def test_pivot_source_is_narrowed_to_the_fields_with_items(tmp_path):
    """OSWorld keys a pivot by its source range narrowed to the first..last field with items,
    and counts fields from there: a table over A:D using only A and B equals one over A:B."""
    wide = Pivot(data=((1, "count", "Count - Product"),))
    gold = pivot_book(tmp_path / "gold.xlsx", wide)
    narrow = pivot_book(
        tmp_path / "narrow.xlsx", dataclasses.replace(wide, source="A1:B5", fields=2)
    )
    shifted = pivot_book(tmp_path / "shifted.xlsx", dataclasses.replace(wide, source="B1:E5"))
    props = ["row_fields", "data_fields", "filter"]
    assert score(narrow, gold, type="pivot_table", pivot_props=props) == 1.0
    assert score(shifted, gold, type="pivot_table", pivot_props=props) == 0.0


def test_pivot_rule_errors(tmp_path):
    gold = pivot_book(tmp_path / "gold.xlsx", GOLD_PIVOT)
    with pytest.raises(NotImplementedError, match="pivot_props 'loc'"):
        score(gold, gold, type="pivot_table", pivot_props=["loc"])


def test_pivot_reader_agrees_with_openpyxl(tmp_path):
    """OSWorld reads pivot tables through openpyxl; our XML reader sees the same values."""
    path = pivot_book(tmp_path / "p.xlsx", Pivot(cols=(-2,), attrs=(("visualTotals", "0"),)))
    (table,) = openpyxl.load_workbook(path)["Pivot"]._pivots
    props = ["name", "show_total", "location", "selection", "ordered", "filter", "row_fields"]
    mine = table_objects.pivot_tables(table_objects.Package(path), "Pivot", [*props, "col_fields"])
    ((source, info),) = mine.items()
    assert source == ("worksheet", (1, 1), (5, 2), table.cache.cacheSource.worksheetSource.sheet)
    assert info["name"] == table.name
    assert info["show_total"] is table.visualTotals is False
    assert info["location"]["ref"] == table.location.ref
    assert info["selection"] == [
        [(item.h, item.x) for item in field.items if item.x is not None]
        for field in table.pivotFields[:2]
    ]
    assert info["filter_fields"] == {f.fld for f in table.pageFields}
    assert info["row_fields"] == [f.x for f in table.rowFields]
    assert info["col_fields"] == [f.x for f in table.colFields] == [-2]


# -- sparklines ---------------------------------------------------------------------------------

X14 = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"
XM = "http://schemas.microsoft.com/office/excel/2006/main"
QUARTERS = [["Name", "Q1", "Q2", "Q3"], ["a", 1, 3, 2], ["b", 4, 2, 5]]
GOLD_SPARKLINES = {"E2": "Sheet1!B2:D2", "E3": "Sheet1!B3:D3"}


def sparkline_book(path: Path, sparklines: dict[str, str], kind: str = "line") -> str:
    """QUARTERS with one sparkline group: ``{cell: data range}``."""
    out = xlsx(path, QUARTERS)
    if not sparklines:
        return out
    lines = "".join(
        f"<x14:sparkline><xm:f>{f}</xm:f><xm:sqref>{cell}</xm:sqref></x14:sparkline>"
        for cell, f in sparklines.items()
    )
    kind_attr = "" if kind == "line" else f' type="{kind}"'
    ext = (
        f'<extLst><ext xmlns:x14="{X14}" uri="{{05C60535-1F16-4fd2-B633-F4F36F0B64E0}}">'
        f'<x14:sparklineGroups xmlns:xm="{XM}"><x14:sparklineGroup{kind_attr} '
        f'displayEmptyCellsAs="gap"><x14:colorSeries rgb="FF376092"/>'
        f"<x14:sparklines>{lines}</x14:sparklines></x14:sparklineGroup></x14:sparklineGroups>"
        "</ext></extLst>"
    )
    patch_parts(
        out, {"xl/worksheets/sheet1.xml": lambda s: s.replace("</worksheet>", f"{ext}</worksheet>")}
    )
    return out


def test_sparklines_match_by_cell_and_data_range(tmp_path):
    gold = sparkline_book(tmp_path / "gold.xlsx", GOLD_SPARKLINES)
    same = sparkline_book(tmp_path / "same.xlsx", GOLD_SPARKLINES)
    columns = sparkline_book(tmp_path / "columns.xlsx", GOLD_SPARKLINES, kind="column")
    wrong_data = sparkline_book(tmp_path / "data.xlsx", {**GOLD_SPARKLINES, "E3": "Sheet1!B3:C3"})
    moved = sparkline_book(tmp_path / "moved.xlsx", {"F2": "Sheet1!B2:D2", "E3": "Sheet1!B3:D3"})
    one = sparkline_book(tmp_path / "one.xlsx", {"E2": "Sheet1!B2:D2"})
    none = sparkline_book(tmp_path / "none.xlsx", {})
    assert score(same, gold, type="sparkline") == 1.0
    assert score(columns, gold, type="sparkline") == 1.0  # as in OSWorld, the type is not compared
    for wrong in (wrong_data, moved, one, none):
        assert score(wrong, gold, type="sparkline") == 0.0
    assert score(none, none, type="sparkline") == 1.0


# -- sheet_print --------------------------------------------------------------------------------


def printed(
    path: Path, rows: list[list[Any]], csv: str | None, edit: Callable[[Any], None] | None = None
) -> str:
    """A workbook and, when ``csv`` is given, its OSWorld-style export ``<stem>-Sheet1.csv``."""
    out = xlsx(path, rows, edit)
    if csv is not None:
        path.with_name(f"{path.stem}-Sheet1.csv").write_text(csv, encoding="utf-8")
    return out


def test_sheet_print_compares_the_exported_csv_beside_the_workbook(tmp_path):
    """OSWorld's layout: the task exports each workbook's sheet to ``<stem>-<sheet>.csv`` and
    fetches it with the workbook. The workbooks' cells do not matter, the CSV does."""
    gold = printed(tmp_path / "ids_gold.xlsx", [[1234]], "ID\n0001234\n")
    same = printed(tmp_path / "ids.xlsx", [[1234]], "\ufeffID \r\n 0001234\n\n\n")
    shouting = printed(tmp_path / "upper.xlsx", [[1234]], "id\n0001234\n")
    unpadded = printed(tmp_path / "unpadded.xlsx", [[1234]], "ID\n1234\n")
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    assert compare_table(same, gold, rules=[rule]) == 1.0  # BOM, spaces, CRLF, blank tail
    assert compare_table(unpadded, gold, rules=[rule]) == 0.0
    assert compare_table(shouting, gold, rules=[rule]) == 0.0
    assert compare_table(shouting, gold, rules=[{**rule, "ignore_case": True}]) == 1.0
    assert score(same, gold, type="sheet_print") == 1.0  # 0 / EI0 name the sheet Sheet1
    missing = {**rule, "sheet_idx0": "RNSheet9"}
    assert compare_table(same, gold, rules=[missing]) == 0.0


def test_sheet_print_without_the_result_export_scores_zero_as_on_osworld(tmp_path):
    """0bf05a7d-style: pad IDs to 7 digits. A number format does it on screen; the cell value
    stays 1234. OSWorld reads only the CSV the task's postconfig exported beside the workbook:
    without it a correctly formatted workbook scores 0 there, and so here (before, we exported
    it ourselves with LibreOffice and scored 1)."""

    def padded(wb: Any) -> None:
        for row in wb.active.iter_rows(min_row=2):
            row[0].number_format = "0000000"

    gold = printed(tmp_path / "gold.xlsx", [["ID"], ["0001234"]], "ID\n0001234\n")
    good = printed(tmp_path / "good.xlsx", [["ID"], [1234]], None, padded)
    assert score(good, gold, type="sheet_print") == 0.0
    Path(good).with_name("good-Sheet1.csv").write_text("ID\n0001234\n")
    assert score(good, gold, type="sheet_print") == 1.0
    # a CSV of another sheet is not this sheet's export
    Path(good).with_name("good-Sheet1.csv").rename(Path(good).with_name("good-Sheet2.csv"))
    assert score(good, gold, type="sheet_print") == 0.0


def test_sheet_print_gold_without_its_export_is_a_judge_error_not_a_zero(tmp_path):
    gold = printed(tmp_path / "gold.xlsx", [["x"]], None)
    mine = printed(tmp_path / "mine.xlsx", [["x"]], "x\n")
    with pytest.raises(EvaluatorError, match="gold workbook .* has no CSV export"):
        score(mine, gold, type="sheet_print")
    # a result without its export scores 0 before the gold is read, as in OSWorld
    bare = printed(tmp_path / "bare.xlsx", [["x"]], None)
    assert score(bare, gold, type="sheet_print") == 0.0


class FakeGuest:
    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        return self.files.get(path)


@pytest.mark.parametrize(("csv", "expected"), [("ID\n0001234\n", 1.0), ("ID\n1234\n", 0.0)])
def test_sheet_print_task_json_scores_through_evaluate(tmp_path, csv, expected):
    """The OSWorld evaluator shape: multi-file vm_file and cloud_file, CSVs after workbooks."""
    result = printed(tmp_path / "Customers.xlsx", [["ID"], [1234]], csv)
    cache = tmp_path / "cache"
    cache.mkdir()
    printed(cache / "Customers_gold.xlsx", [["ID"], ["0001234"]], "ID\n0001234\n")
    url = "https://huggingface.co/x/"
    task = Task.from_dict(
        {
            "id": "0bf05a7d",
            "instruction": "Pad the IDs to 7 digits",
            "evaluator": {
                "func": "compare_table",
                "result": {
                    "type": "vm_file",
                    "multi": True,
                    "path": ["/home/user/Customers.xlsx", "/home/user/Customers-Sheet1.csv"],
                    "dest": ["Customers.xlsx", "Customers-Sheet1.csv"],
                },
                "expected": {
                    "type": "cloud_file",
                    "multi": True,
                    "path": [f"{url}Customers_gold.xlsx", f"{url}Customers_gold.csv"],
                    "dest": ["Customers_gold.xlsx", "Customers_gold-Sheet1.csv"],
                },
                "options": {
                    "rules": [{"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
                },
            },
        }
    )
    guest = FakeGuest(
        {
            "/home/user/Customers.xlsx": Path(result).read_bytes(),
            "/home/user/Customers-Sheet1.csv": csv.encode(),
        }
    )
    ctx = EvalContext(
        client=guest, cache_dir=cache, task_id="0bf05a7d", work_dir=tmp_path / "episode"
    )
    assert evaluate(task, ctx).score == expected


# -- files LibreOffice saved -------------------------------------------------------------------


@pytest.mark.slow
@needs_libreoffice
def test_rules_read_what_libreoffice_saves(tmp_path):
    """A chart, a pivot table and sparklines as Calc writes them after opening and saving the
    files (LibreOffice rewrites every part); the rules still match and still tell differences,
    and our chart reader agrees with openpyxl's (what OSWorld reads)."""
    gold_chart, other_chart = save_with_libreoffice(
        tmp_path,
        chart_book(tmp_path / "chart_gold.xlsx", GOLD_CHART),
        chart_book(tmp_path / "chart_other.xlsx", Chart(title="Revenue", legend="r")),
    )
    props = ["type", "title", "legend", "xtitle", "ytitle", "direction", "anchor"]
    assert score(gold_chart, gold_chart, type="chart", chart_props=props) == 1.0
    assert score(other_chart, gold_chart, type="chart", chart_props=["type", "xtitle"]) == 1.0
    assert score(other_chart, gold_chart, type="chart", chart_props=["title"]) == 0.0
    assert score(other_chart, gold_chart, type="chart", chart_props=["legend"]) == 0.0
    (chart,) = openpyxl.load_workbook(gold_chart).active._charts
    (info,) = table_objects.charts(table_objects.Package(gold_chart), "Sheet1", props).values()
    assert info == {
        "type": chart.tagname,
        "title": chart.title.tx.rich.p[0].r[0].t,
        "legend": chart.legend.position,
        "xtitle": chart.x_axis.title.tx.rich.p[0].r[0].t,
        "ytitle": chart.y_axis.title.tx.rich.p[0].r[0].t,
        "direction": chart.barDir,
        "anchor": [
            chart.anchor.editAs,
            chart.anchor._from.col,
            chart.anchor._from.row,
            chart.anchor.to.col,
            chart.anchor.to.row,
        ],
    }

    gold_pivot, other_pivot = save_with_libreoffice(
        tmp_path,
        pivot_book(tmp_path / "pivot_gold.xlsx", GOLD_PIVOT),
        pivot_book(tmp_path / "pivot_other.xlsx", Pivot(data=((2, "average", "Mean"),))),
    )
    props = ["name", "location", "filter", "row_fields", "col_fields", "data_fields"]
    assert score(gold_pivot, gold_pivot, type="pivot_table", pivot_props=props) == 1.0
    assert score(other_pivot, gold_pivot, type="pivot_table", pivot_props=["row_fields"]) == 1.0
    assert score(other_pivot, gold_pivot, type="pivot_table", pivot_props=props) == 0.0

    (saved_sparklines,) = save_with_libreoffice(
        tmp_path, sparkline_book(tmp_path / "spark.xlsx", GOLD_SPARKLINES)
    )
    gold = sparkline_book(tmp_path / "spark_gold.xlsx", GOLD_SPARKLINES)
    moved = sparkline_book(tmp_path / "spark_moved.xlsx", {"F2": "Sheet1!B2:D2"})
    assert score(saved_sparklines, gold, type="sparkline") == 1.0
    assert score(saved_sparklines, moved, type="sparkline") == 0.0
