"""Metrics on browser state: URLs of the active tab.

The getters (:mod:`..getters.chrome`) give a URL string or a tab dict ``{"title", "url", ...}``.

>>> is_expected_url_pattern_match({"url": "https://ex.org/faq/Ticket-Delivery-FAQs"},
...                               {"expected": ["Ticket-Delivery-FAQs"]})
1.0
>>> is_expected_active_tab("https://www.ex.org/", {"type": "url", "url": "https://ex.org"})
1.0
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any
from urllib.parse import urlparse, urlunparse

logger = logging.getLogger(__name__)


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


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://")


@functools.cache
def _extractor() -> Any:
    """tldextract with its bundled public suffix list only: never a network fetch (OSWorld's
    default extractor downloads the list when it can; the bundled snapshot splits the same)."""
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def normalise_url(url: str, full: bool = True) -> str:
    """A URL as OSWorld's ``compare_urls`` compares addresses.

    The scheme (default ``http``) is lower-cased; the host is reduced to
    ``[subdomain.]domain`` by the public suffix list: the suffix is *dropped* (``airbnb.com``
    and ``airbnb.com.sg`` are the same site, a quirk kept for parity), a port is dropped (so is
    an explicit default one), and a lone ``www`` subdomain is dropped (``www.a.example.org``
    keeps its ``www.a``). A bare ``/`` path is dropped; params, query and fragment are kept
    (dropped with ``full=False``).

    >>> normalise_url("HTTPS://www.Example.org/"), normalise_url("example.org:80/a/?x=1")
    ('https://example', 'http://example/a/?x=1')
    >>> normalise_url("https://www.airbnb.com.sg") == normalise_url("https://airbnb.com")
    True
    """
    url = url if _SCHEME.match(url) else f"http://{url}"
    parts = urlparse(url)
    ext = _extractor()(parts.netloc.lower())
    sub = "" if ext.subdomain == "www" else ext.subdomain
    host = f"{sub}.{ext.domain}" if sub else ext.domain
    path = "" if parts.path == "/" else parts.path
    keep = (parts.params, parts.query, parts.fragment) if full else ("", "", "")
    return urlunparse((parts.scheme.lower(), host, path, *keep))


def is_expected_active_tab(result: Any, rules: dict[str, Any]) -> float:
    """1 if the active tab's URL is ``rules["url"]`` (``rules["type"] == "url"``), compared
    with :func:`normalise_url` (OSWorld's ``compare_urls``: same site under another public
    suffix, or with an explicit port, is the same tab).

    Another ``type`` (``title``, ...) scores 0, as in OSWorld, which knows only ``url`` and
    logs the rest; the task can never score 1, so a warning names it.

    >>> is_expected_active_tab({"url": "https://ex.org/", "title": "Ex"},
    ...                        {"type": "title", "title": "Ex"})
    0.0
    """
    url = _url_of(result)
    if not url:
        return 0.0
    if not _url_rule("is_expected_active_tab", rules):
        return 0.0
    return float(normalise_url(url) == normalise_url(rules["url"]))


def _url_rule(metric: str, rules: dict[str, Any]) -> bool:
    """Whether ``rules`` is a ``url`` rule (OSWorld reads ``rules["type"]``, required)."""
    if "type" not in rules:
        raise ValueError(f"{metric}: the rule needs a 'type' (OSWorld knows only 'url')")
    if rules["type"] == "url":
        return True
    logger.warning(
        "%s: rule type %r is not 'url'; it scores 0, as in OSWorld", metric, rules["type"]
    )
    return False


def is_expected_active_tab_approximate(result: Any, rules: dict[str, Any]) -> float:
    """Like :func:`is_expected_active_tab` but comparing the raw URLs with the query string
    removed (OSWorld: ``urlparse(url)._replace(query="")``; no other normalisation, so
    ``www.`` and trailing slashes count here).

    >>> is_expected_active_tab_approximate("https://ex.org/a?x=1",
    ...                                    {"type": "url", "url": "https://ex.org/a?y=2"})
    1.0
    """
    url = _url_of(result)
    if not url:
        return 0.0
    if not _url_rule("is_expected_active_tab_approximate", rules):
        return 0.0

    def strip(u: str) -> str:
        return urlunparse(urlparse(u)._replace(query=""))

    return float(strip(url) == strip(rules["url"]))


def is_expected_tabs(result: Any, rules: dict[str, Any]) -> float:
    """1 if the open tabs' URLs are ``rules["urls"]`` as a multiset under
    :func:`normalise_url` (``rules["type"] == "url"``): same count, and every expected URL
    has an equal one among the open tabs (order ignored; OSWorld's ``are_lists_equal``).
    ``result`` is the ``open_tabs_info`` list of ``{"title", "url"}``; empty scores 0.
    """
    if not result or rules.get("type", "url") != "url":
        return 0.0
    open_urls = [normalise_url(t["url"]) for t in result]
    want = [normalise_url(u) for u in rules["urls"]]
    if len(open_urls) != len(want):
        return 0.0
    return float(all(u in open_urls for u in want))


def check_font_size(result: dict[str, Any] | None, rule: dict[str, Any]) -> float:
    """Chrome's default font size (the ``chrome_font_size`` getter's ``default_font_size``)
    against ``rule``: ``type: value`` equal to ``value``; ``type: range`` strictly between
    ``min`` and ``max``. A profile that stores other font settings but not this one has
    Chrome's default, 16 (OSWorld raises there).

    Raises:
        ValueError: another rule type.
    """
    if not result:
        return 0.0
    size = result.get("default_font_size", 16)
    if rule["type"] == "value":
        return float(size == rule["value"])
    if rule["type"] == "range":
        return float(rule["min"] < size < rule["max"])
    raise ValueError(f"check_font_size: rule type {rule['type']!r} is not supported")
