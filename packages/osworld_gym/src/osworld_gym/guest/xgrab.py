"""Judge X connections that a player's ``XGrabServer`` cannot stall (issue 17, item d).

Xvfb runs without authorization, so any desktop client, the player's included, may grab the
server and never let go; every other client's requests then wait. XTEST ``GrabControl`` with
``impervious=True`` exempts one connection from grabs (the server keeps processing it while
another client holds the grab). Every X connection the guest opens as the judge goes through
here right after it is opened:

* :func:`make_impervious` for a python-xlib ``Display`` (input, windows, cursor, desktop);
* :func:`make_xcb_impervious` for a raw ``xcb_connection_t *`` (``mss``'s screenshot connection),
  sending the request with libxcb's generic ``xcb_send_request``: libxcb-xtest is not needed.

Both wait for the server to have processed the request (a round trip), so a grab that starts
after they return can no longer block the connection.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from Xlib.display import Display

log = logging.getLogger(__name__)

#: XTEST's minor opcode for GrabControl (xtestproto: X_XTestGrabControl).
_X_XTEST_GRAB_CONTROL = 3


class GrabControlError(RuntimeError):
    """The server has no XTEST or refused GrabControl: the connection stays grab-sensitive."""


_Display = TypeVar("_Display", bound="Display")


def make_impervious(display: _Display) -> _Display:
    """Make a python-xlib ``Display`` ignore other clients' server grabs; returns it."""
    if not display.has_extension("XTEST"):
        raise GrabControlError("the X server lacks XTEST: judge connections stay grab-sensitive")
    display.xtest_grab_control(True)
    display.sync()  # round trip: processed before we go on
    return display


# ---- raw XCB --------------------------------------------------------------------------------
class _Extension(ctypes.Structure):  # xcb_extension_t
    _fields_ = (("name", ctypes.c_char_p), ("global_id", ctypes.c_int))


class _ProtocolRequest(ctypes.Structure):  # xcb_protocol_request_t
    _fields_ = (
        ("count", ctypes.c_size_t),
        ("ext", ctypes.POINTER(_Extension)),
        ("opcode", ctypes.c_uint8),
        ("isvoid", ctypes.c_uint8),
    )


class _IOVec(ctypes.Structure):  # struct iovec
    _fields_ = (("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t))


class _VoidCookie(ctypes.Structure):  # xcb_void_cookie_t
    _fields_ = (("sequence", ctypes.c_uint),)


class _QueryExtensionReply(ctypes.Structure):  # xcb_query_extension_reply_t
    _fields_ = (
        ("response_type", ctypes.c_uint8),
        ("pad0", ctypes.c_uint8),
        ("sequence", ctypes.c_uint16),
        ("length", ctypes.c_uint32),
        ("present", ctypes.c_uint8),
        ("major_opcode", ctypes.c_uint8),
        ("first_event", ctypes.c_uint8),
        ("first_error", ctypes.c_uint8),
    )


class _GrabControlRequest(ctypes.Structure):  # xcb_test_grab_control_request_t
    _fields_ = (
        ("major_opcode", ctypes.c_uint8),
        ("minor_opcode", ctypes.c_uint8),
        ("length", ctypes.c_uint16),
        ("impervious", ctypes.c_uint8),
        ("pad0", ctypes.c_uint8 * 3),
    )


#: libxcb keys its per-connection extension cache on this struct's global_id: one, for ever.
_XTEST_ID = _Extension(b"XTEST", 0)
_XCB_REQUEST_CHECKED = 1
_lib: ctypes.CDLL | None = None


def _libxcb() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(ctypes.util.find_library("xcb") or "libxcb.so.1")
        lib.xcb_get_extension_data.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Extension)]
        lib.xcb_get_extension_data.restype = ctypes.POINTER(_QueryExtensionReply)
        lib.xcb_send_request.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.POINTER(_IOVec),
            ctypes.POINTER(_ProtocolRequest),
        ]
        lib.xcb_send_request.restype = ctypes.c_uint
        lib.xcb_request_check.argtypes = [ctypes.c_void_p, _VoidCookie]
        lib.xcb_request_check.restype = ctypes.c_void_p
        lib.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
        lib.xcb_connection_has_error.restype = ctypes.c_int
        _lib = lib
    return _lib


def _address(conn: Any) -> int:
    """The ``xcb_connection_t *`` as an int, from a ctypes pointer, structure or int."""
    if isinstance(conn, int):
        return conn
    if isinstance(conn, ctypes._Pointer):  # type: ignore[attr-defined]
        return ctypes.cast(conn, ctypes.c_void_p).value or 0
    return ctypes.addressof(conn)


def make_xcb_impervious(conn: Any) -> None:
    """Send XTEST GrabControl(impervious) on a raw XCB connection and wait for it."""
    lib, c = _libxcb(), _address(conn)
    if not c or lib.xcb_connection_has_error(c):
        raise GrabControlError("the XCB connection is closed or in error")
    ext = lib.xcb_get_extension_data(c, ctypes.byref(_XTEST_ID))
    if not ext or not ext.contents.present:
        raise GrabControlError(
            "the X server lacks XTEST: the screenshot connection stays grab-sensitive"
        )
    body = _GrabControlRequest(0, _X_XTEST_GRAB_CONTROL, 0, 1)  # libxcb fills opcode, length
    # xcb_send_request wants two spare iovecs before the request's own (it uses them itself)
    parts = (_IOVec * 4)()
    parts[2] = _IOVec(ctypes.cast(ctypes.byref(body), ctypes.c_void_p), ctypes.sizeof(body))
    parts[3] = _IOVec(None, 0)  # 8 bytes: already 4-aligned, no padding
    request = _ProtocolRequest(2, ctypes.pointer(_XTEST_ID), _X_XTEST_GRAB_CONTROL, 1)
    first = ctypes.cast(ctypes.addressof(parts) + 2 * ctypes.sizeof(_IOVec), ctypes.POINTER(_IOVec))
    seq = lib.xcb_send_request(c, _XCB_REQUEST_CHECKED, first, ctypes.byref(request))
    if seq == 0:
        raise GrabControlError("xcb_send_request failed for XTEST GrabControl")
    err = lib.xcb_request_check(c, _VoidCookie(seq))  # round trip; NULL when accepted
    if err:
        ctypes.CDLL(None).free(ctypes.c_void_p(err))
        raise GrabControlError("the X server refused XTEST GrabControl")


def make_mss_impervious(grabber: Any) -> None:
    """The same for an ``mss.MSS`` object on its XCB backend (mss 10's default on Linux)."""
    impl = getattr(grabber, "_impl", grabber)
    conn = getattr(impl, "conn", None)
    if conn is None:
        raise GrabControlError(
            f"mss backend {type(impl).__name__} has no XCB connection "
            "(expected mss 10's XCB backends)"
        )
    make_xcb_impervious(conn)
