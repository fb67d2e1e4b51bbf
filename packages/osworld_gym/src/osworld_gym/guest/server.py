"""HTTP machinery of the guest: a threading ``http.server`` on a unix socket or loopback TCP,
bearer-token auth, routing, and JSON errors.

Every answer that is not a success is JSON ``{"status": "error", "message": ...}``; a handler
that raises never takes the server down (it becomes a 500). Handlers are plain functions
``(Request) -> Response``.

Whoever can reach the socket gets bounded resources, not a thread forever: at most
:data:`MAX_CONNECTIONS` connections at once (more are answered 503 and closed), the request
line and headers must arrive within :data:`HEADER_TIMEOUT_S` of the first byte, a body within
:data:`BODY_TIMEOUT_S` plus one second per :data:`BODY_MIN_RATE` bytes (a watchdog thread shuts
the socket of a request past its deadline), and a body -- ``Content-Length`` or chunked, whose
chunk sizes must be plain hex -- is at most :data:`MAX_BODY` bytes.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import os
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

from osworld_gym.errors import ActionError, GuestError, MissingDependencyError
from osworld_gym.guest.files import FileRefused
from osworld_gym.guest.multipart import Field, FormError, parse_form
from osworld_gym.protocol import routes

log = logging.getLogger(__name__)

#: Largest request body accepted (uploads of task files).
MAX_BODY = 1 << 30
#: Seconds an idle keep-alive connection may wait for its next request.
IDLE_TIMEOUT_S = 300
#: Seconds from a request's first byte until its request line and headers must be complete.
HEADER_TIMEOUT_S = 30.0
#: Seconds a request body may take, plus one second per BODY_MIN_RATE bytes of it.
BODY_TIMEOUT_S = 30.0
BODY_MIN_RATE = 1 << 20
#: Connections served at once; more are answered 503 and closed.
MAX_CONNECTIONS = 64
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
TOKEN_HEADERS = (routes.TOKEN_HEADER,)


class HTTPError(Exception):
    """Raise in a handler to answer ``status`` with a JSON error ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Message
    body: bytes

    def json(self) -> dict[str, Any]:
        """The body as a JSON object (an empty body is ``{}``); 400 otherwise."""
        if not self.body.strip():
            return {}
        try:
            data = json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise HTTPError(400, f"request body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise HTTPError(400, f"request body must be a JSON object, got {type(data).__name__}")
        return data

    def form(self) -> dict[str, Field]:
        try:
            return parse_form(self.headers.get("Content-Type"), self.body)
        except FormError as e:
            raise HTTPError(400, str(e)) from None

    def field(self, name: str) -> str:
        """A required text field from a form *or* JSON body."""
        ctype = (self.headers.get("Content-Type") or "").lower()
        if ctype.startswith("application/json"):
            value = self.json().get(name)
        else:
            f = self.form().get(name)
            value = f.text if f is not None else None
        if not isinstance(value, str) or not value:
            raise HTTPError(400, f"missing form field {name!r}")
        return value


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    #: Stream this file instead of ``body`` (opened before the status line is sent).
    file: Path | None = None
    #: Or stream this already opened (and checked) file of ``stream_size`` bytes; closed after.
    stream: BinaryIO | None = None
    stream_size: int = 0


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(obj).encode(), "application/json", headers or {})


def text_response(text: str, status: int = 200) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8")


def error_response(status: int, message: str) -> Response:
    return json_response({"status": "error", "message": message}, status)


Handler = Callable[[Request], Response]


class Router:
    """``(method, path) -> handler`` with 404/405 JSON answers and bearer-token auth."""

    def __init__(self, token: str):
        if not token:
            raise ValueError("the guest needs a non-empty token")
        self._token = token.encode()
        self._routes: dict[str, dict[str, Handler]] = {}

    def add(self, methods: str | tuple[str, ...], path: str, handler: Handler) -> None:
        for m in (methods,) if isinstance(methods, str) else methods:
            self._routes.setdefault(path, {})[m.upper()] = handler

    def route(self, methods: str | tuple[str, ...], path: str) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            self.add(methods, path, fn)
            return fn

        return deco

    def authorized(self, headers: Message) -> bool:
        auth = headers.get("Authorization") or ""
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        for name in TOKEN_HEADERS:
            given = given or (headers.get(name) or "").strip()
        return bool(given) and hmac.compare_digest(given.encode(), self._token)

    def dispatch(self, req: Request) -> Response:
        by_method = self._routes.get(req.path)
        if by_method is None:
            raise HTTPError(404, f"no such endpoint: {req.path}")
        handler = by_method.get(req.method) or (
            by_method.get("GET") if req.method == "HEAD" else None
        )
        if handler is None:
            raise HTTPError(
                405, f"{req.path} accepts {', '.join(sorted(by_method))}, not {req.method}"
            )
        try:
            return handler(req)
        except HTTPError:
            raise
        except ActionError as e:
            raise HTTPError(400, f"invalid action: {e}") from None
        except MissingDependencyError as e:
            raise HTTPError(501, str(e)) from None
        except GuestError as e:
            raise HTTPError(e.status or 500, str(e)) from None
        except FileRefused as e:
            raise HTTPError(e.status, e.message) from None


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "osworld-gym-guest/1"
    timeout = IDLE_TIMEOUT_S
    router: Router  # set on the subclass made per server
    watchdog: _Watchdog  # likewise
    rfile: io.BufferedReader  # StreamRequestHandler's makefile("rb", rbufsize=-1): buffered

    def handle_one_request(self) -> None:
        """Wait (idle timeout) for a request's first byte, then give its headers a deadline."""
        try:
            if not self.rfile.peek(1):
                self.close_connection = True
                return
        except (OSError, ValueError):
            self.close_connection = True
            return
        self.watchdog.arm(self.connection, HEADER_TIMEOUT_S)
        try:
            super().handle_one_request()
        finally:
            self.watchdog.disarm(self.connection)

    def do_GET(self) -> None:
        self.watchdog.disarm(self.connection)  # headers are in; the body has its own deadline
        self._handle()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        try:
            resp = self._dispatch()
        except HTTPError as e:
            resp = error_response(e.status, e.message)
        except Exception as e:  # the server must survive any handler bug
            log.exception("%s %s failed", self.command, self.path)
            resp = error_response(500, f"internal error: {type(e).__name__}: {e}")
        try:
            self._send(resp)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            if resp.stream is not None:
                resp.stream.close()

    def _dispatch(self) -> Response:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        if not self.router.authorized(self.headers):
            self.close_connection = True  # the body was not read
            raise HTTPError(401, "missing or wrong token: send 'Authorization: Bearer <token>'")
        body = self._read_body()
        return self.router.dispatch(
            Request(self.command, url.path or "/", query, self.headers, body)
        )

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        budget = BODY_TIMEOUT_S + (
            int(length) / BODY_MIN_RATE if length and length.isdigit() and len(length) < 19 else 0
        )
        self.watchdog.arm(self.connection, min(budget, BODY_TIMEOUT_S + MAX_BODY / BODY_MIN_RATE))
        try:
            return self._read_body_unguarded()
        except (OSError, ValueError):
            self.close_connection = True
            raise HTTPError(400, "request body not received in time") from None
        finally:
            self.watchdog.disarm(self.connection)

    def _read_body_unguarded(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            self.close_connection = True
            raise HTTPError(400, f"bad Content-Length {length!r}") from None
        if n < 0 or n > MAX_BODY:
            self.close_connection = True
            raise HTTPError(413, f"request body of {n} bytes is over the {MAX_BODY} byte limit")
        data = self.rfile.read(n)
        if len(data) != n:
            self.close_connection = True
            raise HTTPError(400, "request body shorter than its Content-Length")
        return data

    def _read_chunked(self) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            text = line.split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.fullmatch(text):  # int(..., 16) would take "-1", "+1", "0x1_0"
                self.close_connection = True
                raise HTTPError(400, f"malformed chunk size {text[:40]!r} in a chunked body")
            size = int(text, 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise HTTPError(413, f"request body is over the {MAX_BODY} byte limit")
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.readline(8) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise HTTPError(400, "chunked body truncated or malformed")
            parts.append(chunk)

    def _send(self, resp: Response) -> None:
        if resp.file is not None and resp.stream is None:
            try:  # open first: a 200 must come with a file
                resp.stream = open(resp.file, "rb")
                resp.stream_size = os.fstat(resp.stream.fileno()).st_size
            except OSError as e:
                resp = error_response(
                    404 if isinstance(e, FileNotFoundError) else 422,
                    f"cannot read {resp.file}: {e.strerror}",
                )
        size = resp.stream_size if resp.stream is not None else len(resp.body)
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(size))
        for k, v in resp.headers.items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if resp.stream is not None and not _copy_exactly(resp.stream, self.wfile, size):
            self.close_connection = True  # a short body: end it, or the client waits forever
        else:
            self.wfile.write(resp.body)

    def address_string(self) -> str:
        return self.client_address[0] if isinstance(self.client_address, tuple) else "unix"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("%s %s -> %s", self.command, self.path, code)


def _copy_exactly(src: BinaryIO, dst: Any, size: int) -> bool:
    """Send at most ``size`` bytes, the promised Content-Length, even if the file grew
    meanwhile; False if it shrank and fewer were sent."""
    left = size
    while left > 0:
        block = src.read(min(left, 1 << 20))
        if not block:
            return False
        dst.write(block)
        left -= len(block)
    return True


class _Watchdog:
    """One thread that shuts down the sockets of requests past their deadline."""

    def __init__(self) -> None:
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, seconds: float) -> None:
        with self._lock:
            self._deadlines[sock] = time.monotonic() + seconds
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="guest-deadlines", daemon=True
                )
                self._thread.start()

    def disarm(self, sock: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(sock, None)

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self._lock:
                late = [s for s, t in self._deadlines.items() if t <= now]
                for s in late:
                    del self._deadlines[s]
            for s in late:
                log.info("closing a connection that missed its request deadline")
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _Bounded(socketserver.BaseServer):
    """Mixin: at most MAX_CONNECTIONS connection threads; the rest get 503 and are closed.

    Listed before ThreadingMixIn and the server class, which it overrides; BaseServer as its
    base comes last in their method order, and tells the checker what ``self`` is."""

    daemon_threads = True
    block_on_close = False
    max_connections = MAX_CONNECTIONS

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("over %d connections: refusing one", self.max_connections)
            try:
                request.settimeout(1.0)
                body = b'{"status": "error", "message": "too many connections"}'
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                    b"Content-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._slots.release()

    @property
    def _slots(self) -> threading.BoundedSemaphore:
        sem = self.__dict__.get("_sem")
        if sem is None:
            sem = self.__dict__["_sem"] = threading.BoundedSemaphore(self.max_connections)
        return sem


class _UnixHTTPServer(_Bounded, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    pass


class _TCPHTTPServer(_Bounded, ThreadingHTTPServer):
    pass


class _TCP6HTTPServer(_TCPHTTPServer):
    address_family = socket.AF_INET6


def make_server(
    router: Router, *, uds: str | None = None, host: str | None = None, port: int | None = None
) -> socketserver.BaseServer:
    """A threading HTTP server on a unix socket (mode 0600) or on a loopback TCP port."""
    handler = type(
        "GuestRequestHandler", (_RequestHandler,), {"router": router, "watchdog": _Watchdog()}
    )
    if uds is not None:
        path = Path(uds)
        if path.is_socket():
            path.unlink()
        elif path.exists():
            raise ValueError(f"{uds} exists and is not a socket; refusing to replace it")
        old = os.umask(0o177)
        try:
            return _UnixHTTPServer(str(path), handler)
        finally:
            os.umask(old)
    if host not in LOOPBACK_HOSTS:
        raise ValueError(
            f"the guest only listens on loopback ({', '.join(sorted(LOOPBACK_HOSTS))})"
            f" or a unix socket, not on {host!r}"
        )
    if port is None:
        raise ValueError("--port is required with --host")
    if host == "::1":
        return _TCP6HTTPServer((host, port), handler)
    return _TCPHTTPServer(("127.0.0.1", port), handler)
