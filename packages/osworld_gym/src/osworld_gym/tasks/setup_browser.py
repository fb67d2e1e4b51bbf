"""OSWorld's browser setup steps: ``chrome_open_tabs``, ``chrome_close_tabs``,
``update_browse_history``.

Semantics follow OSWorld's setup controller:

* ``chrome_open_tabs`` (``urls_to_open``): connect to the running Chrome's DevTools (retrying
  while it starts), open each URL in a new tab and, after the first, close the tab Chrome was
  showing. A page that does not finish loading is logged, not an error (OSWorld's too).
* ``chrome_close_tabs`` (``urls_to_close``): for each URL, close the first tab whose URL matches
  it, compared without scheme, ``www.`` and a trailing slash.
* ``update_browse_history`` (``history``: ``[{url, title, visit_time_from_now_in_seconds}]``):
  OSWorld takes a Chrome ``History`` database from its file cache (``history_new.sqlite`` in the
  task's cache dir, downloaded from a hub on a miss), adds one ``urls`` row and one ``visits``
  row per item (visit time in Chrome's microseconds since 1601), and uploads it as
  ``~/.config/google-chrome/Default/History``. Offline, the database must be in the cache; a
  missing one is a setup error naming the path. (OSWorld writes the rows into the cached file
  itself, so they pile up over episodes; we add them to a copy.)

The tab steps run :mod:`.chrome_tabs` inside the desktop (``python3 -c``), because Chrome's
DevTools port is reachable only there.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from osworld_gym.errors import SetupError
from osworld_gym.tasks.paths import guest_path

if TYPE_CHECKING:
    from osworld_gym.client import GuestClient


class SetupRunner(Protocol):
    """What these steps use of :class:`osworld_gym.tasks.setup.SetupRunner` (which calls them)."""

    client: GuestClient
    home: str

    @property
    def task_cache_dir(self) -> Path: ...


#: The script the tab steps run inside the desktop (standard library only).
_CHROME_TABS = Path(__file__).with_name("chrome_tabs.py")
#: DevTools ports tried in order: our google-chrome shim's, then OSWorld's socat forward.
PORTS = (1337, 9222)
#: OSWorld's cache name of the base History database.
HISTORY_CACHE_NAME = "history_new.sqlite"
HISTORY_PATH = "~/.config/google-chrome/Default/History"
#: A typed link visit, as OSWorld records it.
_TRANSITION = 805306368
_CHROME_EPOCH = datetime(1601, 1, 1)


def _run_tabs(runner: SetupRunner, args: dict[str, Any]) -> dict[str, Any]:
    source = _CHROME_TABS.read_text(encoding="utf-8")
    args = {"ports": list(PORTS), **args}
    timeout = float(args.get("connect_s", 75)) + 15 * (len(args.get("urls", [])) + 1)
    result = runner.client.execute(
        ["python3", "-c", source, json.dumps(args)], shell=False, timeout=timeout, setup=True
    )
    if result.get("status", "success") != "success" or result.get("returncode", 0) != 0:
        raise SetupError(
            f"the desktop could not run the tab helper: "
            f"{result.get('message') or result.get('error') or result}"
        )
    try:
        out = json.loads(result.get("output") or "")
    except json.JSONDecodeError as exc:
        raise SetupError(f"the tab helper printed {result.get('output')!r:.300}") from exc
    if "error" in out:
        raise SetupError(out["error"])
    return out


def chrome_open_tabs(runner: SetupRunner, urls_to_open: list[str]) -> None:
    _run_tabs(runner, {"action": "open", "urls": list(urls_to_open)})


def chrome_close_tabs(runner: SetupRunner, urls_to_close: list[str]) -> None:
    # OSWorld waits 5 s for Chrome to finish launching; connecting retries until it answers
    _run_tabs(runner, {"action": "close", "urls": list(urls_to_close)})


def chrome_time(when: datetime) -> int:
    """Chrome's timestamps: microseconds since 1601-01-01.

    >>> chrome_time(datetime(1601, 1, 1, 0, 0, 1))
    1000000
    """
    return int((when - _CHROME_EPOCH).total_seconds() * 1_000_000)


def add_history(db: Path, history: list[dict[str, Any]], now: datetime | None = None) -> None:
    """Add OSWorld's rows for ``history`` to the Chrome History database ``db``."""
    now = now or datetime.now()
    con = sqlite3.connect(db)
    try:
        for item in history:
            stamp = chrome_time(now - timedelta(seconds=item["visit_time_from_now_in_seconds"]))
            cur = con.execute(
                "INSERT INTO urls (url, title, visit_count, typed_count, "
                "last_visit_time, hidden) VALUES (?, ?, 1, 0, ?, 0)",
                (item["url"], item["title"], stamp),
            )
            con.execute(
                "INSERT INTO visits (url, visit_time, from_visit, transition, "
                "segment_id, visit_duration) VALUES (?, ?, 0, ?, 0, 0)",
                (cur.lastrowid, stamp, _TRANSITION),
            )
        con.commit()
    except (sqlite3.Error, KeyError) as exc:
        raise SetupError(f"cannot add the browse history to {db}: {exc}") from exc
    finally:
        con.close()


def update_browse_history(runner: SetupRunner, history: list[dict[str, Any]]) -> None:
    cached = runner.task_cache_dir / HISTORY_CACHE_NAME
    if not cached.is_file():
        raise SetupError(
            f"update_browse_history needs Chrome's base History database from "
            f"OSWorld's file cache: place {HISTORY_CACHE_NAME} at {cached}"
        )
    with tempfile.TemporaryDirectory(prefix="osworld-history-") as tmp:
        db = Path(tmp) / "History"
        shutil.copyfile(cached, db)  # the cached base stays as it was, for the next episode
        add_history(db, history)
        runner.client.upload(guest_path(HISTORY_PATH, runner.home), db.read_bytes())
