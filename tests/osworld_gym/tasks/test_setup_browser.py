"""OSWorld's browser setup steps on a real desktop with Chromium: chrome_open_tabs,
chrome_close_tabs, update_browse_history."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
from osworld_gym.errors import SetupError
from osworld_gym.providers.local import LocalProvider
from osworld_gym.tasks import SetupRunner
from osworld_gym.tasks.chrome_tabs import normalize, open_tabs
from osworld_gym.tasks.setup_browser import HISTORY_CACHE_NAME, add_history, chrome_time

#: The two tables OSWorld writes to, with Chrome's column names.
HISTORY_SCHEMA = """
CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, title LONGVARCHAR,
  visit_count INTEGER DEFAULT 0 NOT NULL, typed_count INTEGER DEFAULT 0 NOT NULL,
  last_visit_time INTEGER NOT NULL, hidden INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE visits(id INTEGER PRIMARY KEY, url INTEGER NOT NULL, visit_time INTEGER NOT NULL,
  from_visit INTEGER, transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
  visit_duration INTEGER DEFAULT 0 NOT NULL);
"""


def history_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript(HISTORY_SCHEMA)
    con.close()
    return path


def step(kind: str, **params) -> dict:
    return {"type": kind, "parameters": params}


def test_urls_compare_like_osworld():
    assert normalize("https://www.Example.org/a/") == normalize("http://example.org/a")
    assert normalize("example.org/a?q=1") != normalize("example.org/a?q=2")


def test_history_rows_use_chromes_clock(tmp_path):
    db = history_db(tmp_path / "History")
    now = datetime(2026, 1, 1, 12, 0, 0)
    add_history(
        db,
        [
            {
                "url": "https://www.youtube.com/watch?v=x",
                "title": "X",
                "visit_time_from_now_in_seconds": 3600,
            }
        ],
        now=now,
    )
    con = sqlite3.connect(db)
    ((url_id, url, title, last),) = con.execute(
        "SELECT id, url, title, last_visit_time FROM urls"
    ).fetchall()
    assert (url, title) == ("https://www.youtube.com/watch?v=x", "X")
    assert last == chrome_time(datetime(2026, 1, 1, 11, 0, 0))
    assert con.execute("SELECT url, visit_time, transition FROM visits").fetchall() == [
        (url_id, last, 805306368)
    ]


class LateFirstTab:
    """DevTools' HTTP endpoints, answering before the tab Chrome starts with is listed: the
    first ``late`` listings are empty, as on a loaded machine. (A stand-in for one race; the
    real browser runs in the tests below.)"""

    def __init__(self, late: int | None) -> None:
        self.late, self.listings, self.tabs, self.next_id = late, 0, [], 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def reply(self, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/json/list":
                    outer.listings += 1
                    if outer.late is not None and outer.listings == outer.late + 1:
                        outer.add("chrome://newtab/", first=True)
                    self.reply(list(outer.tabs))
                elif self.path.startswith("/json/close/"):
                    tab_id = self.path.rsplit("/", 1)[1]
                    outer.tabs = [t for t in outer.tabs if t["id"] != tab_id]
                    self.reply("Target is closing")
                else:
                    self.reply({"Browser": "stand-in"})

            def do_PUT(self) -> None:
                self.reply(outer.add(unquote(self.path.split("?", 1)[1])))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, url: str, first: bool = False) -> dict:
        self.next_id += 1
        tab = {"id": str(self.next_id), "type": "page", "url": url}
        self.tabs = [*self.tabs, tab] if first else [tab, *self.tabs]  # newest first
        return tab


def test_open_tabs_waits_for_the_tab_chrome_starts_with():
    chrome = LateFirstTab(late=3)
    try:
        out = open_tabs(chrome.port, ["file:///a.html", "file:///b.html"], 1.0, startup_s=30)
    finally:
        chrome.server.shutdown()
        chrome.server.server_close()
    assert out["closed"] == ["chrome://newtab/"]
    assert sorted(t["url"] for t in chrome.tabs) == ["file:///a.html", "file:///b.html"]


def test_open_tabs_gives_up_waiting_for_a_first_tab_that_never_comes():
    chrome = LateFirstTab(late=None)
    try:
        out = open_tabs(chrome.port, ["file:///a.html"], 1.0, startup_s=0.5)
    finally:
        chrome.server.shutdown()
        chrome.server.server_close()
    assert out == {"port": chrome.port, "opened": ["file:///a.html"], "closed": []}
    assert 1 < chrome.listings < 50  # it looked more than once, then stopped looking


@pytest.fixture(scope="module")
def desktop() -> Iterator:
    if shutil.which("chromium") is None:
        pytest.skip("needs chromium (scripts/install.sh)")
    provider = LocalProvider(screen_size=(1024, 768))
    client = provider.start()
    try:
        yield client
    finally:
        provider.stop()


def open_urls(client) -> list[str]:
    script = (
        "import json, urllib.request; print(json.dumps([t['url'] for t in json.load("
        "urllib.request.urlopen('http://127.0.0.1:9222/json/list')) if t['type'] == 'page']))"
    )
    return json.loads(client.execute(["python3", "-c", script], setup=True)["output"])


def test_open_then_close_tabs_like_osworld(desktop, tmp_path):
    desktop.reset_desktop()
    runner = SetupRunner(desktop, cache_dir=tmp_path, task_id="tabs")
    pages = [f"/home/user/p{i}.html" for i in range(3)]
    for i, p in enumerate(pages):
        desktop.upload(p, f"<title>page {i}</title><h1>{i}</h1>".encode())
    runner.run(
        [
            step("launch", command=["google-chrome", "--remote-debugging-port=1337"]),
            step("launch", command=["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]),
            step("chrome_open_tabs", urls_to_open=[f"file://{p}" for p in pages]),
        ]
    )
    # the tab Chrome started with is gone; the three pages are open
    assert sorted(open_urls(desktop)) == [f"file://{p}" for p in pages]
    runner.run([step("chrome_close_tabs", urls_to_close=[f"file://{pages[1]}"])])
    assert sorted(open_urls(desktop)) == [f"file://{pages[0]}", f"file://{pages[2]}"]


def test_open_tabs_without_a_browser_is_a_setup_error_naming_it(desktop, tmp_path, monkeypatch):
    from osworld_gym.tasks import setup_browser

    desktop.reset_desktop()
    runner = SetupRunner(desktop, cache_dir=tmp_path, task_id="none")
    original = setup_browser._run_tabs
    monkeypatch.setattr(
        setup_browser,
        "_run_tabs",  # give up after 2 s, not OSWorld's 75
        lambda r, args: original(r, {**args, "connect_s": 2}),
    )
    with pytest.raises(SetupError, match="DevTools did not answer.*is Chrome running"):
        runner.run([step("chrome_open_tabs", urls_to_open=["file:///home/user/x.html"])])


def test_update_browse_history_uploads_chromes_history_file(desktop, tmp_path):
    runner = SetupRunner(desktop, cache_dir=tmp_path, task_id="hist")
    with pytest.raises(SetupError, match=f"place {HISTORY_CACHE_NAME} at"):
        runner.run(
            [
                step(
                    "update_browse_history",
                    history=[
                        {
                            "url": "https://a.example/",
                            "title": "A",
                            "visit_time_from_now_in_seconds": 5,
                        }
                    ],
                )
            ]
        )
    (tmp_path / "hist").mkdir()
    base = history_db(tmp_path / "hist" / HISTORY_CACHE_NAME)
    runner.run(
        [
            step(
                "update_browse_history",
                history=[
                    {
                        "url": "https://a.example/",
                        "title": "A",
                        "visit_time_from_now_in_seconds": 5,
                    },
                    {
                        "url": "https://b.example/",
                        "title": "B",
                        "visit_time_from_now_in_seconds": 60,
                    },
                ],
            )
        ]
    )
    out = desktop.execute(
        [
            "python3",
            "-c",
            "import sqlite3, os; print(sqlite3.connect("
            "os.path.expanduser('~/.config/google-chrome/Default/History'))"
            ".execute('select count(*) from urls').fetchone()[0])",
        ],
        setup=True,
    )
    assert out["output"].strip() == "2", out
    assert sqlite3.connect(base).execute("select count(*) from urls").fetchone()[0] == 0
