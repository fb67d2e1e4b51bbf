"""Getters that read Chrome's profile files (``~/.config/google-chrome/Default/...``).

Chrome writes ``Preferences`` lazily and completely on a clean shutdown, which is why OSWorld's
tasks run ``pkill chrome``, relaunch and sleep in their ``postconfig`` before these getters.
A profile file that does not exist means Chrome never ran: ``None`` (the metric scores 0).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from osworld_gym.evaluators.context import EvalContext
from osworld_gym.tasks.paths import guest_path

logger = logging.getLogger(__name__)

PROFILE = "~/.config/google-chrome/Default"
#: Most bytes of a profile file parsed in memory (Chrome's Preferences and Bookmarks are a few
#: hundred KB; a larger one is the agent's, and parsing it whole would take GBs on the host).
MAX_PROFILE_BYTES = 32 << 20


def read_profile_json(ctx: EvalContext, name: str) -> dict[str, Any] | None:
    """``<profile>/<name>`` parsed as JSON; ``None`` if missing or unparsable."""
    data = ctx.client.get_file(
        guest_path(f"{PROFILE}/{name}", ctx.home), max_bytes=MAX_PROFILE_BYTES
    )
    if data is None:
        return None
    try:
        out = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        logger.info("task %s: Chrome's %s is not JSON: %s", ctx.task_id, name, exc)
        return None
    return out if isinstance(out, dict) else None


def get_enable_do_not_track(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """``"true"`` if "Send a Do Not Track request" is on, else ``"false"``."""
    prefs = read_profile_json(ctx, "Preferences")
    if prefs is None:
        return None
    return "true" if prefs.get("enable_do_not_track", False) else "false"


def get_default_search_engine(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The default search engine's short name (``"Google"`` when never changed)."""
    prefs = read_profile_json(ctx, "Preferences")
    if prefs is None:
        return None
    data = prefs.get("default_search_provider_data", {}).get("template_url_data", {})
    return data.get("short_name", "Google")


def get_profile_name(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The profile's display name (``profile.name``)."""
    prefs = read_profile_json(ctx, "Preferences")
    return None if prefs is None else prefs.get("profile", {}).get("name")


def get_bookmarks(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The ``roots`` of Chrome's ``Bookmarks`` file (``bookmark_bar``, ``other``, ``synced``)."""
    bookmarks = read_profile_json(ctx, "Bookmarks")
    return None if bookmarks is None else bookmarks.get("roots", {})


def _prefs(ctx: EvalContext) -> dict[str, Any] | None:
    return read_profile_json(ctx, "Preferences")


def get_chrome_font_size(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """Chrome's ``webkit.webprefs`` (font sizes), or Chrome's defaults
    (``default_fixed_font_size`` 13, ``default_font_size`` 16, ``minimum_font_size`` 13) when
    never changed, as OSWorld reads it."""
    prefs = _prefs(ctx)
    if prefs is None:
        return None
    defaults = {"default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}
    return prefs.get("webkit", {}).get("webprefs", defaults)


def get_enable_safe_browsing(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """``"true"`` if Safe Browsing is on (standard or enhanced), else ``"false"``."""
    prefs = _prefs(ctx)
    if prefs is None:
        return None
    sb = prefs.get("safebrowsing", {})
    return "true" if sb.get("enhanced", False) or sb.get("enabled", False) else "false"


def get_new_startup_page(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """``"true"`` if Chrome opens the New Tab page on startup: OSWorld's reading is "no
    ``session`` settings at all, or ``session.restore_on_startup`` is 5"."""
    prefs = _prefs(ctx)
    if prefs is None:
        return None
    if "session" not in prefs:
        return "true"
    return "true" if prefs["session"].get("restore_on_startup") == 5 else "false"


def _extensions(ctx: EvalContext) -> dict[str, Any] | None:
    prefs = _prefs(ctx)
    return None if prefs is None else prefs.get("extensions", {}).get("settings", {})


def get_find_unpacked_extension_path(ctx: EvalContext, config: dict[str, Any]) -> list[str] | None:
    """The ``path`` of every extension in Chrome's settings (unpacked ones are a folder)."""
    exts = _extensions(ctx)
    return None if exts is None else [e["path"] for e in exts.values() if "path" in e]


def get_find_installed_extension_name(ctx: EvalContext, config: dict[str, Any]) -> list[str] | None:
    """The manifest ``name`` of every extension in Chrome's settings."""
    exts = _extensions(ctx)
    if exts is None:
        return None
    return [e["manifest"]["name"] for e in exts.values() if "name" in e.get("manifest", {})]


#: Chrome's content-setting value "session only": site data is deleted when Chrome closes.
SESSION_ONLY = 4


def get_data_delete_automacally(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """``"true"`` if Chrome deletes site data on close: the cookies content setting's default
    is "session only" (``profile.default_content_setting_values.cookies == 4``, what the
    settings toggle writes); the misspelt name is OSWorld's.

    Stricter than OSWorld, which answers "true" when ``default_content_setting_values`` exists
    at all: a fresh Chromium profile already has that key (with other settings), so doing
    nothing would pass. The right answer passes both rules.
    """
    prefs = _prefs(ctx)
    if prefs is None:
        return None
    values = (prefs.get("profile") or {}).get("default_content_setting_values")
    cookies = values.get("cookies") if isinstance(values, dict) else None
    return "true" if cookies == SESSION_ONLY else "false"
