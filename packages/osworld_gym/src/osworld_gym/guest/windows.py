"""Window helpers: :class:`Windows` over ``wmctrl``, :class:`ClickFocus` over Xlib.

Both need a running EWMH window manager such as openbox. Matching follows OSWorld's ``wmctrl``
flags: ``strict`` is ``-F`` (exact, case-sensitive), ``by_class`` is ``-x`` (match
``res_name.res_class`` instead of the title). Activation waits until the window manager reports
the window active, so the next action goes to it.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from array import array
from dataclasses import dataclass
from enum import Enum

from Xlib import X
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.protocol import event as xevent

from osworld_gym.errors import MissingDependencyError
from osworld_gym.guest.processes import ProcessRegistry
from osworld_gym.guest.xgrab import make_impervious

log = logging.getLogger(__name__)

WMCTRL_TIMEOUT_S = 5.0
#: How long activation waits for the window manager to make the window active.
ACTIVATE_WAIT_S = 2.0
#: How long a click waits for the window manager to focus the clicked window (it takes ~1 ms).
CLICK_FOCUS_WAIT_S = 0.5
#: Window types openbox does not focus when clicked (its ``client_mouse_focusable``), and the
#: desktop, whose clicks our openbox configuration does not bind.
NOT_CLICK_FOCUSED = (
    "_NET_WM_WINDOW_TYPE_DOCK",
    "_NET_WM_WINDOW_TYPE_DESKTOP",
    "_NET_WM_WINDOW_TYPE_TOOLBAR",
    "_NET_WM_WINDOW_TYPE_MENU",
    "_NET_WM_WINDOW_TYPE_SPLASH",
)
#: Modifiers and buttons held during a press: the window manager's click binding (plain Left,
#: Middle, Right) would not fire, so neither does ours.
_HELD_MASK = (
    X.ShiftMask
    | X.ControlMask
    | X.Mod1Mask
    | X.Mod4Mask
    | X.Button1Mask
    | X.Button2Mask
    | X.Button3Mask
    | X.Button4Mask
    | X.Button5Mask
)
_OPENBOX_NS = "{http://openbox.org/3.4/rc}"


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
        return next(
            (w for w in self.list() if matches(w, name, strict=strict, by_class=by_class)), None
        )

    def active_id(self) -> int | None:
        """``_NET_ACTIVE_WINDOW`` of the root window (None if unset or no WM)."""
        with self._xlock:
            try:
                if self._x is None:
                    self._x = make_impervious(xdisplay.Display(self._display_name))
                root = self._x.screen().root
                prop = root.get_full_property(
                    self._x.intern_atom("_NET_ACTIVE_WINDOW"), X.AnyPropertyType
                )
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


class FocusMode(Enum):
    """Who focuses a clicked window."""

    #: No window manager: nobody (the X server's focus follows the pointer).
    NONE = "none"
    #: The window manager, with a synchronous button grab on client windows: the pointer is
    #: frozen after a press until it has handled it, so input must pause after each press.
    WM = "wm"
    #: :class:`ClickFocus`, before the press: openbox without client-window click bindings.
    GUEST = "guest"


def openbox_grabs_client_clicks(rc_xml: str) -> bool:
    """Whether an openbox configuration binds mouse buttons on client windows.

    Openbox grabs such bindings synchronously (it must replay the click to the application):
    the pointer is frozen after each press until openbox has run the actions.

    >>> ns = '<openbox_config xmlns="http://openbox.org/3.4/rc"><mouse>'
    >>> openbox_grabs_client_clicks(ns + '<context name="Titlebar Client"><mousebind '
    ...     'button="Left" action="Press"><action name="Focus"/></mousebind></context></mouse>'
    ...     '</openbox_config>')
    True
    >>> openbox_grabs_client_clicks(ns + '<context name="Titlebar"><mousebind button="Left" '
    ...     'action="Drag"><action name="Move"/></mousebind></context></mouse></openbox_config>')
    False
    """
    root = ET.fromstring(rc_xml)
    if root.tag != f"{_OPENBOX_NS}openbox_config":  # openbox would fall back to its defaults
        return True
    for ctx in root.iter(f"{_OPENBOX_NS}context"):
        names = {n.lower() for n in ctx.get("name", "").split()}
        if names & {"client", "desktop"} and ctx.find(f"{_OPENBOX_NS}mousebind") is not None:
            return True
    return False


class ClickFocus:
    """Click to focus, done by the guest instead of the window manager's synchronous grab.

    Openbox focuses and raises a clicked window through a *synchronous* button grab: the X
    server freezes the pointer at the press until openbox has run its actions and replayed the
    press, so input sent meanwhile arrives late and out of place, and the sender has to pause
    after every press. Our openbox configuration binds no clicks on client windows; instead,
    :meth:`before_press` asks openbox to activate the top-level window under the pointer
    (``_NET_ACTIVE_WINDOW``, source "user": the same focus, modal-dialog and raise rules as its
    click binding) and waits until openbox has handled that request, so the focus has moved
    before the press is sent. That wait happens only when the window is not already the active,
    topmost one; no fixed sleeps.

    It shares the X connection of :class:`~osworld_gym.guest.xinput.XInput` (and its lock).
    """

    def __init__(self, d: xdisplay.Display):
        self._d = d
        self._root = d.screen().root
        self._atoms = {
            name: d.intern_atom(name)
            for name in (
                "WM_STATE",
                "_NET_ACTIVE_WINDOW",
                "_NET_CLIENT_LIST_STACKING",
                "_NET_WM_WINDOW_TYPE",
                "_NET_SUPPORTING_WM_CHECK",
                "_NET_WM_NAME",
                "_OB_CONFIG_FILE",
                "_NET_REQUEST_FRAME_EXTENTS",
                "_NET_FRAME_EXTENTS",
                *NOT_CLICK_FOCUSED,
            )
        }
        self._probe = None  # our unmapped window: grab probe and barrier (see _activate)
        self._rc: tuple[str, int, bool] | None = None  # (path, mtime, grabs client clicks)

    def _prop(self, win, name: str) -> array[int] | bytes | None:
        """A property's value: bytes for 8-bit formats (strings), an array of 16/32-bit items."""
        prop = win.get_full_property(self._atoms[name], X.AnyPropertyType)
        return None if prop is None else prop.value

    def _ids(self, win, name: str) -> list[int]:
        return [int(v) for v in self._prop(win, name) or ()]

    def mode(self) -> FocusMode:
        """Who focuses a clicked window on this display right now (a few round trips).

        An unknown window manager, or openbox whose configuration we cannot read or that binds
        clicks on client windows, counts as :attr:`FocusMode.WM`.
        """
        try:
            check = self._ids(self._root, "_NET_SUPPORTING_WM_CHECK")
            if not check:
                return FocusMode.NONE
            name = self._prop(self._d.create_resource_object("window", check[0]), "_NET_WM_NAME")
            path = self._prop(self._root, "_OB_CONFIG_FILE")
        except xerror.XError:  # a stale check window: the window manager is gone
            return FocusMode.NONE
        name, path = (
            v.decode(errors="replace") if isinstance(v, bytes) else v for v in (name, path)
        )
        # (openbox reads a relative path from its home directory; a path is a string property)
        if name != "Openbox" or not isinstance(path, str) or not os.path.isabs(path):
            return FocusMode.WM
        try:
            mtime = os.stat(path).st_mtime_ns
            rc = self._rc
            if rc is None or rc[:2] != (path, mtime):
                with open(path, encoding="utf-8") as f:
                    rc = self._rc = (path, mtime, openbox_grabs_client_clicks(f.read()))
        except (OSError, ET.ParseError) as e:
            log.debug("cannot read openbox's configuration %s: %s", path, e)
            return FocusMode.WM
        return FocusMode.WM if rc[2] else FocusMode.GUEST

    def before_press(self) -> None:
        """Focus and raise the top-level window under the pointer, as openbox's click binding
        would, unless it is active and on top already or the click goes elsewhere anyway."""
        root = self._root
        ptr = root.query_pointer()
        if ptr.mask & _HELD_MASK or not ptr.child:  # held keys or buttons; the bare desktop
            return
        try:
            frame = ptr.child
            if frame.get_attributes().override_redirect:  # a menu, popup or tooltip
                return
            client = frame.query_pointer().child
            if not client or self._prop(client, "WM_STATE") is None:
                return  # the frame's decorations: openbox's own bindings handle those
            if self._ids(root, "_NET_ACTIVE_WINDOW")[:1] == [client.id] and self._ids(
                root, "_NET_CLIENT_LIST_STACKING"
            )[-1:] == [client.id]:
                return
            types = self._prop(client, "_NET_WM_WINDOW_TYPE")
            if isinstance(types, array) and any(self._atoms[t] in types for t in NOT_CLICK_FOCUSED):
                return
        except xerror.XError:  # the window went away meanwhile
            return
        if self._pointer_grabbed():
            return  # e.g. an open menu: the click goes to its application and closes it
        self._activate(client)

    def _probe_window(self):
        if self._probe is None:
            self._probe = self._root.create_window(
                -10, -10, 1, 1, 0, X.CopyFromParent, event_mask=X.PropertyChangeMask
            )
        return self._probe

    def _pointer_grabbed(self) -> bool:
        """Whether another client holds the pointer, without side effects: grabbing on an
        unmapped window answers AlreadyGrabbed if so and GrabNotViewable otherwise (confining
        to it too keeps the server from releasing another grab's confinement)."""
        probe = self._probe_window()
        status = probe.grab_pointer(
            False, 0, X.GrabModeAsync, X.GrabModeAsync, probe, X.NONE, X.CurrentTime
        )
        if status == X.GrabSuccess:  # not for an unmapped window; be safe anyway
            self._d.ungrab_pointer(X.CurrentTime)
        return status == X.AlreadyGrabbed

    def _activate(self, client) -> None:
        """Ask the window manager to activate ``client`` and wait until it has handled that.

        The wait is a barrier: right after the activation request we ask for the frame
        extents of our own window (``_NET_REQUEST_FRAME_EXTENTS``), which openbox answers by
        setting a property on it. Openbox handles requests in order, so once that property
        changes it has already set the input focus (or refused to).
        """
        probe = self._probe_window()
        while self._d.pending_events():  # stale answers of an earlier, timed-out barrier
            self._d.next_event()
        mask = X.SubstructureRedirectMask | X.SubstructureNotifyMask
        for window, atom, data in (
            (client, "_NET_ACTIVE_WINDOW", [2, X.CurrentTime, 0, 0, 0]),
            (probe, "_NET_REQUEST_FRAME_EXTENTS", [0, 0, 0, 0, 0]),
        ):
            msg = xevent.ClientMessage(
                window=window, client_type=self._atoms[atom], data=(32, data)
            )
            self._root.send_event(msg, event_mask=mask)
        self._d.flush()
        deadline = time.monotonic() + CLICK_FOCUS_WAIT_S
        while True:
            while self._d.pending_events():
                e = self._d.next_event()
                if (
                    e.type == X.PropertyNotify
                    and e.window.id == probe.id
                    and e.atom == self._atoms["_NET_FRAME_EXTENTS"]
                ):
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "the window manager did not handle a click-to-focus request "
                    "within %.1f s; clicking anyway",
                    CLICK_FOCUS_WAIT_S,
                )
                probe.destroy()  # its late answer must not end the next wait early
                self._probe = None
                return
            select.select([self._d.fileno()], [], [], left)
