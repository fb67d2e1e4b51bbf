"""A GRPO group as a PettingZoo ``ParallelEnv``: G desktops, one task instance, G agents.

GRPO-style training samples G rollouts of the *same* task and compares their rewards. Here each
agent owns one desktop; :meth:`OSWorldGroupEnv.reset` puts every desktop on the same task id and
the same variation, and :meth:`OSWorldGroupEnv.step` steps the live agents at once, each in its
own thread (an agent's env spends its time waiting on its desktop, so threads suffice, and the
thread that started a desktop keeps driving it). Agents finish independently: an agent whose
episode terminated (DONE/FAIL) or was truncated (step budget, or an infrastructure error) leaves
``agents`` and gets no more actions; its reward is the task score only when its
``info["infra_error"]`` is ``None``.

>>> from osworld_gym.parallel import OSWorldGroupEnv
>>> from osworld_gym.support import builtin_task
>>> tasks = [builtin_task("os-infeasible-001"), builtin_task("os-mkdir-001")]
>>> group = OSWorldGroupEnv(group_size=3, provider="fake", tasks=tasks, max_steps=2)
>>> obs, infos = group.reset(options={"task": "os-infeasible-001"})
>>> group.agents
['desktop_0', 'desktop_1', 'desktop_2']
>>> {info["task_id"] for info in infos.values()}          # one task for the whole group
{'os-infeasible-001'}
>>> obs, rewards, terms, truncs, infos = group.step(
...     {"desktop_0": "FAIL", "desktop_1": "DONE", "desktop_2": "pyautogui.click(5, 5)"})
>>> rewards
{'desktop_0': 1.0, 'desktop_1': 0.0, 'desktop_2': 0.0}
>>> group.agents                                          # the two that answered are done
['desktop_2']
>>> obs, rewards, terms, truncs, infos = group.step({"desktop_2": "FAIL"})
>>> rewards, group.agents
({'desktop_2': 1.0}, [])
>>> group.close()

Needs the ``pettingzoo`` extra (``pip install osworld-gym[pettingzoo]``).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np

from osworld_gym.env import osworld_env
from osworld_gym.errors import MissingDependencyError
from osworld_gym.vector import VectorSafe

try:
    from pettingzoo import ParallelEnv
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "osworld_gym.parallel needs PettingZoo: pip install 'osworld-gym[pettingzoo]'"
    ) from e

log = logging.getLogger(__name__)

__all__ = ["OSWorldGroupEnv"]


class OSWorldGroupEnv(ParallelEnv):
    """G desktops on one task instance, one agent each (see the module docstring).

    Args:
        group_size: G, the number of agents (= desktops).
        agent_prefix: agents are named ``f"{agent_prefix}{i}"``.
        **env_kwargs: arguments of :class:`~osworld_gym.env.OSWorldEnv` (``provider``,
            ``tasks``, ``max_steps``, ...), the same for every desktop.

    ``reset(seed, options)`` picks the task as a single env would (``options["task"]``, else
    ``tasks.for_seed(seed)``, else a random one) and its variation (``options["variation"]``,
    else ``seed``, else a random one) *once* and gives both to every desktop. A desktop that
    fails to reset does not fail the group: its agent gets a blank observation and
    ``info["infra_error"]``, and its first step truncates its episode.
    """

    metadata = {"name": "osworld_group_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, group_size: int = 8, *, agent_prefix: str = "desktop_", **env_kwargs: Any):
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        import osworld_gym  # noqa: F401 - registers OSWorld-v0

        self.possible_agents: list[str] = [f"{agent_prefix}{i}" for i in range(group_size)]
        self.agents: list[str] = []
        # desktops start lazily at the first reset, each in its agent's own thread
        self._envs: dict[str, gym.Env] = {
            a: VectorSafe(gym.make("OSWorld-v0", disable_env_checker=True, **env_kwargs))
            for a in self.possible_agents
        }
        self._threads = {
            a: ThreadPoolExecutor(1, thread_name_prefix=f"osworld-{a}")
            for a in self.possible_agents
        }
        first = self._envs[self.possible_agents[0]]
        self._observation_space = first.observation_space
        self._action_space = first.action_space
        self._rng = np.random.default_rng()
        self._closed = False

    # -- PettingZoo API ----------------------------------------------------------------------------

    def observation_space(self, agent: str) -> gym.spaces.Space:
        """The agent's observation space (the same object at every call, as PettingZoo requires)."""
        self._check_agent(agent)
        return self._observation_space

    def action_space(self, agent: str) -> gym.spaces.Space:
        """The agent's action space (the same object at every call)."""
        self._check_agent(agent)
        return self._action_space

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = dict(options or {})
        task, variation = self._choose(seed, options)
        per_env = dict(options, task=task, variation=variation)
        futures = {
            a: self._threads[a].submit(self._envs[a].reset, seed=seed, options=per_env)
            for a in self.possible_agents
        }
        results = _gather(futures)
        self.agents = list(self.possible_agents)
        return (
            {a: obs for a, (obs, _) in results.items()},
            {a: info for a, (_, info) in results.items()},
        )

    def step(self, actions: dict[str, Any]):
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(
                f"actions for agents that are not live: {sorted(unknown)}; "
                f"live agents: {self.agents}"
            )
        missing = set(self.agents) - set(actions)
        if missing:
            raise ValueError(
                f"no action for live agents {sorted(missing)}: every live agent acts at every step"
            )
        futures = {a: self._threads[a].submit(self._envs[a].step, actions[a]) for a in self.agents}
        results = _gather(futures)
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for a, (o, r, term, trunc, info) in results.items():
            obs[a], rewards[a], terms[a], truncs[a], infos[a] = (
                o,
                float(r),
                bool(term),
                bool(trunc),
                info,
            )
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        futures = {a: self._threads[a].submit(self._envs[a].close) for a in self.possible_agents}
        try:
            _gather(futures)
        finally:
            for pool in self._threads.values():
                pool.shutdown(wait=True)
            self.agents = []

    # -- extras ------------------------------------------------------------------------------------

    def env(self, agent: str) -> gym.Env:
        """The Gymnasium env behind one agent (``group.env("desktop_0").unwrapped.provider``)."""
        self._check_agent(agent)
        return self._envs[agent]

    @property
    def task(self) -> Any:
        """The group's current task instance (every desktop runs this one)."""
        return osworld_env(self._envs[self.possible_agents[0]]).task

    # -- internals ---------------------------------------------------------------------------------

    def _choose(self, seed: int | None, options: dict[str, Any]) -> tuple[Any, int | None]:
        """The one (task, variation) the group runs, as :meth:`OSWorldEnv.reset` would pick it."""
        choice = options.get("task")
        tasks = osworld_env(self._envs[self.possible_agents[0]]).tasks
        if choice is None:
            if not tasks:
                raise ValueError("this group has no task set; pass options={'task': ...}")
            choice = (
                tasks.for_seed(seed)
                if seed is not None
                else tasks[int(self._rng.integers(len(tasks)))]
            )
        variation = options.get("variation", seed)
        if variation is None and options.get("task") is None:
            variation = int(self._rng.integers(2**31))
        return choice, variation

    def _check_agent(self, agent: str) -> None:
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; agents are {self.possible_agents}")


def _gather(futures: dict[str, Future]) -> dict[str, Any]:
    """Every future's result, in agent order; the first exception is raised after all finished."""
    results, error = {}, None
    for agent, fut in futures.items():
        try:
            results[agent] = fut.result()
        except Exception as e:  # noqa: BLE001 - re-raised below once every agent has finished
            log.error("agent %s failed: %s", agent, e)
            error = error or e
    if error is not None:
        raise error
    return results
