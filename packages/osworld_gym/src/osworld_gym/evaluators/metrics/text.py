"""Metrics on text files: whole-file comparison, line patterns, JSON settings files."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


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


def file_lines(text: str) -> list[str]:
    """``text``'s lines as iterating a text file gives them (OSWorld's ``for l in f``):
    split only at ``\\n``, ``\\r\\n`` and ``\\r`` (each read as ``\\n`` and kept at the line's
    end), not at the form feeds, vertical tabs and Unicode separators that ``str.splitlines``
    also splits at.

    >>> file_lines("a\\fb\\r\\nc")
    ['a\\x0cb\\n', 'c']
    """
    return list(io.StringIO(text, newline=None))


def check_list(result: str | None, rules: dict[str, list[str]]) -> float:
    """1 if every ``rules["expect"]`` regex matches some line of the file ``result`` and no
    ``rules["unexpect"]`` regex matches any line (both lists optional). Missing file: 0.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "list.txt"
    >>> _ = f.write_text("apple 3\\nbanana 5\\n")
    >>> check_list(str(f), {"expect": [r"^apple \\d$", "banana"], "unexpect": ["cherry"]})
    1.0
    >>> check_list(str(f), {"expect": ["cherry"]})
    0.0
    """
    if not result or not Path(result).is_file():
        return 0.0
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    found = [False] * len(expect)
    for line in file_lines(Path(result).read_text(encoding="utf-8", errors="replace")):
        if any(p.search(line) for p in unexpect):
            return 0.0
        for i, p in enumerate(expect):
            found[i] = found[i] or p.search(line) is not None
    return float(all(found))


def check_json_settings(result: str | None, expected: dict[str, Any]) -> float:
    """1 if the JSON settings file ``result`` has every key of ``expected["expected"]`` with an
    equal value (other keys are ignored).

    The file is read as strict JSON, as OSWorld's ``json.load`` does: a settings file with
    ``//`` comments or trailing commas (which VS Code itself tolerates) scores 0 there, and here
    (parity; the agent saved a file the checker cannot read). A missing or unparsable file, or
    one that is not an object, scores 0.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "settings.json"
    >>> _ = f.write_text('{"editor.tabSize": 2, "a": [1]}')
    >>> check_json_settings(str(f), {"expected": {"editor.tabSize": 2}})
    1.0
    >>> _ = f.write_text('{\\n  // editor\\n  "editor.tabSize": 2,\\n}')
    >>> check_json_settings(str(f), {"expected": {"editor.tabSize": 2}})
    0.0
    """
    if not result or not Path(result).is_file():
        return 0.0
    try:
        data = json.loads(Path(result).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        logger.info("check_json_settings: %s is not JSON: %s", result, exc)
        return 0.0
    if not isinstance(data, dict):
        return 0.0
    return float(all(k in data and data[k] == v for k, v in expected["expected"].items()))
