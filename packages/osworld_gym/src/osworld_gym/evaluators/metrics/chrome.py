"""Metrics on browser state: URLs of the active tab.

The getters (:mod:`..getters.chrome`) give a URL string or a tab dict ``{"title", "url", ...}``.

>>> is_expected_url_pattern_match({"url": "https://ex.org/faq/Ticket-Delivery-FAQs"},
...                               {"expected": ["Ticket-Delivery-FAQs"]})
1.0
>>> is_expected_active_tab("https://www.ex.org/", {"type": "url", "url": "https://ex.org"})
1.0
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit


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
    """A URL as OSWorld compares addresses: scheme (default ``http``) and host lower-cased,
    ``www.`` dropped, a bare ``/`` path dropped; path, query and fragment otherwise kept.

    >>> normalise_url("HTTPS://www.Example.org/"), normalise_url("example.org/a/?x=1")
    ('https://example.org', 'http://example.org/a/?x=1')
    """
    parts = urlsplit(url.strip())
    if not parts.scheme and not parts.netloc:  # "example.org/a": a host without a scheme
        parts = urlsplit("http://" + url.strip())
    scheme = (parts.scheme or "http").lower()
    host = parts.netloc.lower().replace("www.", "")
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((scheme, host, path, parts.query, parts.fragment))


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
