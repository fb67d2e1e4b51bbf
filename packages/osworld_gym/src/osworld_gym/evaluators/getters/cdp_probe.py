"""A DevTools (CDP) client that runs *inside the desktop*, standard library only.

The desktop is network-isolated: the host reaches it only through the guest server, and
Chrome's DevTools endpoint (``127.0.0.1:1337``, or ``:9222`` through the tasks' ``socat``) is
reachable only from inside. The browser getters (:mod:`.chrome`) therefore send this file's
source to the guest and run it there::

    python3 -c <this source> '{"action": "active", "ports": [1337, 9222]}'

It prints one JSON object on stdout: ``{"port": ..., "tabs": [...]}`` for ``"list"``,
``{"port": ..., "tab": {...} | null}`` for ``"active"``, or ``{"error": "..."}``. Nothing here
may import anything outside the standard library (the guest may be OSWorld's Ubuntu VM), and the
file must stay runnable as a script.

Actions:

* ``list``: the open tabs (``page`` targets) as ``{"id", "title", "url"}`` in the order they
  were opened (``Target.getTargets``; falls back to ``/json/list``, most recently active first).
* ``active``: the active tab: the most recently active tab whose document is visible, else the
  most recently active tab; with ``"content": true`` also its ``document.body.innerText``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import sys
import urllib.request
from typing import Any
from urllib.parse import urlsplit


def http_json(port: int, path: str, timeout: float) -> Any:
    """GET ``http://127.0.0.1:<port><path>`` and parse the JSON answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


class WebSocket:
    """The smallest client side of RFC 6455 CDP needs: text frames, masking, fragmentation."""

    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the websocket: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, text: str) -> None:
        payload = text.encode("utf-8")
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode in (0x0, 0x1, 0x2):
                message += data
                if first & 0x80:
                    return message.decode("utf-8", "replace")

    def call(self, call_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one CDP command and return its ``result`` (events in between are skipped)."""
        self.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            answer = json.loads(self.receive())
            if answer.get("id") == call_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def evaluate(target: dict[str, Any], expression: str, timeout: float) -> Any:
    """``Runtime.evaluate`` ``expression`` in a page target; its value (JSON-able) or None."""
    url = target.get("webSocketDebuggerUrl")
    if not url:
        return None
    ws = WebSocket(url, timeout)
    try:
        result = ws.call(1, "Runtime.evaluate", {"expression": expression, "returnByValue": True})
    finally:
        ws.close()
    return result.get("result", {}).get("value")


def pages(port: int, timeout: float) -> list[dict[str, Any]]:
    """Page targets, most recently active first (DevTools' ``/json/list`` order)."""
    targets = http_json(port, "/json/list", timeout)
    return [t for t in targets if _is_tab(t.get("type"), t.get("url"))]


def pages_in_creation_order(port: int, timeout: float) -> list[dict[str, Any]]:
    """Page targets in the order they were opened (``Target.getTargets`` on the browser)."""
    version = http_json(port, "/json/version", timeout)
    ws = WebSocket(version["webSocketDebuggerUrl"], timeout)
    try:
        infos = ws.call(1, "Target.getTargets", {}).get("targetInfos", [])
    finally:
        ws.close()
    return [
        {"id": t.get("targetId"), "title": t.get("title", ""), "url": t.get("url", "")}
        for t in infos
        if _is_tab(t.get("type"), t.get("url"))
    ]


def _is_tab(kind: Any, url: Any) -> bool:
    """Page targets except DevTools' own windows."""
    return kind == "page" and not str(url or "").startswith("devtools://")


def tab(target: dict[str, Any]) -> dict[str, Any]:
    return {"id": target.get("id"), "title": target.get("title", ""), "url": target.get("url", "")}


def run(args: dict[str, Any]) -> dict[str, Any]:
    timeout = float(args.get("timeout", 10))
    errors = []
    for port in args.get("ports", [1337, 9222]):
        try:
            targets = pages(int(port), timeout)
        except (OSError, ValueError) as exc:
            errors.append(f"port {port}: {exc}")
            continue
        if args.get("action", "list") == "list":
            try:
                return {"port": port, "tabs": pages_in_creation_order(int(port), timeout)}
            except (OSError, ValueError, KeyError, RuntimeError):
                return {"port": port, "tabs": [tab(t) for t in targets]}
        chosen = None
        for target in targets:
            try:
                # a page stuck in a dialog never answers: give each a short budget
                if evaluate(target, "document.visibilityState", min(timeout, 3.0)) == "visible":
                    chosen = target
                    break
            except (OSError, ValueError, RuntimeError):
                continue
        chosen = chosen or (targets[0] if targets else None)
        if chosen is None:
            return {"port": port, "tab": None}
        out = tab(chosen)
        if args.get("content"):
            text = "document.body ? document.body.innerText : ''"
            out["content"] = evaluate(chosen, text, timeout)
        return {"port": port, "tab": out}
    return {"error": "no DevTools endpoint answered (" + "; ".join(errors) + ")"}


def main(argv: list[str]) -> int:
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    try:
        out = run(args)
    except Exception as exc:  # noqa: BLE001 - reported to the host as JSON
        out = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
