"""A pool of desktops stepped in lock-step: G rollouts of a task run as parallel episodes.

The pool is a Gymnasium vector env over ``OSWorld-v0`` sub-envs: osworld-gym's desktop recipe
(:class:`osworld_gym.vector.OSWorldVectorEnv`: one subprocess per desktop, autoreset off,
per-step deadlines, hung or dead workers replaced), Ray actors, or, for the fake backend and a
single desktop, a plain ``SyncVectorEnv``. Each sub-env is osworld-gym's
:class:`~osworld_gym.vector.VectorSafe` in its hold-finished mode:

* every desktop gets its own task for the next reset (``set_attr("next_task", [...])``);
* a desktop whose episode has ended is held: stepping it again does nothing, so the lock-step
  loop can step the whole vector while some episodes are still running (the episode's end
  travels in ``info["episode_end"]``);
* an infrastructure failure (a reset failing with an ``InfraError``, a step or reset past
  ``step_timeout``, a desktop's worker that died) never kills the vector env: the desktop reports
  ``info["infra_error"]`` and ends its episode, and the trainer leaves that trajectory out.

Where the desktops come from is the config's ``desktops`` section
(:class:`~osworld_gym.providers.sources.DesktopSource`, parsed by
:func:`~osworld_gym.providers.sources.parse_desktop_source`; ``arpo-eval --desktops`` reads the
same section):

* ``local`` (the default): sandboxed Xvfb desktops on this machine, one subprocess each;
* ``docker``: one container each (osworld-gym's docker provider, a Docker daemon needed);
* ``remote``: desktops that already run somewhere, one guest URL each (OSWorld VMs with
  ``osworld_compat: true``, or our guest server with its token); an optional ``reset_hook``
  (a shell command, or an HTTP call) runs before every episode's reset, e.g. a snapshot revert.
  A hook that fails is an infrastructure error: the episode is left out, never scored 0;
* ``ray``: desktops as Ray actors (:class:`osworld_gym.ray_pool.RayVectorEnv`) on a Ray
  cluster of desktop nodes, each actor running ``provider`` (``local`` by default).

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
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from osworld_gym.providers.sources import (
    DesktopSlot,
    DesktopSource,
    HookedReset,
    RemoteDesktop,
    ResetHook,
    parse_desktop_source,
)
from osworld_gym.vector import OSWorldVectorEnv, make_safe_env

if TYPE_CHECKING:  # Ray is an optional extra, imported only for the ray source
    from osworld_gym.ray_pool import RayVectorEnv

log = logging.getLogger(__name__)

__all__ = [
    "DesktopPool",
    "DesktopSource",
    "HookedReset",
    "RemoteDesktop",
    "ResetHook",
    "StepResult",
    "check_source_count",
    "describe_source",
    "parse_desktop_source",
    "unbatch_info",
]


@dataclass
class StepResult:
    """What one desktop answered to one action."""

    screenshot: np.ndarray
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def _ray_vector_env(
    n: int, kwargs: dict[str, Any], source: DesktopSource, step_timeout: float | None
) -> RayVectorEnv:
    """``n`` held desktops as Ray actors (connecting to Ray first if needed)."""
    # Ray 2.4x under `uv run` would build a fresh virtualenv per worker; desktop actors run in this
    # interpreter's environment (one machine, or the same image on every node). Read at import.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray
    from osworld_gym.ray_pool import RayVectorEnv

    if os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] == "0":  # ray was imported before: it read it
        from ray._private import ray_constants

        ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    if ray.is_initialized():
        here = ray.get_runtime_context().gcs_address
        if source.ray_address not in (None, "auto", here):
            raise ValueError(
                f"desktops.ray_address is {source.ray_address}, but this process is "
                f"already connected to the Ray cluster at {here}"
            )
        log.info("desktop actors go to the Ray cluster this process is connected to (%s)", here)
    elif source.ray_address:
        log.info("connecting to the Ray cluster at %s", source.ray_address)
        ray.init(address=source.ray_address, log_to_driver=False)
    else:  # a Ray instance of this process, with a desktop slot per desktop
        log.info("starting a local Ray instance for %d desktop actors", n)
        slots = {name: amount * n for name, amount in source.ray_resources.items()}
        ray.init(resources=slots, include_dashboard=False, log_to_driver=False)
    return RayVectorEnv(
        n,
        resources=source.ray_resources,
        num_cpus=source.ray_num_cpus,
        transport=source.ray_transport,
        step_timeout=step_timeout,
        reset_timeout=step_timeout,
        start_timeout=source.start_timeout_s or 300.0,
        hold_finished=True,
        **kwargs,
    )


class DesktopPool:
    """``n`` desktops as a vector env, driven one lock-step turn at a time.

    Args:
        n: number of desktops (the generation batch of one process).
        env_kwargs: keyword arguments of ``gym.make("OSWorld-v0", ...)`` (``tasks`` defaults to
            ``None``: every reset names its task).
        backend: ``"async"`` (a subprocess per desktop, stepped in parallel), ``"sync"`` (in
            turn, in this process) or ``"auto"`` (sync for the fake provider, else async).
            Ray desktops are always stepped in parallel, as actors.
        step_timeout: seconds one desktop may take for a step or a reset (async and Ray); a
            desktop that overruns ends its episode with an infra error and its worker is replaced.
        source: where the desktops come from (default: ``env_kwargs["provider"]`` on this machine).
        rank: this process's index among the trainer processes: with ``remote`` desktops, process
            ``rank`` takes guests ``rank * n`` to ``rank * n + n - 1`` of the list.
        first: the source's index of this pool's first desktop, when it is not ``rank * n`` (the
            one-desktop pools of :meth:`singles`).
    """

    def __init__(
        self,
        n: int,
        env_kwargs: dict[str, Any],
        backend: str = "auto",
        step_timeout: float | None = None,
        source: DesktopSource | None = None,
        rank: int = 0,
        first: int | None = None,
    ):
        if n < 1:
            raise ValueError(f"a desktop pool needs at least one desktop, got {n}")
        kwargs = {"tasks": None, **env_kwargs}
        source = source or DesktopSource(kwargs.get("provider", "local"))
        self.source = source
        # desktop i of process `rank` is desktop rank * n + i of the source (with a URL list:
        # that guest); the slot's provider and provider_kwargs override env_kwargs'
        slots = _process_slots(source, n, rank * n if first is None else first, kwargs, rank)
        per_slot = [{**kwargs, **slot} for slot in slots]
        kwargs = per_slot[0]  # what every desktop shares (Ray actors: one set of kwargs for all)
        if source.source == "remote" and source.remotes:
            self.urls = [slot["provider_kwargs"]["url"] for slot in slots]
        if backend == "auto":
            backend = "sync" if kwargs.get("provider") == "fake" or n == 1 else "async"
        if source.source == "ray":
            backend = "ray"
        self.n, self.backend = n, backend
        if backend == "ray":
            self.vec: RayVectorEnv | OSWorldVectorEnv | SyncVectorEnv = _ray_vector_env(
                n, kwargs, source, step_timeout
            )
        elif backend == "async":
            # spawn: the trainer process holds torch threads, which must not be forked.
            self.vec = OSWorldVectorEnv(
                [functools.partial(make_safe_env, hold_finished=True, **slot) for slot in per_slot],
                step_timeout=step_timeout,
                reset_timeout=step_timeout,
                context="spawn",
                daemon=False,
            )
        elif backend == "sync":
            fns = [
                functools.partial(make_safe_env, hold_finished=True, **slot) for slot in per_slot
            ]
            self.vec = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
        else:
            raise ValueError(f"backend must be 'auto', 'sync' or 'async', got {backend!r}")
        log.info("desktop pool: %d %s desktops (%s)", n, source.source, backend)

    @classmethod
    def singles(
        cls,
        n: int,
        env_kwargs: dict[str, Any],
        backend: str = "auto",
        step_timeout: float | None = None,
        source: DesktopSource | None = None,
        rank: int = 0,
    ) -> list[DesktopPool]:
        """``n`` one-desktop pools (the asynchronous loop plays each desktop on its own thread)
        that take the same desktops of the source as one pool of ``n`` would: process ``rank``'s
        guests ``rank * n`` .. ``rank * n + n - 1``, each once."""
        source = source or DesktopSource(env_kwargs.get("provider", "local"))
        # the whole share is checked at once (a URL list too short, one guest for n desktops)
        _process_slots(source, n, rank * n, env_kwargs, rank)
        return [
            cls(1, env_kwargs, backend, step_timeout, source, rank, first=rank * n + i)
            for i in range(n)
        ]

    def reset(self, tasks: list[Any]) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
        """Start one episode per desktop; ``tasks[i]`` runs on desktop ``i``."""
        if len(tasks) != self.n:
            raise ValueError(f"{len(tasks)} tasks for {self.n} desktops")
        self.vec.set_attr("next_task", list(tasks))
        obs, infos = self.vec.reset()
        return list(obs["screenshot"]), unbatch_info(infos, self.n)

    def step(self, actions: list[str | None]) -> list[StepResult | None]:
        """One lock-step turn: desktop ``i`` gets ``actions[i]``; ``None`` leaves it idle (result
        ``None``)."""
        if len(actions) != self.n:
            raise ValueError(f"{len(actions)} actions for {self.n} desktops")
        obs, rewards, terms, truncs, infos = self.vec.step(
            tuple("" if a is None else a for a in actions)
        )
        out: list[StepResult | None] = []
        for i, info in enumerate(unbatch_info(infos, self.n)):
            if actions[i] is None or info.get("held"):
                out.append(None)
                continue
            # the vector env's own failures (a timeout, a dead worker) report the end in its
            # flags, next to info["infra_error"]; the desktops themselves report it in info
            terminated = bool(info.get("terminated", terms[i]))
            truncated = bool(info.get("truncated", truncs[i]))
            out.append(
                StepResult(
                    screenshot=obs["screenshot"][i],
                    reward=float(rewards[i]),
                    done=bool(info.get("episode_end", terminated or truncated)),
                    terminated=terminated,
                    truncated=truncated,
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


def _process_slots(
    source: DesktopSource, n: int, first: int, env_kwargs: dict[str, Any], rank: int
) -> list[DesktopSlot]:
    """Desktops ``first`` .. ``first + n - 1`` of ``source`` for trainer process ``rank``."""
    return source.slots(
        n,
        first=first,
        provider_kwargs=env_kwargs.get("provider_kwargs"),
        who=f"process {rank}",
        fewer="lower per_device_train_batch_size",
    )


# -- where the desktops come from -----------------------------------------------------------------
# The section itself (DesktopSource, RemoteDesktop, ResetHook, parse_desktop_source) lives in
# osworld_gym.providers.sources, shared with arpo-eval; what is the trainer's own is how a run's
# processes split the desktops, in its words (per_device_train_batch_size, processes).


def check_source_count(source: DesktopSource, per_process: int, processes: int) -> list[str]:
    """Problems with running ``per_process`` desktops in each of ``processes`` processes."""
    total = per_process * processes
    problems = []
    if source.num_desktops is not None and source.num_desktops != total:
        problems.append(
            f"desktops.num_desktops is {source.num_desktops}, but the run uses {total} desktops "
            f"({per_process} per process x {processes} process(es) = "
            "per_device_train_batch_size "
            "x steps_per_generation x processes): change one of them"
        )
    if source.source == "remote" and source.remotes and len(source.remotes) < total:
        problems.append(
            f"desktops.urls lists {len(source.remotes)} guest(s), but the run needs {total} "
            f"({per_process} per process x {processes} process(es)); each desktop runs one "
            "episode at a time, so add URLs or lower per_device_train_batch_size"
        )
    return problems


def describe_source(source: DesktopSource, per_process: int, processes: int) -> list[str]:
    """Lines for ``--dry_run``: which desktop each process gets."""
    total = per_process * processes
    if source.source == "remote":
        lines = [f"  source 'remote': {len(source.remotes)} guest URL(s), {total} used"]
        for i, r in enumerate(source.remotes[:total]):
            lines.append(
                f"    process {i // per_process} desktop {i % per_process}: {r.describe()}"
            )
        return lines
    if source.source == "ray":
        where = source.ray_address or "a Ray instance started in each trainer process"
        return [
            f"  source 'ray': {per_process} actor(s) per process on {where}, each running "
            f"provider {source.ray_provider!r}, resources {source.ray_resources}, "
            f"num_cpus {source.ray_num_cpus:g}, transport {source.ray_transport!r}"
        ]
    extra = f", provider_kwargs {source.provider_kwargs}" if source.provider_kwargs else ""
    return [f"  source {source.source!r}: {per_process} per process on this machine{extra}"]


def unbatch_info(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Split a vector env's info dict (``key`` + ``_key`` mask arrays, nested) into one dict per
    env.

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
