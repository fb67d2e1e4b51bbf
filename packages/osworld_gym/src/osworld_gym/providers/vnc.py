"""Screenshots and input over VNC (RFB), for desktops that expose only a VNC server.

QEMU's ``-vnc``, x11vnc on an X display, a cloud VM's console: anything speaking RFB. The
screen is read with full framebuffer updates and input is sent as RFB pointer and key events
(keysyms from the same table our guest's XTest input uses), through ``vncdotool``
(``pip install 'osworld-gym[vnc]'``).

**VNC carries only pixels and input.** Task setup (uploading files, launching apps) and
evaluation (reading files, running commands) need a guest server: give ``guest_url`` (our
guest server with its ``token``, or OSWorld's with ``osworld_compat=True``) and those go
there while observations and actions go over VNC. Without ``guest_url`` only tasks with no
setup and no evaluator can run; everything else raises a :class:`~osworld_gym.errors.GuestError`
that says so, and the desktop is never reset between episodes.

>>> from osworld_gym.protocol.primitives import Click
>>> p = VNCProvider(vnc="127.0.0.1::5901", screen_size=(1280, 720))
>>> p.running, p.server
(False, '127.0.0.1::5901')
>>> rfb_events([Click(10, 20)], Pointer())[:2]
[('pointer', 10, 20, 0), ('pointer', 10, 20, 1)]
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Self

import numpy as np

from osworld_gym.client import GuestClient
from osworld_gym.errors import GuestError, InfraError, MissingDependencyError
from osworld_gym.protocol.client import MAX_FILE_BYTES, poll_until_ready
from osworld_gym.protocol.events import (
    Button,
    InputEvents,
    Key,
    Move,
    Pace,
    Pointer,
    Settle,
    Sleep,
)
from osworld_gym.protocol.input import CALL_PAUSE_S
from osworld_gym.protocol.primitives import (
    Primitive,
    Wait,
    validate,
)
from osworld_gym.providers.base import Provider
from osworld_gym.providers.remote import RemoteProvider, ResetMode

log = logging.getLogger(__name__)

#: An RFB message: ``("pointer", x, y, button_mask)``, ``("key", keysym, down)`` or
#: ``("sleep", seconds)`` (waited between messages).
RfbEvent = tuple


def rfb_events(
    prims: Sequence[Primitive], ptr: Pointer, size: tuple[int, int] = (65535, 65535)
) -> list[RfbEvent]:
    """Translate primitives into RFB messages, updating ``ptr``.

    The events and the pauses between them are :class:`~osworld_gym.protocol.events.
    InputEvents`' (the same as our guest's XTest input sends); RFB sends the pointer's position
    and held buttons with every pointer event. Both :class:`~osworld_gym.protocol.events.Settle`
    and :class:`~osworld_gym.protocol.events.Sleep` become sleeps (VNC cannot see whether the
    desktop's window manager grabs clicks), :class:`~osworld_gym.protocol.events.Pace` is
    nothing, :class:`Wait` is a sleep, and so is the pause pyautogui makes after each call
    that more input follows (``CALL_PAUSE_S``: VNC cannot see when the app has reacted, as our
    guest's settle signal can). Coordinates are clamped to the screen ``size``.

    >>> from osworld_gym.protocol.primitives import Hotkey, Scroll
    >>> rfb_events([Scroll(dy=-1)], Pointer(5, 5))
    [('pointer', 5, 5, 16), ('sleep', 0.005), ('pointer', 5, 5, 0)]
    >>> rfb_events([Hotkey(("ctrl", "c"))], Pointer())
    [('key', 65507, True), ('key', 99, True), ('key', 99, False), ('key', 65507, False)]
    """
    out: list[RfbEvent] = []
    x, y, mask = ptr.x, ptr.y, ptr.mask  # as the server knows them; the expander moves ``ptr``
    expander = InputEvents(size, ptr)
    prims = [validate(p) for p in prims]
    last_input = max((i for i, p in enumerate(prims) if not isinstance(p, Wait)), default=-1)
    for n, p in enumerate(prims):
        if n and not isinstance(prims[n - 1], Wait) and n <= last_input:
            out.append(("sleep", CALL_PAUSE_S))
        for ev in expander.expand(p):
            match ev:
                case Move():
                    x, y = ev.x, ev.y
                    out.append(("pointer", x, y, mask))
                case Button(button, down):
                    bit = 1 << (button - 1)
                    mask = mask | bit if down else mask & ~bit
                    out.append(("pointer", x, y, mask))
                case Key(ks, down):
                    out.append(("key", ks, down))
                case Sleep(seconds) | Settle(seconds):
                    out.append(("sleep", seconds))
                case Pace():
                    pass
    return out


@cache
def _vncdotool() -> tuple[Any, Any]:
    """``(api module, factory class)``; our RFB client subclass runs in Twisted's thread."""
    try:
        from vncdotool import api
        from vncdotool.client import VNCDoToolClient, VNCDoToolFactory
    except ImportError:
        raise MissingDependencyError(
            "VNC needs vncdotool: pip install 'osworld-gym[vnc]'"
        ) from None

    # vncdotool chains every call on the connection's Deferred, so each method must return the
    # protocol itself; results come back through the list the caller passes.
    class Client(VNCDoToolClient):
        def captureArray(self, out: list) -> Any:
            def copy(_: Any) -> Any:
                if self.screen is None:
                    raise RuntimeError("the VNC server sent no framebuffer")
                out.append(np.array(self.screen.convert("RGB"), dtype=np.uint8))
                return self

            return self.refreshScreen(incremental=False).addCallback(copy)

        def sendEvents(self, events: list[RfbEvent]) -> Any:
            for kind, *args in events:
                if kind == "key":
                    self.keyEvent(args[0], down=args[1])
                else:
                    self.x, self.y, self.buttons = args
                    self.pointerEvent(*args)
            return self

    class Factory(VNCDoToolFactory):
        protocol = Client

    return api, Factory


class VNCClient:
    """Observations and input over VNC; everything else goes to ``guest`` when there is one.

    A :class:`~osworld_gym.protocol.DesktopClient`. Methods that need a guest server raise
    :class:`GuestError` (501) without one.
    """

    def __init__(
        self,
        server: str,
        *,
        password: str | None = None,
        timeout: float = 30.0,
        guest: GuestClient | None = None,
    ):
        self.server = server
        self.password = password
        self.timeout = timeout
        self.guest = guest
        self.last_timings: dict[str, float] = {}
        self.settle_supported = False
        self.last_settle_why = ""
        self._ptr = Pointer()
        self._size: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._proxy: Any = None
        self._connected = False

    # ---- connection ---------------------------------------------------------------------------
    def _rfb(self) -> Any:
        if self._proxy is None:
            api, factory = _vncdotool()
            self._proxy = api.connect(
                self.server, password=self.password, factory_class=factory, timeout=self.timeout
            )
        return self._proxy

    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            try:
                result = getattr(self._rfb(), method)(*args)
            except Exception as e:
                self._drop()
                raise GuestError(
                    f"VNC {self.server}: {type(e).__name__}: {e}", endpoint=f"vnc:{method}"
                ) from e
            self._connected = True
            return result

    def _drop(self) -> None:
        proxy, self._proxy = self._proxy, None
        if proxy is not None and self._connected:
            try:
                proxy.disconnect()
            except Exception:
                log.debug("VNC disconnect failed", exc_info=True)
        self._connected = False

    def close(self) -> None:
        self._drop()
        if self.guest is not None:
            self.guest.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- the guest-client interface ----------------------------------------------------------
    def health(self) -> dict:
        h, w = self.screenshot_array().shape[:2]
        return {"status": "ok", "x_alive": True, "screen": [w, h], "transport": "vnc"}

    def wait_ready(self, timeout: float) -> None:
        """Retry a full framebuffer read until it works; GuestError after ``timeout``."""

        def probe() -> None:
            self.health()

        poll_until_ready(
            probe,
            timeout,
            first_s=0.05,
            cap_s=1.0,
            what=f"VNC server {self.server}",
            endpoint="vnc",
        )

    def screenshot_array(self, cursor: bool = True) -> np.ndarray:
        """The framebuffer as ``(H, W, 3)`` uint8 (with the cursor if the server draws it)."""
        t0 = time.perf_counter()
        out: list[np.ndarray] = []
        self._call("captureArray", out)
        frame = out[0]
        h, w = frame.shape[:2]
        self._size = (w, h)
        self.last_timings = {
            "capture_ms": (time.perf_counter() - t0) * 1000,
            "total_ms": (time.perf_counter() - t0) * 1000,
            "bytes": float(frame.nbytes),
        }
        return frame

    def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            self.screenshot_array()
        assert self._size is not None
        return self._size

    def run_actions(self, prims: Sequence[Primitive]) -> dict:
        """Send primitives as RFB events; sleeps (settling, :class:`Wait`) happen here."""
        t0 = time.perf_counter()
        events = rfb_events(prims, self._ptr, self._size or (65535, 65535))
        batch: list[RfbEvent] = []
        for ev in (*events, None):
            if ev is None or ev[0] == "sleep":
                if batch:
                    self._call("sendEvents", batch)
                    batch = []
                if ev is not None:
                    time.sleep(ev[1])
            else:
                batch.append(ev)
        return {
            "status": "success",
            "executed": len(prims),
            "timings": {"exec_ms": (time.perf_counter() - t0) * 1000},
        }

    @property
    def crash_count(self) -> int | None:
        """VNC cannot see crashes; the guest server, when there is one, can."""
        return None if self.guest is None else self.guest.crash_count

    # ---- what needs a guest server (task setup, evaluation, reset) ---------------------------
    def _guest(self, name: str) -> GuestClient:
        if self.guest is None:
            raise GuestError(
                f"{name}() needs a guest server, but this desktop is reached over VNC "
                f"only ({self.server}): task setup and evaluation are unavailable. "
                "Pass guest_url= (and token=, or osworld_compat=True) to the vnc "
                "provider",
                status=501,
                endpoint=name,
            )
        return self.guest

    def reset_desktop(self, restore_home: bool = True) -> dict:
        return self._guest("reset_desktop").reset_desktop(restore_home=restore_home)

    def crashes_after(self, count: int) -> list[dict]:
        return [] if self.guest is None else self.guest.crashes_after(count)

    def settled_screenshot_array(
        self, max_s: float = 3.0, cursor: bool = True
    ) -> tuple[np.ndarray, dict[str, float]] | None:
        return None  # frames come over RFB, which cannot tell when the screen has settled

    def accessibility(self) -> str | None:
        return self._guest("accessibility").accessibility()

    def terminal(self) -> str | None:
        return self._guest("terminal").terminal()

    def execute(
        self,
        command: str | Sequence[str],
        shell: bool = False,
        timeout: float = 120.0,
        setup: bool = False,
    ) -> dict:
        return self._guest("execute").execute(command, shell=shell, timeout=timeout, setup=setup)

    def launch(self, command: str | Sequence[str], shell: bool = False) -> None:
        self._guest("launch").launch(command, shell=shell)

    def upload(self, path: str, data: bytes | Path) -> None:
        self._guest("upload").upload(path, data)

    def open_file(self, path: str, timeout: float = 60.0) -> None:
        self._guest("open_file").open_file(path, timeout=timeout)

    def activate_window(
        self, window_name: str, strict: bool = False, by_class: bool = False
    ) -> None:
        self._guest("activate_window").activate_window(window_name, strict, by_class)

    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        self._guest("close_window").close_window(window_name, strict, by_class)

    def get_file(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        return self._guest("get_file").get_file(path, max_bytes)

    def download_file(self, path: str, dest: Path, max_bytes: int = MAX_FILE_BYTES) -> int | None:
        return self._guest("download_file").download_file(path, dest, max_bytes)

    def list_directory(self, path: str) -> dict:
        return self._guest("list_directory").list_directory(path)


class VNCProvider(Provider):
    """A desktop seen and driven over VNC, optionally with a guest server for setup/evaluation.

    Args:
        screen_size: the VNC desktop's size (observations are checked against it).
        vnc: the server as vncdotool writes it: ``host::port`` (``127.0.0.1::5900``) or
            ``host:display`` (``:1`` is port 5901); ``vnc://host:port`` is accepted too.
        password: VNC password, if the server asks for one.
        guest_url, token, osworld_compat, reset: a guest server for everything that is not
            pixels or input, as for :class:`~osworld_gym.providers.remote.RemoteProvider`.
        start_timeout: seconds to wait for the VNC server (and the guest) on :meth:`start`.
        timeout: seconds for each VNC call.
        client_password: the guest user's sudo password, for ``{CLIENT_PASSWORD}`` in tasks.
    """

    name = "vnc"

    def __init__(
        self,
        screen_size: tuple[int, int] = (1920, 1080),
        *,
        vnc: str,
        password: str | None = None,
        guest_url: str | None = None,
        token: str | None = None,
        osworld_compat: bool = False,
        reset: ResetMode | None = None,
        start_timeout: float = 60.0,
        timeout: float = 30.0,
        client_password: str = "password",
    ):
        super().__init__(screen_size)
        if vnc.startswith("vnc://"):
            host, _, port = vnc[len("vnc://") :].rstrip("/").rpartition(":")
            vnc = f"{host or '127.0.0.1'}::{port or 5900}"
        self.server = vnc
        self.password = password
        self.start_timeout = start_timeout
        self.timeout = timeout
        self.client_password = client_password
        self._guest = (
            RemoteProvider(
                screen_size,
                url=guest_url,
                token=token,
                osworld_compat=osworld_compat,
                reset=reset,
                start_timeout=start_timeout,
                timeout=timeout,
                client_password=client_password,
            )
            if guest_url
            else None
        )
        self._client: VNCClient | None = None
        self._warned = False
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._client is not None

    def start(self) -> VNCClient:
        with self._lock:
            if self._client is not None:
                return self._client
            guest = self._guest.start() if self._guest is not None else None
            client = VNCClient(
                self.server, password=self.password, timeout=self.timeout, guest=guest
            )
            try:
                client.wait_ready(timeout=self.start_timeout)
            except InfraError:
                client.close()
                raise
            self._client = client
            return client

    def reset_state(self) -> None:
        if self._client is None:
            raise InfraError("the VNC desktop is not connected; call start() first")
        if self._guest is not None:
            self._guest.reset_state()
        elif not self._warned:
            log.warning(
                "VNC desktop %s has no guest server: it is not reset between episodes", self.server
            )
            self._warned = True

    def stop(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._guest is not None:
                self._guest.stop()
