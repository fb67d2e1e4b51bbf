"""Word-processor metrics on structure and formatting (``.docx`` through python-docx).

OSWorld's small ``docs`` checks: tables, line spacing, fonts, page breaks, footers,
alignment, subscripts. Each follows OSWorld's definition, quirks included (noted per
function). Where OSWorld returns 0 because a file cannot be opened, we do so only for the
agent's file (``result``); an unreadable *gold* file raises (the task cannot be judged).

>>> import tempfile, pathlib, docx
>>> d = pathlib.Path(tempfile.mkdtemp()); doc = docx.Document()
>>> _ = doc.add_paragraph("Title").alignment = 1
>>> doc.save(d / "a.docx")
>>> is_first_line_centered(str(d / "a.docx"))
1.0
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _open(path: str | None, *, gold: bool = False) -> Any:
    """The python-docx document at ``path``; ``None`` for a missing/unreadable result."""
    from docx import Document

    if not path:
        return None
    if gold:
        return Document(path)
    try:
        return Document(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable result scores 0
        logger.info("cannot read result document %s: %s", path, exc)
        return None


def compare_docx_tables(result: str | None, expected: str | None) -> float:
    """1 if both documents have the same number of tables, each of the same shape, with the
    same stripped text in every cell (``table.cell(i, j)``: a merged cell repeats)."""
    mine, gold = _open(result), _open(expected, gold=True) if expected else None
    if mine is None or gold is None:
        return 0.0
    if len(mine.tables) != len(gold.tables):
        return 0.0
    for t1, t2 in zip(mine.tables, gold.tables, strict=True):
        if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
            return 0.0
        for i in range(len(t1.rows)):
            for j in range(len(t1.columns)):
                if t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def compare_line_spacing(result: str | None, expected: str | None) -> float:
    """1 if the texts match (``compare_docx_files`` with its defaults) and every paragraph has
    the same ``line_spacing`` as python-docx reads it (``None`` = inherited, a float = lines,
    a length = exact points)."""
    from osworld_gym.evaluators.metrics.docs import compare_docx_files

    mine, gold = _open(result), _open(expected, gold=True) if expected else None
    if mine is None or gold is None:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    if len(mine.paragraphs) != len(gold.paragraphs):
        return 0.0
    return float(
        all(
            p1.paragraph_format.line_spacing == p2.paragraph_format.line_spacing
            for p1, p2 in zip(mine.paragraphs, gold.paragraphs, strict=True)
        )
    )


def compare_font_names(result: str | None, rules: dict[str, Any]) -> float:
    """1 if every run of every body paragraph has the explicit font ``rules["font_name"]``.

    Quirk kept: a run that inherits its font (``run.font.name`` is ``None``) fails, even if
    the style's font is the expected one.
    """
    doc = _open(result)
    if doc is None:
        return 0.0
    want = rules["font_name"]
    return float(all(r.font.name == want for p in doc.paragraphs for r in p.runs))


def contains_page_break(result: str | None, rules: dict[str, Any] | None = None) -> float:
    """1 if the body has a page break (``<w:br w:type="page"/>`` inside a run); with
    ``rules["page_break_count"]``, exactly that many."""
    doc = _open(result)
    if doc is None:
        return 0.0
    count = sum(
        1
        for p in doc.paragraphs
        for r in p.runs
        for br in r.element.iter(f"{_W}br")
        if br.get(f"{_W}type") == "page"
    )
    want = (rules or {}).get("page_break_count")
    if want is not None and count != want:
        return 0.0
    return float(count > 0)


def has_page_numbers_in_footers(result: str | None) -> float:
    """1 if every section's footer has a digit in its *first* paragraph's text.

    Quirk kept: a page-number *field* is not text to python-docx, so only a footer whose
    first paragraph holds a digit as text (or a field's cached result) passes.
    """
    doc = _open(result)
    if doc is None:
        return 0.0
    for section in doc.sections:
        paragraphs = section.footer.paragraphs
        text = paragraphs[0].text if paragraphs else ""
        if not any(ch.isdigit() for ch in text):
            return 0.0
    return 1.0


def is_first_line_centered(result: str | None) -> float:
    """1 if the first body paragraph is explicitly centred (an inherited alignment fails).
    A document without paragraphs scores 0 (OSWorld raises there)."""
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    doc = _open(result)
    if doc is None or not doc.paragraphs:
        return 0.0
    return float(doc.paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def compare_subscript_contains(result: str | None, expected: str | None) -> float:
    """1 if some run pair (paragraphs and runs paired by position) is subscript in both."""
    mine, gold = _open(result), _open(expected, gold=True) if expected else None
    if mine is None or gold is None:
        return 0.0
    for p1, p2 in zip(mine.paragraphs, gold.paragraphs, strict=False):
        for r1, r2 in zip(p1.runs, p2.runs, strict=False):
            if r1.font.subscript and r2.font.subscript:
                return 1.0
    return 0.0
