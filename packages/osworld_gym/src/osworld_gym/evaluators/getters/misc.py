"""Getters that need no desktop."""

from __future__ import annotations

from typing import Any


def get_rule(ctx: Any, config: dict[str, Any]) -> Any:
    """Return ``config["rules"]``: the expected values written in the task itself.

    >>> get_rule(None, {"type": "rule", "rules": {"expected": "yes\\n"}})
    {'expected': 'yes\\n'}
    """
    return config["rules"]
