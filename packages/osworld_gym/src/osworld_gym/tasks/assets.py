"""Task files generated offline: ``builtin-asset://NAME?param=value&...`` URLs.

Built-in tasks need spreadsheets, documents, pages and media, but nothing may be downloaded.
A setup ``download`` step (or a ``cloud_file`` gold file) may name a generator instead of a web
address; :func:`osworld_gym.tasks.cache.fetch` then writes the generator's bytes into the
OSWorld cache path, exactly where a downloaded file would go. Parameters come from the URL's
query string (after the task's variables were substituted), so every task instance gets its own
file and the bytes are a pure function of the URL.

Generators are registered by name as ``"module:function"`` strings, imported on first use
(office formats pull in openpyxl, python-docx and friends only when a task needs them).

>>> generate("builtin-asset://text?content=hello%20world%0A")
b'hello world\\n'
>>> generate("builtin-asset://lines?n=3&seed=1&prefix=item").decode().splitlines()[0].startswith("item")
True
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from urllib.parse import parse_qsl, urlparse

from osworld_gym.errors import SetupError

SCHEME = "builtin-asset"

Generator = Callable[[dict[str, str]], bytes]

#: generator name -> "module:function"
GENERATORS: dict[str, str] = {
    "text": "osworld_gym.tasks.assets:text_asset",
    "lines": "osworld_gym.tasks.assets:lines_asset",
    "office_xlsx": "osworld_gym.tasks.builtin.office_assets:xlsx_asset",
    "office_docx": "osworld_gym.tasks.builtin.office_assets:docx_asset",
    "office_pptx": "osworld_gym.tasks.builtin.office_assets:pptx_asset",
    "portal_server": "osworld_gym.tasks.builtin.web_media_assets:portal_server_asset",
    "portal_file": "osworld_gym.tasks.builtin.web_media_assets:portal_file_asset",
    "wav_tone": "osworld_gym.tasks.builtin.web_media_assets:wav_tone_asset",
    "vlcrc": "osworld_gym.tasks.builtin.web_media_assets:vlcrc_asset",
    "pixels_app": "osworld_gym.tasks.pixels:app_asset",
}

_WORDS = (
    "apple banana cherry delta echo falcon garnet harbor indigo juniper kepler lumen "
    "maple nectar orbit pixel quartz raven sierra tango umber velvet willow xenon yarrow zephyr"
).split()


def register_generator(name: str, target: str | Generator) -> None:
    """Register a generator under ``name`` (a ``"module:function"`` string or a callable)."""
    GENERATORS[name] = target  # type: ignore[assignment]


def is_asset_url(url: str) -> bool:
    return urlparse(url).scheme == SCHEME


def generate(url: str) -> bytes:
    """The bytes of a ``builtin-asset://`` URL; :class:`SetupError` for an unknown name or param."""
    parsed = urlparse(url)
    if parsed.scheme != SCHEME:
        raise SetupError(f"{url!r} is not a {SCHEME}:// URL")
    name = parsed.netloc or parsed.path.lstrip("/")
    target = GENERATORS.get(name)
    if target is None:
        raise SetupError(
            f"unknown asset generator {name!r} in {url!r}; known: {sorted(GENERATORS)}"
        )
    if isinstance(target, str):
        module, func = target.split(":")
        target = getattr(importlib.import_module(module), func)
    params = dict(parse_qsl(parsed.query, keep_blank_values=True))
    try:
        data = target(params)
    except (KeyError, ValueError, TypeError) as exc:
        raise SetupError(f"asset generator {name!r} rejected {url!r}: {exc!r}") from exc
    if not isinstance(data, bytes):
        raise SetupError(f"asset generator {name!r} returned {type(data).__name__}, not bytes")
    return data


def text_asset(params: dict[str, str]) -> bytes:
    """``content`` as UTF-8 (use ``%0A`` for newlines in the URL)."""
    return params["content"].encode("utf-8")


def lines_asset(params: dict[str, str]) -> bytes:
    """``n`` lines of ``prefix`` plus seeded words: ``prefix 1: word word``."""
    n, rng = int(params["n"]), random.Random(params.get("seed", "0"))
    prefix = params.get("prefix", "line")
    return "".join(
        f"{prefix} {i}: {rng.choice(_WORDS)} {rng.choice(_WORDS)}\n" for i in range(1, n + 1)
    ).encode()
