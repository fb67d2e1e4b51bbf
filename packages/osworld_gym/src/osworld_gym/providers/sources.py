"""Where desktops come from: the ``desktops`` section shared by ``arpo-train`` and ``arpo-eval``.

A run names its desktops with one mapping (a YAML section or a JSON object), parsed by
:func:`parse_desktop_source` into a :class:`DesktopSource`; every mistake is a ``ValueError``
naming the key:

* ``{source: local}`` (the default): sandboxed Xvfb desktops on this machine;
* ``{source: docker, provider_kwargs: {image: ...}}``: one container each;
* ``{source: remote, urls: [...], token_file: ..., reset_hook: ...}``: desktops that already
  run somewhere, **one guest URL per desktop** (OSWorld VMs with ``osworld_compat: true``, or our
  guest server with its token). An optional :class:`ResetHook` (a shell command, or an HTTP call)
  runs before every episode's reset, e.g. a snapshot revert; a hook that fails is an
  infrastructure error: the episode is left out, never scored 0;
* ``{source: ray, ray_address: auto, provider: local, resources: {osworld_desktop: 1}}``: the
  desktops as Ray actors (the trainer builds the :class:`~osworld_gym.ray_pool.RayVectorEnv`;
  this module only checks the options);
* ``{source: fake}``: canned screens, for tests of the plumbing.

:meth:`DesktopSource.slots` gives each desktop its ``provider`` and ``provider_kwargs``: with a
URL list desktop ``i`` gets guest ``i`` (one episode per URL at a time; a URL listed twice is
refused, since two episodes would share one desktop).

>>> s = parse_desktop_source({"source": "remote", "token": "t",
...                           "urls": ["http://10.0.0.5:5000", "http://10.0.0.6:5000"]})
>>> [slot["provider_kwargs"]["url"] for slot in s.slots(2)]
['http://10.0.0.5:5000', 'http://10.0.0.6:5000']
>>> s.slots(2, first=1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: this run needs guests 1..2 of desktops.urls, which lists 2: add URLs or use fewer ...
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

log = logging.getLogger(__name__)

__all__ = [
    "DESKTOP_SOURCES",
    "RAY_PROVIDERS",
    "DesktopSlot",
    "DesktopSource",
    "HookedReset",
    "RemoteDesktop",
    "ResetHook",
    "parse_desktop_source",
]

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


class DesktopSlot(TypedDict):
    """What one desktop of a source runs: ``gym.make("OSWorld-v0", **env_kwargs, **slot)``."""

    provider: str
    provider_kwargs: dict[str, Any]


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

        if self.http is None:  # parse_desktop_source never builds such a hook
            raise ValueError("a reset hook needs a command or an http URL")
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
    hook, then (for our guest server) the guest's own fast desktop reset. Module level and plain
    data, so a desktop's worker process (``spawn``) or Ray actor can unpickle it."""

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
        """The remote provider's arguments for this guest as desktop ``index``."""
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

    def describe(self) -> str:
        """``URL (kind), reset hook: ...``, for plans and logs (never the token)."""
        kind = "OSWorld guest" if self.osworld_compat else "our guest server"
        if self.reset_hook is not None:
            hook = self.reset_hook.describe()
        elif self.osworld_compat:
            hook = "none: tasks start from what the last episode left"
        else:
            hook = "none (the guest's own desktop reset)"
        return f"{self.url} ({kind}), reset hook: {hook}"


@dataclass(frozen=True)
class DesktopSource:
    """A parsed ``desktops`` section (see :func:`parse_desktop_source`)."""

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

    def slots(
        self,
        n: int,
        first: int = 0,
        *,
        provider_kwargs: dict[str, Any] | None = None,
        who: str | None = None,
        fewer: str = "use fewer desktops",
    ) -> list[DesktopSlot]:
        """The ``provider`` and ``provider_kwargs`` of desktops ``first`` .. ``first + n - 1``.

        Args:
            n: how many desktops.
            first: the index of the first one (a trainer process ``rank`` takes desktops
                ``rank * n`` onwards).
            provider_kwargs: the run's own provider arguments (e.g. ``--provider-arg``): they
                override the section's ``provider_kwargs``, and a remote guest's URL, token and
                hook override them.
            who: what needs the desktops, for the error message (default ``this run``).
            fewer: how to need fewer desktops, for the error message.

        Raises:
            ValueError: a URL list with fewer guests than desktop ``first + n - 1`` needs, or a
                ``remote`` source without a list asked for more than one desktop (two episodes
                would share one guest).
        """
        if n < 1:
            raise ValueError(f"a desktop source gives at least one desktop, got {n}")
        base = dict(provider_kwargs or {})
        last = first + n - 1
        if self.source == "remote" and self.remotes:
            if len(self.remotes) <= last:
                raise ValueError(
                    f"{who or 'this run'} needs guests {first}..{last} of desktops.urls, "
                    f"which lists {len(self.remotes)}: add URLs or {fewer}"
                )
            return [
                DesktopSlot(
                    provider="remote",
                    provider_kwargs={
                        **base,
                        **self.remotes[i].provider_kwargs(i, self.start_timeout_s),
                    },
                )
                for i in range(first, first + n)
            ]
        if self.source == "remote" and n > 1:
            url = base.get("url", "its url")
            raise ValueError(
                f"{n} desktops on one remote guest ({url}): two episodes would share one desktop; "
                "list one guest per desktop: desktops: {source: remote, urls: [...]}"
            )
        merged = {**self.provider_kwargs, **base}
        return [DesktopSlot(provider=self.provider, provider_kwargs=dict(merged)) for _ in range(n)]


def parse_desktop_source(section: dict[str, Any] | None, provider: str = "local") -> DesktopSource:
    """Validate a ``desktops`` section; every mistake is a ``ValueError`` naming the key.

    Without a section the source is ``provider`` (local, docker or fake desktops started on this
    machine, or one remote guest given in ``provider_kwargs``).

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
