"""Getters that describe the desktop."""

from __future__ import annotations

from typing import Any

from osworld_gym.errors import GuestError
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.tasks.paths import guest_path


def get_list_directory(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The directory tree under ``config["path"]``.

    Shaped like OSWorld's ``/list_directory`` answer:
    ``{"type": "directory", "name": ..., "children": [...]}``; ``None`` if the guest reports
    nothing (e.g. the directory does not exist).
    """
    try:
        tree = ctx.client.list_directory(guest_path(config["path"], ctx.home))
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(tree, dict) and set(tree) == {"directory_tree"}:
        tree = tree["directory_tree"]
    return tree or None


def get_accessibility_tree(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The desktop's accessibility tree as OSWorld's XML (``/accessibility``); ``None`` where the
    desktop cannot produce one."""
    return ctx.client.accessibility()


def get_vm_terminal_output(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The text of the desktop's open terminal, read through the accessibility tree (OSWorld's
    ``/terminal``); ``None`` when no terminal is open (the metric then scores 0)."""
    return ctx.client.terminal()
