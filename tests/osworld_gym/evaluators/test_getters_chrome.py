"""Browser getters: DevTools queried inside the desktop by the stdlib probe.

Three levels: canned guest answers (plumbing and errors), the probe run on this machine against
a fake and a real headless Chromium, and the whole OSWorld task shape on the local desktop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators import EvalContext, getter
from osworld_gym.evaluators.getters import cdp_probe
from osworld_gym.evaluators.getters.chrome import address_bar_url
from repo_paths import ROOT
from tcp_guest import free_port

SHIMS = ROOT / "packages/osworld_gym/src/osworld_gym/guest/shims"
needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Chromium is not installed"
)


class CannedGuest:
    """Answers every ``execute`` with one canned result and records the commands."""

    def __init__(self, answer: dict[str, Any]):
        self.answer = answer
        self.commands: list[Any] = []

    def execute(self, command, shell=False, timeout=120.0, setup=False):
        self.commands.append(command)
        return self.answer


class ThisMachine:
    """A 'guest' that is this machine: commands run here (the probe needs only python3)."""

    def execute(self, command, shell=False, timeout=120.0, setup=False):
        command = [sys.executable if c == "python3" else c for c in command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        return {
            "status": "success",
            "output": done.stdout,
            "error": done.stderr,
            "returncode": done.returncode,
        }


def ctx(client: Any, tmp_path: Path) -> EvalContext:
    return EvalContext(client=client, cache_dir=tmp_path / "cache", task_id="t")


# -- plumbing -----------------------------------------------------------------------------------


def test_probe_answer_is_parsed_and_the_source_is_shipped(tmp_path):
    tab = {"id": "1", "title": "Docs", "url": "https://www.example.org/docs", "content": "Hello"}
    guest = CannedGuest(
        {"status": "success", "output": json.dumps({"port": 1337, "tab": tab}), "returncode": 0}
    )
    c = ctx(guest, tmp_path)
    assert getter("active_tab_info")(c, {}) == {
        "title": "Docs",
        "url": tab["url"],
        "content": "Hello",
    }
    assert getter("active_url_from_accessTree")(c, {}) == "https://example.org/docs"
    assert getter("active_url_from_accessTree")(c, {"goto_prefix": "https://www."}) == tab["url"]
    argv = guest.commands[0]
    assert argv[:2] == ["python3", "-c"] and "def main" in argv[2]
    assert json.loads(argv[3]) == {"action": "active", "content": True, "ports": [1337, 9222]}


def test_no_browser_is_none_but_a_broken_probe_is_an_error(tmp_path):
    down = CannedGuest(
        {
            "status": "success",
            "output": '{"error": "no DevTools endpoint answered"}',
            "returncode": 0,
        }
    )
    for name in ("active_tab_info", "open_tabs_info", "active_url_from_accessTree"):
        assert getter(name)(ctx(down, tmp_path), {}) is None
    for answer in (
        {"status": "success", "output": "Traceback ...", "returncode": 0},
        {"status": "success", "output": "", "error": "python3: not found", "returncode": 127},
        {"status": "error", "message": "boom"},
    ):
        with pytest.raises(EvaluatorError):
            getter("open_tabs_info")(ctx(CannedGuest(answer), tmp_path), {})


@pytest.mark.parametrize(
    ("url", "prefix", "shown"),
    [
        ("https://www.google.com/search?q=x", "https://", "https://google.com/search?q=x"),
        ("http://localhost:8000/a.html", "https://", "https://localhost:8000/a.html"),
        ("https://www.drugs.com/npc/", "https://www.", "https://www.drugs.com/npc/"),
        ("chrome://settings/", "https://", "https://chrome://settings/"),  # as OSWorld's reading
    ],
)
def test_address_bar_rendering(url, prefix, shown):
    assert address_bar_url(url, prefix) == shown


class FakeDevTools(BaseHTTPRequestHandler):
    """/json/list with two tabs and a service worker; no websocket, no /json/version."""

    targets = [
        {"type": "page", "id": "B", "title": "Second", "url": "https://b.example/"},
        {"type": "service_worker", "id": "S", "title": "sw", "url": "https://b.example/sw.js"},
        {"type": "page", "id": "A", "title": "First", "url": "https://a.example/"},
    ]

    def do_GET(self) -> None:  # noqa: N802
        if self.path != "/json/list":
            self.send_error(404)
            return
        body = json.dumps(self.targets).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_probe_runs_as_a_program_against_a_fake_devtools(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDevTools)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = ctx(ThisMachine(), tmp_path)
        cfg = {"ports": [free_port(), server.server_address[1]]}  # the first port is closed
        assert getter("open_tabs_info")(c, cfg) == [
            {"title": "Second", "url": "https://b.example/"},
            {"title": "First", "url": "https://a.example/"},
        ]
        assert getter("active_tab_info")(c, cfg) == {
            "title": "Second",
            "url": "https://b.example/",
            "content": "",
        }
        assert getter("open_tabs_info")(c, {"ports": [free_port()]}) is None
    finally:
        server.shutdown()


@pytest.mark.slow
@needs_chromium
def test_probe_against_a_real_headless_chromium(tmp_path):
    """The websocket client: creation order, activation order, page text."""
    port = free_port()
    proc = subprocess.Popen(
        [
            str(SHIMS / "google-chrome"),
            "--headless",
            f"--remote-debugging-port={port}",
            "data:text/html,<title>One</title><p>first page</p>",
        ],
        env={**os.environ, "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                cdp_probe.http_json(port, "/json/version", 1)
                break
            except OSError:
                assert time.monotonic() < deadline, "Chromium did not open DevTools"
                time.sleep(0.2)
        ws = cdp_probe.WebSocket(
            cdp_probe.http_json(port, "/json/version", 5)["webSocketDebuggerUrl"], 5
        )
        ws.call(
            1, "Target.createTarget", {"url": "data:text/html,<title>Two</title><p>second page</p>"}
        )
        ws.close()
        # the new tab's title arrives once its page loaded: a fixed 1 s wait failed under load
        deadline = time.monotonic() + 30
        while True:
            listed = cdp_probe.run({"action": "list", "ports": [port]})
            titles = [t["title"] for t in listed["tabs"]]
            if titles == ["One", "Two"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert titles == ["One", "Two"]
        active = cdp_probe.run({"action": "active", "ports": [port], "content": True})["tab"]
        assert active["title"] == "Two" and active["content"] == "second page"
        first = next(t for t in listed["tabs"] if t["title"] == "One")
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/json/activate/{first['id']}", timeout=5
        ):
            pass
        time.sleep(0.5)
        assert cdp_probe.run({"action": "active", "ports": [port]})["tab"]["title"] == "One"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


# -- the whole thing on the local desktop ------------------------------------------------------


@pytest.mark.desktop
@pytest.mark.slow
@needs_chromium
def test_osworld_url_task_on_the_local_desktop(local_env):
    """f3b19d1e's evaluator, with the live site replaced by a page served inside the desktop."""
    page = "<title>Ticket Delivery FAQs</title><h1>How do tickets arrive?</h1>"
    task = {
        "id": "chrome-url-local",
        "instruction": "Open the ticket delivery FAQ",
        "related_apps": ["chrome"],
        "config": [
            {
                "type": "execute",
                "parameters": {
                    "command": f"mkdir -p ~/site/faq && echo '{page}' > "
                    "~/site/faq/Ticket-Delivery-FAQs.html",
                    "shell": True,
                },
            },
            {
                "type": "launch",
                "parameters": {
                    "command": [
                        "python3",
                        "-m",
                        "http.server",
                        "8000",
                        "--directory",
                        "/home/user/site",
                    ]
                },
            },
            {
                "type": "launch",
                "parameters": {
                    "command": [
                        "google-chrome",
                        "--remote-debugging-port=1337",
                        "http://localhost:8000/faq/Ticket-Delivery-FAQs.html",
                    ]
                },
            },
            {
                "type": "launch",
                "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]},
            },
        ],
        "evaluator": {
            "func": ["is_expected_url_pattern_match", "is_expected_url_pattern_match"],
            "result": [
                {"type": "active_tab_info"},
                {"type": "active_url_from_accessTree", "goto_prefix": "https://"},
            ],
            "expected": [
                {"type": "rule", "rules": {"expected": ["Ticket-Delivery-FAQs"]}},
                {"type": "rule", "rules": {"expected": ["^https://localhost:8000/faq/"]}},
            ],
        },
    }
    local_env.reset(options={"task": task})
    client = local_env.unwrapped.provider.start()
    c = EvalContext(client=client, cache_dir=Path("/tmp/unused"), task_id=task["id"])
    deadline = time.monotonic() + 40
    while (info := getter("active_tab_info")(c, {})) is None or info[
        "title"
    ] != "Ticket Delivery FAQs":
        assert time.monotonic() < deadline, f"the page never became the active tab: {info}"
        time.sleep(0.5)
    assert info["url"] == "http://localhost:8000/faq/Ticket-Delivery-FAQs.html"
    assert "How do tickets arrive?" in info["content"]
    assert getter("open_tabs_info")(c, {}) == [
        {"title": "Ticket Delivery FAQs", "url": info["url"]}
    ]
    assert (
        getter("active_url_from_accessTree")(c, {})
        == "https://localhost:8000/faq/Ticket-Delivery-FAQs.html"
    )
    _, reward, terminated, _, step_info = local_env.step("DONE")
    assert terminated and step_info["infra_error"] is None
    assert reward == 1.0


# -- Chrome's profile files -------------------------------------------------------------------


class Files:
    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        return self.files.get(path)


def test_profile_getters_read_preferences_and_bookmarks(tmp_path):
    prefs = {
        "enable_do_not_track": True,
        "profile": {"name": "Work"},
        "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
    }
    roots = {"bookmark_bar": {"children": [{"name": "Docs", "url": "https://docs.example/"}]}}
    profile = "/home/user/.config/google-chrome/Default"
    c = ctx(
        Files(
            {
                f"{profile}/Preferences": json.dumps(prefs).encode(),
                f"{profile}/Bookmarks": json.dumps({"roots": roots}).encode(),
            }
        ),
        tmp_path,
    )
    assert getter("enable_do_not_track")(c, {}) == "true"
    assert getter("default_search_engine")(c, {}) == "Bing"
    assert getter("profile_name")(c, {}) == "Work"
    assert getter("bookmarks")(c, {}) == roots
    fresh = ctx(Files({f"{profile}/Preferences": b"{}"}), tmp_path)
    assert (
        getter("enable_do_not_track")(fresh, {}),
        getter("default_search_engine")(fresh, {}),
    ) == ("false", "Google")
    never_ran = ctx(Files({}), tmp_path)
    assert (
        getter("enable_do_not_track")(never_ran, {}) is None
        and getter("bookmarks")(never_ran, {}) is None
    )


DNT_TASK = {  # chrome 030eeff7, unchanged but for the id
    "id": "030eeff7-dnt",
    "snapshot": "chrome",
    "related_apps": ["chrome"],
    "proxy": False,
    "instruction": (
        "Can you enable the 'Do Not Track' feature in Chrome to enhance my online privacy?"
    ),
    "config": [
        {
            "type": "launch",
            "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]},
        },
        {
            "type": "launch",
            "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]},
        },
    ],
    "evaluator": {
        "postconfig": [
            {"type": "launch", "parameters": {"command": ["pkill", "chrome"]}},
            {
                "type": "launch",
                "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]},
            },
            {"type": "sleep", "parameters": {"seconds": 3}},
        ],
        "func": "exact_match",
        "result": {"type": "enable_do_not_track"},
        "expected": {"type": "rule", "rules": {"expected": "true"}},
    },
}

ENABLE_DNT = (
    "import json, pathlib; p = pathlib.Path.home() / '.config/google-chrome/Default/Preferences'; "
    "d = json.loads(p.read_text()); d['enable_do_not_track'] = True; p.write_text(json.dumps(d))"
)


@pytest.mark.desktop
@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("enable", [False, True])
def test_do_not_track_task_on_the_local_desktop(local_env, enable):
    """030eeff7 end to end; the agent's clicks are stood in for by editing the profile while
    Chrome is stopped."""
    local_env.reset(options={"task": DNT_TASK})
    client = local_env.unwrapped.provider.start()
    prefs = "/home/user/.config/google-chrome/Default/Preferences"
    deadline = time.monotonic() + 30
    while client.get_file(prefs) is None:
        assert time.monotonic() < deadline, "Chrome never wrote its Preferences"
        time.sleep(0.5)
    if enable:
        client.execute(["pkill", "chrome"])
        deadline = time.monotonic() + 20
        while client.execute("pgrep chromium", shell=True)["output"].strip():
            assert time.monotonic() < deadline, "Chromium did not stop"
            time.sleep(0.25)
        assert client.execute(["python3", "-c", ENABLE_DNT])["returncode"] == 0
    _, reward, terminated, _, info = local_env.step("DONE")
    assert terminated and info["infra_error"] is None
    assert reward == (1.0 if enable else 0.0)
