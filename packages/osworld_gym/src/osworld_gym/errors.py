"""Exception types. Each says what went wrong and what to do next.

The split that matters for training: :class:`ActionError` is the *agent's* fault (bad output,
scored and penalised), every :class:`InfraError` is the *infrastructure's* fault (the desktop died,
an evaluator crashed) and must never be reported as a score of 0.
"""

from __future__ import annotations


class OSWorldGymError(Exception):
    """Base class for every error raised by osworld-gym."""


class ActionError(OSWorldGymError, ValueError):
    """The agent's action text could not be parsed or is not allowed.

    Raised by action sets; the env catches it, executes nothing, and reports the message in
    ``info["action_error"]``.
    """


class InfraError(OSWorldGymError, RuntimeError):
    """The desktop, the guest server or an evaluator failed. Not the agent's fault."""


class GuestError(InfraError):
    """The guest server answered with an error or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, endpoint: str | None = None):
        super().__init__(message)
        self.status = status
        self.endpoint = endpoint


class AppCrashed(InfraError):
    """A task app died mid-episode of a crash signal (segfault, abort, SIGKILL from the OOM
    killer or from outside the desktop). The desktop itself is fine; the next reset recovers.

    No longer raised by :class:`~osworld_gym.env.OSWorldEnv`: the agent can signal its own
    apps, so their deaths are scored and listed in ``info["app_exits"]`` instead."""


class SetupError(InfraError):
    """A task's setup (``config``) or ``postconfig`` step failed."""


class EvaluatorError(InfraError):
    """A getter or metric raised: the episode has no trustworthy score."""


class TaskError(OSWorldGymError, ValueError):
    """A task definition is malformed or names something unknown."""


class TaskValidationError(TaskError):
    """A task asks for something unsafe: an id or destination escaping its directory, a URL to
    a private address or a ``file://`` outside the allowed roots, a non-finite number, ...
    Raised before any episode step runs."""


class UnusableResultFile(OSWorldGymError):
    """What the agent left at a result path is not a readable regular file within the limits
    (a directory, a fifo, ``chmod 000``, a symlink out of the desktop, a file over the cap).

    Not an :class:`InfraError`: the desktop is the agent's, so the evaluator scores this 0 and
    says why."""


class MissingDependencyError(OSWorldGymError, RuntimeError):
    """A system program or Python package the chosen backend needs is not installed."""
