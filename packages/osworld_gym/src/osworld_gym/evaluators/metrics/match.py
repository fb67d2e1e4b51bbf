"""Shared value tests: OSWorld's ``{"method": ..., "ref": ...}`` rules and a fuzzy text ratio.

:func:`match_value` is the rule language of ``compare_table``'s ``check_cell``, ``zoom`` and
``data_validation`` rules:

======================  ==========================================================
``eq ne lt le gt ge``   ``value <op> ref``
``re`` / ``re.I.M...``  ``re.search(ref, value)`` with the named ``re`` flags
``approx:T``            ``abs(float(value) - ref) <= T``
``range.XY``            ``ref[0] <X> value <Y> ref[1]``; ``t`` is strict (<), ``e`` is <=
``str_list_eq``         ``value`` (a comma list, quotes stripped) split equals ``ref``
``str_set_eq``          the same, as sets
``spreadsheet_range``   ``ref[0]`` ⊆ ``value`` ⊆ ``ref[1]``, range by range: each range of
                        the smaller must lie inside *one* range of the larger (openpyxl's
                        ``MultiCellRange`` containment, as OSWorld uses it), so ``A1:A5``
                        is not inside ``A1:A2 A3:A5``
======================  ==========================================================

A comparison that cannot be made (``None < 3``) is simply not a match.

>>> match_value(150, {"method": "ge", "ref": 100})
True
>>> match_value("Total", {"method": "re.I", "ref": "^total$"})
True
>>> match_value(1.004, {"method": "approx:0.01", "ref": 1})
True
>>> match_value(2, {"method": "range.te", "ref": [0, 2]})
True
>>> match_value("'a,b'", {"method": "str_set_eq", "ref": ["b", "a"]})
True
>>> round(fuzzy_ratio("kitten", "sitting"), 4)
0.6154
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable
from typing import Any

_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}


def match_value(value: Any, rule: dict[str, Any]) -> bool:
    """Whether ``value`` satisfies ``rule`` (``{"method": str, "ref": anything}``).

    Raises:
        ValueError: an unknown ``method``.
    """
    method: str = rule["method"]
    ref: Any = rule.get("ref")  # any JSON value; a missing ref compares as None
    try:
        if method in _COMPARE:
            return bool(getattr(operator, method)(value, ref))
        if method == "re" or method.startswith("re."):
            flags = functools.reduce(
                operator.or_,
                (getattr(re, f) for f in method.split(".")[1:]),
                re.RegexFlag(0),
            )
            return value is not None and re.search(ref, str(value), flags) is not None
        if method.startswith("approx:"):
            return abs(float(value) - float(ref)) <= float(method.split(":", 1)[1])
        if method.startswith("range.") and len(method) == 8:
            left = operator.lt if method[6] == "t" else operator.le
            right = operator.lt if method[7] == "t" else operator.le
            return bool(left(ref[0], value) and right(value, ref[1]))
        if method in ("str_list_eq", "str_set_eq"):
            items = str(value).strip("\"'").split(",")
            if method == "str_set_eq":
                return set(items) == set(ref)
            return items == list(ref)
        if method == "spreadsheet_range":
            return _ranges_within(ref[0], value) and _ranges_within(value, ref[1])
    except (TypeError, ValueError, AttributeError):
        return False
    raise ValueError(f"unknown rule method {method!r}")


def _ranges_within(inner: Any, outer: Any) -> bool:
    """Every range of ``inner`` lies inside a single range of ``outer``.

    >>> _ranges_within("A1:A2 A3:A5", "A1:A5"), _ranges_within("A1:A5", "A1:A2 A3:A5")
    (True, False)
    """
    from openpyxl.worksheet.cell_range import MultiCellRange

    return all(r in MultiCellRange(str(outer)) for r in MultiCellRange(str(inner)).ranges)


def range_cells(ranges: Any) -> set[tuple[int, int]]:
    """The (row, column) cells of a range: ``"A1:B2 D4"``, a list of those, or an openpyxl
    ``MultiCellRange``/``CellRange``.

    >>> sorted(range_cells("A1:B1 C3"))
    [(1, 1), (1, 2), (3, 3)]
    """
    from openpyxl.utils.cell import range_boundaries

    if isinstance(ranges, str):
        parts: Iterable[str] = ranges.split()
    elif isinstance(ranges, list | tuple | set):
        parts = [p for r in ranges for p in str(r).split()]
    else:  # MultiCellRange / CellRange: their str() is the space-separated coordinates
        parts = str(ranges).split()
    cells: set[tuple[int, int]] = set()
    for part in parts:
        min_col, min_row, max_col, max_row = range_boundaries(part)
        if min_col is None or min_row is None or max_col is None or max_row is None:
            raise ValueError(f"{part!r} is a whole row or column; give its cells, e.g. A1:B9")
        cells.update(
            (r, c) for r in range(min_row, max_row + 1) for c in range(min_col, max_col + 1)
        )
    return cells


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (bit-parallel, fast for long texts).

    >>> lcs_length("ABCBDAB", "BDCABA")
    4
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, ch in enumerate(b):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    for ch in a:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def fuzzy_ratio(a: str, b: str) -> float:
    """Similarity in ``[0, 1]``: ``2 * LCS / (len(a) + len(b))``, 1 for two empty strings.

    This is the normalised indel similarity that OSWorld gets from ``rapidfuzz.fuzz.ratio``
    (divided by 100).
    """
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    return 2.0 * lcs_length(a, b) / total
