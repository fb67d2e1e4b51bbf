"""Metrics on plain values: strings, lists, JSON objects; the infeasible rule.

>>> exact_match("Directory exists.\\n", {"expected": "Directory exists.\\n"})
1.0
>>> check_include_exclude("ok: 3 files", {"include": ["ok"], "exclude": ["error"]})
1.0
>>> match_in_list("b", {"expected": ["a", "b"]})
1.0
"""

from __future__ import annotations

import ast
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


def check_gnome_favorite_apps(result: str | None, rules: dict[str, Any]) -> float:
    """1 if the dock's favourites (``gsettings get org.gnome.shell favorite-apps`` output) are
    exactly the apps of ``rules["expected"]``, in any order, as OSWorld scores it.

    The list is read as a literal (OSWorld evaluates the text as Python; we never evaluate
    desktop output as code). GVariant's typed empty list ``@as []`` is an empty list; text that
    is no list scores 0, as does ``None``.

    >>> check_gnome_favorite_apps("['google-chrome.desktop', 'thunderbird.desktop']\\n",
    ...                           {"expected": ["thunderbird.desktop", "google-chrome.desktop"]})
    1.0
    >>> check_gnome_favorite_apps("['thunderbird.desktop', 'vim.desktop', 'google-chrome.desktop']",
    ...                           {"expected": ["google-chrome.desktop", "thunderbird.desktop"]})
    0.0
    """
    if result is None:
        return 0.0
    text = result.strip()
    if text.startswith("@as "):
        text = text[4:]
    try:
        apps = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return 0.0
    expected = rules.get("expected")
    if not isinstance(apps, list) or not isinstance(expected, list):
        return 0.0
    # OSWorld: same length, then same set (a duplicate in one list can still pass)
    return float(len(apps) == len(expected) and set(map(str, apps)) == set(map(str, expected)))


def check_direct_json_object(result: Any, rules: dict[str, Any]) -> float:
    """Compare a JSON object with ``rules["expected"]``, key by key, as OSWorld does.

    ``result`` is a dict, or a string holding one (surrounding blanks stripped, every ``'``
    replaced by ``"``). Text that is not JSON is the agent's malformed output: OSWorld raises
    there, we score 0 (the judge did not fail). ``None`` scores 0.

    Default mode: for every key of ``expected``, ``result.get(key)`` must equal the expected
    value (a key missing from ``result`` reads as ``None``, so an expected ``null`` matches it);
    extra keys in ``result`` are ignored. Quirks kept for parity:

    * ``ignore_list_order`` is read *inside* ``expected`` only (a rules-level flag is ignored),
      and there it is itself one of the keys compared: sorting its value ``true`` fails, and
      OSWorld's catch-all turns that into 0. A task using it can never pass in OSWorld.
    * anything that raises while comparing (``result`` not a dict, ...) scores 0.

    With ``rules["expect_in_result"]`` true: an expected string must be ``in`` the result's
    value (a substring of a string, a member of a list); an expected list passes if one of its
    items *equals* the result's string value or is a member of its list value (a comma-joined
    string does not contain-match); any other expected type scores 0.

    >>> check_direct_json_object('{"a": 1, "b": [1, 2]}', {"expected": {"b": [1, 2]}})
    1.0
    >>> check_direct_json_object({"name": "Alice Smith"}, {"expected": {"name": "Alice"},
    ...                                                  "expect_in_result": True})
    1.0
    >>> check_direct_json_object({"c": "x, y"}, {"expected": {"c": ["x", "y"]},
    ...                                        "expect_in_result": True})
    0.0
    >>> check_direct_json_object("not json", {"expected": {"a": 1}})
    0.0
    """
    if isinstance(result, str):
        try:
            result = json.loads(result.strip().replace("'", '"'))
        except json.JSONDecodeError:
            logger.info("check_direct_json_object: result is not JSON: %.200r", result)
            return 0.0
    if result is None:
        return 0.0
    expected = rules["expected"]
    try:
        if rules.get("expect_in_result", False):
            return float(all(_loosely_contains(result.get(k), v) for k, v in expected.items()))
        for key, want in expected.items():
            if expected.get("ignore_list_order", False):
                if sorted(want) != sorted(result.get(key)):
                    return 0.0
            elif want != result.get(key):
                return 0.0
        return 1.0
    except Exception as exc:  # noqa: BLE001 - OSWorld's catch-all: any comparison error is a 0
        logger.info("check_direct_json_object: comparison failed (%s): 0", exc)
        return 0.0


def _loosely_contains(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return any(
            (isinstance(got, list) and w in got) or (isinstance(got, str) and w == got)
            for w in want
        )
    if isinstance(want, str):
        return want in got  # TypeError for None/numbers: the caller's catch-all scores 0
    return False


def infeasible(last_action: Any = None) -> float:
    """The infeasible rule: 1 iff the episode's last action is ``FAIL``.

    >>> infeasible("FAIL"), infeasible("DONE"), infeasible(None)
    (1.0, 0.0, 0.0)
    """
    return float(is_fail_action(last_action))


def is_in_list(result: Any, rules: dict[str, Any]) -> float:
    """1 if ``rules["expected"]`` is *in* ``result`` (a list member, or a substring of a
    string): OSWorld's ``expect in result``, the reverse of :func:`match_in_list`. ``None``
    scores 0.

    >>> is_in_list(["a", "b"], {"expected": "b"}), is_in_list("abc", {"expected": "x"})
    (1.0, 0.0)
    """
    if result is None:
        return 0.0
    try:
        return float(rules["expected"] in result)
    except TypeError:  # result is not a container (a number): nothing is in it
        return 0.0


def is_utc_0(result: str | None) -> float:
    """1 if the 4th line of ``timedatectl`` output (the ``Time zone:`` line) ends with
    ``+0000)``.

    Raises:
        ValueError: the output has fewer than 4 lines: ``timedatectl`` did not run as the
            task expects (the judge's command failed, not the agent).

    >>> out = "L\\nU\\nR\\n  Time zone: Etc/UTC (UTC, +0000)\\nx"
    >>> is_utc_0(out)
    1.0
    """
    if result is None:
        return 0.0
    lines = result.split("\n")
    if len(lines) < 4:
        raise ValueError(f"is_utc_0: not timedatectl output: {result[:200]!r}")
    return float(lines[3].endswith("+0000)"))
