"""Open or close Chrome tabs from *inside the desktop*, standard library only.

Run by :mod:`.setup_browser` as ``python3 -c <this source> '<json>'`` in the desktop (Chrome's
DevTools port is reachable only there), through DevTools' HTTP endpoints: ``/json/list``,
``/json/new?<url>`` (``PUT``, the method current Chrome requires) and ``/json/close/<id>``.
Nothing here may import anything outside the standard library, and the file must stay runnable
as a script. It prints one JSON object: ``{"port": N, "opened": [...], "closed": [...]}`` or
``{"error": "..."}``.

Arguments: ``{"action": "open"|"close", "urls": [...], "ports": [1337, 9222],
"connect_s": 75, "load_s": 10, "startup_s": 10}``.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit


def _request(port: int, path: str, method: str = "GET", timeout: float = 5.0) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read().decode("utf-8", "replace")
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return body


def connect(ports: list[int], wait_s: float) -> int | None:
    """The first port whose DevTools answer, retrying (Chrome may still be starting)."""
    deadline = time.monotonic() + wait_s
    while True:
        for port in ports:
            try:
                _request(port, "/json/version", timeout=2.0)
                return port
            except (OSError, urllib.error.URLError):
                pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)


def pages(port: int) -> list[dict[str, Any]]:
    """Open tabs, most recently active first (DevTools' order)."""
    return [t for t in _request(port, "/json/list") if t.get("type") == "page"]


def normalize(url: str) -> str:
    """OSWorld's URL comparison for closing tabs: scheme-less URLs get ``http://``; host lower
    case without ``www.``; path without a trailing slash; query kept."""
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    port = f":{parts.port}" if parts.port else ""
    query = f"?{parts.query}" if parts.query else ""
    return f"{host}{port}{parts.path.rstrip('/')}{query}"


def new_tab(port: int, url: str) -> dict[str, Any]:
    path = "/json/new?" + quote(url, safe="")
    try:
        return _request(port, path, method="PUT")
    except urllib.error.HTTPError as e:  # older Chrome: GET only
        if e.code != 405:
            raise
        return _request(port, path)


def wait_loaded(port: int, target: str, wait_s: float) -> None:
    """Until the tab has left about:blank (OSWorld waits for 'load' and only logs a timeout)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for t in pages(port):
            if t.get("id") == target and t.get("url") not in ("", "about:blank"):
                return
        time.sleep(0.2)


def startup_tabs(port: int, wait_s: float) -> list[dict[str, Any]]:
    """The tabs open now; if there are none yet, wait up to ``wait_s`` for the one Chrome starts
    with. If DevTools answered before the first window's tab was listed, a setup that looked
    then would leave that tab open beside the task's pages (the likely cause, not reproduced, of
    one failure in a full test run on a loaded machine)."""
    deadline = time.monotonic() + wait_s
    while True:
        tabs = pages(port)
        if tabs or time.monotonic() >= deadline:
            return tabs
        time.sleep(0.2)


def open_tabs(port: int, urls: list[str], load_s: float, startup_s: float = 10.0) -> dict[str, Any]:
    """Each URL in a new tab; after the first, the tab Chrome started with is closed (the oldest
    one open before), as OSWorld's setup does."""
    before = startup_tabs(port, startup_s) if urls else []  # nothing opened, nothing to close
    opened, closed = [], []
    for i, url in enumerate(urls):
        tab = new_tab(port, url)
        opened.append(url)
        if isinstance(tab, dict) and tab.get("id"):
            wait_loaded(port, tab["id"], load_s)
        if i == 0 and before:
            oldest = before[-1]
            _request(port, f"/json/close/{oldest['id']}")
            closed.append(oldest.get("url", ""))
    return {"port": port, "opened": opened, "closed": closed}


def close_tabs(port: int, urls: list[str]) -> dict[str, Any]:
    """For each URL, close the first open tab whose URL matches it (see :func:`normalize`)."""
    closed = []
    for url in urls:
        for t in pages(port):
            if normalize(t.get("url", "")) == normalize(url):
                _request(port, f"/json/close/{t['id']}")
                closed.append(t.get("url", ""))
                break
    return {"port": port, "opened": [], "closed": closed}


def main(argv: list[str]) -> int:
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    port = connect(
        [int(p) for p in args.get("ports", [1337, 9222])], float(args.get("connect_s", 75))
    )
    if port is None:
        print(
            json.dumps(
                {
                    "error": "Chrome's DevTools did not answer on ports "
                    f"{args.get('ports', [1337, 9222])}: is Chrome running?"
                }
            )
        )
        return 0
    try:
        if args.get("action") == "open":
            out = open_tabs(
                port,
                list(args.get("urls", [])),
                float(args.get("load_s", 10)),
                float(args.get("startup_s", 10)),
            )
        elif args.get("action") == "close":
            out = close_tabs(port, list(args.get("urls", [])))
        else:
            out = {"error": f"unknown action {args.get('action')!r}"}
    except (OSError, urllib.error.URLError, ValueError) as e:
        out = {"error": f"DevTools request failed: {e}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
