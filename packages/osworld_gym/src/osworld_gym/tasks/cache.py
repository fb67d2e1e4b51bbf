"""The host-side file cache, laid out exactly like OSWorld's so a pre-filled cache works offline.

Layout under a cache root (OSWorld's ``cache/``):

* setup ``download`` files: ``<root>/<task_id>/<uuid5(NAMESPACE_URL, url)>_<basename(path)>``,
  where ``path`` is the *guest* destination of the step;
* ``cloud_file`` gold files of evaluators: ``<root>/<task_id>/<dest>``.

:func:`fetch` uses a cached file when present and otherwise downloads it (atomically). When the
network is unreachable it raises :class:`~osworld_gym.errors.SetupError` naming the exact file to
place by hand.

>>> from pathlib import Path
>>> p = download_cache_path("cache", "t1", "https://example.org/f.xlsx", "/home/user/f.xlsx")
>>> p.parent == Path("cache/t1"), p.name.endswith("_f.xlsx")
(True, True)
>>> cloud_file_cache_path("cache", "t1", "gold.xlsx")
PosixPath('cache/t1/gold.xlsx')
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from osworld_gym.errors import SetupError
from osworld_gym.tasks.validation import HostAccess, check_local_file, check_resolved_host

logger = logging.getLogger(__name__)

#: Seconds allowed per HTTP request (connect, each read) when downloading.
DEFAULT_TIMEOUT_S = 60.0


def download_cache_path(root: str | os.PathLike[str], task_id: str, url: str, path: str) -> Path:
    """Where a setup ``download`` of ``url`` to guest ``path`` is cached (OSWorld's naming).

    >>> download_cache_path("/c", "t", "http://x/a", "/home/user/b.txt").name
    '1ac1b8f7-1c63-5149-be6a-820bc77da0eb_b.txt'
    """
    name = f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{posixpath.basename(path)}"
    return Path(root) / task_id / name


def cloud_file_cache_path(root: str | os.PathLike[str], task_id: str, dest: str) -> Path:
    """Where an evaluator's ``cloud_file`` with destination ``dest`` is cached."""
    return Path(root) / task_id / dest


def fetch(
    url: str,
    dest: str | os.PathLike[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    attempts: int = 3,
    client: httpx.Client | None = None,
    access: HostAccess | None = None,
) -> Path:
    """Return ``dest``, downloading ``url`` into it first unless it already exists.

    ``http``/``https`` URLs are downloaded with ``httpx`` (redirects followed, ``timeout`` per
    request, up to ``attempts`` tries on network errors and 5xx answers); ``file://`` URLs are
    copied. With ``access`` (setup downloads, whose files land in the agent's desktop)
    ``file://`` reads only from its roots and no request or redirect reaches a private or
    loopback address unless it allows that; without it (gold files that stay on the host)
    nothing is restricted. The file is written to a temporary sibling and renamed, so an interrupted
    download
    never leaves a truncated file that a later run would trust.

    Raises:
        SetupError: the file is not cached and cannot be downloaded; the message names the URL
            and the path to place the file at for offline use.
        TaskValidationError: ``access`` forbids the URL.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "src.txt").write_text("hi")
    >>> fetch((d / "src.txt").as_uri(), d / "cache" / "copy.txt").read_text()
    'hi'
    """
    dest = Path(dest)
    if dest.is_file():
        logger.debug("cache hit for %s at %s", url, dest)
        return dest
    parsed = urlparse(url)
    if parsed.scheme == "builtin-asset":
        from osworld_gym.tasks.assets import generate

        _atomic_write(dest, generate(url))
        return dest
    if parsed.scheme == "file":
        source = Path(unquote(parsed.path))
        if access is not None:
            source = check_local_file(str(source), access, "file:// URL")
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise SetupError(
                f"cannot read {url}: {exc}. Place the file at {dest} to use the cache instead."
            ) from exc
        _atomic_write(dest, data)
        return dest
    if parsed.scheme not in ("http", "https"):
        raise SetupError(
            f"cannot download {url!r}: only http, https, file and builtin-asset URLs are "
            "supported. "
            f"Place the file at {dest} to use the cache instead."
        )
    own_client = client is None
    hooks = {} if access is None else {"request": [_guard(access, timeout)]}
    http = client or httpx.Client(timeout=timeout, follow_redirects=True, event_hooks=hooks)
    if client is not None and access is not None:
        check_resolved_host(parsed.hostname or "", parsed.port, access, timeout)
    last_error = "no attempt made"
    try:
        for attempt in range(1, max(1, attempts) + 1):
            try:
                _download(http, url, dest, timeout)
                logger.info("downloaded %s to %s", url, dest)
                return dest
            except httpx.HTTPStatusError as exc:
                last_error = f"HTTP {exc.response.status_code}"
                if exc.response.status_code < 500:
                    break
            except httpx.HTTPError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("download of %s failed (attempt %d): %s", url, attempt, last_error)
            if attempt < attempts:
                time.sleep(min(2.0 * attempt, 10.0))
    finally:
        if own_client:
            http.close()
    raise SetupError(
        f"could not download {url} ({last_error}). To run offline, place that file at {dest} "
        "(the cache is looked up before any download)."
    )


def _guard(access: HostAccess, timeout: float):
    """An httpx request hook: every request, redirects included, to an allowed host only."""

    def check(request: httpx.Request) -> None:
        check_resolved_host(request.url.host, request.url.port, access, timeout)

    return check


def _download(http: httpx.Client, url: str, dest: Path, timeout: float) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, http.stream("GET", url, timeout=timeout) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                out.write(chunk)
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _atomic_write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
