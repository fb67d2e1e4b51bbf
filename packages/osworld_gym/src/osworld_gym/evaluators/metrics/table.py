"""``compare_table``: OSWorld's spreadsheet metric, a list of rules that must all hold.

``compare_table(result, expected=None, rules=[...])`` opens the result workbook (and the gold
one when given) with openpyxl and checks each rule in order; the first failing rule scores 0.
A result that is missing or not a readable ``.xlsx`` scores 0; an unreadable gold file raises.

Sheets are addressed as in OSWorld: an ``int`` is a sheet index in the *result*;
``"RI<n>"``/``"RN<name>"`` are the result's sheet ``n`` / named ``name``, ``"EI<n>"``/
``"EN<name>"`` the expected workbook's. A sheet that does not exist fails the rule.

Rules (``type`` and its keys):

================  ====================================================================
``sheet_name``    the two workbooks have the same sheet names in the same order
``sheet_data``    ``sheet_idx0``, ``sheet_idx1``: the sheets read as OSWorld reads them,
                  with pandas (``read_excel``: first row the header, cached values of
                  formulas, blank rows inside the data kept, one dtype per column), rounded
                  to ``precision`` decimals (default 4; only numeric columns round: a number
                  in a text column is compared unrounded) and compared with
                  ``DataFrame.equals`` (an int column differs from a float one).
                  ``ignore_case`` is *not* honoured, as in OSWorld.
``sheet_fuzzy``   ``sheet_idx0``, ``sheet_idx1``, ``rules: [{range: [..], type:
                  exact_match|includes|included_by|fuzzy_match, threshold (0-100, default
                  85), ignore_case, ignore_chars, trim_leadings, trim_trailings,
                  normalization: [[old, new], ..]}]``; cells compared as ``str(value)``
                  of the XML value (:mod:`.table_cells`: ``3`` is ``"3.0"``, an empty or
                  boolean cell ``"None"``, as in OSWorld)
``check_cell``    ``sheet_idx``, ``coordinate``, ``props: {prop: {method, ref}}`` where prop
                  is ``value`` (read from the XML as OSWorld does: numbers are floats,
                  booleans ``None``) or a style property (below); see
                  :func:`.match.match_value`
``style``         ``sheet_idx0``, ``sheet_idx1``, ``props: [...]``: every cell's style props
                  equal, conditional formatting applied as OSWorld applies it (see
                  :mod:`.table_conditional`)
``freeze``        ``sheet_idx0``, ``sheet_idx1``: same frozen panes (frozen rows/columns;
                  a split pane is not a frozen one); see :func:`.table_props.freeze_key`
``zoom``          ``sheet_idx``, ``method``, ``ref``: the zoom (default 100) matches
``data_validation``  ``sheet_idx``, ``dv_props: [{attr: {method, ref}}]``: at least as many
                  validations as entries, each validation matching one entry
``filter``        ``sheet_idx0``, ``sheet_idx1``: same auto-filter (range, column filters,
                  sort state), attributes compared as written (see
                  :func:`.table_props.auto_filter`)
``row_props``     ``sheet_idx0``, ``sheet_idx1``, ``props`` (e.g. ``["hidden", "height"]``)
``col_props``     same for columns (e.g. ``["hidden", "width"]``)
``sheet_print``   ``sheet_idx0``, ``sheet_idx1``, ``ignore_case``: the sheets' text as
                  displayed (number formats applied) is equal line by line; see
                  :mod:`.table_print` (the CSV export the task fetched beside each
                  workbook; a result without one scores 0, as in OSWorld)
``chart``         ``sheet_idx0``, ``sheet_idx1``, ``chart_props`` (``type``, ``title``,
                  ``legend``, ``anchor``, ``direction``, ``xtitle``, ``ytitle``, ``ztitle``,
                  ``width``, ``height``): the same charts, keyed by the ranges they plot, with
                  equal props; see :func:`.table_objects.charts`
``pivot_table``   ``sheet_idx0``, ``sheet_idx1``, ``pivot_props`` (``name``, ``show_total``,
                  ``show_empty_row``, ``show_empty_col``, ``show_headers``, ``location``,
                  ``filter``, ``selection``, ``ordered``, ``row_fields``, ``col_fields``,
                  ``data_fields``, ``data_fields_name``, ``ignore_special_fields``): the same
                  pivot tables, keyed by their source data; see
                  :func:`.table_objects.pivot_tables`
``sparkline``     ``sheet_idx0``, ``sheet_idx1``: the same sparklines (cell and data range)
================  ====================================================================

Style properties (OSWorld's names; ``None`` for empty cells): ``number_format`` (numeric
cells only), ``font_name``, ``font_family``, ``font_color``, ``font_bold``, ``font_italic``,
``font_underline``, ``font_size``, ``fill_type``, ``bgcolor``, ``fgcolor``, ``hyperlink``,
``merge``.

A rule type, ``chart_props`` or ``pivot_props`` name we do not know raises
``NotImplementedError`` (the task has no trustworthy score), as do unknown rule types in
OSWorld.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators.metrics import table_conditional as conditional
from osworld_gym.evaluators.metrics import table_objects as objects
from osworld_gym.evaluators.metrics import table_print as printing
from osworld_gym.evaluators.metrics import table_props as props
from osworld_gym.evaluators.metrics.match import fuzzy_ratio, match_value, range_cells
from osworld_gym.evaluators.metrics.options import check_options, honours
from osworld_gym.evaluators.metrics.table_cells import read_cell_value

logger = logging.getLogger(__name__)

#: OSWorld rule types osworld-gym implements.
SUPPORTED_RULES = frozenset(
    {
        "sheet_name",
        "sheet_data",
        "sheet_fuzzy",
        "check_cell",
        "style",
        "freeze",
        "zoom",
        "data_validation",
        "filter",
        "row_props",
        "col_props",
        "sheet_print",
        "chart",
        "pivot_table",
        "sparkline",
    }
)


class Workbook:
    """One ``.xlsx`` file, opened lazily twice: cached values, and formulas with styles."""

    def __init__(self, path: str, *, gold: bool = False):
        self.path = path
        #: The task's expected workbook (judge's input), not the agent's result.
        self.gold = gold

    @cached_property
    def values(self) -> Any:
        import openpyxl

        return openpyxl.load_workbook(self.path, data_only=True)

    @cached_property
    def formulas(self) -> Any:
        import openpyxl

        return openpyxl.load_workbook(self.path, data_only=False)

    @cached_property
    def _excel(self) -> Any:
        import pandas as pd

        return pd.ExcelFile(self.path)

    def frame(self, title: str) -> Any:
        """Sheet ``title`` as OSWorld's ``sheet_data`` reads it (``pd.read_excel``); ``None``
        if there is no such sheet."""
        import pandas as pd

        if title not in self._excel.sheet_names:
            return None
        return pd.read_excel(self._excel, title)

    @cached_property
    def parts(self) -> objects.Package:
        """The raw XML parts (charts, pivot tables, sparklines)."""
        return objects.Package(self.path)

    def printed(self, title: str) -> list[str] | None:
        """Sheet ``title`` as displayed: its CSV export beside the workbook (see
        :mod:`.table_print`); ``None`` for a result without one (it scores 0, as on OSWorld).

        Raises:
            EvaluatorError: the gold workbook has no export of that sheet beside it.
        """
        lines = printing.beside(self.path, title)
        if lines is None and self.gold:
            raise EvaluatorError(
                f"sheet_print: the gold workbook {self.path} has no CSV export of sheet "
                f"{title!r} beside it; the task must fetch it as <name>-{title}.csv"
            )
        return lines


def sheet_title(
    idx: int | str, result: Workbook, expected: Workbook | None, *, styles: bool = False
) -> tuple[Workbook, str | None]:
    """The workbook sheet index ``idx`` refers to, and the sheet's name (``None``: no sheet at
    that position; a name, ``RN``/``EN``, is returned whether or not the sheet exists).
    ``styles`` says which reading of the workbook to count sheets in (see :func:`sheet`).

    Raises:
        ValueError: a malformed index, or an ``E..`` index without an expected workbook.
    """
    if isinstance(idx, int):
        book, by, key = result, "I", str(idx)
    elif isinstance(idx, str) and len(idx) >= 2 and idx[0] in "RE" and idx[1] in "IN":
        book, by, key = (result if idx[0] == "R" else expected), idx[1], idx[2:]
    else:
        raise ValueError(f"unrecognised sheet index {idx!r} (use an int, RI0, RNname, EI0, ENname)")
    if book is None:
        raise ValueError(f"sheet index {idx!r} refers to the expected workbook, but none is given")
    if by == "N":
        return book, key
    worksheets = (book.formulas if styles else book.values).worksheets
    i = int(key)
    return book, worksheets[i].title if 0 <= i < len(worksheets) else None


def sheet(
    idx: int | str, result: Workbook, expected: Workbook | None, *, styles: bool = False
) -> Any:
    """The worksheet ``idx`` names (OSWorld addressing), or ``None`` if it does not exist.

    ``styles=True`` reads the workbook with formulas kept (as OSWorld does for styles).

    Raises:
        ValueError: a malformed index, or an ``E..`` index without an expected workbook.
    """
    book, title = sheet_title(idx, result, expected, styles=styles)
    wb = book.formulas if styles else book.values
    return wb[title] if title is not None and title in wb.sheetnames else None


def _unsupported_rules(options: Mapping[str, Any]) -> list[str]:
    """Why ``options`` cannot be honoured: no rule list, or rule types not implemented."""
    rules = options.get("rules")
    if not isinstance(rules, list):
        return ["invalid task: compare_table without options.rules"]
    kinds = {str(r.get("type")) for r in rules if isinstance(r, dict)}
    unsupported = sorted(kinds - SUPPORTED_RULES)
    return [f"unsupported compare_table rule: {', '.join(unsupported)}"] if unsupported else []


@honours("rules", check=_unsupported_rules)
def compare_table(result: str | None, expected: str | None = None, **options: Any) -> float:
    """1 if every rule of ``options["rules"]`` holds for the result workbook, else 0.

    >>> import tempfile, openpyxl, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); wb = openpyxl.Workbook(); wb.active["A1"] = 7
    >>> wb.save(d / "r.xlsx")
    >>> compare_table(str(d / "r.xlsx"), rules=[{"type": "check_cell", "sheet_idx": 0,
    ...     "coordinate": "A1", "props": {"value": {"method": "eq", "ref": 7}}}])
    1.0
    """
    check_options("compare_table", options, compare_table.honoured_options)
    rules = options.get("rules")
    if not isinstance(rules, list):
        raise ValueError("compare_table needs options.rules, a list of rule objects")
    if not result:
        return 0.0
    book_r = Workbook(result)
    try:
        book_r.values  # noqa: B018 - open now: an unreadable result scores 0
    except Exception as exc:  # noqa: BLE001 - any unreadable result scores 0
        logger.info("compare_table: cannot read result %s: %s", result, exc)
        return 0.0
    book_e = Workbook(expected, gold=True) if expected else None
    for i, rule in enumerate(rules):
        kind = rule.get("type")
        check = _RULES.get(kind)
        if check is None:
            raise NotImplementedError(
                f"compare_table rule type {kind!r} is not implemented "
                f"(supported: {', '.join(sorted(SUPPORTED_RULES))})"
            )
        if not check(rule, book_r, book_e):
            logger.info("compare_table: rule %d (%s) failed", i, kind)
            return 0.0
    return 1.0


# -- rules ----------------------------------------------------------------------------------------


def _sheet_name(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    if e is None:
        raise ValueError("the sheet_name rule needs an expected workbook")
    return list(r.values.sheetnames) == list(e.values.sheetnames)


def _sheet_data(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    precision = int(rule.get("precision", 4))
    frames = []
    for key in ("sheet_idx0", "sheet_idx1"):
        book, title = sheet_title(rule[key], r, e)
        frame = None if title is None else book.frame(title)
        if frame is None:
            logger.info("sheet_data: no sheet %r", rule[key])
            return False
        frames.append(frame.round(precision))
    return bool(frames[0].equals(frames[1]))


def _sheet_fuzzy(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    from openpyxl.utils import get_column_letter

    (b0, t0), (b1, t1) = (
        sheet_title(rule["sheet_idx0"], r, e),
        sheet_title(rule["sheet_idx1"], r, e),
    )
    for sub in rule["rules"]:
        for row, col in sorted(range_cells(sub["range"])):
            coordinate = f"{get_column_letter(col)}{row}"
            a = _fuzzy_text(_raw_value(b0, t0, coordinate), sub)
            b = _fuzzy_text(_raw_value(b1, t1, coordinate), sub)
            if not _fuzzy_pair(a, b, sub):
                logger.info("sheet_fuzzy: %s: %r vs %r", coordinate, a, b)
                return False
    return True


def _raw_value(book: Workbook, title: str | None, coordinate: str) -> Any:
    return None if title is None else read_cell_value(book.path, title, coordinate)


def _fuzzy_text(value: Any, sub: dict[str, Any]) -> str:
    text = str(value)
    for old, new in sub.get("normalization", []):
        text = text.replace(old, new)
    if "trim_leadings" in sub:
        text = text.lstrip(sub["trim_leadings"])
    if "trim_trailings" in sub:
        text = text.rstrip(sub["trim_trailings"])
    if "ignore_chars" in sub:
        text = "".join(ch for ch in text if ch not in set(sub["ignore_chars"]))
    if sub.get("ignore_case", False):
        text = text.lower()
    return text


def _fuzzy_pair(a: str, b: str, sub: dict[str, Any]) -> bool:
    kind = sub["type"]
    if kind == "exact_match":
        return a == b
    if kind == "includes":
        return b in a
    if kind == "included_by":
        return a in b
    if kind == "fuzzy_match":
        return 100 * fuzzy_ratio(a, b) >= float(sub.get("threshold", 85))
    raise ValueError(f"unknown sheet_fuzzy comparison {kind!r}")


def _check_cell(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    """OSWorld's check_cell: ``value`` read from the XML (:mod:`.table_cells`: numbers are
    floats, booleans ``None``); a style property unreadable for the cell is ``None``; any
    error while checking fails the rule (OSWorld's catch-all)."""
    styled = sheet(rule["sheet_idx"], r, e, styles=True)
    if styled is None:
        return False
    coordinate = rule["coordinate"]
    for prop, want in rule["props"].items():
        if prop == "value":
            book, title = sheet_title(rule["sheet_idx"], r, e)
            got = _raw_value(book, title, coordinate)
        else:
            try:
                got = props.cell_style(prop, styled[coordinate])
            except ValueError:
                raise
            except Exception as exc:  # noqa: BLE001 - OSWorld reads a failing style as None
                logger.info("check_cell %s.%s unreadable: %s", coordinate, prop, exc)
                got = None
        if not match_value(got, want):
            logger.info("check_cell %s.%s = %r does not match %r", coordinate, prop, got, want)
            return False
    return True


def _pair(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> tuple[Any, Any] | None:
    s0 = sheet(rule["sheet_idx0"], r, e, styles=True)
    s1 = sheet(rule["sheet_idx1"], r, e, styles=True)
    return None if s0 is None or s1 is None else (s0, s1)


Rule = Callable[[dict[str, Any], Workbook, "Workbook | None"], bool]


def _compare_with(read: Callable[..., Any]) -> Rule:
    """A rule comparing ``read(sheet0, sheet1, rule)`` over ``sheet_idx0``/``sheet_idx1``."""

    def check(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
        pair = _pair(rule, r, e)
        return pair is not None and read(pair[0], pair[1], rule)

    return check


def _style(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    """OSWorld's ``style`` rule: every cell's style props equal, conditional formatting
    applied. A sheet whose conditional formatting cannot be applied (a formula OSWorld's code
    or ours cannot evaluate) fails the rule when it is the agent's, and raises when it is the
    gold's: an agent's file never turns a failure into an unscored episode."""
    unknown = sorted(set(rule["props"]) - props.STYLE_PROPS)
    if unknown:
        raise ValueError(f"style: unknown cell style properties {unknown}")
    maps = []
    for key in ("sheet_idx0", "sheet_idx1"):
        book, _ = sheet_title(rule[key], r, e, styles=True)
        ws = sheet(rule[key], r, e, styles=True)
        if ws is None:
            logger.info("style: no sheet %r", rule[key])
            return False
        try:
            maps.append(conditional.style_map(ws, rule["props"], book.path))
        except (ValueError, AttributeError, NotImplementedError) as exc:
            if book.gold:
                raise EvaluatorError(
                    f"style: the gold workbook's conditional formatting cannot be applied: {exc}"
                ) from exc
            logger.info("style: the result's conditional formatting cannot be applied: %s", exc)
            return False
    if maps[0] != maps[1]:
        diff = sorted(set(maps[0]) ^ set(maps[1])) or [
            k for k in sorted(maps[0]) if maps[0][k] != maps[1][k]
        ]
        logger.info("style differs at %s", diff[:5])
    return maps[0] == maps[1]


def _filter(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    """OSWorld's ``filter`` rule: a sheet that does not exist has no filter (``{}``), so two
    missing sheets compare equal; see :func:`.table_props.auto_filter`."""
    a = props.auto_filter(sheet(rule["sheet_idx0"], r, e, styles=True))
    b = props.auto_filter(sheet(rule["sheet_idx1"], r, e, styles=True))
    if a != b:
        logger.info("filter: %r vs %r", a, b)
    return a == b


def _zoom(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    ws = sheet(rule["sheet_idx"], r, e, styles=True)
    return ws is not None and match_value(ws.sheet_view.zoomScale or 100, rule)


def _data_validation(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    ws = sheet(rule["sheet_idx"], r, e, styles=True)
    if ws is None:
        return False
    validations = list(ws.data_validations.dataValidation)
    wanted: list[dict[str, Any]] = rule["dv_props"]
    if len(validations) < len(wanted):
        return False
    return all(
        any(all(match_value(getattr(dv, attr), m) for attr, m in w.items()) for w in wanted)
        for dv in validations
    )


def _sheet_print(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
    printed = []
    for key in ("sheet_idx0", "sheet_idx1"):
        book, title = sheet_title(rule[key], r, e)
        lines = None if title is None else book.printed(title)
        if lines is None:
            logger.info("sheet_print: no sheet %r", rule[key])
            return False
        printed.append([line.lower() for line in lines] if rule.get("ignore_case") else lines)
    return printed[0] == printed[1]


def _objects(read: Callable[[objects.Package, str, dict[str, Any]], Any]) -> Rule:
    """A rule comparing ``read(parts, sheet name, rule)`` over ``sheet_idx0``/``sheet_idx1``;
    a sheet that does not exist fails it."""

    def check(rule: dict[str, Any], r: Workbook, e: Workbook | None) -> bool:
        found = []
        for key in ("sheet_idx0", "sheet_idx1"):
            book, title = sheet_title(rule[key], r, e)
            value = None if title is None else read(book.parts, title, rule)
            if value is None:
                logger.info("%s: no sheet %r", rule["type"], rule[key])
                return False
            found.append(value)
        if found[0] != found[1]:
            logger.info("%s: %r vs %r", rule["type"], found[0], found[1])
        return found[0] == found[1]

    return check


_RULES: dict[str, Rule] = {
    "sheet_name": _sheet_name,
    "sheet_data": _sheet_data,
    "sheet_fuzzy": _sheet_fuzzy,
    "check_cell": _check_cell,
    "style": _style,
    "freeze": _compare_with(lambda a, b, rule: props.freeze_key(a) == props.freeze_key(b)),
    "zoom": _zoom,
    "data_validation": _data_validation,
    "filter": _filter,
    "row_props": _compare_with(lambda a, b, rule: props.dimensions(a, b, "row", rule["props"])),
    "col_props": _compare_with(lambda a, b, rule: props.dimensions(a, b, "column", rule["props"])),
    "sheet_print": _sheet_print,
    "chart": _objects(lambda p, name, rule: objects.charts(p, name, rule.get("chart_props", []))),
    "pivot_table": _objects(
        lambda p, name, rule: objects.pivot_tables(p, name, rule.get("pivot_props", []))
    ),
    "sparkline": _objects(lambda p, name, rule: objects.sparklines(p, name)),
}
assert set(_RULES) == SUPPORTED_RULES
