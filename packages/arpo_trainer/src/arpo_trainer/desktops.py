"""A pool of desktops stepped in lock-step: G rollouts of a task run as parallel episodes.

The pool is a Gymnasium vector env over ``OSWorld-v0`` sub-envs: osworld-gym's desktop recipe
(:func:`osworld_gym.vector.make_vec`: an ``AsyncVectorEnv`` with one subprocess per desktop,
autoreset off, per-step deadlines, hung workers replaced) or, for the fake backend, a plain
``SyncVectorEnv``. Each sub-env is wrapped in an :class:`EpisodeSlot`:

* every slot gets its own task for the next reset (``set_attr("next_task", [...])``);
* a slot whose episode has ended keeps its final state: stepping it again does nothing, so the
  lock-step loop can step the whole vector while some episodes are still running. The episode
  end travels in ``info["episode_end"]``; the vector env itself never sees ``terminated``, so it
  neither autoresets nor refuses to step the slot;
* an infrastructure failure during reset or step never kills the vector env: the slot reports
  ``info["infra_error"]`` and ends its episode, and the trainer leaves that trajectory out.

>>> import osworld_gym
>>> pool = DesktopPool(2, {"provider": "fake", "settle": None, "screen_size": (64, 48)})
>>> frames, infos = pool.reset([osworld_gym.testing.FAKE_TASK] * 2)
>>> frames[0].shape, infos[1]["task_id"]
((48, 64, 3), 'fake-always-fail')
>>> results = pool.step(["FAIL", None])
>>> results[0].reward, results[0].done, results[1]
(1.0, True, None)
>>> pool.close()
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """What one desktop answered to one action."""

    screenshot: np.ndarray
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class EpisodeSlot(gym.Wrapper):
    """Runs one episode per reset on a per-slot task and holds still once the episode is over."""

    #: The task of the next :meth:`reset` (an id, a task dict or an ``osworld_gym`` Task).
    next_task: Any = None

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._over = True
        self._last_obs: dict[str, Any] | None = None
        self._task_id: str | None = None

    def _blank(self) -> dict[str, Any]:
        shape = self.observation_space["screenshot"].shape
        return {"screenshot": np.zeros(shape, np.uint8), "instruction": ""}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        if "task" not in options and self.next_task is not None:
            options["task"] = self.next_task
        task = options.get("task")
        self._task_id = getattr(task, "id", None) or (
            task.get("id") if isinstance(task, dict) else task
        )
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except Exception as e:  # noqa: BLE001 - any failure here is the desktop's, never the agent's
            log.warning("reset of task %s failed: %s", self._task_id, e)
            self._over, self._last_obs = True, self._blank()
            return self._last_obs, self._info_for_failure(e, step=0)
        self._over, self._last_obs = False, obs
        return obs, {**info, "episode_end": False}

    def step(self, action: Any):
        if self._over:
            assert self._last_obs is not None, "reset() the slot first"
            return self._last_obs, 0.0, False, False, {"idle": True, "episode_end": True}
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as e:  # noqa: BLE001 - the env reports agent errors in info, not by raising
            log.warning("step of task %s failed: %s", self._task_id, e)
            self._over = True
            return self._last_obs, 0.0, False, False, self._info_for_failure(e, step=-1)
        self._last_obs = obs
        self._over = bool(terminated or truncated)
        info = {
            **info,
            "episode_end": self._over,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "idle": False,
        }
        return obs, reward, False, False, info

    def _info_for_failure(self, e: BaseException, step: int) -> dict[str, Any]:
        return {
            "task_id": self._task_id,
            "step": step,
            "infra_error": f"{type(e).__name__}: {e}",
            "action_error": None,
            "special": None,
            "episode_end": True,
            "idle": False,
            "terminated": False,
            "truncated": True,
        }


def make_slot(env_kwargs: dict[str, Any]) -> EpisodeSlot:
    """``EpisodeSlot(gym.make("OSWorld-v0", **env_kwargs))`` (module level, so subprocesses can pickle it)."""
    import osworld_gym  # noqa: F401 - registers OSWorld-v0 in a fresh subprocess

    return EpisodeSlot(gym.make("OSWorld-v0", disable_env_checker=True, **env_kwargs))


class DesktopPool:
    """``n`` desktops as a vector env, driven one lock-step turn at a time.

    Args:
        n: number of desktops (the generation batch of one process).
        env_kwargs: keyword arguments of ``gym.make("OSWorld-v0", ...)`` (``tasks`` defaults to
            ``None``: every reset names its task).
        backend: ``"async"`` (a subprocess per desktop, stepped in parallel), ``"sync"`` (in
            turn, in this process) or ``"auto"`` (sync for the fake provider, else async).
        step_timeout: seconds one desktop may take for a step or a reset (async only); a desktop
            that overruns ends its episode with an infra error and its worker is replaced.
    """

    def __init__(
        self,
        n: int,
        env_kwargs: dict[str, Any],
        backend: str = "auto",
        step_timeout: float | None = None,
    ):
        if n < 1:
            raise ValueError(f"a desktop pool needs at least one desktop, got {n}")
        kwargs = {"tasks": None, **env_kwargs}
        if backend == "auto":
            backend = "sync" if kwargs.get("provider") == "fake" or n == 1 else "async"
        self.n, self.backend = n, backend
        if backend == "async":
            from osworld_gym.vector import make_vec

            # spawn: the trainer process holds torch threads, which must not be forked.
            self.vec: gym.vector.VectorEnv = make_vec(
                n,
                step_timeout=step_timeout,
                reset_timeout=step_timeout,
                context="spawn",
                daemon=False,
                wrappers=[EpisodeSlot],
                **kwargs,
            )
        elif backend == "sync":
            fns = [functools.partial(make_slot, kwargs) for _ in range(n)]
            self.vec = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
        else:
            raise ValueError(f"backend must be 'auto', 'sync' or 'async', got {backend!r}")
        log.info("desktop pool: %d %s desktops (%s)", n, kwargs.get("provider", "local"), backend)

    def reset(self, tasks: list[Any]) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
        """Start one episode per desktop; ``tasks[i]`` runs on desktop ``i``."""
        if len(tasks) != self.n:
            raise ValueError(f"{len(tasks)} tasks for {self.n} desktops")
        self.vec.set_attr("next_task", list(tasks))
        obs, infos = self.vec.reset()
        return list(obs["screenshot"]), unbatch_info(infos, self.n)

    def step(self, actions: list[str | None]) -> list[StepResult | None]:
        """One lock-step turn: desktop ``i`` gets ``actions[i]``; ``None`` leaves it idle (result ``None``)."""
        if len(actions) != self.n:
            raise ValueError(f"{len(actions)} actions for {self.n} desktops")
        obs, rewards, _, _, infos = self.vec.step(tuple("" if a is None else a for a in actions))
        out: list[StepResult | None] = []
        for i, info in enumerate(unbatch_info(infos, self.n)):
            if actions[i] is None or info.get("idle"):
                out.append(None)
                continue
            out.append(
                StepResult(
                    screenshot=obs["screenshot"][i],
                    reward=float(rewards[i]),
                    done=bool(info.get("episode_end")),
                    terminated=bool(info.get("terminated")),
                    truncated=bool(info.get("truncated")),
                    info=info,
                )
            )
        return out

    def close(self) -> None:
        """Stop every desktop."""
        self.vec.close()

    def __enter__(self) -> DesktopPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unbatch_info(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Split a vector env's info dict (``key`` + ``_key`` mask arrays, nested) into one dict per env.

    >>> unbatch_info({"a": np.array([1, 2]), "_a": np.array([True, False])}, 2)
    [{'a': 1}, {}]
    """
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}", np.ones(n, bool))
        if isinstance(value, dict):
            nested = unbatch_info(value, n)
            for i in range(n):
                if mask[i]:
                    out[i][key] = nested[i]
            continue
        for i in range(n):
            if mask[i]:
                v = value[i]
                out[i][key] = v.item() if isinstance(v, np.generic) else v
    return out
