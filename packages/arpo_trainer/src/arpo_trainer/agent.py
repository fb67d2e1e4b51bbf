"""Agents: the small protocol evaluation code drives, one episode at a time.

An :class:`Agent` is reset with a task and then asked for one action text per observation. The
policy agent keeps its own episode history and encodes it exactly as the trainer does (same
:class:`~arpo_trainer.chat.TurnEncoder`), so an evaluated checkpoint sees the contexts it was
trained on. :func:`run_episode` plays one episode on any ``OSWorld-v0`` env.

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

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
from osworld_gym.actions import ActionSet

from arpo_trainer.chat import TurnEncoder
from arpo_trainer.demos import oracle_script
from arpo_trainer.generation import Policy
from arpo_trainer.rollout import done_text

log = logging.getLogger(__name__)


@runtime_checkable
class Agent(Protocol):
    """What an evaluation loop needs from an agent."""

    def reset(self, task: Any) -> None:
        """Forget the previous episode; ``task`` (an ``osworld_gym`` Task) is about to start."""

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        """The next action text for this observation (``obs["screenshot"]``, ``obs["instruction"]``)."""


class PolicyAgent:
    """A :class:`~arpo_trainer.generation.Policy` (e.g. a model with ``TransformersPolicy``) as an agent."""

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


class OracleAgent:
    """Plays each task's built-in oracle, rendered in ``action_set``'s syntax (a sanity baseline)."""

    def __init__(self, action_set: ActionSet):
        self.action_set = action_set
        self._script: list[str] = []
        self._turn = 0

    def reset(self, task: Any) -> None:
        self._script, self._turn = oracle_script(task, self.action_set), 0

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        text = (
            self._script[self._turn]
            if self._turn < len(self._script)
            else done_text(self.action_set)
        )
        self._turn += 1
        return text


@dataclass
class EpisodeResult:
    """How one episode went."""

    task_id: str
    score: float
    steps: int
    actions: list[str] = field(default_factory=list)
    infra_error: str | None = None


def run_episode(env: gym.Env, agent: Agent, task: Any) -> EpisodeResult:
    """Play one episode of ``task`` with ``agent`` until the env terminates or truncates it."""
    agent.reset(task)
    obs, info = env.reset(options={"task": task})
    actions: list[str] = []
    while True:
        text = agent.act(obs, info)
        actions.append(text)
        obs, reward, terminated, truncated, info = env.step(text)
        if info.get("infra_error") or terminated or truncated:
            return EpisodeResult(
                task_id=str(info.get("task_id")),
                score=float(reward),
                steps=len(actions),
                actions=actions,
                infra_error=info.get("infra_error"),
            )
