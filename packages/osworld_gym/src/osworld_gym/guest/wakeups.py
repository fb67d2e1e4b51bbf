"""When will a sleeping event loop wake up? Read the timeout of the call it is blocked in.

An app that has gone idle may still have a timer armed that will change the screen: LibreOffice
updates its toolbars and status bar (the word count) 300 ms after an edit, from a timer. An
event loop sleeps in ``poll``/``select``/``epoll_wait`` with the time to its next timer as the
timeout, and the kernel shows the call and its arguments in ``/proc/PID/syscall``; where the
timeout is passed by pointer it is read from ``/proc/PID/mem`` (the guest is the apps'
ancestor and the namespace's root, so it may). The timeout is an upper bound on the time left:
the thread may have been asleep for a while already, never for longer.

x86-64 only (syscall numbers and register order); elsewhere :func:`next_wakeup` says None.

>>> parse_syscall_line("7 0x7ffd 0x3 0x1f4 0x0 0x0 0x0 0x7ffc 0x7f00")
(7, [32765, 3, 500, 0, 0, 0])
>>> parse_syscall_line("running") is None
True
"""

from __future__ import annotations

import os
import platform
import struct

_X86_64 = platform.machine() in ("x86_64", "AMD64")

# syscall number -> (argument index of the timeout, how it is passed)
_MS, _TIMESPEC, _TIMEVAL = "ms", "timespec", "timeval"
_TIMEOUTS: dict[int, tuple[int, str]] = {
    7: (2, _MS),  # poll(fds, nfds, timeout_ms)
    23: (4, _TIMEVAL),  # select(n, r, w, x, struct timeval *)
    232: (3, _MS),  # epoll_wait(epfd, events, max, timeout_ms)
    270: (4, _TIMESPEC),  # pselect6(n, r, w, x, struct timespec *, sigmask)
    271: (2, _TIMESPEC),  # ppoll(fds, nfds, struct timespec *, sigmask)
    281: (3, _MS),  # epoll_pwait(epfd, events, max, timeout_ms, sigmask)
    441: (3, _TIMESPEC),  # epoll_pwait2(epfd, events, max, struct timespec *, sigmask)
    35: (0, _TIMESPEC),  # nanosleep(struct timespec *, rem)
}


def parse_syscall_line(line: str) -> tuple[int, list[int]] | None:
    """``(number, six arguments)`` of a ``/proc/PID/syscall`` line; None when not in a call."""
    parts = line.split()
    if len(parts) < 7 or not parts[0].isdigit():
        return None
    return int(parts[0]), [int(p, 16) for p in parts[1:7]]


def next_wakeup(pid: int, tid: int | None = None) -> float | None:
    """Seconds (at most) until thread ``tid`` of ``pid`` (its main thread by default) wakes
    from the timed wait it is blocked in; None when it is not in one we know, waits without a
    timeout, or cannot be read."""
    if not _X86_64:
        return None
    base = f"/proc/{pid}" if tid is None else f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{base}/syscall") as f:
            call = parse_syscall_line(f.read())
    except OSError:
        return None
    if call is None or call[0] not in _TIMEOUTS:
        return None
    index, kind = _TIMEOUTS[call[0]]
    arg = call[1][index]
    if kind == _MS:  # an int: -1 (no timeout) may come as 0xffffffff, not sign-extended
        low = arg & 0xFFFFFFFF
        signed = low - (1 << 32) if low >= 1 << 31 else low
        return None if signed < 0 else signed / 1000
    if arg == 0:  # a NULL timeout: wait forever
        return None
    try:
        fd = os.open(f"{base}/mem", os.O_RDONLY)
        try:
            raw = os.pread(fd, 16, arg)
        finally:
            os.close(fd)
    except OSError:
        return None
    if len(raw) != 16:
        return None
    sec, frac = struct.unpack("qq", raw)
    return sec + frac / (1e9 if kind == _TIMESPEC else 1e6)
