"""Getters that run a command on the desktop."""

from __future__ import annotations

import logging
from typing import Any

from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators.context import EvalContext

logger = logging.getLogger(__name__)

#: Seconds a getter's command may run (OSWorld's guest uses 120 s for every ``/execute``).
DEFAULT_COMMAND_TIMEOUT_S = 120.0


def _run(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any]:
    command = config["command"]
    result = ctx.client.execute(
        command,
        shell=bool(config.get("shell", False)),
        timeout=float(config.get("timeout", DEFAULT_COMMAND_TIMEOUT_S)),
    )
    if result.get("status", "success") != "success":
        message = result.get("message") or result.get("error") or result
        raise EvaluatorError(f"the desktop could not run evaluator command {command!r}: {message}")
    logger.debug("evaluator command %r -> rc=%s", command, result.get("returncode"))
    return result


def get_vm_command_line(ctx: EvalContext, config: dict[str, Any]) -> str:
    """Run ``config["command"]`` (``shell`` optional) on the desktop and return its stdout.

    The exit code is not checked: commands like ``[ -d x ] && echo yes || echo no`` carry their
    answer in the output.
    """
    return _run(ctx, config).get("output") or ""


def get_vm_command_error(ctx: EvalContext, config: dict[str, Any]) -> str:
    """Run ``config["command"]`` on the desktop and return its stderr."""
    return _run(ctx, config).get("error") or ""
