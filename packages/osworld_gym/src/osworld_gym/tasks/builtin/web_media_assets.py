"""Offline web sites and media for the built-in chrome, vlc and multi_apps tasks.

Every generator is a pure function of its URL parameters (see :mod:`osworld_gym.tasks.assets`):

- ``portal_server``: a self-contained Python 3 script that serves the "Maple Street" team portal
  (news, staff directory, contact form, downloads, search) on 127.0.0.1 and records what the
  browser asked for, in its own memory only: every request (``GET /__judge/requests``, one
  line each) and every form post (``GET /__judge/submissions``, one JSON line each). Run it
  inside the desktop with ``python3 portal.py [port]``. That record is evidence only the
  server writes: not a file in the player's home (the agent wrote one and scored 1 without a
  browser), and the process makes itself non-dumpable (``PR_SET_DUMPABLE`` 0), so the player's
  processes, though of its uid, can neither ``ptrace`` it nor write its memory. A portal the
  agent kills and replaces on the port is refused by the guest when the evaluator's command
  names the port (409, scored 0).
- ``portal_file``: one of the portal's downloadable files (the same bytes the server sends).
- ``wav_tone``: a 16-bit PCM mono WAV sine tone.
- ``vlcrc``: a VLC configuration file for the sandboxed desktop (no first-start privacy dialog,
  HTTP interface on 8080 with password ``password``), plus any ``option=value`` given.

>>> from osworld_gym.tasks.assets import generate
>>> generate("builtin-asset://wav_tone?freq=440&seconds=1&rate=8000")[:4]
b'RIFF'
>>> b"one-instance=1" in generate("builtin-asset://vlcrc?one-instance=1")
True
>>> b"MAPLE-4242" in portal_pages({"code": "MAPLE-4242"})["/voucher.html"][1]
True
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import struct
import zipfile
from typing import Any

#: Announcements on the portal: slug -> (title, body).
ARTICLES: dict[str, tuple[str, str]] = {
    "office-move": (
        "Office move on Friday",
        "The support team moves to the third floor on Friday. Pack your desk by "
        "Thursday evening; boxes are in the kitchen.",
    ),
    "coffee-machine": (
        "A new coffee machine",
        "The kitchen has a new coffee machine. It makes espresso, cappuccino and "
        "hot chocolate. Please rinse the milk jug after use.",
    ),
    "security-training": (
        "Security training dates",
        "Everyone must attend one security training session this quarter. "
        "Sessions run on the 4th, 11th and 18th, 10:00 in room Birch.",
    ),
    "summer-party": (
        "Summer party RSVP",
        "The summer party is on the roof terrace on the 27th at 17:00. Reply to "
        "Dana Whitfield by the 20th.",
    ),
    "parking-rules": (
        "New parking rules",
        "From next month, spots A1 to A12 are reserved for car sharing. Visitor "
        "parking moves to level -2.",
    ),
    "quarterly-results": (
        "Quarterly results are out",
        "Revenue grew 12 percent over the last quarter. The full report is on the downloads page.",
    ),
}

#: Staff directory rows: (name, department, extension, email).
STAFF: tuple[tuple[str, str, str, str], ...] = (
    ("Dana Whitfield", "Sales", "4102", "dana.whitfield@maple.example"),
    ("Omar Haddad", "Engineering", "4217", "omar.haddad@maple.example"),
    ("Lena Kovacs", "Support", "4330", "lena.kovacs@maple.example"),
    ("Priya Raman", "Sales", "4125", "priya.raman@maple.example"),
    ("Tomas Berg", "Finance", "4451", "tomas.berg@maple.example"),
    ("Mei Lin", "Engineering", "4209", "mei.lin@maple.example"),
    ("Jonas Adler", "Support", "4338", "jonas.adler@maple.example"),
    ("Sofia Marques", "Sales", "4118", "sofia.marques@maple.example"),
)

#: Departments offered by the contact form.
DEPARTMENTS: tuple[str, ...] = ("Sales", "Support", "Engineering", "Finance")

_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:50em}"
    "nav a{margin-right:1.2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #999;padding:.3em .8em}"
    "label{display:block;margin-top:.8em}"
)

Page = tuple[str, bytes, dict[str, str]]  # content type, body, extra headers


def _html(title: str, body: str) -> bytes:
    nav = (
        '<nav><a href="/index.html">Home</a><a href="/news/index.html">Announcements</a>'
        '<a href="/staff.html">Staff directory</a><a href="/contact.html">Contact us</a>'
        '<a href="/downloads.html">Downloads</a></nav>'
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{_STYLE}</style></head><body>{nav}<h1>{html.escape(title)}</h1>"
        f"{body}</body></html>"
    ).encode()


def portal_files(params: dict[str, str]) -> dict[str, bytes]:
    """The portal's downloadable files by name (``report.csv``, ``notes.txt``, ``photos.zip``).

    ``params["quarter"]`` (default ``Q3``) is printed in the report.
    """
    quarter = params.get("quarter", "Q3")
    report = "region,quarter,revenue\n" + "".join(
        f"{region},{quarter},{revenue}\n"
        for region, revenue in (("North", 1200), ("South", 950), ("East", 1430), ("West", 780))
    )
    notes = "Meeting notes\n- budget approved\n- hire two engineers\n- next review in six weeks\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in (
            ("beach.txt", "sand and sea\n"),
            ("mountain.txt", "snow and rock\n"),
            ("city.txt", "lights and noise\n"),
        ):
            info = zipfile.ZipInfo(f"photos/{name}", date_time=(2024, 6, 1, 12, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, text)
    return {
        "report.csv": report.encode(),
        "notes.txt": notes.encode(),
        "photos.zip": buf.getvalue(),
    }


def portal_pages(params: dict[str, str]) -> dict[str, Page]:
    """Every page of the portal: path -> (content type, body, extra headers).

    Parameters (all optional): ``code`` (the voucher code on ``/voucher.html``), ``quarter``
    (printed in ``report.csv``).
    """
    pages: dict[str, Page] = {}

    def page(path: str, title: str, body: str) -> None:
        pages[path] = ("text/html; charset=utf-8", _html(title, body), {})

    page(
        "/index.html",
        "Maple Street Team Portal",
        "<p>Welcome to the team portal.</p>"
        '<form action="/search" method="get"><label for="q">Search the portal</label>'
        '<input id="q" name="q" type="search" autofocus> '
        '<button type="submit">Search</button></form>'
        '<ul><li><a href="/news/index.html">Announcements</a></li>'
        '<li><a href="/staff.html">Staff directory</a></li>'
        '<li><a href="/contact.html">Contact us</a></li>'
        '<li><a href="/downloads.html">Downloads</a></li>'
        '<li><a href="/voucher.html">Canteen voucher</a></li></ul>',
    )
    pages["/"] = pages["/index.html"]
    items = "".join(
        f'<li><a href="/news/{slug}.html">{html.escape(title)}</a></li>'
        for slug, (title, _) in ARTICLES.items()
    )
    page("/news/index.html", "Announcements", f"<ul>{items}</ul>")
    for slug, (title, body) in ARTICLES.items():
        page(f"/news/{slug}.html", title, f"<p>{html.escape(body)}</p>")
    rows = "".join(
        f"<tr><td>{n}</td><td>{d}</td><td>{x}</td><td>{e}</td></tr>" for n, d, x, e in STAFF
    )
    page(
        "/staff.html",
        "Staff directory",
        f"<table><tr><th>Name</th><th>Department</th><th>Extension</th><th>Email</th></tr>"
        f"{rows}</table>",
    )
    options = "".join(f"<option>{d}</option>" for d in DEPARTMENTS)
    page(
        "/contact.html",
        "Contact us",
        '<form action="/submit" method="post">'
        '<label for="name">Full name</label><input id="name" name="name" type="text" autofocus>'
        '<label for="email">Email</label><input id="email" name="email" type="text">'
        f'<label for="department">Department</label><select id="department" name="department">'
        f"{options}</select>"
        '<label for="message">Message</label>'
        '<textarea id="message" name="message" rows="4" cols="40"></textarea>'
        '<label><input id="newsletter" name="newsletter" type="checkbox" value="yes"> '
        "Send me the monthly newsletter</label>"
        '<p><button type="submit">Send</button></p></form>',
    )
    links = "".join(f'<li><a href="/files/{name}">{name}</a></li>' for name in portal_files(params))
    page("/downloads.html", "Downloads", f"<ul>{links}</ul>")
    code = params.get("code", "MAPLE-0000")
    page(
        "/voucher.html",
        "Canteen voucher",
        f'<p>Your canteen voucher code is: <strong id="code">{html.escape(code)}</strong></p>'
        "<p>Show it at the till for a free lunch.</p>",
    )
    for name, data in portal_files(params).items():
        kind = {"csv": "text/csv", "txt": "text/plain", "zip": "application/zip"}[name[-3:]]
        pages[f"/files/{name}"] = (
            kind,
            data,
            {"Content-Disposition": f'attachment; filename="{name}"'},
        )
    return pages


_SERVER = r'''#!/usr/bin/env python3
"""The Maple Street team portal (osworld-gym built-in tasks). Usage: python3 portal.py [port]"""
import base64, ctypes, html, json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PAGES = json.loads(base64.b64decode("%(pages)s"))
TITLES = %(titles)r
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else %(port)d
#: What the browser asked for, kept in this process only (see the module's docstring).
RECORD = {"requests": [], "submissions": []}
LOCK = threading.Lock()
JUDGE = "/__judge/"


def private():
    """Non-dumpable: no process of this uid may ptrace this one or touch its memory."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def log(name, line):
    with LOCK:
        RECORD[name].append(line)


def wrap(title, body):
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>%%s</title></head>"
            "<body><h1>%%s</h1>%%s<p><a href='/index.html'>Home</a></p></body></html>"
            %% (html.escape(title), html.escape(title), body)).encode()


class Handler(BaseHTTPRequestHandler):
    def send(self, status, kind, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path.startswith(JUDGE) and url.path[len(JUDGE):] in RECORD:
            with LOCK:
                lines = list(RECORD[url.path[len(JUDGE):]])
            body = "".join(line + "\n" for line in lines).encode()
            return self.send(200, "text/plain; charset=utf-8", body)
        log("requests", "GET " + self.path)
        if url.path == "/search":
            q = parse_qs(url.query).get("q", [""])[0]
            hits = [(p, t) for p, t in TITLES.items() if q.strip() and q.lower() in t.lower()]
            items = "".join("<li><a href='%%s'>%%s</a></li>" %% (p, html.escape(t))
                            for p, t in hits)
            body = ("<p>%%d result(s) for <b>%%s</b></p><ul>%%s</ul>"
                    %% (len(hits), html.escape(q), items))
            return self.send(200, "text/html; charset=utf-8", wrap("Search results", body))
        page = PAGES.get(url.path)
        if page is None:
            return self.send(404, "text/html; charset=utf-8", wrap("Not found", ""))
        kind, body, headers = page
        self.send(200, kind, base64.b64decode(body), headers.items())

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        fields = {k: v[0] if len(v) == 1 else v for k, v in parse_qs(raw).items()}
        log("requests", "POST " + self.path)
        log("submissions", json.dumps({"path": self.path, "time": time.time(),
                                       "fields": fields}, sort_keys=True))
        name = html.escape(str(fields.get("name", "")))
        self.send(200, "text/html; charset=utf-8",
                  wrap("Thank you", "<p>Thank you %%s, your message was sent.</p>" %% name))

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    private()
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
'''


def portal_server_asset(params: dict[str, str]) -> bytes:
    """The portal server script. Params: ``port`` (default 8000) and those of
    :func:`portal_pages`."""
    pages = {
        path: [kind, base64.b64encode(body).decode(), headers]
        for path, (kind, body, headers) in portal_pages(params).items()
    }
    titles = {
        path: body.split(b"<title>", 1)[1].split(b"</title>", 1)[0].decode()
        for path, (kind, body, _) in portal_pages(params).items()
        if kind.startswith("text/html") and path.endswith(".html")
    }
    blob = base64.b64encode(json.dumps(pages, sort_keys=True).encode()).decode()
    return (
        _SERVER
        % {
            "pages": blob,
            "titles": dict(sorted(titles.items())),
            "port": int(params.get("port", "8000")),
        }
    ).encode()


def portal_file_asset(params: dict[str, str]) -> bytes:
    """One downloadable file of the portal: ``name`` plus :func:`portal_files` params."""
    return portal_files(params)[params["name"]]


def wav_tone_asset(params: dict[str, str]) -> bytes:
    """A mono 16-bit PCM WAV sine tone: ``freq`` (Hz, integer, default 440), ``seconds``
    (default 5), ``rate`` (samples per second, default 8000), ``volume`` (0..1, default 0.3)."""
    freq, seconds = int(params.get("freq", "440")), int(params.get("seconds", "5"))
    rate, volume = int(params.get("rate", "8000")), float(params.get("volume", "0.3"))
    if not (0 < freq < rate // 2 and 0 < seconds <= 3600 and 0 <= volume <= 1):
        raise ValueError("need 0 < freq < rate/2, 0 < seconds <= 3600 and 0 <= volume <= 1")
    amplitude = int(32767 * volume)
    # An integer frequency repeats exactly every second: build one second, repeat it.
    second = struct.pack(
        f"<{rate}h",
        *(round(amplitude * math.sin(2 * math.pi * freq * i / rate)) for i in range(rate)),
    )
    data = second * seconds
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        rate,
        rate * 2,
        2,
        16,
        b"data",
        len(data),
    )
    return header + data


#: vlcrc options every built-in VLC task needs on the sandboxed desktop.
VLC_BASE_OPTIONS: dict[str, str] = {
    "qt-privacy-ask": "0",  # no "Privacy and Network Access Policy" dialog
    "qt-updates-notif": "0",
    "metadata-network-access": "0",
    "extraintf": "http",  # status at http://127.0.0.1:8080/requests/status.xml
    "http-password": "password",  # OSWorld's VLC password
}


def vlcrc_asset(params: dict[str, str]) -> bytes:
    """A ``~/.config/vlc/vlcrc``: :data:`VLC_BASE_OPTIONS` updated with every param given.

    VLC looks options up by name whatever ``[section]`` they are in, so one section suffices.
    """
    options: dict[str, Any] = {**VLC_BASE_OPTIONS, **params}
    lines = ["# VLC configuration written by osworld-gym", "[core]"]
    lines += [f"{key}={value}" for key, value in sorted(options.items())]
    return ("\n".join(lines) + "\n").encode()
