"""Cell values as OSWorld's ``read_cell_value`` reads them: straight from the sheet's XML.

``compare_table``'s ``check_cell`` (``value``) and ``sheet_fuzzy`` rules do not ask openpyxl
for a cell's value; OSWorld opens ``xl/worksheets/sheet<sheetId>.xml`` inside the ``.xlsx``
and reads the ``<c>`` element itself. The result differs from openpyxl's in ways that change
scores, so we read the same way:

* a number (no ``t`` or ``t="n"``) is always a ``float``: ``3`` reads ``3.0`` (``sheet_fuzzy``
  compares ``"3.0"``), a date is its serial number;
* a boolean (``t="b"``) or a cell with no cached value reads ``None``;
* ``t="s"`` is the shared string (its ``<t>`` pieces joined), ``t="str"``/``"e"`` the text
  of ``<v>``, ``t="inlineStr"`` the text of ``<is><t>``;
* the sheet file is found by ``sheetId`` (a quirk: a workbook whose part names do not follow
  the ids reads ``None``), and a missing sheet, file or cell reads ``None``.

>>> import tempfile, pathlib, openpyxl
>>> p = pathlib.Path(tempfile.mkdtemp()) / "b.xlsx"
>>> wb = openpyxl.Workbook(); ws = wb.active
>>> ws["A1"], ws["A2"], ws["A3"] = 3, "three", True
>>> wb.save(p)
>>> [read_cell_value(str(p), "Sheet", c) for c in ("A1", "A2", "A3", "A4")]
[3.0, 'three', None, None]
"""

from __future__ import annotations

import functools
import logging
import zipfile
from typing import Any

logger = logging.getLogger(__name__)

_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


@functools.lru_cache(maxsize=32)
def _book(path: str, mtime_ns: int) -> tuple[list[str], dict[str, str]]:
    """Shared strings and sheet name -> sheetId of the workbook at ``path``."""
    from lxml import etree

    with zipfile.ZipFile(path) as z:
        try:
            sst = etree.fromstring(z.read("xl/sharedStrings.xml"))
            shared = [
                "".join(t.text or "" for t in si.iter(f"{_NS}t")) for si in sst.iter(f"{_NS}si")
            ]
        except KeyError:
            shared = []
        wb = etree.fromstring(z.read("xl/workbook.xml"))
        # a <sheet> lacking either attribute cannot be looked up by name or read by id
        ids = {
            name: sid
            for s in wb.iter(f"{_NS}sheet")
            if (name := s.get("name")) is not None and (sid := s.get("sheetId")) is not None
        }
    return shared, ids


@functools.lru_cache(maxsize=32)
def _cells(path: str, mtime_ns: int, sheet_id: str) -> dict[str, Any] | None:
    from lxml import etree

    with zipfile.ZipFile(path) as z:
        try:
            root = etree.fromstring(z.read(f"xl/worksheets/sheet{sheet_id}.xml"))
        except KeyError:
            return None
    cells: dict[str, Any] = {}
    for c in root.iter(f"{_NS}c"):
        ref = c.get("r")
        if ref is not None and ref not in cells:  # the first <c> with that reference wins
            cells[ref] = c
    return cells


def read_cell_value(path: str, sheet_name: str, coordinate: str) -> Any:
    """The value of ``coordinate`` in sheet ``sheet_name`` of the ``.xlsx`` at ``path``, read
    as OSWorld reads it (see the module docstring); ``None`` when it cannot be read."""
    import os

    try:
        mtime = os.stat(path).st_mtime_ns
        shared, ids = _book(path, mtime)
        if sheet_name not in ids:
            return None
        cells = _cells(path, mtime, ids[sheet_name])
    except (OSError, zipfile.BadZipFile, ValueError) as exc:  # lxml's XMLSyntaxError is one
        logger.info("read_cell_value: cannot read %s: %s", path, exc)
        return None
    if cells is None or coordinate not in cells:
        return None
    c = cells[coordinate]
    kind = c.get("t")
    v = c.find(f"{_NS}v")
    text = None if v is None else (v.text or "")
    try:
        if kind is None or kind == "n":
            return float(text) if text is not None else None
        if kind == "s":
            return shared[int(text)] if text is not None else None
        if kind in ("str", "e"):
            return text
        if kind == "inlineStr":
            t = c.find(f"{_NS}is/{_NS}t")
            return None if t is None else (t.text or "")
    except (ValueError, IndexError, TypeError):
        return None
    return None  # t="b" and anything else: OSWorld returns nothing
