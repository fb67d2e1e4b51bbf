"""What the red-team tests share: acting as the desktop's user (the player)."""

from __future__ import annotations


def player(env, command: str, timeout: float = 60) -> dict:
    """Run a shell command as the desktop user (the player), as a terminal would."""
    return env.unwrapped.provider.start().execute(command, shell=True, setup=True,
                                                  timeout=timeout)
