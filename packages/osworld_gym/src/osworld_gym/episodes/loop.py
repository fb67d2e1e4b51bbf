"""The episode loop: :func:`run_episode`, as OSWorld's ``run_single_example`` plays one.

Reset the agent and the env, then ask the agent for one action text per observation and step
the env with it until the env terminates (DONE/FAIL) or truncates (the step limit). How the
episode ended is classified, never guessed:

- **scored**: the env ended the episode; ``score`` is its final reward.
- **infrastructure failure** (``infra_error``): the desktop failed to reset
  (:class:`~osworld_gym.errors.InfraError`) or reported ``info["infra_error"]`` (desktop died,
  evaluator raised). Never a score: ``score`` is ``None``.
- **agent failure** (``agent_error``): the agent raised in ``reset`` or ``act``, or (with
  ``stop_on_action_error``) wrote an action the env rejected. Never a score either, and never
  reported as an infrastructure failure.
- **task failure** (``task_error``): the env refused to start the task for another reason (a
  malformed task, unknown options): bad input, not the desktop's fault nor the agent's.

An exception from ``env.step`` is not caught: the env itself is broken, and the caller (e.g. the
pool, which replaces the desktop) decides what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from osworld_gym.episodes.agents import Agent
from osworld_gym.errors import InfraError
from osworld_gym.outcome import counts

log = logging.getLogger(__name__)

#: ``prepare(turn, text) -> (action, step_kwargs)``: what to step the env with for the agent's text.
Prepare = Callable[[int, str], tuple[Any, dict[str, Any]]]


@dataclass
class EpisodeResult:
    """How one episode went.

    Attributes:
        task_id: the task's id.
        score: the final reward when the env ended the episode, else ``None``.
        steps: env steps taken.
        actions: the agent's action texts, one per step.
        infra_error / agent_error / task_error: why the episode has no score (at most one is set).
        exception: the exception behind an error, when one was raised.
    """

    task_id: str
    score: float | None = None
    steps: int = 0
    actions: list[str] = field(default_factory=list)
    infra_error: str | None = None
    agent_error: str | None = None
    task_error: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def scored(self) -> bool:
        """Whether the episode counts (:func:`osworld_gym.outcome.counts`)."""
        return counts(self.score, self.infra_error)

    @property
    def error(self) -> str | None:
        """Why the episode has no score, whoever's fault it was (``None`` when scored)."""
        return self.infra_error or self.agent_error or self.task_error


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def run_episode(
    env: Any,
    agent: Agent,
    task: Any,
    *,
    agent_task: Any = None,
    reset_options: dict[str, Any] | None = None,
    prepare: Prepare | None = None,
    stop_on_action_error: bool = False,
) -> EpisodeResult:
    """Play one episode of ``task`` with ``agent`` until the env terminates or truncates it.

    Args:
        env: an ``OSWorld-v0`` env (or a wrapper of one).
        agent: answers one action text per observation.
        task: the task to play (an ``osworld_gym`` Task).
        agent_task: what ``agent.reset`` is given (default: ``task``), e.g. a task instance.
        reset_options: ``env.reset`` options (default: ``{"task": task}``).
        prepare: turns the agent's text into the env's action and extra ``step`` arguments
            (default: the text itself, no extra arguments).
        stop_on_action_error: end the episode as an agent failure at the first action the env
            rejects (default: the rejected action is a wasted turn, as in OSWorld).

    Returns:
        The :class:`EpisodeResult`; agent, desktop and task failures come back classified in it.
    """
    res = EpisodeResult(task_id=str(getattr(task, "id", task)))
    try:
        agent.reset(task if agent_task is None else agent_task)
    except Exception as e:  # noqa: BLE001 - an agent that cannot start this task
        res.agent_error, res.exception = f"agent reset failed: {_describe(e)}", e
        return res
    try:
        obs, info = env.reset(options={"task": task} if reset_options is None else reset_options)
    except InfraError as e:
        res.infra_error, res.exception = f"reset failed: {_describe(e)}", e
        return res
    except Exception as e:  # noqa: BLE001 - the env refused the task: reported, never scored
        res.task_error, res.exception = f"reset failed: {_describe(e)}", e
        return res
    while True:
        turn = res.steps + 1
        try:
            text = agent.act(obs, info)
        except Exception as e:  # noqa: BLE001 - agent backends fail in many ways; never a score
            res.agent_error = f"agent failed at turn {turn}: {_describe(e)}"
            res.exception = e
            log.warning("task %s: %s", res.task_id, res.agent_error)
            return res
        action, kwargs = prepare(turn, text) if prepare is not None else (text, {})
        obs, reward, terminated, truncated, info = env.step(action, **kwargs)
        res.steps = turn
        res.actions.append(text)
        if stop_on_action_error and info.get("action_error"):
            res.agent_error = f"action {turn} rejected: {text!r}: {info['action_error']}"
            return res
        if info.get("infra_error"):
            res.infra_error = str(info["infra_error"])
            return res
        if terminated or truncated:
            res.score = float(reward)
            return res
