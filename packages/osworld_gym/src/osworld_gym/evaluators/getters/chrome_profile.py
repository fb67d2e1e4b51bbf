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


def read_profile_json(ctx: EvalContext, name: str) -> dict[str, Any] | None:
    """``<profile>/<name>`` parsed as JSON; ``None`` if missing or unparsable."""
    data = ctx.client.get_file(guest_path(f"{PROFILE}/{name}", ctx.home))
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
