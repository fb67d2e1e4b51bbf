"""Window helpers over ``wmctrl`` (needs a running EWMH window manager such as openbox).

Matching follows OSWorld's ``wmctrl`` flags: ``strict`` is ``-F`` (exact, case-sensitive),
``by_class`` is ``-x`` (match ``res_name.res_class`` instead of the title). Activation waits
until the window manager reports the window active, so the next action goes to it.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

from Xlib import X
from Xlib import display as xdisplay
from Xlib import error as xerror

from osworld_gym.errors import MissingDependencyError
from osworld_gym.guest.processes import ProcessRegistry

log = logging.getLogger(__name__)

WMCTRL_TIMEOUT_S = 5.0
#: How long activation waits for the window manager to make the window active.
ACTIVATE_WAIT_S = 2.0


@dataclass(frozen=True)
class Window:
    """One line of ``wmctrl -l -x``."""

    id: str
    desktop: int
    wm_class: str
    title: str


def parse_wmctrl(text: str) -> list[Window]:
    """Parse ``wmctrl -l -x`` output.

    >>> parse_wmctrl("0x00c00003  0 xterm.XTerm  host cat > /tmp/a b\\n")
    [Window(id='0x00c00003', desktop=0, wm_class='xterm.XTerm', title='cat > /tmp/a b')]
    """
    out = []
    for line in text.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 4:
            continue
        try:
            desk = int(parts[1])
        except ValueError:
            continue
        title = parts[4] if len(parts) > 4 else ""
        out.append(Window(parts[0], desk, parts[2], title))
    return out


def matches(w: Window, name: str, *, strict: bool, by_class: bool) -> bool:
    """wmctrl's rule: ``strict`` = exact and case-sensitive, else a case-insensitive substring;
    of the title, or of ``res_name.res_class`` with ``by_class``.

    >>> w = Window("0x1", 0, "xterm.XTerm", "Terminal - bash")
    >>> matches(w, "terminal", strict=False, by_class=False), matches(w, "XTerm", strict=False,
    ...     by_class=True), matches(w, "Terminal", strict=True, by_class=False)
    (True, True, False)
    """
    hay = w.wm_class if by_class else w.title
    if strict:
        return hay == name or (not by_class and _chrome_alias(name) == hay)
    if name.lower() in hay.lower():
        return True
    alias = _chrome_alias(name)
    return alias is not None and alias.lower() in hay.lower()


def _chrome_alias(name: str) -> str | None:
    """OSWorld's image runs Google Chrome; ours runs Chromium under the google-chrome shim.

    Window titles end in "Chromium" and WM classes read "chromium" where OSWorld's tasks look for
    "Google Chrome" / "google-chrome", so those names also match Chromium's windows.

    >>> _chrome_alias("New Tab - Google Chrome"), _chrome_alias("google-chrome"), _chrome_alias("x")
    ('New Tab - Chromium', 'chromium', None)
    """
    for chrome, chromium in (("Google Chrome", "Chromium"), ("google-chrome", "chromium")):
        if chrome in name:
            return name.replace(chrome, chromium)
    return None


class Windows:
    """Lists, activates and closes windows via ``wmctrl``; reads the active window via Xlib."""

    def __init__(self, registry: ProcessRegistry, display_name: str):
        self._registry = registry
        self._display_name = display_name
        self._x: xdisplay.Display | None = None
        self._xlock = threading.Lock()

    def _wmctrl(self, *args: str) -> subprocess.CompletedProcess:
        if shutil.which("wmctrl") is None:
            raise MissingDependencyError("wmctrl is not installed; install the 'wmctrl' package")
        return self._registry.run(["wmctrl", *args], timeout=WMCTRL_TIMEOUT_S)

    def list(self) -> list[Window]:
        """All managed windows, in the window manager's client-list order (empty without WM)."""
        res = self._wmctrl("-l", "-x")
        if res.returncode != 0:
            log.debug("wmctrl -l failed: %s", res.stderr.decode(errors="replace").strip())
            return []
        return parse_wmctrl(res.stdout.decode("utf-8", errors="replace"))

    def find(self, name: str, *, strict: bool = False, by_class: bool = False) -> Window | None:
        """The first window wmctrl would pick for ``name``."""
        return next((w for w in self.list() if matches(w, name, strict=strict, by_class=by_class)),
                    None)

    def active_id(self) -> int | None:
        """``_NET_ACTIVE_WINDOW`` of the root window (None if unset or no WM)."""
        with self._xlock:
            try:
                if self._x is None:
                    self._x = xdisplay.Display(self._display_name)
                root = self._x.screen().root
                prop = root.get_full_property(self._x.intern_atom("_NET_ACTIVE_WINDOW"),
                                              X.AnyPropertyType)
            except (xerror.XError, ConnectionError, OSError):
                self._x = None
                return None
        return int(prop.value[0]) if prop is not None and len(prop.value) else None

    def activate(self, name: str, *, strict: bool = False, by_class: bool = False) -> bool:
        """Raise and focus the first matching window. False if none matches."""
        w = self.find(name, strict=strict, by_class=by_class)
        return w is not None and self.activate_id(w.id)

    def activate_id(self, window_id: str, wait: float = ACTIVATE_WAIT_S) -> bool:
        """Activate a window by id and wait (bounded) until the WM reports it active."""
        if self._wmctrl("-i", "-a", window_id).returncode != 0:
            return False
        target, deadline = int(window_id, 16), time.monotonic() + wait
        while self.active_id() != target:
            if time.monotonic() >= deadline:
                log.warning("window %s did not become active within %.1f s", window_id, wait)
                break
            time.sleep(0.02)
        return True

    def close(self, name: str, *, strict: bool = False, by_class: bool = False) -> bool:
        """Politely close the first matching window. False if none matches."""
        w = self.find(name, strict=strict, by_class=by_class)
        return w is not None and self._wmctrl("-i", "-c", w.id).returncode == 0

    def disconnect(self) -> None:
        with self._xlock:
            if self._x is not None:
                self._x.close()
                self._x = None
