"""Metrics on PDF files (text through pypdf)."""

from __future__ import annotations

import logging

from osworld_gym.evaluators.metrics.match import fuzzy_ratio

logger = logging.getLogger(__name__)


def pdf_text(path: str) -> str:
    """The text of every page, concatenated and stripped.

    OSWorld extracts with PyMuPDF; pypdf may lay out spaces and line breaks differently, but both
    files of a comparison go through the same extractor.
    """
    from pypdf import PdfReader

    reader = PdfReader(path)
    return "".join(page.extract_text() or "" for page in reader.pages).strip()


def compare_pdfs(result: str | list[str | None] | None, expected: str | list[str] | None) -> float:
    """Text similarity of two PDFs (``2 * LCS / total length``), in ``[0, 1]``.

    ``result`` and ``expected`` may be parallel lists (a ``multi`` getter); the score is then the
    mean over the pairs. A pair with a missing or unreadable file on either side counts 0, as in
    OSWorld (which catches every per-pair error): some tasks put the agent's files on the
    ``expected`` side, so an unreadable file there is the agent's doing, not infrastructure.

    >>> compare_pdfs(None, "gold.pdf")
    0.0
    """
    if result is None or expected is None:
        return 0.0
    results = result if isinstance(result, list) else [result]
    golds = expected if isinstance(expected, list) else [expected]
    if not golds:
        return 0.0
    total = 0.0
    for mine, gold in zip(results, golds, strict=False):
        if not mine or not gold:
            continue
        try:
            total += fuzzy_ratio(pdf_text(mine), pdf_text(gold))
        except Exception as exc:  # noqa: BLE001 - any unreadable PDF scores its pair 0
            logger.info("compare_pdfs: cannot read %s or %s: %s", mine, gold, exc)
    return total / len(golds)
