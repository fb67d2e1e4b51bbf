"""A sheet as it is displayed: the lines of its CSV export with "cell contents as shown".

``compare_table``'s ``sheet_print`` rule compares these (``0001234`` for ``1234`` in the format
``0000000``, ``25%`` for ``0.25``), as OSWorld does: its tasks export each sheet in a
``postconfig`` step (``libreoffice --convert-to "csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,
false,true,true,false,false,1"``) and fetch the CSV with the workbook, and the metric
(``_load_sheet`` in xlang-ai/OSWorld ``desktop_env/evaluators/metrics/table.py``) reads
``<workbook path without .xlsx>-<sheet name>.csv`` beside the workbook.

We read that file when it is there. When it is not (a task that fetches only the workbook, or a
desktop whose export failed), we export the workbook here with LibreOffice headless, with the
same filter options, in a private profile and under a timeout.

Lines are compared stripped of surrounding white space, trailing blank lines ignored.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from osworld_gym.errors import EvaluatorError, MissingDependencyError

logger = logging.getLogger(__name__)

#: The LibreOffice program; tests point it elsewhere.
SOFFICE = "soffice"
#: Seconds one workbook's export may take.
CONVERT_TIMEOUT_S = 120.0
#: OSWorld's export options (comma, double quotes, UTF-8, contents as shown), all sheets (-1).
CSV_FILTER = "csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,false,true,true,false,false,-1"


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


def export(workbook: str) -> dict[str, list[str]]:
    """Every sheet of ``workbook`` exported as shown: ``{sheet name: lines}``.

    Raises:
        MissingDependencyError: LibreOffice (``soffice``) is not installed.
        EvaluatorError: the export failed or timed out.
    """
    program = shutil.which(SOFFICE)
    if program is None:
        raise MissingDependencyError(
            f"sheet_print needs LibreOffice ({SOFFICE!r} on PATH) to export {workbook} as shown, "
            "or the task must fetch the exported CSV beside it; install LibreOffice"
        )
    with tempfile.TemporaryDirectory(prefix="osworld-gym-print-") as tmp:
        src = Path(tmp) / "book.xlsx"  # a fixed name: LibreOffice writes book-<sheet>.csv
        shutil.copyfile(workbook, src)
        out = Path(tmp) / "out"
        argv = [
            program,
            f"-env:UserInstallation={(Path(tmp) / 'profile').as_uri()}",
            "--headless",
            "--norestore",
            "--convert-to",
            CSV_FILTER,
            "--outdir",
            str(out),
            str(src),
        ]
        detail = _run(argv, CONVERT_TIMEOUT_S, workbook)
        sheets = {
            p.name[len("book-") : -len(".csv")]: lines(p.read_bytes())
            for p in (out.glob("book-*.csv") if out.is_dir() else [])
        }
    if not sheets:
        raise EvaluatorError(f"LibreOffice wrote no CSV for {workbook}: {detail}")
    return sheets


def _run(argv: list[str], timeout: float, workbook: str) -> str:
    """Run LibreOffice in its own process group (killed whole on timeout); its output."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise EvaluatorError(
            f"LibreOffice did not export {workbook} within {timeout:.0f} s; "
            "is the machine overloaded, or the file very large?"
        ) from None
    detail = output.decode(errors="replace").strip()[-500:]
    if proc.returncode != 0:
        raise EvaluatorError(
            f"LibreOffice failed to export {workbook} (exit {proc.returncode}): {detail}"
        )
    logger.debug("exported %s: %s", workbook, detail)
    return detail
