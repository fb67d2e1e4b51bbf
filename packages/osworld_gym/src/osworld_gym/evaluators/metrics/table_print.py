"""A sheet as it is displayed: the lines of its CSV export with "cell contents as shown".

``compare_table``'s ``sheet_print`` rule compares these (``0001234`` for ``1234`` in the format
``0000000``, ``25%`` for ``0.25``), as OSWorld does: its tasks export each sheet in a
``postconfig`` step (``libreoffice --convert-to "csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,
false,true,true,false,false,1"``) and fetch the CSV with the workbook, and the metric
(``_load_sheet`` in xlang-ai/OSWorld ``desktop_env/evaluators/metrics/table.py``) reads
``<workbook path without .xlsx>-<sheet name>.csv`` beside the workbook.

Only that file counts. A result workbook without it scores 0, as on OSWorld (the export ran on
the desktop after the agent, so a workbook LibreOffice could not export is the agent's); a gold
workbook without it is a task that cannot be scored (:class:`~osworld_gym.errors.EvaluatorError`).

Lines are compared stripped of surrounding white space, trailing blank lines ignored.
"""

from __future__ import annotations

import os
from pathlib import Path


def beside(workbook: str, sheet: str) -> list[str] | None:
    """The lines of ``<workbook minus extension>-<sheet>.csv`` (OSWorld's file), if it exists."""
    path = Path(f"{os.path.splitext(workbook)[0]}-{sheet}.csv")
    return lines(path.read_bytes()) if path.is_file() else None


def lines(data: bytes) -> list[str]:
    """A CSV export's lines, each stripped, without trailing blank lines (as OSWorld reads).

    >>> lines(b"\\xef\\xbb\\xbfID, Share \\r\\n0001234,25%\\n\\n")
    ['ID, Share', '0001234,25%']
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    out = [line.strip() for line in text.splitlines()]
    while out and not out[-1]:
        out.pop()
    return out
