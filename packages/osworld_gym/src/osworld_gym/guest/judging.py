"""Evaluation commands as the desktop user, with the player's loose processes held still.

OSWorld's evaluators read the desktop as its user: ``ssh -G`` only trusts a config its own uid
owns, ``git`` refuses a repository another uid owns, ``~`` is the user's. So an evaluation
command (``/execute``) runs with the desktop user's uid, like a setup command, but

* with a clean environment and ``python3 -I`` (see :mod:`~osworld_gym.guest.osworld_api`),
* in the judge's cgroup (a player that exhausted its own pids/memory cannot starve it),
* while every player process that can act on a command it did not start is stopped (SIGSTOP,
  then SIGCONT): shells, interpreters, command runners (:data:`RUNS_CODE`) and any program from
  outside ``/usr``/``/opt`` (the home, ``/tmp``). A process of the same uid could otherwise
  signal the command, ``ptrace`` it, or simply write the expected answer into
  ``/proc/<pid>/fd/1``. Installed applications keep running, whoever started them (setup or
  the agent's terminal), because getters query them live (Chromium's DevTools, VLC's HTTP
  interface), and so do the window manager and the session bus.

What stays possible: code injected into a running application (a ptrace-capable agent that
hijacked Chromium before the episode ended), or an installed program not listed in
:data:`RUNS_CODE` used as a controller. The README's threat model lists this.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from osworld_gym.guest.processes import descendants

log = logging.getLogger(__name__)

#: Programs that run code given to them (interpreters, shells, debuggers, command runners).
#: Network relays (``socat``, ``nc``) are not held: OSWorld's Chrome tasks forward 9222 to
#: 1337 with ``socat`` and getters query through it.
RUNS_CODE = re.compile(
    r"(ba|da|z|k|c|tc|fi|mk|ya)?sh|busybox|python[\d.]*m?|perl[\d.]*|ruby[\d.]*|node(js)?|"
    r"lua[\d.]*|luajit|tclsh[\d.]*|wish[\d.]*|php[\d.]*|gdb|strace|ltrace|watch|xargs|env|"
    r"nohup|setsid|timeout|script|expect|stdbuf|nice|flock|parallel|"
    r"awk|gawk|mawk|sed|find|make|java|gjs")
#: Where the programs of task apps live; anything else (the home, /tmp) is the player's own.
APP_ROOTS = ("/usr/", "/opt/")
#: Read-only scripts of ours that supervise apps (the Chromium supervisor behind the
#: ``google-chrome`` shim forwards ``pkill chrome`` to Chromium; held, it would not, and an
#: evaluator's ``pkill chrome`` would never get Chromium's profile written).
OUR_SCRIPTS = "/opt/osworld-gym/shims/"


def _uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _app_program(pid: int) -> bool:
    exe = _exe(pid).removesuffix(" (deleted)")
    if not exe.startswith(APP_ROOTS):
        return False
    if not RUNS_CODE.fullmatch(os.path.basename(exe)):
        return True
    try:  # an interpreter running one of our read-only supervisor scripts
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) > 1 and argv[1].decode("utf-8", "replace").startswith(OUR_SCRIPTS)


@contextmanager
def player_held(player_uid: int, keep: set[int]) -> Iterator[int]:
    """SIGSTOP every process of ``player_uid`` below this one that runs code
    (:data:`RUNS_CODE`) or a program from outside :data:`APP_ROOTS`, for the duration; SIGCONT
    after. ``keep``: pids that keep running regardless (window manager, session bus). Yields
    how many processes were stopped.
    """
    stopped: list[int] = []
    seen: set[int] = set()
    try:
        for _ in range(8):  # a process may fork while we scan: rescan until nothing is new
            new = [p.pid for p in descendants(os.getpid())
                   if p.pid not in seen and p.pid not in keep and p.state not in "ZXT"
                   and _uid(p.pid) == player_uid and not _app_program(p.pid)]
            if not new:
                break
            for pid in new:
                seen.add(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        if stopped:
            log.debug("holding %d player processes during an evaluation command", len(stopped))
        yield len(stopped)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
