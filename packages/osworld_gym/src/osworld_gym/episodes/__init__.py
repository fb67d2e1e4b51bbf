"""Playing episodes: the one home of the agent loop, the simple agents and the desktop pool.

- :mod:`.agents`: the :class:`Agent` protocol (``reset(task)``, ``act(obs, info) -> str``) and
  the agents that need no model: :class:`NoopAgent`, :class:`FailAgent`,
  :class:`ReplayOracleAgent` (a task's pyautogui oracle verbatim), :class:`OracleAgent` (the
  oracle rendered in any action set), :class:`ScriptAgent` (a fixed list of action texts).
- :mod:`.loop`: :func:`run_episode`, reset then one agent answer per step until the env
  terminates or truncates, and its :class:`EpisodeResult`, which tells a score from an
  infrastructure failure from an agent failure.
- :mod:`.pool`: :func:`run_pool`, independent jobs over ``N`` desktops (one thread and one env per
  desktop), and :func:`make_osworld_env`, the factory the pool's users build envs with.

Used by ``osworld-gym tasks check``, ``arpo-eval`` and the trainer (which adds its model agent).

>>> import gymnasium as gym, osworld_gym
>>> from osworld_gym.actions import make_action_set
>>> from osworld_gym.support import builtin_task
>>> env = make_osworld_env(provider="fake", tasks=None, action_set="uitars", settle=None,
...                        screen_size=(640, 360))
>>> agent = OracleAgent(make_action_set("uitars", screen_size=(640, 360)))
>>> result = run_episode(env, agent, builtin_task("os-infeasible-001"))
>>> result.score, result.actions
(1.0, ['Action: call_user()'])
>>> env.close()
"""

from __future__ import annotations

from osworld_gym.episodes.agents import (
    Agent,
    FailAgent,
    NoopAgent,
    OracleAgent,
    ReplayOracleAgent,
    ScriptAgent,
    done_text,
    oracle_script,
)
from osworld_gym.episodes.loop import EpisodeResult, run_episode
from osworld_gym.episodes.pool import JobQueue, make_osworld_env, run_pool

__all__ = [
    "Agent",
    "EpisodeResult",
    "FailAgent",
    "JobQueue",
    "NoopAgent",
    "OracleAgent",
    "ReplayOracleAgent",
    "ScriptAgent",
    "done_text",
    "make_osworld_env",
    "oracle_script",
    "run_episode",
    "run_pool",
]
