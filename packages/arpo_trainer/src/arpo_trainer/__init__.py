"""ARPO for GUI agents: multi-turn GRPO with success replay, as a thin subclass of TRL's
GRPOTrainer.

>>> from arpo_trainer import ARPOConfig, ARPOTrainer, ReplayBuffer
>>> ARPOConfig.__mro__[1].__name__
'GRPOConfig'

Modules, one concept each: :mod:`.config` (ARPOConfig), :mod:`.chat` (token layout of an episode),
:mod:`.generation` (sampling a turn), :mod:`.desktops` (lock-step desktop pool),
:mod:`.rollout` (trajectories and the collector), :mod:`.replay` (success replay),
:mod:`.rewards` (rewards and advantages), :mod:`.batch` (tensors for TRL's loss),
:mod:`.metrics` (what is logged), :mod:`.trainer` (ARPOTrainer), :mod:`.demos` (oracle
demonstrations), :mod:`.agent` (Agent protocol), :mod:`.selection` (task selection),
:mod:`.tasks`, :mod:`.envspec`, :mod:`.modeling`, :mod:`.plotting`, :mod:`.cli` (``arpo-train``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Exports resolve lazily, so that desktop subprocesses (which import arpo_trainer.desktops) and
# the command line stay light: torch, transformers and TRL load only when a trainer is needed.
_EXPORTS = {
    "ARPOConfig": "arpo_trainer.config",
    "ARPOTrainer": "arpo_trainer.trainer",
    "Agent": "arpo_trainer.agent",
    "Collector": "arpo_trainer.rollout",
    "OracleAgent": "arpo_trainer.agent",
    "PolicyAgent": "arpo_trainer.agent",
    "ReplayBuffer": "arpo_trainer.replay",
    "Trajectory": "arpo_trainer.rollout",
    "Turn": "arpo_trainer.rollout",
    "run_episode": "arpo_trainer.agent",
}

# spelled out (not built from _EXPORTS) so that checkers read it; a test keeps them equal
__all__ = [
    "ARPOConfig",
    "ARPOTrainer",
    "Agent",
    "Collector",
    "OracleAgent",
    "PolicyAgent",
    "ReplayBuffer",
    "Trajectory",
    "Turn",
    "run_episode",
    "__version__",
]

if TYPE_CHECKING:  # the lazily exported names, for type checkers and editors
    from arpo_trainer.agent import Agent, OracleAgent, PolicyAgent, run_episode
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.replay import ReplayBuffer
    from arpo_trainer.rollout import Collector, Trajectory, Turn
    from arpo_trainer.trainer import ARPOTrainer


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'arpo_trainer' has no attribute {name!r}")
