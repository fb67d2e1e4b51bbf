"""Host-side client of the guest server (:mod:`osworld_gym.guest`).

One method per endpoint. Transport failures and non-2xx answers raise
:class:`~osworld_gym.errors.GuestError` carrying the server's message, the HTTP status and the
endpoint. Idempotent GETs are retried (with backoff) on transport errors and 5xx answers;
POSTs only when the connection could not be made at all (so nothing ran twice).

Example (needs a running guest)::

    with GuestClient(uds="/run/guest.sock", token=token) as guest:
        guest.wait_ready(timeout=30)
        frame = guest.screenshot_array()              # (H, W, 3) uint8
        guest.run_actions([Click(100, 200), TypeText("héllo")])
        guest.reset_desktop()
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, Self, overload

import httpx
import numpy as np

from osworld_gym.errors import GuestError, UnusableResultFile
from osworld_gym.protocol import routes

# Largest file get_file/download_file accept by default. Task result files are documents,
# sheets and slides of a few MB; a larger one at a result path is the agent's doing
# (``truncate -s 2G``) and is scored 0, never buffered.
from osworld_gym.protocol.client import MAX_FILE_BYTES, poll_until_ready
from osworld_gym.protocol.primitives import Primitive, Wait, to_dict

log = logging.getLogger(__name__)

_RETRY_STATUSES = {502, 503}
_BACKOFF_S = 0.2


class GuestClient:
    """Talks to one guest over a unix socket (``uds``) or ``base_url`` (loopback TCP)."""

    def __init__(
        self,
        *,
        uds: str | None = None,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
    ):
        if (uds is None) == (base_url is None):
            raise ValueError("give exactly one of uds= or base_url=")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.HTTPTransport(uds=uds) if uds is not None else httpx.HTTPTransport()
        self._http = httpx.Client(
            transport=transport,
            base_url=base_url or "http://guest",
            headers=headers,
            timeout=timeout,
        )
        self.timeout = timeout
        self.retries = retries
        self.last_timings: dict[str, float] = {}
        #: The guest's count of task-app crashes, as of the last answer that carried it (every
        #: raw screenshot, action batch and health check). None until one did.
        self.crash_count: int | None = None
        #: False once the guest said it cannot tell when its screen settles (no XDamage, or a
        #: guest from before the signal): callers poll screenshots instead.
        self.settle_supported: bool = True
        #: What kept the guest's last settle wait going (its ``X-Settle-Why`` trace), for
        #: benchmarks and debugging; empty when it was not asked or an older guest answered.
        self.last_settle_why: str = ""

    # ---- plumbing ---------------------------------------------------------------------------
    @overload
    def _request(
        self,
        method: str,
        endpoint: str,
        *,
        timeout: float | None = None,
        ok_404: Literal[False] = False,
        ok_501: Literal[False] = False,
        **kwargs: Any,
    ) -> httpx.Response: ...

    @overload
    def _request(
        self,
        method: str,
        endpoint: str,
        *,
        timeout: float | None = None,
        ok_404: bool = False,
        ok_501: bool = False,
        **kwargs: Any,
    ) -> httpx.Response | None: ...

    def _request(
        self,
        method: str,
        endpoint: str,
        *,
        timeout: float | None = None,
        ok_404: bool = False,
        ok_501: bool = False,
        **kwargs: Any,
    ) -> httpx.Response | None:
        attempts = 1 + max(0, self.retries)
        last: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
            try:
                resp = self._send_capped(method, endpoint, timeout or self.timeout, kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                last = GuestError(f"cannot connect to the guest: {e}", endpoint=endpoint)
                continue  # nothing reached the server: safe to retry any method
            except httpx.TransportError as e:
                last = GuestError(
                    f"{method} {endpoint} failed: {type(e).__name__}: {e}", endpoint=endpoint
                )
                if method == "GET":
                    continue
                raise last from e
            if resp.is_success:
                return resp
            if (ok_404 and resp.status_code == 404) or (ok_501 and resp.status_code == 501):
                return None
            last = GuestError(
                f"{method} {endpoint} -> {resp.status_code}: {_message(resp)}",
                status=resp.status_code,
                endpoint=endpoint,
            )
            if method == "GET" and resp.status_code in _RETRY_STATUSES:
                continue
            raise last
        assert last is not None
        raise last

    def _send_capped(
        self, method: str, endpoint: str, timeout: float, kwargs: dict[str, Any]
    ) -> httpx.Response:
        """Send, and read the answer as it comes up to :data:`routes.MAX_ANSWER_BYTES`: an
        answer over it (a guest that is not ours printing a huge command output) is refused
        unread, GuestError 413, never held whole."""
        request = self._http.build_request(method, endpoint, timeout=timeout, **kwargs)
        resp = self._http.send(request, stream=True)
        limit = routes.MAX_ANSWER_BYTES
        try:
            declared = resp.headers.get("Content-Length")
            body = bytearray()
            if not (declared is not None and declared.isdigit() and int(declared) > limit):
                for chunk in resp.iter_bytes(1 << 20):
                    body += chunk
                    if len(body) > limit:
                        break
            if len(body) > limit or (declared or "").isdigit() and int(declared or 0) > limit:
                raise GuestError(
                    f"{method} {endpoint}: the answer is over the {limit} byte limit",
                    status=routes.OUTPUT_TOO_LARGE,
                    endpoint=endpoint,
                )
        finally:
            resp.close()
        headers = [
            (k, v)
            for k, v in resp.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            resp.status_code, headers=headers, content=bytes(body), request=request
        )

    def _json(
        self, method: str, endpoint: str, *, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        resp = self._request(method, endpoint, timeout=timeout, **kwargs)
        assert resp is not None  # only ok_404/ok_501 callers get None, and they do not come here
        try:
            return resp.json()
        except ValueError:
            raise GuestError(
                f"{endpoint} answered non-JSON: {resp.text[:200]!r}",
                status=resp.status_code,
                endpoint=endpoint,
            ) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- lifecycle --------------------------------------------------------------------------
    def health(self) -> dict:
        h = self._json("GET", routes.HEALTH)
        self._note_crashes(h.get("crashes"))
        return h

    def _note_crashes(self, value: Any) -> None:
        try:
            self.crash_count = int(value)
        except (TypeError, ValueError):
            pass

    def crashes_after(self, count: int) -> list[dict]:
        """The guest's records of crashes numbered above ``count`` (checks health first)."""
        return [c for c in self.health().get("recent_crashes", []) if c.get("seq", 0) > count]

    def wait_ready(self, timeout: float) -> None:
        """Poll :meth:`health` until the guest answers with a live X server; GuestError after
        ``timeout`` seconds, carrying the last error."""

        def probe() -> str | None:
            h = self._json("GET", routes.HEALTH, timeout=min(5.0, self.timeout))
            return None if h.get("x_alive") else f"guest is up but its X server is not: {h}"

        poll_until_ready(
            probe, timeout, first_s=0.02, cap_s=0.5, what="guest", endpoint=routes.HEALTH
        )

    def reset_desktop(self, restore_home: bool = True) -> dict:
        """Kill all apps, restore the home directory; ``{"killed": N, "ms": ...}``."""
        return self._json(
            "POST",
            routes.RESET,
            json={"restore_home": restore_home},
            timeout=max(self.timeout, 60.0),
        )

    # ---- observation ------------------------------------------------------------------------
    def screenshot_png(self) -> bytes:
        """OSWorld's ``/screenshot``: PNG with the cursor drawn."""
        return self._request("GET", routes.SCREENSHOT).content

    def screenshot_array(self, cursor: bool = True) -> np.ndarray:
        """The screen as an ``(H, W, 3)`` uint8 array (raw transfer, no PNG)."""
        return self._raw_screenshot({"format": "raw", "cursor": "1" if cursor else "0"})[0]

    def settled_screenshot_array(
        self, max_s: float = 3.0, cursor: bool = True
    ) -> tuple[np.ndarray, dict[str, float]] | None:
        """The screen once the desktop has finished reacting to the last actions.

        The guest waits until nothing was drawn and no desktop process ran for a moment (see
        :mod:`osworld_gym.guest.settle_signal`), at most ``max_s`` after the last input, then
        captures. Returns ``(frame, facts)``, or None where the guest cannot tell (no XDamage,
        an older guest, OSWorld's server): then poll :meth:`screenshot_array` instead.
        """
        if not self.settle_supported:
            return None
        params = {"format": "raw", "cursor": "1" if cursor else "0", "settle": f"{max_s:g}"}
        try:
            arr, resp = self._raw_screenshot(params, timeout=max(self.timeout, max_s + 10))
        except GuestError as e:
            if e.status != 501:
                raise
            self.settle_supported = False
            return None
        header = resp.headers.get(routes.SETTLE_HEADER)
        self.last_settle_why = resp.headers.get(routes.SETTLE_WHY_HEADER, "")
        if header is None:  # a guest that ignores the parameter: this frame was not waited for
            self.settle_supported = False
            return None
        try:
            facts = {str(k): float(v) for k, v in json.loads(header).items()}
        except (ValueError, TypeError, AttributeError):
            raise GuestError(
                f"unreadable X-Settle header {header[:100]!r}", endpoint=routes.RAW_SCREENSHOT
            ) from None
        return arr, facts

    def _raw_screenshot(
        self, params: dict[str, str], timeout: float | None = None
    ) -> tuple[np.ndarray, httpx.Response]:
        t0 = time.perf_counter()
        resp = self._request("GET", routes.RAW_SCREENSHOT, params=params, timeout=timeout)
        try:
            w, h = int(resp.headers[routes.WIDTH_HEADER]), int(resp.headers[routes.HEIGHT_HEADER])
        except (KeyError, ValueError):
            raise GuestError(
                "raw screenshot without X-Width/X-Height headers", endpoint=routes.RAW_SCREENSHOT
            ) from None
        if len(resp.content) != w * h * 3:
            raise GuestError(
                f"raw screenshot is {len(resp.content)} bytes, expected {w}x{h}x3",
                endpoint=routes.RAW_SCREENSHOT,
            )
        arr = np.frombuffer(resp.content, dtype=np.uint8).reshape(h, w, 3)
        self._note_crashes(resp.headers.get(routes.CRASHES_HEADER))
        self.last_timings = {
            "capture_ms": float(resp.headers.get(routes.CAPTURE_MS_HEADER, "nan")),
            "encode_ms": float(resp.headers.get(routes.ENCODE_MS_HEADER, "nan")),
            "total_ms": (time.perf_counter() - t0) * 1000,
            "bytes": float(len(resp.content)),
        }
        return arr, resp

    def screen_size(self) -> tuple[int, int]:
        d = self._json("POST", routes.SCREEN_SIZE)
        return int(d["width"]), int(d["height"])

    def cursor_position(self) -> tuple[int, int]:
        x, y = self._json("GET", routes.CURSOR_POSITION)
        return int(x), int(y)

    def platform(self) -> str:
        return self._request("GET", routes.PLATFORM).text

    def terminal(self) -> str | None:
        return self._json("GET", routes.TERMINAL).get("output")

    def accessibility(self) -> str | None:
        """OSWorld-style AT-SPI XML, or None where the guest cannot produce one (501)."""
        resp = self._request(
            "GET", routes.ACCESSIBILITY, ok_501=True, timeout=max(self.timeout, 45)
        )
        return None if resp is None else resp.json().get("AT")

    # ---- commands and files -----------------------------------------------------------------
    def execute(
        self,
        command: str | Sequence[str],
        shell: bool = False,
        timeout: float = 120.0,
        setup: bool = False,
    ) -> dict:
        """Run a command to completion: ``{"status", "output", "error", "returncode"}``."""
        endpoint = routes.SETUP_EXECUTE if setup else routes.EXECUTE
        body = {
            "command": command if isinstance(command, str) else list(command),
            "shell": shell,
            "timeout": timeout,
        }
        return self._json("POST", endpoint, json=body, timeout=timeout + 10)

    def launch(self, command: str | Sequence[str], shell: bool = False) -> None:
        body = {"command": command if isinstance(command, str) else list(command), "shell": shell}
        self._request("POST", routes.SETUP_LAUNCH, json=body)

    def upload(self, path: str, data: bytes | Path) -> None:
        """Write ``data`` -- bytes, or a local file streamed from disk -- to ``path`` in the
        guest (parents created)."""
        if isinstance(data, Path):
            with open(data, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self._request(
                    "POST",
                    routes.SETUP_UPLOAD,
                    data={"file_path": path},
                    files={"file_data": ("file", f, "application/octet-stream")},
                    timeout=max(self.timeout, 30 + size / 20e6),
                )
            return
        self._request(
            "POST",
            routes.SETUP_UPLOAD,
            data={"file_path": path},
            files={"file_data": ("file", data, "application/octet-stream")},
            timeout=max(self.timeout, 30 + len(data) / 20e6),
        )

    def open_file(self, path: str, timeout: float = 60.0) -> None:
        """Open a file (xdg-open) or command and wait until its window appears."""
        self._request(
            "POST",
            routes.SETUP_OPEN_FILE,
            json={"path": path, "timeout": timeout},
            timeout=timeout + 15,
        )

    def activate_window(
        self, window_name: str, strict: bool = False, by_class: bool = False
    ) -> None:
        self._request(
            "POST",
            routes.SETUP_ACTIVATE_WINDOW,
            json={"window_name": window_name, "strict": strict, "by_class": by_class},
        )

    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        self._request(
            "POST",
            routes.SETUP_CLOSE_WINDOW,
            json={"window_name": window_name, "strict": strict, "by_class": by_class},
        )

    def get_file(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        """The file's bytes (at most ``max_bytes``), or None if it does not exist.

        Raises:
            UnusableResultFile: something is there but not a readable regular file, or it is
                larger than ``max_bytes``.
        """
        import io

        buf = io.BytesIO()
        return buf.getvalue() if self._fetch_file(path, buf, max_bytes) is not None else None

    def download_file(self, path: str, dest: Path, max_bytes: int = MAX_FILE_BYTES) -> int | None:
        """Stream the guest file ``path`` into the local file ``dest``; its size, or None if it
        does not exist. Never holds more than one chunk in memory, never writes more than
        ``max_bytes``; ``dest`` appears whole (renamed into place) or not at all.

        Raises:
            UnusableResultFile: something is there but not a readable regular file, or it is
                larger than ``max_bytes``.
        """
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                size = self._fetch_file(path, out, max_bytes)
            if size is None:
                os.unlink(tmp)
                return None
            os.replace(tmp, dest)
            return size
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _fetch_file(self, path: str, out: BinaryIO, max_bytes: int) -> int | None:
        endpoint = routes.FILE
        last = GuestError(f"POST {endpoint}: no attempt made", endpoint=endpoint)
        for attempt in range(1 + max(0, self.retries)):
            if attempt:
                time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
            try:
                with self._http.stream(
                    "POST", endpoint, data={"file_path": path}, timeout=max(self.timeout, 120)
                ) as resp:
                    if resp.status_code == 404:
                        return None
                    if resp.status_code in (413, 422):
                        resp.read()
                        raise UnusableResultFile(_message(resp))  # it names the path
                    if not resp.is_success:
                        resp.read()
                        raise GuestError(
                            f"POST {endpoint} -> {resp.status_code}: {_message(resp)}",
                            status=resp.status_code,
                            endpoint=endpoint,
                        )
                    declared = resp.headers.get("Content-Length")
                    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                        raise UnusableResultFile(
                            f"{path} is {declared} bytes, over the "
                            f"{max_bytes} byte limit for result files"
                        )
                    out.seek(0)
                    out.truncate()
                    size = 0
                    for chunk in resp.iter_bytes(1 << 20):
                        size += len(chunk)
                        if size > max_bytes:
                            raise UnusableResultFile(
                                f"{path} is over the {max_bytes} byte limit for result files"
                            )
                        out.write(chunk)
                    return size
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                last = GuestError(f"cannot connect to the guest: {e}", endpoint=endpoint)
            except httpx.TransportError as e:
                last = GuestError(
                    f"POST {endpoint} failed: {type(e).__name__}: {e}", endpoint=endpoint
                )
        raise last

    def list_directory(self, path: str) -> dict:
        return self._json("POST", routes.LIST_DIRECTORY, json={"path": path})["directory_tree"]

    # ---- recording --------------------------------------------------------------------------
    def start_recording(self) -> None:
        self._request("POST", routes.START_RECORDING)

    def end_recording(self) -> bytes:
        """Stop the recording and return the mp4."""
        return self._request("POST", routes.END_RECORDING, timeout=max(self.timeout, 60)).content

    # ---- input ------------------------------------------------------------------------------
    def run_actions(self, prims: Sequence[Primitive]) -> dict:
        """Execute primitives. :class:`Wait` primitives are slept here, between the requests
        carrying the actions around them. The guest paces the calls as pyautogui does (after
        each one, until the desktop has reacted), also before a wait that more input follows.
        Returns ``{"status", "executed", "timings": {"exec_ms", "pace_ms", "paces"}}`` summed
        over requests."""
        result: dict = {
            "status": "success",
            "executed": 0,
            "timings": {"exec_ms": 0.0, "pace_ms": 0.0, "paces": 0},
        }
        batch: list[Primitive] = []

        def flush(more_input: bool) -> None:
            if batch:
                executed, timings = self._send_actions(batch, more_input)
                result["executed"] += executed
                for key in ("exec_ms", "pace_ms", "paces"):
                    result["timings"][key] += timings.get(key, 0)
                batch.clear()

        for i, p in enumerate(prims):
            if isinstance(p, Wait):
                flush(more_input=any(not isinstance(q, Wait) for q in prims[i + 1 :]))
                time.sleep(p.seconds)
            else:
                batch.append(p)
        flush(more_input=False)
        return result

    def _send_actions(
        self, prims: Sequence[Primitive], more_input: bool = False
    ) -> tuple[int, dict[str, float]]:
        """Perform ``prims`` (no :class:`Wait`) in one request, through XTest in the guest;
        ``(executed, timings)``. ``more_input``: more of the same action follows a wait (the
        guest then paces after the last primitive too)."""
        body: dict = {"actions": [to_dict(p) for p in prims]}
        if more_input:
            body["more_input"] = True
        r = self._json("POST", routes.ACTIONS, json=body, timeout=max(self.timeout, 120))
        self._note_crashes(r.get("crashes"))
        return r.get("executed", len(prims)), r.get("timings", {})


def _message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
        if isinstance(data, dict) and "message" in data:
            return str(data["message"])
    except ValueError:
        pass
    return resp.text[:500] or resp.reason_phrase


# ---- OSWorld's own guest server -----------------------------------------------------------------

#: What OSWorld's ``PythonController`` puts before every pyautogui command it sends to ``/execute``.
OSWORLD_PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


class OSWorldCompatClient(GuestClient):
    """:class:`GuestClient` for OSWorld's own guest server (``desktop_env/server/main.py``).

    That server listens on TCP port 5000 without a token and has none of our ``/osworld_gym/*``
    extensions, so in this mode the client

    * talks to ``base_url`` (e.g. ``http://127.0.0.1:5000``), sending a token only if given;
    * is ready once ``GET /screenshot`` answers with an image (OSWorld's own readiness check);
    * takes observations from ``/screenshot`` (PNG with the cursor drawn) and decodes them;
    * executes primitives the way OSWorld's ``PythonController`` does: rendered as canonical
      pyautogui code (:func:`~osworld_gym.protocol.primitives.to_pyautogui_code`) and POSTed to
      ``/execute`` as ``python -c "<prefix><code>"``, so the guest needs ``python`` with pyautogui;
      text containing ``<`` is typed with ``shift+,`` as OSWorld does (pyautogui#198);
    * cannot reset a desktop: :meth:`reset_desktop` raises, and providers restart the machine.

    Every other endpoint (``/execute``, ``/setup/*``, ``/file``, ``/accessibility``, ...) is the
    shared protocol and works unchanged.

    >>> c = OSWorldCompatClient("http://127.0.0.1:5000")
    >>> c.base_url
    'http://127.0.0.1:5000'
    >>> c.close()
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        python: str = "python",
    ):
        super().__init__(base_url=base_url, token=token, timeout=timeout, retries=retries)
        #: the guest command that runs pyautogui code (OSWorld's image: ``python``)
        self.python = python

    @property
    def base_url(self) -> str:
        return str(self._http.base_url).rstrip("/")

    def retarget(self, base_url: str) -> None:
        """Talk to another address from now on (after a provider replaced the machine)."""
        self._http.base_url = httpx.URL(base_url)

    # ---- lifecycle --------------------------------------------------------------------------
    def health(self) -> dict:
        """``{"status": "ok", "x_alive": True}`` when ``/screenshot`` answers with an image."""
        resp = self._request("GET", routes.SCREENSHOT, timeout=min(10.0, self.timeout))
        if not _is_image(resp.content):
            raise GuestError(
                f"/screenshot answered {resp.headers.get('content-type')!r}, not an image",
                endpoint=routes.SCREENSHOT,
            )
        return {"status": "ok", "x_alive": True}

    def wait_ready(self, timeout: float) -> None:
        """Poll ``GET /screenshot`` until it answers with an image; GuestError after ``timeout``."""

        def probe() -> None:
            self.health()

        poll_until_ready(
            probe,
            timeout,
            first_s=0.05,
            cap_s=1.0,
            what=f"OSWorld guest at {self.base_url}",
            endpoint=routes.SCREENSHOT,
        )

    def reset_desktop(self, restore_home: bool = True) -> dict:
        raise GuestError(
            "OSWorld's guest server cannot reset its desktop: restart or revert the "
            "machine instead (the docker provider restarts the container)",
            status=501,
            endpoint=routes.RESET,
        )

    # ---- observation ------------------------------------------------------------------------
    def settled_screenshot_array(self, max_s: float = 3.0, cursor: bool = True) -> None:
        """OSWorld's server cannot tell when its screen settles: always None (poll instead)."""
        return None

    def screenshot_array(self, cursor: bool = True) -> np.ndarray:
        """``/screenshot`` decoded to ``(H, W, 3)`` uint8 (the server always draws the cursor)."""
        import io

        from PIL import Image

        t0 = time.perf_counter()
        data = self.screenshot_png()
        t1 = time.perf_counter()
        try:
            with Image.open(io.BytesIO(data)) as img:
                arr = np.asarray(img.convert("RGB"))
        except OSError as e:
            raise GuestError(
                f"/screenshot is not a readable image: {e}", endpoint=routes.SCREENSHOT
            ) from None
        self.last_timings = {
            "capture_ms": (t1 - t0) * 1000,
            "encode_ms": (time.perf_counter() - t1) * 1000,
            "total_ms": (time.perf_counter() - t0) * 1000,
            "bytes": float(len(data)),
        }
        return arr

    # ---- input ------------------------------------------------------------------------------
    def pyautogui_command(self, prims: Sequence[Primitive]) -> list[str]:
        """The ``/execute`` command that performs ``prims`` (no :class:`Wait` among them)."""
        from osworld_gym.protocol.primitives import to_pyautogui_code

        code = to_pyautogui_code(_type_less_than_with_shift(list(prims)))
        return [self.python, "-c", OSWORLD_PYAUTOGUI_PREFIX + code]

    def _send_actions(
        self, prims: Sequence[Primitive], more_input: bool = False
    ) -> tuple[int, dict[str, float]]:
        """Perform ``prims`` as pyautogui code through ``/execute``. GuestError if the code
        fails in the guest. pyautogui paces the calls itself (its ``PAUSE``, 0.1 s after each,
        the last one too), so ``more_input`` changes nothing here."""
        t0 = time.perf_counter()
        r = self._json(
            "POST",
            routes.EXECUTE,
            json={"command": self.pyautogui_command(prims), "shell": False},
            timeout=max(self.timeout, 120),
        )
        if r.get("returncode", 0) != 0 or r.get("status", "success") != "success":
            err = (r.get("error") or r.get("message") or "")[-800:]
            raise GuestError(
                f"pyautogui failed in the guest (returncode {r.get('returncode')}): {err}",
                endpoint=routes.EXECUTE,
            )
        return len(prims), {"exec_ms": (time.perf_counter() - t0) * 1000}


def _is_image(data: bytes) -> bool:
    return data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"))


def _type_less_than_with_shift(prims: list[Primitive]) -> list[Primitive]:
    """pyautogui types ``<`` as ``>`` on some X keymaps (pyautogui#198); OSWorld sends
    ``shift+,`` instead, and so do we.

    >>> from osworld_gym.protocol.primitives import TypeText
    >>> _type_less_than_with_shift([TypeText("a<b")])
    [TypeText(text='a'), Hotkey(keys=('shift', ',')), TypeText(text='b')]
    """
    from osworld_gym.protocol.primitives import Hotkey, Press, TypeText

    out: list[Primitive] = []
    for p in prims:
        if isinstance(p, TypeText) and "<" in p.text:
            for i, part in enumerate(p.text.split("<")):
                if i:
                    out.append(Hotkey(("shift", ",")))
                if part:
                    out.append(TypeText(part))
        elif isinstance(p, Press) and p.key == "<":
            out.extend(Hotkey(("shift", ",")) for _ in range(p.presses))
        else:
            out.append(p)
    return out
