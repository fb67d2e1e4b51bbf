"""Metrics on word-processor documents (``.docx`` through python-docx, ``.odt`` through odfpy)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from osworld_gym.evaluators.metrics.match import fuzzy_ratio
from osworld_gym.evaluators.metrics.options import check_options, honours

logger = logging.getLogger(__name__)


def docx_paragraphs(path: str) -> list[str]:
    """The text of each body paragraph of a ``.docx`` (tables, headers, footers excluded)."""
    from docx import Document

    return [p.text for p in Document(path).paragraphs]


def odt_paragraphs(path: str) -> list[str]:
    """The text of every ``text:p`` of an ``.odt`` as OSWorld reads it (odfpy).

    OSWorld's reader keeps only a paragraph's own text nodes and those directly inside a
    ``text:span``; everything else contributes nothing. Quirks kept for parity: a tab
    (``text:tab``), runs of spaces (``text:s``), line breaks, hyperlink text (``text:a``) and
    text in a span nested in a span are dropped, so ``"a<tab/>b"`` reads ``"ab"``. Headings
    (``text:h``) are not paragraphs; paragraphs of headers, footers, tables and lists are.

    >>> import tempfile, pathlib
    >>> from odf.opendocument import OpenDocumentText
    >>> from odf.text import P, Span, Tab
    >>> doc = OpenDocumentText(); p = P(text="a"); p.addElement(Tab()); p.addText("b")
    >>> s = Span(text="c"); s.addElement(Span(text="nested")); p.addElement(s)
    >>> doc.text.addElement(p)
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.odt"; doc.save(str(f))
    >>> odt_paragraphs(str(f))
    ['abc']
    """
    from odf.opendocument import load
    from odf.text import P

    out = []
    for paragraph in load(path).getElementsByType(P):
        parts = []
        for node in paragraph.childNodes:
            if node.nodeType == node.TEXT_NODE:
                parts.append(node.data)
            elif node.nodeType == node.ELEMENT_NODE and node.tagName == "text:span":
                parts += [c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE]
        out.append("".join(parts))
    return out


def _paragraphs(path: str) -> list[str]:
    suffix = Path(path).suffix.lower()
    if suffix == ".docx":
        return docx_paragraphs(path)
    if suffix == ".odt":
        return odt_paragraphs(path)
    raise ValueError(f"not a .docx or .odt file: {path}")


def _squash(paragraphs: list[str], ignore_case: bool) -> str:
    text = re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()
    return text.lower() if ignore_case else text


@honours(
    "ignore_blanks",
    "ignore_case",
    "ignore_order",
    "content_only",
    "fuzzy_match",
    "delete_empty_lines",
)
def compare_docx_files(result: str | None, expected: str | None, **options: Any) -> float:
    """Compare the paragraph texts of two documents (both ``.docx`` or both ``.odt``).

    Options (OSWorld's, same defaults):

    * ``ignore_blanks`` (true): join the paragraphs and collapse all whitespace, then compare the
      whole text; false compares paragraph by paragraph (the counts must match).
    * ``ignore_case`` (false), ``ignore_order`` (false: sort the paragraphs first),
      ``delete_empty_lines`` (false: drop blank paragraphs first).
    * ``fuzzy_match`` (false): score the similarity ratio instead of 0/1 (per paragraph, averaged,
      when ``ignore_blanks`` is false).
    * ``content_only`` (false): the similarity ratio of the whitespace-collapsed texts.

    A missing, unreadable or differently-typed result scores 0.

    >>> import tempfile, pathlib, docx
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name, lines in [("a", ["Hello", "World"]), ("b", ["hello ", "world"])]:
    ...     doc = docx.Document()
    ...     _ = [doc.add_paragraph(t) for t in lines]
    ...     doc.save(d / f"{name}.docx")
    >>> compare_docx_files(str(d / "a.docx"), str(d / "b.docx"))
    0.0
    >>> compare_docx_files(str(d / "a.docx"), str(d / "b.docx"), ignore_case=True)
    1.0
    """
    check_options("compare_docx_files", options, compare_docx_files.honoured_options)
    if not result or not expected:
        return 0.0
    if Path(result).suffix.lower() != Path(expected).suffix.lower():
        logger.info("compare_docx_files: %s and %s are of different types", result, expected)
        return 0.0
    try:
        mine = _paragraphs(result)
    except Exception as exc:  # noqa: BLE001 - any unreadable result scores 0
        logger.info("compare_docx_files: cannot read result %s: %s", result, exc)
        return 0.0
    gold = _paragraphs(expected)

    ignore_case = bool(options.get("ignore_case", False))
    if options.get("ignore_order", False):
        mine, gold = sorted(mine), sorted(gold)
    if options.get("delete_empty_lines", False):
        mine, gold = [p for p in mine if p.strip()], [p for p in gold if p.strip()]

    if options.get("content_only", False):
        return fuzzy_ratio(_squash(mine, ignore_case), _squash(gold, ignore_case))
    if options.get("ignore_blanks", True):
        a, b = _squash(mine, ignore_case), _squash(gold, ignore_case)
        if options.get("fuzzy_match", False):
            return fuzzy_ratio(a, b)
        return float(a == b)
    if len(mine) != len(gold):
        return 0.0
    if ignore_case:
        mine, gold = [p.lower() for p in mine], [p.lower() for p in gold]
    if options.get("fuzzy_match", False):
        if not gold:
            return 1.0
        return sum(fuzzy_ratio(a, b) for a, b in zip(mine, gold, strict=True)) / len(gold)
    return float(mine == gold)
