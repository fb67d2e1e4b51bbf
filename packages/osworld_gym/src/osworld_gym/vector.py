"""Many desktops on one machine: the vector-env recipe for slow, flaky, real desktops.

A desktop reset takes from 0.1 s (the local sandbox) to minutes (a VM), an episode ends when
the agent says so, and a desktop can die under a run. Gymnasium's defaults assume the opposite
(cheap resets, autoreset on the next step, one crash ends the batch). :func:`make_vec` builds an
:class:`OSWorldVectorEnv`, Gymnasium's ``AsyncVectorEnv`` set up for desktops:

* **autoreset disabled** (``AutoresetMode.DISABLED``): a finished sub-env waits until *you*
  reset it, with ``options={"reset_mask": mask}``, so an expensive reset never happens behind
  your back and a finished episode's last observation stays put;
* **seed → task**: ``reset(seed=s)`` gives sub-env ``i`` the seed ``s + i``, and an env draws its
  task from its seed (``TaskSet.for_seed``), so the sub-envs start distinct tasks;
* **non-daemonic workers** (``daemon=False``), so a sub-env may start helper processes of its own
  with ``multiprocessing``; every worker is still closed at interpreter exit;
* **infrastructure errors stay per sub-env**: a desktop that fails to reset, a reset or step that
  overruns ``reset_timeout``/``step_timeout``, and a worker process that died are reported in
  that sub-env's ``info["infra_error"]`` and truncate its episode (reward 0.0, **not a score**);
  the others carry on, and a hung or dead worker is replaced by a fresh one;
* **hold-finished mode** (``make_vec(..., hold_finished=True)``, see :class:`VectorSafe`): for
  lock-step groups of multi-turn episodes, a finished sub-env is held (stepping it runs nothing)
  until you reset it or the group; its episode's end is in ``info["episode_end"]``;
* **no shared memory**: Gymnasium 1.4 reads ``Text`` observations out of shared memory only once,
  at construction, so with ``shared_memory=True`` every instruction would come back as the same
  filler string. Screenshots therefore travel through the pipes (~10 ms per step for a 1080p
  frame: 33 ms against 23 ms in-process, measured with screen-settling off).

The recipe, runnable (the ``fake`` provider needs no desktop; drop it for real ones):

>>> from osworld_gym.support import builtin_task, load_tasks
>>> from osworld_gym.vector import make_vec
>>> ids = ("os-mkdir-001", "os-copy-001", "os-infeasible-001")
>>> tasks = load_tasks([builtin_task(t) for t in ids])
>>> envs = make_vec(2, provider="fake", tasks=tasks, max_steps=3)
>>> obs, info = envs.reset(seed=0)                  # sub-env i runs tasks.for_seed(0 + i)
>>> list(info["task_id"]) == [tasks.for_seed(0).id, tasks.for_seed(1).id]
True
>>> obs["screenshot"].shape, len(obs["instruction"])
((2, 1080, 1920, 3), 2)
>>> obs, reward, terminated, truncated, info = envs.step(("DONE", "pyautogui.click(5, 5)"))
>>> terminated.tolist(), truncated.tolist(), info["infra_error"].tolist()
([True, False], [False, False], [None, None])
>>> done = terminated | truncated                   # reset only the finished sub-envs
>>> obs, info = envs.reset(options={"task": "os-infeasible-001", "reset_mask": done})
>>> info["task_id"].tolist(), info["_task_id"].tolist()    # sub-env 1 kept its episode
(['os-infeasible-001', None], [True, False])
>>> envs.close()

The same configuration through Gymnasium's own factory (no per-sub-env error handling, no
step timeout)::

    from gymnasium.vector import AutoresetMode
    envs = gym.make_vec("OSWorld-v0", num_envs=4, vectorization_mode="async",
                        vector_kwargs={"daemon": False, "shared_memory": False,
                                       "autoreset_mode": AutoresetMode.DISABLED},
                        wrappers=[VectorSafe], tasks="builtin")

A deadline for a single call: ``envs.step_async(actions); envs.step_wait(timeout=120)``.
"""

from __future__ import annotations

import atexit
import copy
import functools
import logging
import multiprocessing
import time
import weakref
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from multiprocessing.connection import Connection
from multiprocessing.context import DefaultContext
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState, _async_worker
from gymnasium.vector.utils import CloudpickleWrapper, concatenate, iterate

from osworld_gym.errors import InfraError

log = logging.getLogger(__name__)

__all__ = [
    "OSWorldVectorEnv",
    "SubEnvFailures",
    "VectorSafe",
    "blank_observation",
    "error_info",
    "make_safe_env",
    "make_vec",
]


def blank_observation(space: gym.Space[Any]) -> dict[str, Any]:
    """The stand-in observation of a sub-env whose desktop failed: black screen, empty text."""
    if not isinstance(space, gym.spaces.Dict):
        raise TypeError(f"an OSWorld observation space is a Dict space, got {space!r}")
    obs: dict[str, Any] = {}
    for key, sub in space.spaces.items():
        if isinstance(sub, gym.spaces.Box):
            obs[key] = np.zeros(sub.shape, sub.dtype)
        else:
            obs[key] = ""
    return obs


def error_info(
    message: str, *, task_id: str | None = None, domain: str | None = None, step: int = 0
) -> dict[str, Any]:
    """An ``info`` with every key an env step reports, for a sub-env that had no real step."""
    return {
        "task_id": task_id,
        "domain": domain,
        "step": step,
        "action_error": None,
        "infra_error": message,
        "special": None,
        "variation": -1,
        "timings": {},
    }


class SubEnvFailures:
    """The failure bookkeeping of sub-envs: one behaviour and one wording for every vector env
    (:class:`OSWorldVectorEnv`'s worker processes, :class:`~osworld_gym.ray_pool.RayVectorEnv`'s
    actors) and for :class:`VectorSafe`'s failed resets inside a sub-env. Every failure ends the
    sub-env's episode as **truncated, reward 0.0, with** ``info["infra_error"]`` (never a score):

    * a **reset that failed** (:meth:`reset_failed`: it raised an ``InfraError``, overran its
      deadline, or its worker died) answers a blank observation and ``info["infra_error"]``; the
      sub-env is then *broken*: its next step is not run, and :meth:`take` answers for it with
      a blank observation and ``step`` 1. A successful reset (:meth:`clear`) forgets it;
    * a **step that failed** (:meth:`step_failed`: overran its deadline, or its worker died
      during it or since the last call) keeps the last observation; a worker found dead before
      the step ran (:meth:`broke`) is reported the same way by :meth:`take`.

    The vector env replaces a dead or hung worker itself; the messages say so
    (:meth:`timed_out`, :meth:`died`), in the same words whatever the worker is (the cause only
    one kind of worker knows goes to the log).

    >>> space = gym.spaces.Dict({"screenshot": gym.spaces.Box(0, 255, (2, 2, 3), np.uint8)})
    >>> failures = SubEnvFailures(space)
    >>> obs, info = failures.reset_failed(1, SubEnvFailures.timed_out("reset", 30))
    >>> info["infra_error"]
    "reset timed out after 30 s; the sub-env's worker was replaced"
    >>> failures.take(0) is None, sorted(failures.broken)
    (True, [1])
    >>> obs, reward, terminated, truncated, info = failures.take(1)
    >>> reward, terminated, truncated, info["step"], failures.take(1)
    (0.0, False, True, 1, None)
    """

    def __init__(self, observation_space: gym.Space[Any]):
        self.observation_space = observation_space
        #: sub-env -> (the info its next step reports, whether that step keeps the last
        #: observation): its reset failed, or its worker died since the last call
        self.broken: dict[int, tuple[dict[str, Any], bool]] = {}

    @staticmethod
    def timed_out(what: str, timeout: float | None) -> str:
        """Why a ``what`` (``"step"``, ``"reset"``) past its deadline ended the episode."""
        after = "" if timeout is None else f" after {timeout:g} s"
        return f"{what} timed out{after}; the sub-env's worker was replaced"

    @staticmethod
    def died() -> str:
        """Why a worker that died (found at whichever call) ended the episode."""
        return "the sub-env's worker died (killed, or crashed); it was replaced"

    def blank(self) -> dict[str, Any]:
        return blank_observation(self.observation_space)

    def reset_failed(
        self, i: int, message: str, **fields: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Sub-env ``i``'s reset failed: what the reset answers (``fields``: ``task_id``,
        ``domain`` of the info), and its next step ends the episode."""
        log.warning("sub-env %d: %s", i, message)
        info = error_info(message, **fields)
        self.broken[i] = (dict(info, step=1), False)
        return self.blank(), info

    def broke(self, i: int, message: str) -> None:
        """Sub-env ``i`` lost its episode between calls (its worker died): its next step ends
        it, as a step that failed."""
        log.warning("sub-env %d: %s", i, message)
        self.broken[i] = (error_info(message), True)

    def clear(self, i: int) -> None:
        """Sub-env ``i`` was reset: its new episode runs."""
        self.broken.pop(i, None)

    def take(
        self, i: int, last_obs: Any = None
    ) -> tuple[Any, float, bool, bool, dict[str, Any]] | None:
        """The transition a broken sub-env ``i`` reports instead of running its step (then it is
        no longer broken), or ``None`` when it is not broken."""
        if i not in self.broken:
            return None
        info, keeps_obs = self.broken.pop(i)
        obs = last_obs if keeps_obs and last_obs is not None else self.blank()
        return obs, 0.0, False, True, info

    def step_failed(
        self, i: int, message: str, last_obs: Any
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Sub-env ``i``'s step failed (timed out, its worker died): the episode ends there."""
        log.warning("sub-env %d: %s", i, message)
        obs = last_obs if last_obs is not None else self.blank()
        return obs, 0.0, False, True, error_info(message)


class VectorSafe(gym.Wrapper):
    """Make an :class:`~osworld_gym.env.OSWorldEnv` safe to batch with other sub-envs.

    * A reset that fails with an :class:`InfraError` (after the env's own retries) does not
      raise: it returns :func:`blank_observation` and ``info["infra_error"]``; the next step then
      ends the episode as truncated with reward 0.0 and the same ``infra_error`` (the next reset
      restarts the desktop). One bad desktop no longer takes the whole batch down.
    * ``info["variation"]`` is ``-1`` for tasks without seeded variables (``None`` in a single
      env), so that Gymnasium can batch it as an integer array.
    * :attr:`next_task` names the task of every reset whose ``options`` name none, so each
      sub-env of a vector env can get its own: ``envs.set_attr("next_task", [t0, t1, ...])``.

    **Hold-finished mode** (``hold_finished=True``), for groups of multi-turn episodes stepped in
    lock-step (a GRPO group: the finished desktops wait for the rest). An env whose episode has
    ended is *held* until the caller resets it (alone, with ``reset_mask``, or with the group):
    stepping it again runs nothing and returns its last observation, reward 0.0 and
    ``info["held"] = True``. Gymnasium's vector envs with autoreset disabled require a finished
    sub-env to be reset before its next step (``SyncVectorEnv`` asserts it), so in this mode the
    episode's end travels in ``info`` and the returned ``terminated``/``truncated`` stay False:
    every step's info has ``episode_end`` and ``held``, and a step that ran also the env's own
    ``terminated`` and ``truncated``. An env never reset (a vector env's replacement of a dead or
    hung worker) is held too, with a blank observation. A transition with ``info["infra_error"]``
    also ends the episode: a vector env's own failures (a timeout, a dead worker) come with its
    vector-level ``truncated`` and no ``episode_end``.

    >>> import osworld_gym
    >>> env = VectorSafe(gym.make("OSWorld-v0", provider="fake", settle=None,
    ...                           screen_size=(64, 48)), hold_finished=True)
    >>> env.next_task = osworld_gym.testing.FAKE_TASK
    >>> _, info = env.reset()
    >>> _, reward, terminated, truncated, info = env.step("FAIL")
    >>> reward, terminated, info["episode_end"], info["terminated"], info["held"]
    (1.0, False, True, True, False)
    >>> _, reward, terminated, truncated, info = env.step("FAIL")     # held: nothing runs
    >>> reward, info["episode_end"], info["held"]
    (0.0, True, True)
    >>> env.close()
    """

    #: The task of every :meth:`reset` whose ``options`` name none: an id, a task dict or a
    #: :class:`~osworld_gym.tasks.Task` (``None``: the seed or the env's RNG draws one).
    next_task: Any = None

    def __init__(self, env: gym.Env, *, hold_finished: bool = False):
        super().__init__(env)
        self.hold_finished = hold_finished
        self._failures = SubEnvFailures(self.observation_space)
        self._last_info: dict[str, Any] = {}
        self._last_obs: dict[str, Any] | None = None
        self._held = True  # no episode yet

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.next_task is not None and "task" not in (options or {}):
            options = dict(options or {}, task=self.next_task)
        self._failures.clear(0)
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except InfraError as e:
            obs, info = self._failures.reset_failed(
                0,
                f"reset failed: {type(e).__name__}: {e}",
                task_id=self._task_id(seed, options),
            )
        self._last_info, self._last_obs, self._held = info, obs, False
        return obs, self._batchable(info)

    def step(self, action: Any):
        if self.hold_finished and self._held:
            return self._held_step()
        if (failed := self._failures.take(0)) is not None:
            obs, reward, terminated, truncated, info = failed
            return self._ended(obs, reward, terminated, truncated, info)
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._ended(obs, reward, terminated, truncated, self._batchable(info))

    def _ended(
        self,
        obs: Any,
        reward: SupportsFloat,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ):
        """The transition as this mode reports it (in hold-finished mode: the end in ``info``)."""
        if not self.hold_finished:
            return obs, reward, terminated, truncated, info
        over = bool(terminated or truncated)
        self._held, self._last_obs = over, obs
        self._last_info = info
        info = dict(
            info,
            episode_end=over,
            terminated=bool(terminated),
            truncated=bool(truncated),
            held=False,
        )
        return obs, reward, False, False, info

    def _held_step(self):
        obs = (
            self._last_obs
            if self._last_obs is not None
            else blank_observation(self.observation_space)
        )
        info = {
            "task_id": self._last_info.get("task_id"),
            "step": self._last_info.get("step", 0),
            "episode_end": True,
            "held": True,
        }
        return obs, 0.0, False, False, info

    def space_fingerprint(self) -> str:
        """A cheap identity of the env's spaces (``Text`` spaces with a Unicode charset are
        slow to pickle, so vector envs compare these instead)."""
        return f"{self.observation_space!r} | {self.action_space!r}"

    def _task_id(self, seed: int | None, options: dict[str, Any] | None) -> str | None:
        choice = (options or {}).get("task")
        if isinstance(choice, str):
            return choice
        if isinstance(choice, dict):
            return choice.get("id")
        if choice is not None:
            return getattr(choice, "id", None)
        tasks = getattr(self.env.unwrapped, "tasks", None)
        if seed is not None and tasks:
            return tasks.for_seed(seed).id
        return None

    @staticmethod
    def _batchable(info: dict[str, Any]) -> dict[str, Any]:
        if info.get("variation", 0) is None:
            info = dict(info, variation=-1)
        return info


class OSWorldVectorEnv(AsyncVectorEnv):
    """``AsyncVectorEnv`` with per-sub-env timeouts and recovery; see the module docstring.

    Args:
        env_fns: one callable per sub-env, each building an env (wrap it in :class:`VectorSafe`).
        step_timeout: seconds a sub-env may take for one step; a sub-env that overruns gets its
            worker (and so its desktop) killed and replaced, and reports ``truncated=True``,
            reward 0.0 and ``info["infra_error"]``. ``None``: wait as long as it takes.
        reset_timeout: the same for resets (a replaced sub-env returns a blank observation and
            its next step truncates, as for :class:`VectorSafe`).
        context: ``multiprocessing`` start method (``None``: the platform default).
        daemon: run workers as daemonic processes (they may then not use ``multiprocessing``).
    """

    _live: weakref.WeakSet[OSWorldVectorEnv] = weakref.WeakSet()

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        context: str | None = None,
        daemon: bool = False,
    ):
        super().__init__(
            env_fns,
            shared_memory=False,
            copy=True,
            context=context,
            daemon=daemon,
            autoreset_mode=AutoresetMode.DISABLED,
        )
        self.step_timeout = step_timeout
        self.reset_timeout = reset_timeout
        # a concrete context (fork, spawn, forkserver): typeshed's BaseContext has no Process
        self._ctx = cast(DefaultContext, multiprocessing.get_context(context))
        self._failures = SubEnvFailures(self.single_observation_space)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._skipped: set[int] = set()  # broken sub-envs the pending step does not run
        self._masked: list[bool] = [True] * self.num_envs
        OSWorldVectorEnv._live.add(self)

    def __repr__(self) -> str:
        return f"OSWorldVectorEnv(num_envs={self.num_envs})"

    # -- reset -------------------------------------------------------------------------------------

    def reset_async(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        mask = (options or {}).get("reset_mask")
        self._masked = [True] * self.num_envs if mask is None else [bool(m) for m in mask]
        for i in self._revive_dead_workers("reset"):  # a fresh worker takes the reset; if it is
            if not self._masked[i]:  # not reset now, its episode ends at the next step
                self._failures.broke(i, SubEnvFailures.died())
        super().reset_async(seed=seed, options=dict(options) if options is not None else None)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        timeout = self.reset_timeout if timeout is None else timeout
        replies = self._collect(AsyncState.WAITING_RESET, "reset", timeout)
        infos: dict[str, Any] = {}
        for i, (result, ok) in enumerate(replies):
            if ok is None:  # the worker was replaced (hung, died): the episode starts broken
                obs_i, info = self._failures.reset_failed(i, result)
            else:
                obs_i, info = result
                if self._masked[i]:
                    self._failures.clear(i)
            if obs_i is None:  # a sub-env left out by reset_mask keeps its observation
                obs_i = self._last_obs[i] if self._last_obs[i] is not None else self._blank()
            self._last_obs[i] = obs_i
            infos = self._add_info(infos, info, i)
        self.observations = concatenate(
            self.single_observation_space, self._last_obs, self.observations
        )
        return self._copy_obs(), infos

    # -- step --------------------------------------------------------------------------------------

    def step_async(self, actions: Any) -> None:
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise gym.error.AlreadyPendingCallError(
                f"step_async called while waiting for a pending call to {self._state.value}",
                self._state.value,
            )
        # a broken sub-env (its reset failed, its worker died) has a fresh worker that was never
        # reset: it is not stepped, and step_wait answers for it (truncated, with infra_error)
        for i in self._revive_dead_workers("step"):
            self._failures.broke(i, SubEnvFailures.died())
        self._skipped = set(self._failures.broken)
        for i, (pipe, action) in enumerate(
            zip(self.parent_pipes, iterate(self.action_space, actions), strict=True)
        ):
            if i not in self._skipped:
                try:
                    pipe.send(("step", action))
                except OSError:  # died just now: step_wait finds the pipe closed
                    pass
        self._state = AsyncState.WAITING_STEP

    def step_wait(self, timeout: float | None = None):
        timeout = self.step_timeout if timeout is None else timeout
        replies = self._collect(AsyncState.WAITING_STEP, "step", timeout, skip=self._skipped)
        rewards = np.zeros(self.num_envs, np.float64)
        terminations = np.zeros(self.num_envs, np.bool_)
        truncations = np.zeros(self.num_envs, np.bool_)
        infos: dict[str, Any] = {}
        for i, (result, ok) in enumerate(replies):
            if i in self._skipped:
                transition = self._failures.take(i, self._last_obs[i])
                assert transition is not None
            elif ok is None:
                transition = self._failures.step_failed(i, result, self._last_obs[i])
            else:
                transition = result
            obs_i, rewards[i], terminations[i], truncations[i], info = transition
            self._last_obs[i] = obs_i
            infos = self._add_info(infos, info, i)
        self._skipped = set()
        self.observations = concatenate(
            self.single_observation_space, self._last_obs, self.observations
        )
        return self._copy_obs(), rewards, terminations, truncations, infos

    def set_attr(self, name: str, values: Any) -> None:
        """Set an attribute of every sub-env (``values``: one per sub-env, or one for all); a
        worker that died since the last call is replaced first (its episode, if one ran, ends
        at the next step with ``info["infra_error"]``), so the fresh one gets the value too."""
        for i in self._revive_dead_workers("set_attr"):
            self._failures.broke(i, SubEnvFailures.died())
        super().set_attr(name, values)

    # -- internals ---------------------------------------------------------------------------------

    def _check_spaces(self) -> None:
        """Every sub-env has the spaces of the first: compared by fingerprint, not by pickling
        the spaces to every worker (a Unicode ``Text`` space pickles in about a second)."""
        want = f"{self.single_observation_space!r} | {self.single_action_space!r}"
        for pipe in self.parent_pipes:
            pipe.send(("_call", ("space_fingerprint", (), {})))
        replies = [pipe.recv() for pipe in self.parent_pipes]
        self._raise_if_errors([ok for _, ok in replies])
        for i, (got, _) in enumerate(replies):
            if got != want:
                raise RuntimeError(
                    f"sub-env {i} has spaces {got}, unlike sub-env 0's {want}; "
                    "every sub-env must be built the same way"
                )

    def _collect(
        self,
        state: AsyncState,
        what: str,
        timeout: float | None,
        skip: AbstractSet[int] = frozenset(),
    ) -> list[tuple[Any, bool | None]]:
        """Each worker's ``(result, success)``; ``(message, None)`` for one that overran."""
        self._assert_is_running()
        if self._state != state:
            raise gym.error.NoAsyncCallError(
                f"call {what}_wait only after {what}_async", state.value
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[tuple[Any, bool | None]] = []
        for i, pipe in enumerate(self.parent_pipes):
            if i in skip:
                replies.append((None, True))
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = SubEnvFailures.timed_out(what, timeout)
            if pipe is not None and (left is None or pipe.poll(left)):
                try:
                    replies.append(pipe.recv())
                    continue
                except (EOFError, OSError) as e:  # the worker process died (OOM killer, crash)
                    msg = SubEnvFailures.died()
                    log.warning("sub-env %d: its worker process died (%r)", i, e)
            self._replace_worker(i)
            replies.append((msg, None))
        self._state = AsyncState.DEFAULT
        self._raise_if_errors([ok is not False for _, ok in replies])
        return replies

    def _revive_dead_workers(self, what: str) -> list[int]:
        """Replace every worker that died since the last call (killed by the OS, crashed),
        found at a ``what`` call. A closed env revives nothing: it raises
        ``ClosedEnvironmentError`` before a worker is started that nothing would ever stop."""
        self._assert_is_running()
        dead = [i for i, proc in enumerate(self.processes) if not proc.is_alive()]
        for i in dead:
            log.warning(
                "sub-env %d: its worker process exited (code %s) before %s",
                i,
                self.processes[i].exitcode,
                what,
            )
            self._replace_worker(i)
        return dead

    def _replace_worker(self, i: int) -> None:
        """Kill worker ``i`` (its desktop dies with it) and start a fresh, un-reset one."""
        old, pipe = self.processes[i], self.parent_pipes[i]
        if old.is_alive():
            old.terminate()
            old.join(5)
            if old.is_alive():
                old.kill()
                old.join(5)
        if pipe is not None:
            pipe.close()
        # (typeshed offers Windows' PipeConnection too; desktops run on Linux only)
        parent, child = cast("tuple[Connection, Connection]", self._ctx.Pipe())
        proc = self._ctx.Process(
            target=self.worker or _async_worker,
            name=f"Worker<{type(self).__name__}>-{i}",
            args=(
                i,
                CloudpickleWrapper(self.env_fns[i]),
                child,
                parent,
                None,
                self.error_queue,
                self.autoreset_mode,
                None,
            ),
        )
        proc.daemon = self.daemon
        proc.start()
        child.close()
        self.parent_pipes[i], self.processes[i] = parent, proc

    def _blank(self) -> dict[str, Any]:
        return blank_observation(self.single_observation_space)

    def _copy_obs(self) -> Any:
        return copy.deepcopy(self.observations)

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        OSWorldVectorEnv._live.discard(self)
        super().close_extras(timeout=timeout, terminate=terminate)


@atexit.register
def _close_all() -> None:  # non-daemonic workers would otherwise keep the interpreter waiting
    for envs in list(OSWorldVectorEnv._live):
        try:
            envs.close(terminate=True)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            log.exception("closing %r at exit failed", envs)


def make_safe_env(
    *,
    hold_finished: bool = False,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    **env_kwargs: Any,
) -> VectorSafe:
    """One ``OSWorld-v0`` env with ``wrappers`` (innermost first) inside :class:`VectorSafe`: a
    sub-env of :func:`make_vec` (module level, so a ``spawn`` worker can unpickle it, e.g. as
    ``functools.partial(make_safe_env, provider="local", ...)``)."""
    import osworld_gym  # noqa: F401 - registers OSWorld-v0 in a fresh subprocess

    env: gym.Env = gym.make("OSWorld-v0", disable_env_checker=True, **env_kwargs)
    for wrap in wrappers:
        env = wrap(env)
    return VectorSafe(env, hold_finished=hold_finished)


def make_vec(
    num_envs: int,
    *,
    step_timeout: float | None = None,
    reset_timeout: float | None = None,
    context: str | None = None,
    daemon: bool = False,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    hold_finished: bool = False,
    **env_kwargs: Any,
) -> OSWorldVectorEnv:
    """``num_envs`` OSWorld envs in worker processes, set up for desktops (module docstring).

    Args:
        num_envs: how many desktops.
        step_timeout: per-step deadline in seconds for every sub-env (``None``: none).
        reset_timeout: per-reset deadline in seconds (``None``: none).
        context: ``multiprocessing`` start method (``"fork"``, ``"spawn"``, ``"forkserver"``).
        daemon: daemonic workers (default ``False``: a sub-env may spawn processes of its own).
        wrappers: extra wrappers applied to each sub-env, innermost first, inside
            :class:`VectorSafe` (e.g. ``lambda env: RecordEpisode(env, "results")``).
        hold_finished: hold a finished sub-env until it is reset (:class:`VectorSafe`'s
            hold-finished mode: the episode's end is reported in ``info``).
        **env_kwargs: arguments of :class:`~osworld_gym.env.OSWorldEnv` (``provider``,
            ``tasks``, ``max_steps``, ...), the same for every sub-env.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1, got {num_envs}")
    make_one = functools.partial(
        make_safe_env, hold_finished=hold_finished, wrappers=tuple(wrappers), **env_kwargs
    )
    return OSWorldVectorEnv(
        [make_one] * num_envs,
        step_timeout=step_timeout,
        reset_timeout=reset_timeout,
        context=context,
        daemon=daemon,
    )
