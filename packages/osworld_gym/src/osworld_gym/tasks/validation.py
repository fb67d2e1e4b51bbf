"""Safety checks of task JSON, run before any episode of the task.

A task file is data from whoever wrote it, and official OSWorld files are downloaded from the
internet, so nothing in one may make the host write outside the cache, read host files into the
desktop, or reach the host's private network:

* **ids** match :data:`SAFE_ID` (ids name cache directories);
* **host-side names** -- evaluator ``dest`` (``vm_file``, ``cloud_file``, ...), the ``stdout`` /
  ``stderr`` files of setup commands, ``cache_file`` paths -- are relative paths without ``..``
  (:func:`host_name`), and are joined with :func:`safe_child`, which also refuses a symlink
  leading out of the directory;
* **desktop-side destinations** -- where ``download`` / ``upload_file`` put files -- lie in the
  desktop user's home or ``/tmp`` once ``~`` and ``..`` are folded (OSWorld tasks write
  ``/home/user/...``). Sources read from the desktop (``vm_file`` paths) are left to the guest,
  which serves only those roots;
* **URLs**: ``download`` takes ``http``, ``https``, ``file`` and ``builtin-asset`` URLs only;
  ``file://`` and ``upload_file``'s ``local_path`` only from :attr:`HostAccess.file_roots` (by
  default just the task's cache directory); an ``http(s)`` host that is loopback, private,
  link-local or otherwise not global is refused unless :attr:`HostAccess.allow_private_urls`
  (checked before the episode for literal addresses and ``localhost``, and again on every request
  and redirect of the download itself, after DNS; a name that fails to resolve there is left to
  the download to report). Evaluator ``cloud_file`` gold URLs stay on the host, out of the
  agent's reach, and are not restricted;
* the **instruction** fits the observation space (:func:`check_instruction`);
* **numbers** are finite (JSON parsers accept ``NaN`` and ``Infinity``);
* OSWorld's **string booleans** (``"shell": "true"``) are accepted: :func:`normalize_booleans`
  turns them into booleans before the steps are checked.

Every refusal is a :class:`~osworld_gym.errors.TaskValidationError` naming the task and field.

>>> check_task_id("os-mkdir-001")
>>> check_task_id("../../etc")
Traceback (most recent call last):
...
osworld_gym.errors.TaskValidationError: task id '../../etc' is not safe: use letters, digits, ...
"""

from __future__ import annotations

import ipaddress
import math
import os
import posixpath
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from osworld_gym.errors import TaskValidationError
from osworld_gym.spaces import MAX_INSTRUCTION_CHARS
from osworld_gym.tasks.paths import GUEST_HOME, guest_path

#: What a task id may look like (OSWorld's are UUIDs; ours ``os-mkdir-001``).
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: Desktop directories setup may write to and evaluators may read from.
GUEST_ROOTS = (GUEST_HOME, "/tmp")
DOWNLOAD_SCHEMES = ("http", "https", "file", "builtin-asset")
_BOOL_KEYS = frozenset({"shell", "strict", "by_class", "check", "multi"})
_MAX_DEPTH = 64


@dataclass(frozen=True)
class HostAccess:
    """What of the host a task's setup may reach (an option of the env and the setup runner).

    Attributes:
        file_roots: directories ``file://`` downloads and ``upload_file`` may read from (the
            task's cache directory is always allowed).
        allow_private_urls: let ``download`` reach loopback, private and link-local addresses
            (a local mirror of OSWorld's file cache, say). Off by default: such a URL could pull
            a host service's secrets into the desktop, where the agent reads them.
    """

    file_roots: tuple[Path, ...] = field(default_factory=tuple)
    allow_private_urls: bool = False

    def with_root(self, root: Path) -> HostAccess:
        return HostAccess((*self.file_roots, Path(root)), self.allow_private_urls)


def check_task_id(task_id: str) -> None:
    if not SAFE_ID.fullmatch(task_id):
        raise TaskValidationError(
            f"task id {task_id!r} is not safe: use letters, digits, '.', '_' and '-' "
            "(at most 128, starting with a letter or digit)"
        )


def host_name(name: Any, what: str) -> str:
    """``name`` if it is a relative path that stays in its directory, else the error.

    >>> host_name("gold/a.xlsx", "dest")
    'gold/a.xlsx'
    >>> host_name("../x", "dest")
    Traceback (most recent call last):
    ...
    osworld_gym.errors.TaskValidationError: dest '../x' must be a relative path inside its ...
    """
    if (
        not isinstance(name, str)
        or not name
        or "\x00" in name
        or "\\" in name
        or name.startswith("/")
        or ".." in name.split("/")
        or posixpath.normpath(name) == "."
    ):
        raise TaskValidationError(
            f"{what} {name!r} must be a relative path inside its directory (no '..', not absolute)"
        )
    return name


def safe_child(root: Path, name: str, what: str = "file name") -> Path:
    """``root / name``, refused if ``name`` is unsafe or a symlink leads it out of ``root``."""
    host_name(name, what)
    target = root / name
    real_root = os.path.realpath(root)
    real = os.path.realpath(target)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise TaskValidationError(f"{what} {name!r} leads out of {root} (to {real})")
    return target


def guest_destination(path: Any, what: str, home: str = GUEST_HOME) -> str:
    """The absolute desktop path of ``path``, which must lie in the home or ``/tmp``."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise TaskValidationError(f"{what} {path!r} must be a non-empty path")
    full = guest_path(path, home)
    roots = (home, *GUEST_ROOTS[1:])
    if not any(full == r or full.startswith(r + "/") for r in roots):
        raise TaskValidationError(
            f"{what} {path!r} is {full}, outside the desktop user's home and /tmp"
        )
    return full


def normalize_booleans(obj: Any, depth: int = 0) -> Any:
    """Turn OSWorld's ``"true"``/``"false"`` strings under boolean keys into booleans."""
    if depth > _MAX_DEPTH:
        raise TaskValidationError("task JSON is nested too deeply")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _BOOL_KEYS and isinstance(v, str) and v.strip().lower() in ("true", "false"):
                obj[k] = v.strip().lower() == "true"
            else:
                normalize_booleans(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            normalize_booleans(v, depth + 1)
    return obj


def check_finite(obj: Any, where: str, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise TaskValidationError(f"{where}: task JSON is nested too deeply")
    if isinstance(obj, float) and not math.isfinite(obj):
        raise TaskValidationError(f"{where} is {obj}, not a finite number")
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_finite(v, f"{where}.{k}", depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_finite(v, f"{where}[{i}]", depth + 1)


def _steps(task: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    for phase, steps in (
        ("config", task.config),
        ("postconfig", task.evaluator.get("postconfig") or []),
    ):
        if isinstance(steps, list):
            for i, step in enumerate(steps):
                if isinstance(step, dict) and isinstance(step.get("parameters"), dict):
                    yield f"{phase} step {i} ({step.get('type')})", step


def _getters(evaluator: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in ("result", "expected"):
        value = evaluator.get(key)
        configs = value if isinstance(value, list) else [value]
        for i, cfg in enumerate(configs):
            if isinstance(cfg, dict):
                yield f"evaluator {key}[{i}] ({cfg.get('type')})", cfg


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def validate_task(task: Any) -> None:
    """Every static check of the module docstring (``task`` is a
    :class:`~osworld_gym.tasks.task.Task`); raises :class:`TaskValidationError`."""
    who = f"task {task.id!r}"
    check_task_id(task.id)
    check_instruction(task.instruction, who)
    check_finite(task.config, f"{who}: config")
    check_finite(task.evaluator, f"{who}: evaluator")
    for where, step in _steps(task):
        p, kind, at = step["parameters"], step.get("type"), f"{who}: {where}"
        for name in ("stdout", "stderr"):
            if name in p:
                host_name(p[name], f"{at}: {name}")
        if kind in ("download", "upload_file") and isinstance(p.get("files"), list):
            for j, f in enumerate(p["files"]):
                if not isinstance(f, dict):
                    continue
                guest_destination(f.get("path"), f"{at}: files[{j}].path")
                if kind == "download":
                    _check_url_static(f.get("url"), f"{at}: files[{j}].url")
    for where, cfg in _getters(task.evaluator):
        at = f"{who}: {where}"
        kind = cfg.get("type")
        if "dest" in cfg:
            for d in _listify(cfg["dest"]):
                host_name(d, f"{at}: dest")
        if (
            kind == "cache_file"
            and isinstance(cfg.get("path"), str)
            and urlparse(cfg["path"]).scheme not in ("http", "https", "file")
        ):
            host_name(cfg["path"], f"{at}: path")


def check_instruction(instruction: str, who: str) -> None:
    """The instruction must fit the observation space: at most ``MAX_INSTRUCTION_CHARS``
    characters (refused, not silently truncated, which would change the task) and encodable
    (no lone surrogates)."""
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise TaskValidationError(
            f"{who}: the instruction is {len(instruction)} characters; "
            f"the observation space admits {MAX_INSTRUCTION_CHARS}"
        )
    try:
        instruction.encode("utf-8")
    except UnicodeEncodeError:
        raise TaskValidationError(
            f"{who}: the instruction contains a lone surrogate (a broken \\ud83d-style escape)"
        ) from None


def _check_url_static(url: Any, what: str) -> None:
    if not isinstance(url, str):
        raise TaskValidationError(f"{what} must be a URL string")
    parsed = urlparse(url)
    if parsed.scheme not in DOWNLOAD_SCHEMES:
        raise TaskValidationError(
            f"{what} {url!r}: only {', '.join(DOWNLOAD_SCHEMES)} URLs may be downloaded"
        )
    if parsed.scheme == "file" and ".." in unquote(parsed.path).split("/"):
        raise TaskValidationError(f"{what} {url!r} contains '..'")


# ---- what of the host a task may reach (checked with the env's HostAccess) -------------------


def check_host_access(task: Any, access: HostAccess) -> None:
    """Refuse, before the episode, ``file://`` and ``upload_file`` sources outside the allowed
    roots and ``http(s)`` downloads whose host is a non-global address literal or ``localhost``
    (names are resolved and checked again when the download happens)."""
    who = f"task {task.id!r}"
    for where, step in _steps(task):
        files = step["parameters"].get("files")
        if not isinstance(files, list):
            continue
        for j, f in enumerate(files):
            if not isinstance(f, dict):
                continue
            at = f"{who}: {where}: files[{j}]"
            if step.get("type") == "upload_file":
                check_local_file(f.get("local_path"), access, f"{at}.local_path")
            elif step.get("type") == "download" and isinstance(f.get("url"), str):
                parsed = urlparse(f["url"])
                if parsed.scheme == "file":
                    check_local_file(unquote(parsed.path), access, f"{at}.url")
                elif parsed.scheme in ("http", "https") and not access.allow_private_urls:
                    host = parsed.hostname or ""
                    if (
                        host.lower() in ("localhost", "localhost.localdomain")
                        or host.lower().endswith(".localhost")
                        or _literal_not_global(host)
                    ):
                        raise TaskValidationError(
                            f"{at}.url {f['url']!r} points at a private or loopback address; "
                            "pass HostAccess(allow_private_urls=True) to allow it"
                        )


def check_local_file(path: Any, access: HostAccess, what: str) -> Path:
    """``path`` (a host file a task wants uploaded) if it lies in the allowed roots."""
    if not isinstance(path, str) or not path:
        raise TaskValidationError(f"{what} must be a path")
    real = os.path.realpath(os.path.expanduser(path))
    for root in access.file_roots:
        r = os.path.realpath(root)
        if real == r or real.startswith(r.rstrip("/") + "/"):
            return Path(real)
    roots = ", ".join(str(r) for r in access.file_roots) or "none"
    raise TaskValidationError(
        f"{what} {path!r} is outside the host directories tasks may read "
        f"from ({roots}); add its directory to HostAccess.file_roots"
    )


def _literal_not_global(host: str) -> bool:
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_global
    except ValueError:
        return False


def check_resolved_host(host: str, port: int | None, access: HostAccess, timeout: float) -> None:
    """Refuse ``host`` if any of its addresses is not global (unless allowed). DNS gets
    ``timeout`` seconds (a thread, as ``getaddrinfo`` has no timeout of its own)."""
    if access.allow_private_urls:
        return
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        infos = pool.submit(socket.getaddrinfo, host, port or 443).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise TaskValidationError(f"resolving {host!r} took over {timeout:g} s") from None
    except OSError:
        return  # the download itself reports the unknown host
    finally:
        pool.shutdown(wait=False)
    for info in infos:
        addr = str(info[4][0])  # IPv4/IPv6 results: a string (int only for other families)
        if not ipaddress.ip_address(addr.split("%")[0]).is_global:
            raise TaskValidationError(
                f"download host {host!r} resolves to {addr}, a private or loopback address; "
                "pass HostAccess(allow_private_urls=True) to allow it"
            )
