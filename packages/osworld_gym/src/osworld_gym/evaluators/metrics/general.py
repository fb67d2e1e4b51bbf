"""Metrics on plain values: strings, lists, JSON objects; the infeasible rule.

>>> exact_match("Directory exists.\\n", {"expected": "Directory exists.\\n"})
1.0
>>> check_include_exclude("ok: 3 files", {"include": ["ok"], "exclude": ["error"]})
1.0
>>> match_in_list("b", {"expected": ["a", "b"]})
1.0
"""

from __future__ import annotations

import json
import logging
from typing import Any

from osworld_gym.evaluators.context import is_fail_action

logger = logging.getLogger(__name__)


def exact_match(result: Any, rules: dict[str, Any]) -> float:
    """1 if ``result == rules["expected"]`` (no normalisation: trailing newlines count).

    >>> exact_match("yes", {"expected": "yes\\n"})
    0.0
    """
    return float(result is not None and result == rules["expected"])


def match_in_list(result: Any, rules: dict[str, Any]) -> float:
    """1 if ``result`` is one of ``rules["expected"]`` (a list).

    >>> match_in_list("c", {"expected": ["a", "b"]})
    0.0
    """
    return float(result is not None and result in rules["expected"])


def check_include_exclude(result: str | None, rules: dict[str, Any]) -> float:
    """1 if ``result`` contains every string of ``rules["include"]`` and none of ``"exclude"``.

    Both lists are optional (default empty). ``None`` scores 0.

    >>> check_include_exclude("a.txt b.log", {"include": ["a.txt"], "exclude": [".log"]})
    0.0
    """
    if result is None:
        return 0.0
    include = rules.get("include", [])
    exclude = rules.get("exclude", [])
    return float(all(s in result for s in include) and not any(s in result for s in exclude))


def check_direct_json_object(result: Any, rules: dict[str, Any]) -> float:
    """Compare a JSON object with ``rules["expected"]``, key by key.

    ``result`` is a dict, or a string holding one (surrounding blanks stripped, single quotes
    read as double quotes, as OSWorld does); an unparsable string or ``None`` scores 0.

    Default mode: every key of ``expected`` must be present in ``result`` with an equal value;
    extra keys in ``result`` are ignored. With ``rules["ignore_list_order"]`` true (OSWorld also
    accepts that flag *inside* ``expected``), list values are compared as sorted lists.

    With ``rules["expect_in_result"]`` true the values are looser: an expected string must be a
    substring of the result's value, an expected list means "any one of these appears in the
    result's value" (a list or string), anything else must be equal.

    >>> check_direct_json_object('{"a": 1, "b": [2, 1]}', {"expected": {"b": [1, 2]},
    ...                                                  "ignore_list_order": True})
    1.0
    >>> check_direct_json_object({"name": "Alice Smith"}, {"expected": {"name": "Alice"},
    ...                                                  "expect_in_result": True})
    1.0
    >>> check_direct_json_object("not json", {"expected": {"a": 1}})
    0.0
    """
    if isinstance(result, str):
        try:
            result = json.loads(result.strip().replace("'", '"'))
        except json.JSONDecodeError:
            logger.info("check_direct_json_object: result is not JSON: %.200r", result)
            return 0.0
    if not isinstance(result, dict):
        return 0.0
    expected = dict(rules["expected"])
    ignore_order = bool(rules.get("ignore_list_order") or expected.pop("ignore_list_order", False))
    loose = bool(rules.get("expect_in_result", False))
    for key, want in expected.items():
        if key not in result:
            return 0.0
        got = result[key]
        if loose:
            ok = _loosely_contains(got, want)
        elif ignore_order and isinstance(want, list) and isinstance(got, list):
            ok = _sorted(want) == _sorted(got)
        else:
            ok = want == got
        if not ok:
            return 0.0
    return 1.0


def _loosely_contains(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return isinstance(got, str) and want in got
    if isinstance(want, list):
        if isinstance(got, str):
            return any(isinstance(w, str) and w in got for w in want)
        return isinstance(got, list) and any(w in got for w in want)
    return want == got


def _sorted(values: list[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:  # mixed types: order by their JSON text
        return sorted(values, key=lambda v: json.dumps(v, sort_keys=True))


def infeasible(last_action: Any = None) -> float:
    """The infeasible rule: 1 iff the episode's last action is ``FAIL``.

    >>> infeasible("FAIL"), infeasible("DONE"), infeasible(None)
    (1.0, 0.0, 0.0)
    """
    return float(is_fail_action(last_action))
