"""Metrics on plain files: text diffs, CSV, JSON, substrings, zip archives.

OSWorld's readers, quirks included: text files are read as OSWorld's ``_safe_read_file``
reads them (UTF-8 with or without a BOM, else Latin-1, which never fails). A missing or
unreadable *result* scores 0; an unreadable *gold* file raises (no trustworthy score).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "r.csv").write_text("a,b\\n1,2\\n"); _ = (d / "g.csv").write_text("a,b\\n1,2\\n")
>>> compare_csv(str(d / "r.csv"), str(d / "g.csv"))
1.0
"""

from __future__ import annotations

import csv
import difflib
import json
import logging
import zipfile
from pathlib import Path
from typing import Any

from osworld_gym.evaluators.metrics.match import match_value
from osworld_gym.evaluators.metrics.options import check_options, honours

logger = logging.getLogger(__name__)


def read_lines(path: str) -> list[str]:
    """``path``'s lines (``splitlines``): UTF-8 (BOM dropped), else Latin-1.

    Raises:
        OSError: the file cannot be read.
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError:
        return data.decode("latin-1").splitlines()


def _result_lines(path: str | None) -> list[str] | None:
    if not path:
        return None
    try:
        return read_lines(path)
    except OSError as exc:
        logger.info("cannot read result %s: %s", path, exc)
        return None


def diff_text_file(result: str | None, expected: str) -> float:
    """``difflib.SequenceMatcher`` ratio of the two files' *lines* (a score in [0, 1])."""
    mine = _result_lines(result)
    if mine is None:
        return 0.0
    return difflib.SequenceMatcher(a=mine, b=read_lines(expected)).ratio()


@honours("strict", "ignore_case")
def compare_csv(result: str | None, expected: str | list[str], **options: Any) -> float:
    """1 if the result's lines equal a gold file's lines (any of them, if a list).

    Options (OSWorld's): ``strict`` (default true; false strips every line),
    ``ignore_case`` (default false). The files are compared as text, not parsed: quoting
    and number formats count.
    """
    check_options("compare_csv", options, compare_csv.honoured_options)
    mine = _result_lines(result)
    if mine is None:
        return 0.0
    for gold_path in [expected] if isinstance(expected, str) else list(expected):
        gold = read_lines(gold_path)
        a, b = mine, gold
        if not options.get("strict", True):
            a, b = [s.strip() for s in a], [s.strip() for s in b]
        if options.get("ignore_case", False):
            a, b = [s.lower() for s in a], [s.lower() for s in b]
        if a == b:
            return 1.0
    return 0.0


def _match_record(pattern: dict[str, Any], item: dict[str, Any]) -> bool:
    return all(k in item and item[k] == v for k, v in pattern.items())


def check_csv(result: str | None, rules: dict[str, list[dict[str, str]]]) -> float:
    """1 if every ``rules["expect"]`` record matches some row and no ``"unexpect"`` record
    matches any (rows read with ``csv.DictReader``; a record matches when each of its keys
    has that exact string value)."""
    if not result or not Path(result).is_file():
        return 0.0
    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    found = [False] * len(expect)
    with open(result, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            found = [ok or _match_record(r, row) for ok, r in zip(found, expect, strict=True)]
            if any(_match_record(r, row) for r in unexpect):
                return 0.0
    return float(all(found))


def check_json(result: str | None, rules: dict[str, Any], is_yaml: bool = False) -> float:
    """Rules on values inside a JSON (or, with ``is_yaml``, YAML) file.

    Each ``rules["expect"]`` entry ``{"key": [k1, k2, ...], "method", "ref"}`` walks the keys
    and must match (:func:`.match.match_value`); a missing key scores 0. Each ``"unexpect"``
    entry must not match (a missing key reads ``None``). An unreadable file scores 0.
    """
    if not result or not Path(result).is_file():
        return 0.0
    try:
        text = Path(result).read_text(encoding="utf-8")
        if is_yaml:
            import yaml

            data = yaml.safe_load(text)
            if data is None:
                return 0.0
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - the agent's file is not JSON/YAML: 0
        logger.info("check_json: cannot parse %s: %s", result, exc)
        return 0.0
    for rule in rules.get("expect", []):
        value = data
        try:
            for key in rule["key"]:
                value = value[key]
        except (KeyError, TypeError, IndexError):
            return 0.0
        if not match_value(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []):
        value = data
        for key in rule["key"]:
            try:
                value = value[key]
            except (KeyError, TypeError, IndexError):
                value = None
                break
        if match_value(value, rule):
            return 0.0
    return 1.0


def file_contains(result: str | None, config: dict[str, Any]) -> float:
    """1 if the file's text contains every string of ``config["expected"]``; an unreadable
    file scores 0."""
    if not result:
        return 0.0
    try:
        text = Path(result).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        logger.info("file_contains: cannot read %s: %s", result, exc)
        return 0.0
    return float(all(s in text for s in config["expected"]))


def compare_zip_files(result: str | None, expected: str) -> float:
    """1 if both archives hold the same member names with byte-identical contents.

    OSWorld compares ``.pdf`` members by their text instead of their bytes; a pdf member
    whose bytes differ raises ``NotImplementedError`` here (no honest score). A result that
    is not a zip archive scores 0.
    """
    if not result:
        return 0.0
    try:
        mine = zipfile.ZipFile(result)
    except (OSError, zipfile.BadZipFile) as exc:
        logger.info("compare_zip_files: cannot read %s: %s", result, exc)
        return 0.0
    with mine, zipfile.ZipFile(expected) as gold:
        names = set(mine.namelist())
        if names != set(gold.namelist()):
            return 0.0
        for name in sorted(names):
            a, b = mine.read(name), gold.read(name)
            if a == b:
                continue
            if name.lower().endswith(".pdf"):
                raise NotImplementedError(
                    f"compare_zip_files: pdf member {name!r} differs in bytes; comparing pdf "
                    "text inside archives is not implemented"
                )
            return 0.0
    return 1.0
