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

Where the desktops come from is the config's ``desktops`` section (:class:`DesktopSource`,
parsed by :func:`parse_desktop_source`):

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from osworld_gym.vector import OSWorldVectorEnv, make_safe_env

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


def _ray_vector_env(
    n: int, kwargs: dict[str, Any], source: DesktopSource, step_timeout: float | None
) -> gym.vector.VectorEnv:
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
    """

    def __init__(
        self,
        n: int,
        env_kwargs: dict[str, Any],
        backend: str = "auto",
        step_timeout: float | None = None,
        source: DesktopSource | None = None,
        rank: int = 0,
    ):
        if n < 1:
            raise ValueError(f"a desktop pool needs at least one desktop, got {n}")
        kwargs = {"tasks": None, **env_kwargs}
        source = source or DesktopSource(kwargs.get("provider", "local"))
        self.source = source
        if source.source != "remote" or not source.remotes:
            kwargs["provider"] = source.provider
        if source.provider_kwargs:
            kwargs["provider_kwargs"] = {
                **source.provider_kwargs,
                **(kwargs.get("provider_kwargs") or {}),
            }
        per_slot = [dict(kwargs) for _ in range(n)]
        if source.source == "remote" and source.remotes:
            first = rank * n
            if len(source.remotes) < first + n:
                raise ValueError(
                    f"process {rank} needs guests {first}..{first + n - 1} of desktops.urls, which "
                    f"lists {len(source.remotes)}: add URLs or lower per_device_train_batch_size"
                )
            for i, slot in enumerate(per_slot):
                remote = source.remotes[first + i]
                slot["provider"] = "remote"
                slot["provider_kwargs"] = {
                    **(kwargs.get("provider_kwargs") or {}),
                    **remote.provider_kwargs(first + i, source.start_timeout_s),
                }
            self.urls = [source.remotes[first + i].url for i in range(n)]
        if backend == "auto":
            backend = "sync" if kwargs.get("provider") == "fake" or n == 1 else "async"
        if source.source == "ray":
            backend = "ray"
        self.n, self.backend = n, backend
        if backend == "ray":
            self.vec: gym.vector.VectorEnv = _ray_vector_env(n, kwargs, source, step_timeout)
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


# -- where the desktops come from -----------------------------------------------------------------

DESKTOP_SOURCES = ("local", "docker", "remote", "ray", "fake")
RAY_PROVIDERS = ("local", "docker", "fake")
#: keys of the ``desktops`` section each source accepts (``source`` and ``num_desktops`` always)
SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "local": ("provider_kwargs",),
    "fake": ("provider_kwargs",),
    "docker": ("provider_kwargs",),
    "remote": ("urls", "token", "token_file", "osworld_compat", "reset_hook", "start_timeout_s"),
    "ray": (
        "ray_address",
        "provider",
        "provider_kwargs",
        "resources",
        "num_cpus",
        "transport",
        "start_timeout_s",
    ),
}
REMOTE_URL_KEYS = ("url", "token", "token_file", "osworld_compat", "reset_hook")
HOOK_KEYS = ("command", "http", "method", "timeout_s")


@dataclass(frozen=True)
class ResetHook:
    """What restores a remote desktop before an episode: a shell command or an HTTP call.

    The command runs with ``sh -c`` and sees ``OSWORLD_DESKTOP_URL`` and ``OSWORLD_DESKTOP_INDEX``
    in its environment; the HTTP call is a request (``method``, POST by default) whose answer
    must be 2xx. Anything else (exit status not 0, an HTTP error, no answer within ``timeout_s``)
    raises :class:`~osworld_gym.errors.InfraError`: the desktop is not in a known state, which is
    never the agent's fault.
    """

    command: str | None = None
    http: str | None = None
    method: str = "POST"
    timeout_s: float = 600.0

    def describe(self) -> str:
        return f"command {self.command!r}" if self.command else f"{self.method} {self.http}"

    def run(self, url: str, index: int) -> None:
        import subprocess

        from osworld_gym.errors import InfraError

        if self.command:
            env = {**os.environ, "OSWORLD_DESKTOP_URL": url, "OSWORLD_DESKTOP_INDEX": str(index)}
            try:
                done = subprocess.run(
                    ["sh", "-c", self.command],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=self.timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as e:
                raise InfraError(
                    f"reset hook for {url} ({self.describe()}) did not finish within "
                    f"{self.timeout_s:g} s"
                ) from e
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip()[-500:]
                raise InfraError(
                    f"reset hook for {url} ({self.describe()}) exited with status "
                    f"{done.returncode}: {tail}"
                )
            return
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            self.http,
            method=self.method,
            data=b"" if self.method in ("POST", "PUT") else None,
            headers={"X-OSWorld-Desktop-Url": url},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                status = answer.status
        except urllib.error.HTTPError as e:
            status = e.code
        except (urllib.error.URLError, OSError) as e:
            raise InfraError(f"reset hook for {url} ({self.describe()}) failed: {e}") from e
        if not 200 <= status < 300:
            raise InfraError(f"reset hook for {url} ({self.describe()}) answered HTTP {status}")


@dataclass
class HookedReset:
    """The ``reset=`` function of a :class:`~osworld_gym.providers.remote.RemoteProvider`: the
    hook, then (for our guest server) the guest's own fast desktop reset."""

    hook: ResetHook
    index: int

    def __call__(self, provider: Any) -> None:
        log.info("reset hook for %s: %s", provider.url, self.hook.describe())
        self.hook.run(provider.url, self.index)
        if not provider.osworld_compat:  # start() hands back the connected client
            provider.start().reset_desktop(restore_home=True)


@dataclass(frozen=True)
class RemoteDesktop:
    """One remote guest of a ``remote`` source."""

    url: str
    token: str | None = None
    token_file: str | None = None
    osworld_compat: bool = False
    reset_hook: ResetHook | None = None

    def provider_kwargs(self, index: int, start_timeout_s: float | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"url": self.url, "osworld_compat": self.osworld_compat}
        if self.token is not None:
            kwargs["token"] = self.token
        if self.token_file is not None:
            kwargs["token_file"] = self.token_file
        if self.reset_hook is not None:
            kwargs["reset"] = HookedReset(self.reset_hook, index)
        if start_timeout_s is not None:
            kwargs["start_timeout"] = start_timeout_s
        return kwargs


@dataclass(frozen=True)
class DesktopSource:
    """The parsed ``desktops`` section of a trainer config (see :func:`parse_desktop_source`)."""

    source: str = "local"
    num_desktops: int | None = None
    provider_kwargs: dict[str, Any] = field(default_factory=dict)
    remotes: tuple[RemoteDesktop, ...] = ()
    start_timeout_s: float | None = None
    ray_address: str | None = None
    ray_provider: str = "local"
    ray_resources: dict[str, float] = field(default_factory=lambda: {"osworld_desktop": 1.0})
    ray_num_cpus: float = 1.0
    ray_transport: str = "auto"

    @property
    def provider(self) -> str:
        """The osworld-gym provider each desktop runs (what tasks are checked against)."""
        return self.ray_provider if self.source == "ray" else self.source

    def check_count(self, per_process: int, processes: int) -> list[str]:
        """Problems with running ``per_process`` desktops in each of ``processes`` processes."""
        total = per_process * processes
        problems = []
        if self.num_desktops is not None and self.num_desktops != total:
            problems.append(
                f"desktops.num_desktops is {self.num_desktops}, but the run uses {total} desktops "
                f"({per_process} per process x {processes} process(es) = "
                "per_device_train_batch_size "
                "x steps_per_generation x processes): change one of them"
            )
        if self.source == "remote" and self.remotes and len(self.remotes) < total:
            problems.append(
                f"desktops.urls lists {len(self.remotes)} guest(s), but the run needs {total} "
                f"({per_process} per process x {processes} process(es)); each desktop runs one "
                "episode at a time, so add URLs or lower per_device_train_batch_size"
            )
        return problems

    def describe(self, per_process: int, processes: int) -> list[str]:
        """Lines for ``--dry_run``: which desktop each process gets."""
        total = per_process * processes
        if self.source == "remote":
            lines = [f"  source 'remote': {len(self.remotes)} guest URL(s), {total} used"]
            for i, r in enumerate(self.remotes[:total]):
                kind = "OSWorld guest" if r.osworld_compat else "our guest server"
                hook = (
                    r.reset_hook.describe()
                    if r.reset_hook
                    else (
                        "none: tasks start from what the last episode left"
                        if r.osworld_compat
                        else "none (the guest's own desktop reset)"
                    )
                )
                lines.append(
                    f"    process {i // per_process} desktop {i % per_process}: {r.url} "
                    f"({kind}), reset hook: {hook}"
                )
            return lines
        if self.source == "ray":
            where = self.ray_address or "a Ray instance started in each trainer process"
            return [
                f"  source 'ray': {per_process} actor(s) per process on {where}, each running "
                f"provider {self.ray_provider!r}, resources {self.ray_resources}, "
                f"num_cpus {self.ray_num_cpus:g}, transport {self.ray_transport!r}"
            ]
        extra = f", provider_kwargs {self.provider_kwargs}" if self.provider_kwargs else ""
        return [f"  source {self.source!r}: {per_process} per process on this machine{extra}"]


def parse_desktop_source(section: dict[str, Any] | None, provider: str = "local") -> DesktopSource:
    """Validate a config's ``desktops`` section; every mistake is a ``ValueError`` naming the key.

    Without a section the source is the config's ``provider`` (local, docker or fake desktops
    started by the trainer).

    >>> parse_desktop_source(None, "fake").source
    'fake'
    >>> s = parse_desktop_source({"source": "remote", "token": "t",
    ...                           "urls": ["http://10.0.0.5:5000", {"url": "http://10.0.0.6:5000",
    ...                                    "reset_hook": "virsh snapshot-revert vm2 clean"}]})
    >>> [r.url for r in s.remotes], s.remotes[1].reset_hook.command
    (['http://10.0.0.5:5000', 'http://10.0.0.6:5000'], 'virsh snapshot-revert vm2 clean')
    >>> parse_desktop_source({"source": "ray", "urls": ["http://x:1"]})
    Traceback (most recent call last):
    ...
    ValueError: desktops: source 'ray' does not take 'urls' (it takes: source, num_desktops, ...)
    """
    if not section:
        # provider 'remote' without a section: one guest given in env_kwargs' provider_kwargs
        return DesktopSource(provider)
    if not isinstance(section, dict):
        raise ValueError(
            f"desktops must be a mapping (YAML section or JSON object), got {section!r}"
        )
    source = section.get("source")
    if source not in DESKTOP_SOURCES:
        raise ValueError(
            f"desktops.source must be one of {', '.join(DESKTOP_SOURCES)}, got {source!r}"
        )
    allowed = ("source", "num_desktops", *SOURCE_KEYS[source])
    for key in section:
        if key not in allowed:
            raise ValueError(
                f"desktops: source {source!r} does not take {key!r} "
                f"(it takes: {', '.join(allowed)})"
            )
    num = section.get("num_desktops")
    if num is not None and (not isinstance(num, int) or isinstance(num, bool) or num < 1):
        raise ValueError(f"desktops.num_desktops must be a positive integer, got {num!r}")
    start_timeout = section.get("start_timeout_s")
    if start_timeout is not None and not (_is_number(start_timeout) and start_timeout > 0):
        raise ValueError(
            f"desktops.start_timeout_s must be a positive number, got {start_timeout!r}"
        )
    provider_kwargs = section.get("provider_kwargs") or {}
    if not isinstance(provider_kwargs, dict):
        raise ValueError(f"desktops.provider_kwargs must be a mapping, got {provider_kwargs!r}")
    if source == "remote":
        return DesktopSource(
            "remote",
            num_desktops=num,
            start_timeout_s=start_timeout,
            remotes=_parse_remotes(section),
        )
    if source == "ray":
        ray_provider = section.get("provider", "local")
        if ray_provider not in RAY_PROVIDERS:
            raise ValueError(
                f"desktops.provider (what each Ray actor runs) must be one of "
                f"{', '.join(RAY_PROVIDERS)}, got {ray_provider!r}"
            )
        address = section.get("ray_address")
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ValueError(
                f"desktops.ray_address must be a Ray address ('auto', 'host:6379', "
                f"'ray://host:10001') or left out, got {address!r}"
            )
        resources = section.get("resources", {"osworld_desktop": 1.0})
        if not isinstance(resources, dict) or not all(
            isinstance(k, str) and _is_number(v) and v >= 0 for k, v in resources.items()
        ):
            raise ValueError(
                "desktops.resources must map Ray resource names to non-negative "
                f"numbers, e.g. {{osworld_desktop: 1}}; got {resources!r}"
            )
        num_cpus = section.get("num_cpus", 1.0)
        if not (_is_number(num_cpus) and num_cpus >= 0):
            raise ValueError(f"desktops.num_cpus must be a non-negative number, got {num_cpus!r}")
        transport = section.get("transport", "auto")
        if transport not in ("auto", "array", "png"):
            raise ValueError(f"desktops.transport must be auto, array or png, got {transport!r}")
        return DesktopSource(
            "ray",
            num_desktops=num,
            provider_kwargs=dict(provider_kwargs),
            start_timeout_s=start_timeout,
            ray_address=address,
            ray_provider=ray_provider,
            ray_resources=dict(resources),
            ray_num_cpus=float(num_cpus),
            ray_transport=transport,
        )
    return DesktopSource(source, num_desktops=num, provider_kwargs=dict(provider_kwargs))


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _parse_hook(spec: Any, where: str) -> ResetHook | None:
    if spec is None:
        return None
    if isinstance(spec, str):
        if not spec.strip():
            raise ValueError(f"{where} is empty")
        return ResetHook(command=spec)
    if not isinstance(spec, dict):
        raise ValueError(
            f"{where} must be a shell command or a mapping with 'command' or 'http', got {spec!r}"
        )
    for key in spec:
        if key not in HOOK_KEYS:
            raise ValueError(f"{where}: unknown key {key!r} (it takes: {', '.join(HOOK_KEYS)})")
    if bool(spec.get("command")) == bool(spec.get("http")):
        raise ValueError(
            f"{where} needs exactly one of 'command' (a shell command) or 'http' "
            f"(a URL to call), got {spec!r}"
        )
    http = spec.get("http")
    if http is not None and not str(http).startswith(("http://", "https://")):
        raise ValueError(f"{where}.http must start with http:// or https://, got {http!r}")
    method = str(spec.get("method", "POST")).upper()
    if method not in ("GET", "POST", "PUT"):
        raise ValueError(f"{where}.method must be GET, POST or PUT, got {spec.get('method')!r}")
    timeout = spec.get("timeout_s", 600.0)
    if not (_is_number(timeout) and timeout > 0):
        raise ValueError(f"{where}.timeout_s must be a positive number, got {timeout!r}")
    return ResetHook(
        command=spec.get("command"), http=http, method=method, timeout_s=float(timeout)
    )


def _parse_remotes(section: dict[str, Any]) -> tuple[RemoteDesktop, ...]:
    urls = section.get("urls")
    if not isinstance(urls, list) or not urls:
        raise ValueError(
            "desktops.urls must be a non-empty list of guest URLs (or of mappings "
            "with 'url' and optional 'token', 'token_file', 'osworld_compat', 'reset_hook')"
        )
    default_hook = _parse_hook(section.get("reset_hook"), "desktops.reset_hook")
    out: list[RemoteDesktop] = []
    for i, entry in enumerate(urls):
        where = f"desktops.urls[{i}]"
        if isinstance(entry, str):
            entry = {"url": entry}
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a URL or a mapping with 'url', got {entry!r}")
        for key in entry:
            if key not in REMOTE_URL_KEYS:
                raise ValueError(
                    f"{where}: unknown key {key!r} (it takes: {', '.join(REMOTE_URL_KEYS)})"
                )
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(
                f"{where}: the guest URL must start with http:// or https://, got {url!r}"
            )
        compat = entry.get("osworld_compat", section.get("osworld_compat", False))
        if not isinstance(compat, bool):
            raise ValueError(f"{where}: osworld_compat must be true or false, got {compat!r}")
        token = entry.get("token", section.get("token"))
        token_file = entry.get("token_file", section.get("token_file"))
        if not compat and not token and not token_file:
            raise ValueError(
                f"{where} ({url}): our guest server needs its token (token or "
                "token_file); for OSWorld's own guest server set osworld_compat: true"
            )
        if token_file is not None and not Path(token_file).expanduser().is_file():
            raise ValueError(f"{where}: token_file {token_file} does not exist")
        hook = (
            _parse_hook(entry["reset_hook"], f"{where}.reset_hook")
            if "reset_hook" in entry
            else default_hook
        )
        out.append(
            RemoteDesktop(
                url=url.rstrip("/"),
                token=token,
                token_file=str(Path(token_file).expanduser()) if token_file else None,
                osworld_compat=compat,
                reset_hook=hook,
            )
        )
    seen = [r.url for r in out]
    dupes = sorted({u for u in seen if seen.count(u) > 1})
    if dupes:
        raise ValueError(
            f"desktops.urls lists {', '.join(dupes)} more than once: two episodes "
            "would share one desktop"
        )
    return tuple(out)


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
