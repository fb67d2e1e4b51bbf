"""What every backend's client offers the env, task setup and evaluators: :class:`DesktopClient`.

:class:`~osworld_gym.client.GuestClient` (our guest server, local/docker/remote),
:class:`~osworld_gym.client.OSWorldCompatClient` (OSWorld's server),
:class:`~osworld_gym.providers.vnc.VNCClient` and
:class:`~osworld_gym.providers.fake.FakeClient` implement it. A client that cannot do something
(VNC without a guest server cannot run commands; OSWorld's server cannot reset) still has the
method, and it raises :class:`~osworld_gym.errors.GuestError` with status 501 saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from osworld_gym.protocol.primitives import Primitive

#: Largest file a client fetches from the guest unless told otherwise.
MAX_FILE_BYTES = 256 << 20


def poll_until_ready(
    probe: Callable[[], str | None],
    timeout: float,
    *,
    first_s: float,
    cap_s: float,
    what: str,
    endpoint: str,
) -> None:
    """The back-off of every client's :meth:`DesktopClient.wait_ready`: call ``probe`` until it
    returns None (ready), sleeping ``first_s``, then twice as long each time up to ``cap_s``.

    ``probe`` returns why the desktop is not ready yet, or raises
    :class:`~osworld_gym.errors.GuestError` (its message is the reason). A 401 is raised at
    once: a wrong token will not get better by waiting. When the next sleep would end past
    ``timeout`` seconds, raises GuestError ``"<what> not ready after <timeout> s: <last
    reason>"`` for ``endpoint``.

    >>> answers = iter(["booting", None])
    >>> poll_until_ready(lambda: next(answers), 1.0, first_s=0.001, cap_s=0.01,
    ...                  what="guest", endpoint="/health")
    >>> poll_until_ready(lambda: "booting", 0.0, first_s=0.01, cap_s=0.01,
    ...                  what="guest", endpoint="/health")
    Traceback (most recent call last):
    osworld_gym.errors.GuestError: guest not ready after 0 s: booting
    """
    from osworld_gym.errors import GuestError

    deadline = time.monotonic() + timeout
    delay, last = first_s, "no answer yet"
    while True:
        try:
            why = probe()
            if why is None:
                return
            last = why
        except GuestError as e:
            if e.status == 401:
                raise
            last = str(e)
        if time.monotonic() + delay > deadline:
            raise GuestError(f"{what} not ready after {timeout:g} s: {last}", endpoint=endpoint)
        time.sleep(delay)
        delay = min(delay * 2, cap_s)


@runtime_checkable
class DesktopClient(Protocol):
    """One connection to one desktop."""

    @property
    def crash_count(self) -> int | None:
        """The guest's count of task-app crashes, as of its last answer that carried one (raw
        screenshots, action batches, health checks); None where the backend cannot tell."""
        ...

    @property
    def last_timings(self) -> dict[str, float]:
        """Timings of the last observation (``capture_ms``, ``total_ms``, ...), for ``info``."""
        ...

    @property
    def settle_supported(self) -> bool:
        """False where the backend cannot tell when its screen has settled: callers poll."""
        ...

    @property
    def last_settle_why(self) -> str:
        """What kept the last settle wait going (empty where none was asked or is known)."""
        ...

    # lifecycle
    def health(self) -> dict[str, Any]: ...
    def wait_ready(self, timeout: float) -> None: ...
    def reset_desktop(self, restore_home: bool = True) -> dict[str, Any]: ...
    def crashes_after(self, count: int) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...

    # observation
    def screenshot_array(self, cursor: bool = True) -> np.ndarray: ...
    def settled_screenshot_array(
        self, max_s: float = 3.0, cursor: bool = True
    ) -> tuple[np.ndarray, dict[str, float]] | None: ...
    def screen_size(self) -> tuple[int, int]: ...
    def accessibility(self) -> str | None: ...
    def terminal(self) -> str | None: ...

    # input
    def run_actions(self, prims: Sequence[Primitive]) -> dict[str, Any]: ...

    # task setup and evaluation (OSWorld's guest protocol)
    def execute(
        self,
        command: str | Sequence[str],
        shell: bool = False,
        timeout: float = 120.0,
        setup: bool = False,
    ) -> dict[str, Any]: ...
    def launch(self, command: str | Sequence[str], shell: bool = False) -> None: ...
    def upload(self, path: str, data: bytes | Path) -> None: ...
    def open_file(self, path: str, timeout: float = 60.0) -> None: ...
    def activate_window(
        self, window_name: str, strict: bool = False, by_class: bool = False
    ) -> None: ...
    def close_window(
        self, window_name: str, strict: bool = False, by_class: bool = False
    ) -> None: ...
    def get_file(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None: ...
    def download_file(
        self, path: str, dest: Path, max_bytes: int = MAX_FILE_BYTES
    ) -> int | None: ...
    def list_directory(self, path: str) -> dict[str, Any]: ...
