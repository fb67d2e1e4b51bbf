"""Metrics on application configuration files: Thunderbird prefs and filters, GIMP's
``gimprc``-style status files.

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "prefs.js"
>>> _ = f.write_text('user_pref("mail.spam.manualMark", true);\\n')
>>> check_thunderbird_prefs(str(f), {"expect": {"mail.spam.manualMark":
...                                             {"method": "eq", "ref": True}}})
1.0
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from osworld_gym.evaluators.metrics.match import match_value

logger = logging.getLogger(__name__)

_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)", (?P<val>.+)\);$')


def check_thunderbird_prefs(result: str | None, rule: dict[str, Any]) -> float:
    """1 if every ``rule["expect"]`` pref (``{name: {"method", "ref"}}``) is set in
    ``prefs.js`` and matches, and no ``"unexpect"`` pref that is set matches.

    As in OSWorld: the *last* line setting an expected pref decides; an expected pref that
    is never set fails; values are read as JSON (``true``, ``3``, ``"text"``). A value that
    is not JSON is kept as its raw text (OSWorld would raise on it).
    """
    if not result or not Path(result).is_file():
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    met = dict.fromkeys(expect, False)
    ok = True
    for line in Path(result).read_text(encoding="utf-8", errors="replace").splitlines():
        m = _PREF.match(line.strip())
        if m is None:
            continue
        key = m.group("key")
        try:
            value = json.loads(m.group("val"))
        except json.JSONDecodeError:
            value = m.group("val")
        if key in expect:
            met[key] = match_value(value, expect[key])
        elif key in unexpect:
            ok = ok and not match_value(value, unexpect[key])
    return float(all(met.values()) and ok)


_CONDITION = re.compile(
    r"\b(?:AND|OR) \((?:[\w ]+),(?:[\w ']+),(?:\"(?:(?:[^\"]|\")+)\"|(?:[^)]+))\)|\bALL\b"
)


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def thunderbird_filters(path: str) -> list[dict[str, Any]]:
    """The filters of a ``msgFilterRules.dat``: ``name``, ``enabled``, ``type``, ``action``,
    ``actionValue`` (the last one of each) and ``condition`` (a list of ``AND (...)``
    clauses). A filter is recorded when its ``condition=`` line is read, as OSWorld does."""
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, raw = line.partition("=")
        if not sep or not raw.startswith('"') or not raw.endswith('"'):
            continue
        value = _unescape(raw[1:-1])
        if key == "name":
            current = {"name": value}
        elif key in ("enabled", "type", "action", "actionValue"):
            current[key] = value
        elif key == "condition":
            current["condition"] = _CONDITION.findall(value)
            filters.append(current)
    return filters


def check_thunderbird_filter(result: str | None, rules: dict[str, list[dict[str, Any]]]) -> float:
    """1 if every ``rules["expect"]`` record matches some filter and no ``"unexpect"`` record
    matches any (a record matches when each of its keys has that exact value)."""
    if not result or not Path(result).is_file():
        return 0.0
    filters = thunderbird_filters(result)

    def matches(record: dict[str, Any], flt: dict[str, Any]) -> bool:
        return all(k in flt and flt[k] == v for k, v in record.items())

    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    return float(
        all(any(matches(r, f) for f in filters) for r in expect)
        and not any(matches(r, f) for r in unexpect for f in filters)
    )


def check_config_status(result: str | None, rule: dict[str, Any]) -> float:
    """1 if a line of the GIMP config file ``result`` sets ``rule["key"]`` to
    ``rule["value"]``.

    Lines are ``(key ... value)``; comments (``#``) and blank lines are skipped. A string
    key must be the first word; a two-word key (a list) the first two; the value is the last
    word, compared as text (quotes included, as written).
    """
    if not result or not Path(result).is_file():
        return 0.0
    key, value = rule["key"], rule["value"]
    for line in Path(result).read_text(encoding="utf-8", errors="replace").splitlines(True):
        if line.startswith("#") or line == "\n":
            continue
        items = line.strip().lstrip("(").rstrip(")\n").split()
        if not items:
            continue
        if isinstance(key, str) and items[0] == key and items[-1] == value:
            return 1.0
        if (
            isinstance(key, list)
            and len(key) == 2
            and len(items) >= 2
            and items[:2] == key
            and items[-1] == value
        ):
            return 1.0
    return 0.0
