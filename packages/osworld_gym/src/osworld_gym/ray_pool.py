"""Desktops across machines: a Gymnasium ``VectorEnv`` whose sub-envs are Ray actors.

Each sub-env is an :class:`EnvActor`, a Ray actor holding one :class:`~osworld_gym.env.OSWorldEnv`
(and so one desktop) on whichever node Ray places it. The caller sees the vector-env interface of
:mod:`osworld_gym.vector`, with the same semantics: autoreset disabled, ``reset_mask`` partial
resets, ``reset(seed=s)`` → sub-env ``i`` draws ``tasks.for_seed(s + i)``, and every failure of
one sub-env reported in its ``info["infra_error"]`` (episode truncated, reward 0.0, **not a score**)
instead of raised: a desktop that fails to reset, a step past ``step_timeout``, and an actor that
died with its node. A dead or hung actor is replaced at once; the replacement starts its episode
at the next reset.

Placement: give each node that can host desktops a custom resource and ask for it per actor::

    ray start --head --resources='{"osworld_desktop": 8}'        # on every desktop node
    envs = RayVectorEnv(32, resources={"osworld_desktop": 1}, tasks="builtin")

Screenshots cross as uint8 arrays or as PNG bytes. ``transport="auto"`` (the default) picks per
actor: arrays when the actor runs on the driver's node (Ray's object store hands them over through
shared memory), PNG when it runs elsewhere. Measured on one node (2 shared cores, 1080p frames):
a step through an actor costs ~33 ms more than in-process with arrays and ~63 ms more with PNG,
since encoding takes ~14 ms and decoding ~6 ms; but a PNG screenshot is ~27 KB against 6.2 MB, so
over any link slower than ~2.5 Gbit/s (6.2 MB in the ~20 ms PNG costs) PNG is the faster way.

>>> import ray
>>> from osworld_gym.ray_pool import RayVectorEnv
>>> from osworld_gym.support import builtin_task
>>> ray.init(num_cpus=2, resources={"osworld_desktop": 2})   # doctest: +SKIP
>>> envs = RayVectorEnv(2, num_cpus=0, provider="fake",     # any Ray cluster, fake desktops
...                     tasks=[builtin_task("os-mkdir-001"), builtin_task("os-copy-001")])
>>> obs, info = envs.reset(seed=0)
>>> obs["screenshot"].shape, sorted(info["task_id"])
((2, 1080, 1920, 3), ['os-copy-001', 'os-mkdir-001'])
>>> obs, reward, terminated, truncated, info = envs.step(("DONE", "pyautogui.click(5, 5)"))
>>> terminated.tolist(), info["infra_error"].tolist()
([True, False], [None, None])
>>> envs.close()

Under ``uv run``, Ray (2.4x and later) starts workers with ``uv run`` in a copy of the project and
so builds a fresh virtual environment per session, gigabytes for this workspace; where the workers
can use the driver's environment (one machine, or the same image on every node), set
``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0`` before ``ray.init``.

Needs the ``ray`` extra (``pip install osworld-gym[ray]``).
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from osworld_gym.errors import MissingDependencyError
from osworld_gym.vector import SubEnvFailures, blank_observation, make_safe_env

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "osworld_gym.ray_pool needs Ray: pip install 'osworld-gym[ray]'"
    ) from e

log = logging.getLogger(__name__)

__all__ = ["DesktopNode", "EnvActor", "RayVectorEnv", "desktop_nodes"]

TRANSPORTS = ("auto", "array", "png")


def encode_png(frame: np.ndarray) -> bytes:
    """A frame as PNG (fast, light compression: screenshots are mostly flat colour)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """The uint8 RGB array of a PNG."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


class EnvActor:
    """One OSWorld env in a Ray actor (use through :class:`RayVectorEnv`)."""

    def __init__(
        self,
        env_kwargs: dict[str, Any],
        transport: str = "auto",
        driver_node: str | None = None,
        wrappers: tuple = (),
        hold_finished: bool = False,
    ):
        self.env = make_safe_env(hold_finished=hold_finished, wrappers=wrappers, **env_kwargs)
        if transport == "auto":
            here = ray.get_runtime_context().get_node_id()
            transport = "array" if driver_node in (None, here) else "png"
        self.transport = transport

    def ready(self) -> dict[str, Any]:
        """Where the actor runs and how it sends frames (answers once it is constructed)."""
        return {
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "transport": self.transport,
        }

    def reset(self, seed: int | None, options: dict[str, Any] | None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._pack(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._pack(obs), float(reward), bool(terminated), bool(truncated), info

    def call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        attr = self.env.get_wrapper_attr(name)
        return attr(*args, **kwargs) if callable(attr) else attr

    def set_attr(self, name: str, value: Any) -> None:
        self.env.set_wrapper_attr(name, value)

    def desktop_pid(self) -> int | None:
        """The host PID of this actor's desktop sandbox, if it runs locally."""
        return getattr(getattr(self.env.unwrapped, "provider", None), "pid", None)

    def close(self) -> None:
        self.env.close()

    def _pack(self, obs: dict[str, Any]) -> dict[str, Any]:
        if self.transport == "png":
            return dict(obs, screenshot=encode_png(obs["screenshot"]))
        return obs


class RayVectorEnv(VectorEnv):
    """``num_envs`` OSWorld envs as Ray actors, behind the Gymnasium ``VectorEnv`` interface.

    Args:
        num_envs: how many actors (= desktops).
        resources: custom Ray resources each actor needs, e.g. ``{"osworld_desktop": 1}``.
        num_cpus: CPUs Ray reserves per actor (a desktop and its apps use about one).
        scheduling_strategy: Ray's placement strategy; ``"SPREAD"`` puts actors on as many
            nodes as it can.
        transport: ``"auto"``, ``"array"`` or ``"png"`` (see the module docstring).
        step_timeout: seconds a sub-env may take for one step before its actor is killed and
            replaced and the step reported as an infrastructure error (``None``: no limit).
        reset_timeout: the same for resets.
        start_timeout: seconds to wait for all actors to be placed and constructed.
        hold_finished: hold a finished sub-env until it is reset (``VectorSafe``'s
            hold-finished mode: the episode's end is reported in ``info``).
        wrappers: wrappers applied to each sub-env in its actor, innermost first, inside
            ``VectorSafe`` (as in :func:`osworld_gym.vector.make_vec`); they must be importable
            on the nodes (a class or function of an installed module).
        **env_kwargs: arguments of :class:`~osworld_gym.env.OSWorldEnv`, the same for every actor.

    Raises:
        TimeoutError: the cluster could not place every actor within ``start_timeout`` (too few
            nodes with the requested resources).
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(
        self,
        num_envs: int,
        *,
        resources: dict[str, float] | None = None,
        num_cpus: float = 1,
        scheduling_strategy: Any = "SPREAD",
        transport: str = "auto",
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        start_timeout: float = 300.0,
        wrappers: tuple | list = (),
        hold_finished: bool = False,
        **env_kwargs: Any,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
        if not ray.is_initialized():
            ray.init()
        import osworld_gym  # noqa: F401 - registers OSWorld-v0

        probe = gym.make("OSWorld-v0", disable_env_checker=True, **env_kwargs)  # starts no desktop
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        probe.close()
        self.num_envs = num_envs
        self.observation_space = _batch(self.single_observation_space, num_envs)
        self.action_space = _batch(self.single_action_space, num_envs)
        self.metadata = dict(self.metadata)
        self.render_mode = None
        self.closed = False

        self.transport = transport
        self.step_timeout = step_timeout
        self.reset_timeout = reset_timeout
        self._env_kwargs = env_kwargs
        self._wrappers = tuple(wrappers)
        self._hold_finished = hold_finished
        self._driver_node = ray.get_runtime_context().get_node_id()
        self._actor_cls = ray.remote(EnvActor).options(
            num_cpus=num_cpus,
            resources=dict(resources or {}),
            scheduling_strategy=scheduling_strategy,
            max_restarts=0,
        )
        self.actors = [self._new_actor() for _ in range(num_envs)]
        self._wait_placed(start_timeout)
        self._last_obs: list[dict[str, Any] | None] = [None] * num_envs
        self._failures = SubEnvFailures(self.single_observation_space)
        self._obs_buffer = create_empty_array(self.single_observation_space, num_envs, fn=np.zeros)

    # -- Gymnasium API -----------------------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._check_open()
        seeds = _seeds(seed, self.num_envs)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            mask = np.ones(self.num_envs, np.bool_)
        elif not (
            isinstance(mask, np.ndarray)
            and mask.dtype == np.bool_
            and mask.shape == (self.num_envs,)
        ):
            raise ValueError(
                f"options['reset_mask'] must be a bool array of shape ({self.num_envs},)"
            )
        calls = {
            i: self.actors[i].reset.remote(seeds[i], options or None)
            for i in range(self.num_envs)
            if mask[i]
        }
        infos: dict[str, Any] = {}
        for i, (result, error) in self._collect(calls, self.reset_timeout, "reset").items():
            if error is None:
                obs, info = result
                self._failures.clear(i)
                self._last_obs[i] = self._unpack(obs)
            else:  # the actor was replaced (hung, died): the episode starts broken
                self._last_obs[i], info = self._failures.reset_failed(i, error)
            infos = self._add_info(infos, info, i)
        return self._batched_obs(), infos

    def step(self, actions: Any):
        self._check_open()
        actions = list(iterate(self.action_space, actions))
        # a broken sub-env (its reset failed, its actor died) is not stepped: it answers for
        # itself (truncated, with infra_error)
        calls = {
            i: self.actors[i].step.remote(actions[i])
            for i in range(self.num_envs)
            if i not in self._failures.broken
        }
        rewards = np.zeros(self.num_envs, np.float64)
        terminations = np.zeros(self.num_envs, np.bool_)
        truncations = np.zeros(self.num_envs, np.bool_)
        infos: dict[str, Any] = {}
        results = self._collect(calls, self.step_timeout, "step")
        for i in range(self.num_envs):
            if i not in results:
                transition = self._failures.take(i, self._last_obs[i])
                assert transition is not None
            elif (error := results[i][1]) is not None:
                transition = self._failures.step_failed(i, error, self._last_obs[i])
            else:
                obs, *rest = results[i][0]
                transition = (self._unpack(obs), *rest)
            obs_i, rewards[i], terminations[i], truncations[i], info = transition
            self._last_obs[i] = obs_i
            infos = self._add_info(infos, info, i)
        return self._batched_obs(), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method (or read an attribute) of every sub-env, in its actor."""
        self._check_open()
        return tuple(ray.get([a.call.remote(name, args, kwargs) for a in self.actors]))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set an attribute of every sub-env (``values``: one per sub-env, or one for all)."""
        self._check_open()
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"{len(values)} values for {self.num_envs} sub-envs")
        refs = [a.set_attr.remote(name, v) for a, v in zip(self.actors, values, strict=True)]
        for i, ref in enumerate(refs):
            try:
                ray.get(ref)
            except RayActorError as e:  # died since its last call: its replacement gets the
                # value, and the episode it ran (if any) ends at the next step
                log.warning("sub-env %d: its env actor died (%s)", i, _first_line(e))
                self._replace(i)
                self._failures.broke(i, SubEnvFailures.died())
                ray.get(self.actors[i].set_attr.remote(name, values[i]))

    def close_extras(self, **kwargs: Any) -> None:
        """Close every env (stopping its desktop), then kill every actor."""
        pending = [a.close.remote() for a in self.actors]
        try:
            ray.wait(pending, num_returns=len(pending), timeout=60)
        finally:
            for actor in self.actors:
                ray.kill(actor, no_restart=True)

    # -- internals ---------------------------------------------------------------------------------

    def _new_actor(self) -> Any:
        return self._actor_cls.remote(
            self._env_kwargs, self.transport, self._driver_node, self._wrappers, self._hold_finished
        )

    def _wait_placed(self, timeout: float) -> None:
        refs = [a.ready.remote() for a in self.actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        if len(ready) < len(refs):
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
            raise TimeoutError(
                f"only {len(ready)} of {len(refs)} env actors started within {timeout:.0f} s; the "
                f"cluster has {ray.cluster_resources()}, and each actor needs the resources passed "
                "as resources=/num_cpus= (give desktop nodes e.g. "
                "--resources='{\"osworld_desktop\": 8}')"
            )
        self.placement = ray.get(refs)

    def _collect(
        self, calls: dict[int, Any], timeout: float | None, what: str
    ) -> dict[int, tuple[Any, str | None]]:
        """``{i: (result, None)}`` or ``{i: (None, infra_error)}`` for every call."""
        refs = list(calls.values())
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=timeout)
        out: dict[int, tuple[Any, str | None]] = {}
        for i, ref in calls.items():
            try:
                out[i] = (ray.get(ref, timeout=0), None)
            except GetTimeoutError:
                out[i] = (None, SubEnvFailures.timed_out(what, timeout))
                self._replace(i)
            except RayActorError as e:
                log.warning("sub-env %d: its env actor died (%s)", i, _first_line(e))
                out[i] = (None, SubEnvFailures.died())
                self._replace(i)
            except RayError as e:  # the actor raised: a bug, not the desktop's fault
                raise e
        return out

    def _replace(self, i: int) -> None:
        ray.kill(self.actors[i], no_restart=True)
        self.actors[i] = self._new_actor()

    @staticmethod
    def _unpack(obs: dict[str, Any]) -> dict[str, Any]:
        if isinstance(obs.get("screenshot"), bytes):
            return dict(obs, screenshot=decode_png(obs["screenshot"]))
        return obs

    def _batched_obs(self) -> Any:
        blank = None
        items = []
        for obs in self._last_obs:
            if obs is None:
                blank = blank or blank_observation(self.single_observation_space)
                obs = blank
            items.append(obs)
        self._obs_buffer = concatenate(self.single_observation_space, items, self._obs_buffer)
        return _copy(self._obs_buffer)

    def _check_open(self) -> None:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("this RayVectorEnv is closed")

    def __repr__(self) -> str:
        return f"RayVectorEnv(num_envs={self.num_envs}, transport={self.transport!r})"


@dataclass
class DesktopNode:
    """One node of a Ray cluster that can host desktop actors, and what its desktops offer.

    Attributes:
        node_id: Ray's node id.
        address: the node's IP address.
        slots: how many desktops its resources admit (its custom resource over the amount each
            desktop asks for).
        cpus: the node's CPUs; memory_gb: its memory as Ray counts it.
        capabilities: what desktops of the asked provider offer there
            (:class:`~osworld_gym.providers.capabilities.Capabilities`), or ``None`` with
            ``error`` saying why they could not be read (no image on that node, no daemon).
    """

    node_id: str
    address: str
    slots: int
    cpus: float
    memory_gb: float
    capabilities: Any = None
    error: str | None = None


def _node_capabilities(provider: str, provider_kwargs: dict[str, Any]) -> tuple[Any, str | None]:
    from osworld_gym.providers import provider_class

    try:
        return provider_class(provider).config_capabilities(provider_kwargs), None
    except Exception as e:  # noqa: BLE001 - reported per node, with its own message
        return None, f"{type(e).__name__}: {e}"


def desktop_nodes(
    resources: dict[str, float],
    provider: str = "local",
    provider_kwargs: dict[str, Any] | None = None,
    timeout: float = 120.0,
) -> list[DesktopNode]:
    """The alive nodes of the connected Ray cluster that have ``resources`` (what each desktop
    actor asks for), with what desktops of ``provider`` offer on each: a task runs on every
    node with the node's own provider (its docker image, its apps), so each is asked there.

    Raises:
        RuntimeError: Ray is not initialised (connect with ``ray.init(address=...)`` first).
    """
    if not ray.is_initialized():
        raise RuntimeError("connect to the Ray cluster first (ray.init(address=...))")
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(_node_capabilities)
    nodes: list[DesktopNode] = []
    refs = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        have = node.get("Resources") or {}
        slots = min((int(have.get(k, 0) // v) for k, v in resources.items() if v > 0), default=0)
        if resources and slots == 0:
            continue
        nodes.append(
            DesktopNode(
                node_id=node["NodeID"],
                address=str(node.get("NodeManagerAddress", "?")),
                slots=slots,
                cpus=float(have.get("CPU", 0)),
                memory_gb=float(have.get("memory", 0)) / 2**30,
            )
        )
        refs.append(
            probe.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(provider, dict(provider_kwargs or {}))
        )
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    for node, ref in zip(nodes, refs, strict=True):
        if ref in ready:
            node.capabilities, node.error = ray.get(ref)
        else:
            node.error = f"no answer from the node within {timeout:.0f} s"
            ray.cancel(ref, force=True)
    return nodes


def _batch(space: gym.Space, n: int) -> gym.Space:
    """``batch_space`` without deep-copying ``Text`` spaces n times (a Unicode charset makes
    each copy take about a second): the batched space holds n references to one space."""
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({k: _batch(s, n) for k, s in space.spaces.items()})
    if isinstance(space, gym.spaces.Text):
        return gym.spaces.Tuple((space,) * n)
    return batch_space(space, n)


def _first_line(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _seeds(seed: int | list[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"{len(seed)} seeds for {n} sub-envs")
    return list(seed)


def _copy(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: _copy(v) for k, v in obs.items()}
    if isinstance(obs, np.ndarray):
        return obs.copy()
    return obs
