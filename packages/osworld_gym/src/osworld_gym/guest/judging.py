"""Evaluation commands as the desktop user, with everything the agent started frozen.

OSWorld's evaluators read the desktop as its user: ``ssh -G`` only trusts a config its own uid
owns, ``git`` refuses a repository another uid owns, ``~`` is the user's. So an evaluation
command (``/execute``) runs with the desktop user's uid, like a setup command, but

* with a clean environment and ``python3 -I`` (see :mod:`~osworld_gym.guest.osworld_api`),
* in the judge's cgroup (a player that exhausted its own pids/memory cannot starve it),
* while every player process the judge does not trust is frozen. A process of the same uid
  could otherwise signal the command, ``ptrace`` it, write the expected answer into
  ``/proc/<pid>/fd/1`` or rewrite the result file while it is read.

**Trusted** (keeps running, because getters query apps live: Chromium's DevTools, VLC's HTTP
interface): the desktop's infrastructure (window manager, session bus and services); the
processes setup launched (``/setup/launch``, ``/open_file``: the task author is trusted) and,
below those, processes that run an installed application (:func:`app_program`) and have no
controlling terminal -- walked from parent to child, so a shell anywhere in the chain (a
terminal's ``bash``, ``vim``'s ``:!``, an app's helper script) makes its whole subtree
untrusted; and, whoever started them, the apps getters query live (:data:`LIVE_APPS`:
Chromium, VLC, by executable). Everything else -- whatever the agent started from a terminal,
through ``setsid``/double forks (orphans re-parent to the guest), from the home or ``/tmp``, or
as an interpreter -- is not, and an evaluator command that names a port such a process listens
on is refused (:func:`untrusted_listeners`).

**How it is held.** With a freezer cgroup (:class:`~osworld_gym.providers.limits.PlayerFreezer`,
the default on a root host): the guest freezes the player's cgroup as a whole (new children of
a frozen cgroup are frozen too, so neither a fork-hopping loop nor a process started during the
scan escapes), moves each untrusted process into its ``held`` child cgroup, freezes ``held``
and thaws the rest; after the command, ``held`` is thawed. Without one (no writable cgroup): a
fallback SIGSTOPs, one pid at a time, the player's processes that run code
(:data:`RUNS_CODE`) or a program from outside ``/usr``/``/opt``, rescanning a few times; a
fork-hopping loop or an installed non-interpreter (``yes > file``) can slip past it, so that
mode is logged as weaker.

What stays possible: code injected into a running trusted application (a ptrace-capable agent
that hijacked Chromium before the episode ended). The README's threat model lists this.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from osworld_gym.guest.processes import ProcInfo, all_processes, descendants

log = logging.getLogger(__name__)

#: Programs that run code given to them (interpreters, shells, debuggers, command runners).
#: Network relays (``socat``, ``nc``) are not held: OSWorld's Chrome tasks forward 9222 to
#: 1337 with ``socat`` and getters query through it.
RUNS_CODE = re.compile(
    r"(ba|da|z|k|c|tc|fi|mk|ya)?sh|busybox|python[\d.]*m?|perl[\d.]*|ruby[\d.]*|node(js)?|"
    r"lua[\d.]*|luajit|tclsh[\d.]*|wish[\d.]*|php[\d.]*|gdb|strace|ltrace|watch|xargs|env|"
    r"nohup|setsid|timeout|script|expect|stdbuf|nice|flock|parallel|"
    r"awk|gawk|mawk|sed|find|make|java|gjs|"
    # editors and multiplexers that run commands (`vim -c '!...'`, `:terminal`, M-x shell)
    r"g?vim?(\.\w+)?|nvim|emacs[-\w.]*|tmux|screen|"
    # the dynamic loader runs any program given to it (`ld-linux-x86-64.so.2 /usr/bin/python3`)
    r"ld(-linux)?[-\w]*\.so(\.\d+)*")
#: Where the programs of task apps live; anything else (the home, /tmp) is the player's own.
APP_ROOTS = ("/usr/", "/opt/")
#: Read-only scripts of ours that supervise apps (the Chromium supervisor behind the
#: ``google-chrome`` shim forwards ``pkill chrome`` to Chromium; held, it would not, and an
#: evaluator's ``pkill chrome`` would never get Chromium's profile written).
OUR_SCRIPTS = "/opt/osworld-gym/shims/"
#: Installed apps whose live state getters query (Chromium's DevTools, VLC's HTTP interface):
#: trusted whoever started them, so an agent that reopens its browser or plays a file with
#: ``vlc song.wav &`` from a terminal (a built-in task's oracle does) is scored on that app.
#: They are real apps reporting their real state; a relay or a script on their port is not.
LIVE_APPS = re.compile(r"chromium(-browser)?|chrome|google-chrome[-\w]*|vlc")
#: Seconds a freeze may take before the evaluation goes on regardless (logged).
FREEZE_TIMEOUT_S = 10.0


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


def _tty(pid: int) -> int:
    """The controlling terminal of ``pid`` (0: none; -1: unreadable)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[4])
    except (OSError, IndexError, ValueError):
        return -1


def _start(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def program_is_app(path: str) -> bool:
    """An installed program that does not run code given to it.

    >>> program_is_app("/usr/bin/socat"), program_is_app("/usr/bin/bash")
    (True, False)
    >>> program_is_app("/home/user/socat"), program_is_app("/usr/bin/vim.basic")
    (False, False)
    """
    return path.startswith(APP_ROOTS) and not RUNS_CODE.fullmatch(os.path.basename(path))


def app_program(pid: int) -> bool:
    """Whether ``pid`` executes an installed application (or one of our supervisor scripts)."""
    exe = _exe(pid).removesuffix(" (deleted)")
    if not exe.startswith(APP_ROOTS):
        return False
    if not RUNS_CODE.fullmatch(os.path.basename(exe)):
        return True
    try:  # an interpreter running one of our read-only supervisor scripts
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # resolved: `/opt/osworld-gym/shims/../../../tmp/x.py` is the player's script, not ours
    return len(argv) > 1 and os.path.realpath(
        argv[1].decode("utf-8", "replace")).startswith(OUR_SCRIPTS)


_app_program = app_program  # the old name


def live_app(pid: int) -> bool:
    """Whether ``pid`` executes one of :data:`LIVE_APPS` (by its executable, not its name)."""
    exe = _exe(pid).removesuffix(" (deleted)")
    return exe.startswith(APP_ROOTS) and bool(LIVE_APPS.fullmatch(os.path.basename(exe)))


class SetupRoots:
    """The processes setup launched (``/setup/launch``, ``/open_file``): the roots of trust.

    The task author is trusted, so whatever setup launches keeps running while the judge
    reads the desktop (a task's local web server, Chromium, ``socat``); a root counts only
    while the process with its pid is the one launched (start time). Its descendants are
    trusted only as :func:`trusted_pids` says.
    """

    def __init__(self) -> None:
        self._roots: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, pid: int) -> None:
        start = _start(pid)
        if start is not None:
            with self._lock:
                self._roots[pid] = start

    def pids(self) -> set[int]:
        with self._lock:
            for pid, start in list(self._roots.items()):
                if _start(pid) != start:
                    del self._roots[pid]
            return set(self._roots)

    def clear(self) -> None:
        with self._lock:
            self._roots.clear()


def trusted_pids(infrastructure: set[int], roots: set[int],
                 procs: list[ProcInfo] | None = None) -> set[int]:
    """Processes the judge trusts (see the module's docstring): ``infrastructure`` and setup
    ``roots``, and below them, from parent to child, installed applications with no
    controlling terminal."""
    procs = all_processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for p in procs:
        if p.state not in "ZX":
            children.setdefault(p.ppid, []).append(p.pid)
    live = {p.pid for p in procs if p.state not in "ZX"}
    out = {pid for pid in infrastructure | roots if pid in live}
    out |= {pid for pid in live if pid not in out and live_app(pid)}
    stack = list(out)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out and _tty(child) == 0 and app_program(child):
                out.add(child)
                stack.append(child)
    return out


def listener_pids(port: int) -> set[int]:
    """The processes holding a socket that LISTENs on TCP ``port`` (any address, v4 or v6) in
    this network namespace: socket inodes from ``/proc/net/tcp*`` matched against every
    process's open descriptors (readable to the judge only)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            # local_address is ADDR:PORT in hex; state 0A is LISTEN
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    if not inodes:
        return set()
    wanted = {f"socket:[{i}]" for i in inodes}
    owners: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted:
                    owners.add(int(name))
                    break
            except OSError:
                continue
    return owners


def command_ports(argv: list[str] | str) -> set[int]:
    """Unprivileged TCP port numbers a command names (as whole words: ``curl
    localhost:1337/json``, ``{"ports": [1337, 9222]}``).

    >>> sorted(command_ports(["bash", "-c", "curl -s http://127.0.0.1:1337/json/list"]))
    [1337]
    >>> sorted(command_ports('{"ports": [1337, 9222], "timeout": 10}')), command_ports("ls 80")
    ([1337, 9222], set())
    """
    text = argv if isinstance(argv, str) else " ".join(argv)
    return {int(m) for m in re.findall(r"(?<![\w.])(\d{4,5})(?![\w.])", text)
            if 1024 <= int(m) < 65536}


def untrusted_listeners(ports: set[int], trusted: set[int]) -> dict[int, list[int]]:
    """``{port: pids}`` for each of ``ports`` with a listener the judge does not trust."""
    out = {}
    for port in sorted(ports):
        bad = sorted(listener_pids(port) - trusted)
        if bad:
            out[port] = bad
    return out


def describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        name = os.path.basename(argv[0].decode("utf-8", "replace")) or "?"
    except (OSError, IndexError):
        name = "?"
    return f"{name} (pid {pid})"


class Freezer:
    """The guest's side of the player's freezer cgroup (see
    :class:`~osworld_gym.providers.limits.PlayerFreezer`): ``root`` is the player's cgroup
    directory as bound into the sandbox, with a ``held`` child."""

    def __init__(self, root: str | Path, version: int):
        self.root = Path(root)
        self.held = self.root / "held"
        self.version = version
        self._lock = threading.Lock()
        self._holders = 0  # concurrent evaluation commands: `held` thaws after the last one
        if not (self.held / "cgroup.procs").exists():
            raise OSError(f"{self.held} is not a cgroup")

    def _set(self, d: Path, frozen: bool) -> None:
        if self.version == 2:
            (d / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (d / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def _is_frozen(self, d: Path) -> bool:
        if self.version == 2:
            return "frozen 1" in (d / "cgroup.events").read_text().splitlines()
        return (d / "freezer.state").read_text().strip() == "FROZEN"

    def _wait(self, d: Path, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while not self._is_frozen(d):
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return True

    def members(self, d: Path | None = None) -> list[int]:
        text = ((d or self.root) / "cgroup.procs").read_text()
        return [int(x) for x in text.split()]

    @contextmanager
    def hold(self, trusted: Callable[[], set[int]],
             timeout: float = FREEZE_TIMEOUT_S) -> Iterator[int]:
        """Freeze the player, move every process not in ``trusted()`` (asked while everything
        is frozen) into ``held``, thaw the rest; thaw ``held`` on exit. Yields how many
        processes are held."""
        with self._lock:
            self._holders += 1
            self._hold_now(trusted, timeout)
        try:
            held = len(self.members(self.held))
            log.debug("holding %d player processes during an evaluation command", held)
            yield held
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    self._set(self.held, False)

    def _hold_now(self, trusted: Callable[[], set[int]], timeout: float) -> None:
        self._set(self.held, True)
        try:
            self._set(self.root, True)
            try:
                if not self._wait(self.root, timeout):
                    log.warning("the player's cgroup did not freeze within %.0f s; evaluating "
                                "anyway", timeout)
                keep = trusted()
                for pid in self.members():
                    if pid in keep:
                        continue
                    try:
                        (self.held / "cgroup.procs").write_text(str(pid))
                    except (ProcessLookupError, OSError) as e:
                        if getattr(e, "errno", None) != errno.ESRCH:
                            raise
            finally:
                self._set(self.root, False)
            if not self._wait(self.held, timeout):
                log.warning("held player processes did not freeze within %.0f s", timeout)
        except BaseException:
            if self._holders == 1:
                self._set(self.held, False)
            self._holders -= 1
            raise


@contextmanager
def player_held(player_uid: int, keep: set[int]) -> Iterator[int]:
    """The fallback without a freezer cgroup: SIGSTOP every process of ``player_uid`` below
    this one that runs code (:data:`RUNS_CODE`) or a program from outside :data:`APP_ROOTS`,
    for the duration; SIGCONT after. ``keep``: pids that keep running regardless (window
    manager, session bus). Yields how many processes were stopped.
    """
    stopped: list[int] = []
    seen: set[int] = set()
    try:
        for _ in range(8):  # a process may fork while we scan: rescan until nothing is new
            new = [p.pid for p in descendants(os.getpid())
                   if p.pid not in seen and p.pid not in keep and p.state not in "ZXT"
                   and _uid(p.pid) == player_uid and not app_program(p.pid)]
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
