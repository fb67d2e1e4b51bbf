"""osworld-gym: OSWorld desktop tasks as a Gymnasium environment over real desktops.

>>> import gymnasium as gym, osworld_gym
>>> "OSWorld-v0" in gym.registry
True
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

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
    "ActionError",
    "EvaluatorError",
    "GuestError",
    "InfraError",
    "MissingDependencyError",
    "OSWorldGymError",
    "SetupError",
    "TaskError",
    "TaskValidationError",
    "UnusableResultFile",
    "testing",
    "__version__",
]

ENV_ID = "OSWorld-v0"


def _register() -> None:
    from gymnasium.envs.registration import register, registry

    if ENV_ID in registry:
        return
    register(
        id=ENV_ID,
        # gymnasium's own checker breaks on the first step after a failed first reset; this
        # entry point wraps the env in a checker that does not (osworld_gym.checker)
        entry_point="osworld_gym.checker:make_env",
        disable_env_checker=True,
        nondeterministic=True,
    )


class _RegisterAfter(importlib.abc.Loader):
    """Gymnasium's own loader, then our registration (see :class:`_WhenGymnasiumIsImported`)."""

    def __init__(self, loader: Any):
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _register()


class _WhenGymnasiumIsImported:
    """Registers ``OSWorld-v0`` right after gymnasium is first imported.

    ``import osworld_gym`` must stay light: the guest server (``python -m osworld_gym.guest``,
    inside the desktop) runs this file first and has no use for gymnasium. Users who import
    gymnasium (before or after us) still find the env in its registry.
    """

    _lock = threading.Lock()

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> ModuleSpec | None:
        if fullname != "gymnasium":
            return None
        with self._lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("gymnasium")
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisterAfter(spec.loader)
        return spec


if "gymnasium" in sys.modules:
    _register()
else:
    sys.meta_path.insert(0, _WhenGymnasiumIsImported())
