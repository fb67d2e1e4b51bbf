"""The trainer's model agent: :class:`PolicyAgent`, behind osworld-gym's :class:`Agent` protocol.

The Agent protocol, the episode loop (:func:`~osworld_gym.episodes.run_episode`) and the
model-free agents (:class:`~osworld_gym.episodes.OracleAgent`, ...) live in
:mod:`osworld_gym.episodes`; they are re-exported here. The policy agent keeps its own episode
history and encodes it exactly as the trainer does (same :class:`~arpo_trainer.chat.TurnEncoder`),
so an evaluated checkpoint sees the contexts it was trained on.

>>> import gymnasium as gym, osworld_gym
>>> from osworld_gym.actions import make_action_set
>>> from osworld_gym.support import builtin_task
>>> env = gym.make("OSWorld-v0", provider="fake", tasks=None, action_set="uitars", settle=None,
...                screen_size=(640, 360))
>>> agent = OracleAgent(make_action_set("uitars", screen_size=(640, 360)))
>>> result = run_episode(env, agent, builtin_task("os-infeasible-001"))
>>> result.score, result.actions
(1.0, ['Action: call_user()'])
>>> env.close()
"""

from __future__ import annotations

from typing import Any

from osworld_gym.episodes import Agent, EpisodeResult, OracleAgent, run_episode

from arpo_trainer.chat import TurnEncoder
from arpo_trainer.generation import Policy

__all__ = ["Agent", "EpisodeResult", "OracleAgent", "PolicyAgent", "run_episode"]


class PolicyAgent:
    """A :class:`~arpo_trainer.generation.Policy` (e.g. a model with ``TransformersPolicy``) as
    an agent."""

    def __init__(self, policy: Policy, encoder: TurnEncoder):
        self.policy = policy
        self.encoder = encoder
        self._instruction = ""
        self._shots: list[bytes] = []
        self._actions: list[list[int]] = []

    def reset(self, task: Any) -> None:
        self._instruction = getattr(task, "instruction", "")
        self._shots, self._actions = [], []

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        self._instruction = self._instruction or str(obs.get("instruction", ""))
        self._shots.append(self.encoder.screenshot_png(obs["screenshot"]))
        context = self.encoder.encode(self._instruction, self._shots, self._actions)
        sample = self.policy.sample([context], [0])[0]
        self._actions.append(sample.ids)
        return sample.text
