"""Getters that produce local file paths: from the desktop, from the gold-file cache.

All three return *paths* (strings) of local files, which file metrics open themselves.

``vm_file`` and ``cloud_file`` accept several files at once, like OSWorld: with ``"multi": true``
(or when ``path`` is a list) ``path`` and ``dest`` are parallel lists and ``gives`` (default
``[0]``) picks which local paths are returned; one picked path is returned as a string, several
as a list.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from osworld_gym.evaluators.admission import admit
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.tasks.cache import fetch
from osworld_gym.tasks.paths import guest_path
from osworld_gym.tasks.validation import safe_child

logger = logging.getLogger(__name__)


def _pairs(config: dict[str, Any]) -> tuple[list[str], list[str], set[int]]:
    """``(paths, dests, gives)`` for the single and the multi-file forms."""
    path, dest = config["path"], config["dest"]
    if config.get("multi", False) or isinstance(path, list):
        if not isinstance(path, list) or not isinstance(dest, list) or len(path) != len(dest):
            raise ValueError("with several files, 'path' and 'dest' must be lists of equal length")
        return list(path), list(dest), set(config.get("gives", [0]))
    return [path], [dest], {0}


def _single_or_list(values: list[str | None]) -> str | None | list[str | None]:
    return values[0] if len(values) == 1 else values


def get_vm_file(ctx: EvalContext, config: dict[str, Any]) -> str | None | list[str | None]:
    """Copy file(s) from the desktop into the task cache dir; return the local path(s).

    Config: ``path`` (guest path; relative to the home dir), ``dest`` (file name in the cache
    dir), optional ``multi``/``gives``. A file missing on the desktop gives ``None`` in its
    place (the metric then scores 0).

    The file is streamed to disk, never held whole in memory, and capped at
    :data:`~osworld_gym.client.MAX_FILE_BYTES`; then admitted
    (:func:`~osworld_gym.evaluators.admission.admit`: what it unpacks to is bounded too).

    Raises:
        UnusableResultFile: what is at ``path`` is not a readable regular file within the cap
            (the agent's doing; :func:`~osworld_gym.evaluators.evaluate` scores it 0).
        TaskValidationError: ``dest`` would leave the episode's directory.
    """
    paths, dests, gives = _pairs(config)
    out: list[str | None] = []
    for i, (path, dest) in enumerate(zip(paths, dests, strict=True)):
        local = safe_child(ctx.episode_dir, dest, "vm_file dest")
        size = _download(ctx.client, guest_path(path, ctx.home), local)
        if size is None:
            logger.info("task %s: %s not found on the desktop", ctx.task_id, path)
            if i in gives:
                out.append(None)
            continue
        admit(local)
        if i in gives:
            out.append(str(local))
    return _single_or_list(out)


def _download(client: Any, path: str, local: Path) -> int | None:
    """Stream ``path`` to ``local`` (``GuestClient.download_file``: capped, constant memory).
    In-memory test doubles that only serve ``get_file`` are written out whole."""
    if hasattr(client, "download_file"):
        return client.download_file(path, local)
    data = client.get_file(path)
    if data is None:
        return None
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return len(data)


def get_cloud_file(ctx: EvalContext, config: dict[str, Any]) -> str | list[str]:
    """Gold file(s) by URL: ``<cache_dir>/<dest>`` if present, else downloaded there.

    Config: ``path`` (URL), ``dest`` (file name in the cache dir), optional ``multi``/``gives``.

    Raises:
        SetupError: not cached and not downloadable; the message says where to put the file.
    """
    urls, dests, gives = _pairs(config)
    out: list[str | None] = []
    for i, (url, dest) in enumerate(zip(urls, dests, strict=True)):
        local = fetch(
            url, safe_child(ctx.cache_dir, dest, "cloud_file dest"), timeout=ctx.download_timeout_s
        )
        if i in gives:
            out.append(str(local))
    return _single_or_list(out)  # type: ignore[return-value]


def get_cache_file(ctx: EvalContext, config: dict[str, Any]) -> str:
    """A file already in the task cache dir (written by setup, e.g. an ``execute`` ``stdout``).

    Config: ``path``, relative to the cache dir. A URL ``path`` is looked up the way the cache
    stores it: ``dest`` when given, else a setup download of that URL
    (``<uuid5(url)>_<name>``), else the URL's file name.

    Raises:
        FileNotFoundError: the file is not in the cache.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "gold.txt").write_text("x")
    >>> ctx = EvalContext(client=None, cache_dir=d, task_id="t")
    >>> get_cache_file(ctx, {"path": "gold.txt"}) == str(d / "gold.txt")
    True
    """
    path = config["path"]
    if urlparse(path).scheme in ("http", "https", "file"):
        candidate = _cached_url(ctx.cache_dir, path, config.get("dest"))
    else:  # a setup command's output (this episode's) or a file placed in the shared cache
        candidate = safe_child(ctx.episode_dir, path, "cache_file path")
        if not candidate.is_file():
            candidate = safe_child(ctx.cache_dir, path, "cache_file path")
    if candidate is None or not candidate.is_file():
        raise FileNotFoundError(
            f"{path!r} is not in the cache of task {ctx.task_id!r} ({ctx.cache_dir}); "
            "it should have been created by the task's setup"
        )
    return str(candidate)


def _cached_url(cache_dir: Path, url: str, dest: str | None) -> Path | None:
    if dest:
        return safe_child(cache_dir, dest, "cache_file dest")
    prefix = f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_"
    matches = sorted(cache_dir.glob(prefix + "*")) if cache_dir.is_dir() else []
    if matches:
        return matches[0]
    name = posixpath.basename(urlparse(url).path)
    return cache_dir / name if name else None
