"""A desktop that already runs somewhere else, reached by URL.

Two kinds of guest answer at a URL:

* **our guest server** (``python -m osworld_gym.guest``) with its bearer token: everything works,
  including the fast desktop reset between episodes. Our server listens on loopback only, so a
  desktop on another machine is reached through a tunnel (``ssh -L 5000:127.0.0.1:5000 host``);
  the token travels in clear over plain HTTP, so never expose the port itself.
* **OSWorld's own guest server** (an OSWorld VM on VMware, VirtualBox, AWS, ...) with
  ``osworld_compat=True``: no token, actions as pyautogui code (see
  :class:`~osworld_gym.client.OSWorldCompatClient`). That server cannot reset its desktop, so
  between episodes the provider does what ``reset`` says: nothing (the default, with a warning:
  tasks then start from whatever the last episode left), or call your function, e.g. one that
  reverts a VMware snapshot and waits for the guest.

>>> p = RemoteProvider(url="http://127.0.0.1:5000", osworld_compat=True)
>>> p.running, p.reset
(False, 'none')
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from osworld_gym.client import GuestClient, OSWorldCompatClient
from osworld_gym.errors import InfraError
from osworld_gym.providers.base import Provider

log = logging.getLogger(__name__)

ResetMode = Literal["guest", "none"] | Callable[["RemoteProvider"], None]


def connect(
    url: str, *, token: str | None = None, osworld_compat: bool = False, timeout: float = 30.0
) -> GuestClient:
    """A client for the guest at ``url`` (not yet checked for readiness).

    >>> connect("http://127.0.0.1:5000", osworld_compat=True).base_url
    'http://127.0.0.1:5000'
    """
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"guest url must start with http:// or https://, got {url!r}")
    if osworld_compat:
        return OSWorldCompatClient(url.rstrip("/"), token=token, timeout=timeout)
    if not token:
        raise ValueError(
            "our guest server needs its token: pass token= (or token_file=), or "
            "osworld_compat=True for OSWorld's own guest server"
        )
    return GuestClient(base_url=url.rstrip("/"), token=token, timeout=timeout)


class RemoteProvider(Provider):
    """A guest server that is already running, at ``url``.

    Args:
        screen_size: the remote screen's size (observations are checked against it).
        url: ``http://host:port`` of the guest server.
        token: bearer token of our guest server (or ``token_file``, a file holding it).
        osworld_compat: the URL is OSWorld's own guest server (no token, pyautogui over
            ``/execute``, no desktop reset).
        reset: what happens between episodes: ``"guest"`` (our server's fast reset; the default
            for our server), ``"none"`` (nothing; the default with ``osworld_compat``), or a
            function called with this provider (revert a snapshot, re-image a cloud VM...).
        start_timeout: seconds to wait for the guest to answer on :meth:`start`.
        timeout: seconds for each HTTP request.
        client_password: the guest user's sudo password, for ``{CLIENT_PASSWORD}`` in tasks
            (OSWorld's AWS images use ``osworld-public-evaluation``).
    """

    name = "remote"

    def __init__(
        self,
        screen_size: tuple[int, int] = (1920, 1080),
        *,
        url: str,
        token: str | None = None,
        token_file: str | None = None,
        osworld_compat: bool = False,
        reset: ResetMode | None = None,
        start_timeout: float = 60.0,
        timeout: float = 30.0,
        client_password: str = "password",
    ):
        super().__init__(screen_size)
        if token is None and token_file is not None:
            token = Path(token_file).read_text().strip()
        self.url = url
        self.token = token
        self.osworld_compat = osworld_compat
        if reset is None:
            reset = "none" if osworld_compat else "guest"
        if reset == "guest" and osworld_compat:
            raise ValueError(
                "OSWorld's guest server cannot reset its desktop: use reset='none' or "
                "a function that reverts the machine"
            )
        if not (reset in ("guest", "none") or callable(reset)):
            raise ValueError(f"reset must be 'guest', 'none' or a function, got {reset!r}")
        self.reset = reset
        self.start_timeout = start_timeout
        self.timeout = timeout
        self.client_password = client_password
        self._client: GuestClient | None = None
        self._warned = False
        self._lock = threading.Lock()
        connect(url, token=token, osworld_compat=osworld_compat).close()  # validate early

    @property
    def running(self) -> bool:
        return self._client is not None

    def start(self) -> GuestClient:
        with self._lock:
            if self._client is not None:
                return self._client
            client = connect(
                self.url, token=self.token, osworld_compat=self.osworld_compat, timeout=self.timeout
            )
            try:
                client.wait_ready(timeout=self.start_timeout)
            except InfraError:
                client.close()
                raise
            self._client = client
            log.info("remote desktop at %s is ready", self.url)
            return client

    def reset_state(self) -> None:
        if self._client is None:
            raise InfraError("the remote desktop is not connected; call start() first")
        if self.reset == "guest":
            self._client.reset_desktop(restore_home=True)
        elif self.reset == "none":
            if not self._warned:
                log.warning(
                    "remote desktop %s is not reset between episodes (reset='none'): "
                    "tasks start from what the previous episode left",
                    self.url,
                )
                self._warned = True
        elif callable(self.reset):
            self.reset(self)
            self._client.wait_ready(timeout=self.start_timeout)

    def stop(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
