"""Metrics on text files."""

from __future__ import annotations

import re
from pathlib import Path


def _normalise(text: str, *, ignore_blanks: bool, ignore_case: bool) -> str:
    if ignore_blanks:
        text = re.sub(r"\s+", " ", text).strip()
    if ignore_case:
        text = text.lower()
    return text


def compare_text_file(
    actual: str | None,
    expected: str | None,
    *,
    ignore_blanks: bool = False,
    ignore_case: bool = False,
) -> float:
    """1 if the two text files (paths) have the same content, else 0.

    Options: ``ignore_blanks`` collapses every run of whitespace (newlines included) into one
    space and strips both ends; ``ignore_case`` compares case-insensitively. A missing file
    (``None``) scores 0.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a").write_text("Hello  World\\n"); _ = (d / "b").write_text("hello world")
    >>> compare_text_file(str(d / "a"), str(d / "b"))
    0.0
    >>> compare_text_file(str(d / "a"), str(d / "b"), ignore_blanks=True, ignore_case=True)
    1.0
    """
    if not actual or not expected:
        return 0.0
    a = Path(actual).read_text(encoding="utf-8", errors="replace")
    b = Path(expected).read_text(encoding="utf-8", errors="replace")
    opts = {"ignore_blanks": ignore_blanks, "ignore_case": ignore_case}
    return float(_normalise(a, **opts) == _normalise(b, **opts))
