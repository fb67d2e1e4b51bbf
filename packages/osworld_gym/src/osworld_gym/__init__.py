"""osworld-gym: OSWorld desktop tasks as a Gymnasium environment over real desktops.

>>> import gymnasium as gym, osworld_gym
>>> "OSWorld-v0" in gym.registry
True
"""

from __future__ import annotations

from gymnasium.envs.registration import register

from osworld_gym import testing
from osworld_gym.errors import (
    ActionError,
    EvaluatorError,
    GuestError,
    InfraError,
    MissingDependencyError,
    OSWorldGymError,
    SetupError,
    TaskError,
    TaskValidationError,
    UnusableResultFile,
)

__version__ = "0.1.0"

__all__ = [
    "ActionError", "EvaluatorError", "GuestError", "InfraError", "MissingDependencyError",
    "OSWorldGymError", "SetupError", "TaskError", "TaskValidationError", "UnusableResultFile",
    "testing", "__version__",
]

register(
    id="OSWorld-v0",
    # gymnasium's own checker breaks on the first step after a failed first reset; this entry
    # point wraps the env in a checker that does not (osworld_gym.checker)
    entry_point="osworld_gym.checker:make_env",
    disable_env_checker=True,
    nondeterministic=True,
)
