"""A fake desktop for API-conformance tests (``check_env``, PettingZoo's ``parallel_api_test``).

It implements :class:`~osworld_gym.protocol.DesktopClient` from memory: frames are
synthetic (a pointer-shaped mark where the last click landed), files live in a dict, commands
do nothing. It exists so the plumbing can be tested in milliseconds *beside* the real-backend
tests, never instead of them: nothing here proves a task works on a desktop.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from osworld_gym.errors import GuestError
from osworld_gym.protocol.client import MAX_FILE_BYTES
from osworld_gym.protocol.primitives import (
    Click,
    DragTo,
    MoveTo,
    Primitive,
    TypeText,
    Wait,
    from_dict,
    to_dict,
)
from osworld_gym.providers.base import Provider
from osworld_gym.providers.capabilities import Capabilities, local_capabilities


class FakeClient:
    """A :class:`~osworld_gym.protocol.DesktopClient` in memory (no desktop)."""

    def __init__(self, screen_size: tuple[int, int]):
        self.screen_size_ = screen_size
        self.files: dict[str, bytes] = {}
        self.pointer = (0, 0)
        self.typed: list[str] = []
        self.closed = False
        self.last_timings: dict[str, float] = {"capture_ms": 0.0}
        #: nothing crashes here
        self.crash_count: int | None = 0
        #: frames change only when drawn, so there is nothing to wait for: callers poll
        self.settle_supported = False
        self.last_settle_why = ""

    def _check(self) -> None:
        if self.closed:
            raise GuestError("fake desktop is closed", endpoint="fake")

    def health(self) -> dict[str, Any]:
        self._check()
        return {"status": "ok", "display": "fake", "screen": list(self.screen_size_)}

    def wait_ready(self, timeout: float) -> None:
        self._check()

    def crashes_after(self, count: int) -> list[dict[str, Any]]:
        self._check()
        return []

    def screenshot_array(self, cursor: bool = True) -> np.ndarray:
        self._check()
        w, h = self.screen_size_
        frame = np.full((h, w, 3), 40, np.uint8)
        if cursor:
            x, y = self.pointer
            frame[max(0, y - 4) : y + 4, max(0, x - 4) : x + 4] = 255
        return frame

    def settled_screenshot_array(
        self, max_s: float = 3.0, cursor: bool = True
    ) -> tuple[np.ndarray, dict[str, float]] | None:
        return None  # settle_supported is False

    def terminal(self) -> str | None:
        self._check()
        return None

    def run_actions(self, prims: Sequence[Primitive]) -> dict[str, Any]:
        self._check()
        for p in (from_dict(to_dict(p)) for p in prims):
            if isinstance(p, (MoveTo, DragTo, Click)) and p.x is not None and p.y is not None:
                w, h = self.screen_size_
                self.pointer = (min(max(p.x, 0), w - 1), min(max(p.y, 0), h - 1))
            if isinstance(p, TypeText):
                self.typed.append(p.text)
            if isinstance(p, Wait):  # the client contract: Wait primitives are slept here
                time.sleep(p.seconds)
        return {"status": "success", "executed": len(prims), "timings": {"exec_ms": 0.0}}

    def reset_desktop(self, restore_home: bool = True) -> dict[str, Any]:
        self._check()
        self.files.clear()
        self.typed.clear()
        self.pointer = (0, 0)
        return {"status": "success", "killed": 0, "ms": 0.0}

    def execute(
        self, command: Any, shell: bool = False, timeout: float = 120.0, setup: bool = False
    ) -> dict[str, Any]:
        self._check()
        return {"status": "success", "output": "", "error": "", "returncode": 0}

    def launch(self, command: Any, shell: bool = False) -> None:
        self._check()

    def upload(self, path: str, data: bytes | Path) -> None:
        self._check()
        self.files[path] = data.read_bytes() if isinstance(data, Path) else data

    def get_file(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        self._check()
        return self.files.get(path)

    def download_file(self, path: str, dest: Path, max_bytes: int = MAX_FILE_BYTES) -> int | None:
        data = self.get_file(path)
        if data is None:
            return None
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        return len(data)

    def open_file(self, path: str, timeout: float = 60.0) -> None:
        self._check()

    def activate_window(
        self, window_name: str, strict: bool = False, by_class: bool = False
    ) -> None:
        self._check()

    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        self._check()

    def list_directory(self, path: str) -> dict[str, Any]:
        self._check()
        return {"type": "directory", "name": path, "children": []}

    def screen_size(self) -> tuple[int, int]:
        return self.screen_size_

    def accessibility(self) -> str | None:
        self._check()
        return '<desktop-frame name="fake"/>'

    def close(self) -> None:
        self.closed = True


class FakeProvider(Provider):
    """A provider whose desktop is a :class:`FakeClient`."""

    name = "fake"

    @classmethod
    def capabilities(cls, profile: str | None = None) -> Capabilities:
        """The local desktop's (the fake stands in for it): this machine's apps and PATH."""
        return local_capabilities(profile)

    def __init__(self, screen_size: tuple[int, int] = (1920, 1080)):
        super().__init__(screen_size)
        self.client: FakeClient | None = None

    @property
    def running(self) -> bool:
        return self.client is not None and not self.client.closed

    def start(self) -> FakeClient:
        if not self.running:
            self.client = FakeClient(self.screen_size)
        assert self.client is not None
        return self.client

    def reset_state(self) -> None:
        self.start().reset_desktop()

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
