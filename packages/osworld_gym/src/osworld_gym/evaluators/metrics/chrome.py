"""Metrics on browser state: URLs of the active tab.

The getters (:mod:`..getters.chrome`) give a URL string or a tab dict ``{"title", "url", ...}``.

>>> is_expected_url_pattern_match({"url": "https://ex.org/faq/Ticket-Delivery-FAQs"},
...                               {"expected": ["Ticket-Delivery-FAQs"]})
1.0
>>> is_expected_active_tab("https://www.ex.org/a/", {"type": "url", "url": "http://ex.org/a"})
1.0
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit


def _url_of(result: Any) -> str | None:
    if isinstance(result, str):
        return result
    if isinstance(result, dict) and isinstance(result.get("url"), str):
        return result["url"]
    return None


def is_expected_url_pattern_match(result: Any, rules: dict[str, Any]) -> float:
    """1 if every regex of ``rules["expected"]`` is found (``re.search``) in the URL.

    ``result`` is a URL or a dict with a ``url`` key; anything else scores 0.

    >>> is_expected_url_pattern_match("https://ex.org/search?q=cats", {"expected": ["q=dogs"]})
    0.0
    """
    url = _url_of(result)
    if not url:
        return 0.0
    return float(all(re.search(p, url) for p in rules["expected"]))


def normalise_url(url: str) -> str:
    """A URL with scheme, a leading ``www.``, the default path ``/`` and a trailing ``/``
    dropped, for comparing what a user would call the same address.

    >>> normalise_url("HTTPS://www.Example.org/"), normalise_url("http://example.org/a/?x=1")
    ('example.org', 'example.org/a?x=1')
    """
    parts = urlsplit(url.strip())
    host = parts.netloc.lower().removeprefix("www.")
    path = parts.path.rstrip("/")
    out = host + path
    if parts.query:
        out += "?" + parts.query
    if parts.fragment:
        out += "#" + parts.fragment
    return out


def is_expected_active_tab(result: Any, rules: dict[str, Any]) -> float:
    """1 if the active tab's URL is ``rules["url"]`` (``rules["type"] == "url"``), compared
    with :func:`normalise_url`.

    Raises:
        ValueError: another ``type`` (OSWorld knows only ``url``).
    """
    if rules.get("type", "url") != "url":
        raise ValueError(f"is_expected_active_tab: unknown rule type {rules.get('type')!r}")
    url = _url_of(result)
    if not url:
        return 0.0
    return float(normalise_url(url) == normalise_url(rules["url"]))
