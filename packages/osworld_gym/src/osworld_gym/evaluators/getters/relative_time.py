"""``rule_relativeTime``: expected values holding dates relative to today ("next Monday").

Task JSON (OSWorld's shape)::

    {"type": "rule_relativeTime",
     "rules": {"relativeTime": {"from": "next Monday"},
               "expected": {"q": "flights", "time": "{DoW}, {Month} {Day0D}, {Year}"}}}

The getter returns ``rules`` with the date fields of ``expected`` rendered for the current date:
with only ``from``, the field ``time``; with ``from`` and ``to``, the fields ``from`` and ``to``;
for the phrase ``"next Monday split"`` the day, month and year go to separate fields
(``puDay``/``puMonth``/``puYear`` for ``from``, ``doDay``/``doMonth``/``doYear`` for ``to``).
``config["timezone"]`` (an IANA name) picks "today"; default: this machine's local time
(OSWorld guesses it from the host's IP address).

Placeholders (:func:`render`): ``{DoW}`` Mon, ``{DoWFull}`` Monday, ``{Month}`` Jan,
``{MonthFull}``/``{month}`` January, ``{Month0D}`` 01, ``{MonthD}`` 1, ``{Day0D}`` 05,
``{DayD}`` 5, ``{Year}`` 2024.

Phrases (:func:`relative_date`): ``today``, ``tomorrow``, ``yesterday``, ``this month``,
``this <weekday>``, ``next <weekday>`` (1-7 days ahead), ``<N>th next month`` / ``<N>th this
month``, ``first <weekday> <N> months later`` (N a number or a word up to twelve),
``<N> days later`` / ``in <N> days`` / ``<N> days ago``; ``split`` at the end is allowed.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import re
from typing import Any

logger = logging.getLogger(__name__)

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
_WEEKDAY = "|".join(_WEEKDAYS)
_NUMBER = r"\d+|" + "|".join(_NUMBERS)
_SPLIT_FIELDS = {"from": ("puDay", "puMonth", "puYear"), "to": ("doDay", "doMonth", "doYear")}


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _add_months(day: dt.date, months: int, new_day: int = 1) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, new_day)


def relative_date(phrase: str, today: dt.date) -> dt.date:
    """The date ``phrase`` names, seen from ``today``.

    >>> monday = dt.date(2024, 5, 6)
    >>> [str(relative_date(p, monday)) for p in ("next Monday", "this Sunday", "tomorrow")]
    ['2024-05-13', '2024-05-12', '2024-05-07']
    >>> str(relative_date("10th next month", dt.date(2024, 12, 20)))
    '2025-01-10'
    >>> str(relative_date("first monday four months later", dt.date(2024, 9, 15)))
    '2025-01-06'

    Raises:
        ValueError: a phrase this parser does not know.
    """
    text = phrase.strip().lower().removesuffix(" split").strip()
    fixed = {"today": 0, "this month": 0, "tomorrow": 1, "yesterday": -1}
    if text in fixed:
        return today + dt.timedelta(days=fixed[text])
    if m := re.fullmatch(rf"(this|next) ({_WEEKDAY})", text):
        target = _WEEKDAYS.index(m.group(2))
        if m.group(1) == "this":
            return today + dt.timedelta(days=target - today.weekday())
        return today + dt.timedelta(days=(target - today.weekday()) % 7 or 7)
    if m := re.fullmatch(r"(\d+)(?:st|nd|rd|th) (this|next) month", text):
        return _add_months(today, 1 if m.group(2) == "next" else 0, int(m.group(1)))
    if m := re.fullmatch(rf"first ({_WEEKDAY}) ({_NUMBER}) months? later", text):
        first = _add_months(today, _count(m.group(2)))
        return first + dt.timedelta(days=(_WEEKDAYS.index(m.group(1)) - first.weekday()) % 7)
    if m := re.fullmatch(rf"in ({_NUMBER}) days?|({_NUMBER}) days? (later|ago)", text):
        sign = -1 if m.group(3) == "ago" else 1
        return today + dt.timedelta(days=sign * _count(m.group(1) or m.group(2)))
    raise ValueError(f"unknown relative time {phrase!r}")


def render(template: str, day: dt.date) -> str:
    """Fill OSWorld's date placeholders in ``template``.

    >>> render("{DoW}, {Month} {Day0D}, {Year} ({MonthD}/{DayD})", dt.date(2024, 3, 5))
    'Tue, Mar 05, 2024 (3/5)'
    """
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    months = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
    values = {
        "{DoWFull}": _WEEKDAYS[day.weekday()].capitalize(),
        "{DoW}": names[day.weekday()],
        "{MonthFull}": months[day.month - 1],
        "{month}": months[day.month - 1],
        "{Month0D}": f"{day.month:02d}",
        "{MonthD}": str(day.month),
        "{Month}": months[day.month - 1][:3],
        "{Day0D}": f"{day.day:02d}",
        "{DayD}": str(day.day),
        "{Year}": str(day.year),
    }
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def today_in(timezone: str | None) -> dt.date:
    """Today's date in ``timezone`` (IANA name), or in this machine's local time."""
    if timezone:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            return dt.datetime.now(ZoneInfo(timezone)).date()
        except (ZoneInfoNotFoundError, ValueError):
            logger.warning("unknown timezone %r; using UTC", timezone)
            return dt.datetime.now(dt.UTC).date()
    return dt.datetime.now().astimezone().date()


def expected_for(rules: dict[str, Any], today: dt.date) -> dict[str, Any]:
    """``rules`` with the date fields of ``rules["expected"]`` rendered for ``today``."""
    out = copy.deepcopy(rules)
    relative, expected = out["relativeTime"], out["expected"]
    ends = ["from", "to"] if "to" in relative else ["from"]
    for end in ends:
        phrase = relative[end]
        day = relative_date(phrase, today)
        if phrase.strip().lower().endswith(" split"):
            for field in _SPLIT_FIELDS[end]:
                expected[field] = render(expected[field], day)
        else:
            field = end if len(ends) == 2 else "time"
            expected[field] = render(expected[field], day)
    return out


def get_rule_relativeTime(ctx: Any, config: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
    """``config["rules"]`` with its relative dates rendered for today (see the module doc)."""
    return expected_for(config["rules"], today_in(config.get("timezone")))
