"""Process supervision: spawn through one registry, reap orphans, kill process trees.

The guest server is the desktop's supervisor. It declares itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``) so that detached grandchildren (``xdg-open`` → app,
double-forking daemons) are re-parented to it instead of to PID 1. That keeps every process of
the desktop inside one tree that :func:`descendants` can walk and :meth:`ProcessRegistry.kill_tree`
can kill.

Re-parented processes become *our* zombies when they exit, so somebody must ``waitpid`` them.
Reaping with ``waitpid(-1)`` would steal the exit status of processes that a request handler is
waiting for (``subprocess`` then silently reports 0). The registry therefore spawns every child
itself under a lock and reaps only zombies whose pid it did not spawn.

**Identities.** In a two-identity sandbox (see :mod:`osworld_gym.providers.sandbox`) the guest
is the *judge* (namespace root) and the desktop's apps are the *player* (uid 1000). Every child
is the player's unless spawned with ``judge=True``: :meth:`ProcessRegistry.popen` starts a
player process through ``setpriv`` (new uid/gid, no groups, no capabilities, no bounding set,
``no_new_privs``), after the still-privileged wrapper has moved itself into the player's
cgroup (:attr:`PlayerIdentity.cgroup_procs`), so everything the player forks is under the
player's memory and pids limits. Defaulting to the player means a forgotten call site runs
unprivileged, never the other way round. :meth:`ProcessRegistry.run` (the guest's own short
helper commands: wmctrl, the a11y helper, evaluation commands) defaults to the judge.

Reaping is also how the guest notices a *crash*: a task app (started with ``app=True``) or an
adopted orphan that died of a signal no well-behaved exit ends with (SIGSEGV, SIGABRT, SIGKILL
from the OOM killer, ...) and that the registry did not send itself. Crashes are counted so a
client can tell "the app died under the agent" (an infrastructure failure) from "the agent did
not solve the task".
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osworld_gym.protocol.routes import MAX_OUTPUT_BYTES

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process. Returns False where unsupported."""
    ok = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if not ok:
        log.warning("prctl(PR_SET_CHILD_SUBREAPER) failed; detached apps may escape supervision")
    return ok


def exit_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits."""
    return _prctl(_PR_SET_PDEATHSIG, int(sig))


def die_with_us(sig: str = "KILL") -> list[str]:
    """Command prefix (``setpriv --pdeathsig SIG --``) that makes a child get ``sig`` when the
    thread that starts it exits, however it exits: a parent killed outright leaves nothing behind.

    Only for children started from the main thread: the kernel signals when the *thread* that
    forked exits, so a child started from a short-lived thread would die with that thread. Off the
    main thread, and where util-linux's ``setpriv`` is missing, the prefix is empty.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    return ["setpriv", "--pdeathsig", sig, "--"] if shutil.which("setpriv") else []


@dataclass(frozen=True)
class ProcInfo:
    """One line of ``/proc/<pid>/stat``, the parts we need."""

    pid: int
    ppid: int
    state: str
    start_time: int
    comm: str


def read_proc(pid: int) -> ProcInfo | None:
    """Parse ``/proc/<pid>/stat``; None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may itself contain spaces or parentheses.
    lpar, rpar = raw.find("("), raw.rfind(")")
    rest = raw[rpar + 2 :].split()
    try:
        return ProcInfo(
            pid=pid,
            ppid=int(rest[1]),
            state=rest[0],
            start_time=int(rest[19]),
            comm=raw[lpar + 1 : rpar],
        )
    except (IndexError, ValueError):
        return None


def all_processes() -> list[ProcInfo]:
    """Every process visible in ``/proc``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := read_proc(int(name))) is not None:
            out.append(info)
    return out


def descendants(root: int, procs: Iterable[ProcInfo] | None = None) -> list[ProcInfo]:
    """All processes below ``root`` (not ``root`` itself), parents before children."""
    children: dict[int, list[ProcInfo]] = {}
    for p in all_processes() if procs is None else procs:
        children.setdefault(p.ppid, []).append(p)
    out: list[ProcInfo] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child.pid)
    return out


#: Deaths that are crashes, not exits: faults, aborts, and SIGKILL (the OOM killer's, or a kill
#: from outside the desktop). SIGTERM/SIGINT/SIGHUP are how apps are asked to quit, so they are not.
CRASH_SIGNALS = frozenset(
    {
        signal.SIGKILL,
        signal.SIGSEGV,
        signal.SIGABRT,
        signal.SIGBUS,
        signal.SIGILL,
        signal.SIGFPE,
        signal.SIGSYS,
        signal.SIGTRAP,
    }
)
#: Crash records kept for :attr:`ProcessRegistry.crashes` (the count keeps growing).
MAX_CRASH_RECORDS = 32
#: How long a launcher (``oosplash``, a wrapper script) gets to exit after the app below it died.
LAUNCHER_GRACE_S = 1.0


@dataclass(frozen=True)
class Crash:
    """A supervised process that died of a crash signal the registry did not send."""

    seq: int
    pid: int
    name: str
    signal: str
    #: The exit status as seen: ``-N`` (killed by signal N) or ``128+N`` (a launcher such as
    #: LibreOffice's oosplash or a shell reporting that its child was killed by signal N).
    status: int
    time: float

    def describe(self) -> str:
        return f"{self.name} (pid {self.pid}) died of {self.signal}"


def crash_signal(returncode: int | None, *, launcher: bool) -> signal.Signals | None:
    """The crash signal a ``subprocess`` return code means, if any.

    ``launcher`` also reads ``128 + N`` as signal N, the convention of shells and launchers that
    wait for the real program (LibreOffice's ``soffice`` exits 137 when ``soffice.bin`` is
    SIGKILLed). Only for processes we started as apps: other programs may exit 134 on purpose.
    """
    if returncode is None:
        return None
    if returncode < 0:
        num = -returncode
    elif launcher and 128 < returncode < 128 + 65:
        num = returncode - 128
    else:
        return None
    try:
        sig = signal.Signals(num)
    except ValueError:
        return None
    return sig if sig in CRASH_SIGNALS else None


def _argv_name(argv: Sequence[str] | str) -> str:
    first = (argv.split() or [""])[0] if isinstance(argv, str) else (list(argv) or [""])[0]
    return os.path.basename(first) or "?"


@dataclass(frozen=True)
class PlayerIdentity:
    """Who the player's processes run as, and the limits they start under.

    Attributes:
        uid, gid: the desktop user's ids (1000) in the sandbox's user namespace.
        cgroup_procs: ``cgroup.procs`` files of the player's cgroup (one per hierarchy),
            joined before dropping privileges (a process may move itself while still root).
        rlimit_prefix: argv prefix (``prlimit --as=N --nproc=M --``) where there is no cgroup.
    """

    uid: int
    gid: int
    cgroup_procs: tuple[str, ...] = ()
    rlimit_prefix: tuple[str, ...] = ()

    def wrap(self, argv: Sequence[str] | str, shell: bool) -> list[str]:
        """``argv`` (or the shell command ``argv``) as a player process."""
        inner = ["/bin/sh", "-c", argv] if shell else list(argv)
        drop = [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            *self.rlimit_prefix,
        ]
        if not self.cgroup_procs:
            return [*drop, *inner]
        joins = " && ".join(f"echo $$ > '{p}'" for p in self.cgroup_procs)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *drop, *inner]


def is_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    info = read_proc(pid)
    return info is not None and info.state not in ("Z", "X")


class OutputTooLarge(Exception):
    """A command printed more than it may: it was killed (see :meth:`ProcessRegistry.run`)."""

    def __init__(self, stream: str, limit: int):
        super().__init__(f"the command printed over {limit} bytes on {stream} and was killed")
        self.stream = stream
        self.limit = limit


@dataclass
class ProcessRegistry:
    """Spawns, tracks and reaps the supervisor's children.

    Every child must be started through :meth:`popen` (or :meth:`run`): the registry holds
    ``_lock`` across fork + registration, and :meth:`reap` holds it while scanning, so a zombie
    it sees is either a registered :class:`subprocess.Popen` (reaped via ``poll()``, which keeps
    the status in the object) or an orphan it may ``waitpid`` directly.
    """

    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str | None = None
    #: The player's identity; ``None``: one identity (everything runs as the guest does).
    player: PlayerIdentity | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _tracked: dict[int, subprocess.Popen] = field(default_factory=dict, init=False, repr=False)
    #: pid -> name of tracked children started as task apps (their crashes are counted).
    _apps: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    #: pids the registry itself signalled: their deaths are not crashes.
    _expected: set[int] = field(default_factory=set, init=False, repr=False)
    #: Crashes seen since start, and the most recent ones.
    crash_count: int = field(default=0, init=False)
    crashes: list[Crash] = field(default_factory=list, init=False)
    #: (pid, start time) of zombies :meth:`reap_dying` waited for in vain (a parent that never
    #: reaps): not waited for again.
    _stuck: set[tuple[int, int]] = field(default_factory=set, init=False, repr=False)
    _wake_r: int = field(default=-1, init=False, repr=False)
    _wake_w: int = field(default=-1, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # ---- spawning ---------------------------------------------------------------------------
    def popen(
        self,
        argv: Sequence[str] | str,
        *,
        shell: bool = False,
        new_session: bool = True,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        app: bool = False,
        judge: bool = False,
        **kwargs: Any,
    ) -> subprocess.Popen:
        """Start a child (not waited for) and track it. ``new_session`` gives it its own group.

        ``app`` marks a task app: if it dies of a crash signal, that is recorded as a
        :class:`Crash`. ``judge`` keeps the guest's identity; otherwise the child runs as
        :attr:`player` (when set).
        """
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        name = _argv_name(argv)
        if self.player is not None and not judge:
            argv, shell = self.player.wrap(argv, shell), False
        with self._lock:
            proc = subprocess.Popen(
                argv,
                shell=shell,
                start_new_session=new_session,
                env=env if env is not None else self.env,
                cwd=cwd if cwd is not None else self.cwd,
                **kwargs,
            )
            self._tracked[proc.pid] = proc
            if app:
                self._apps[proc.pid] = name
        return proc

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float,
        shell: bool = False,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        judge: bool = True,
        max_output: int = MAX_OUTPUT_BYTES,
    ) -> subprocess.CompletedProcess:
        """Run to completion with a hard timeout; on timeout the child's whole group is killed.

        stdout and stderr are read as they come and kept up to ``max_output`` bytes each: a
        command that prints more (``cat`` of an 800 MB file) is killed, group and all, and
        :class:`OutputTooLarge` raised, so neither stream is ever buffered whole.

        Runs as the judge unless ``judge=False``. Raises :class:`subprocess.TimeoutExpired`
        after killing.
        """
        proc = self.popen(
            argv,
            shell=shell,
            env=env,
            cwd=cwd,
            judge=judge,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        )
        try:
            out, err = self._collect(proc, input, timeout, max_output)
        except (subprocess.TimeoutExpired, OutputTooLarge):
            self.kill_group(proc)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:  # a detached grandchild may still hold them open
                    pipe.close()
            proc.wait(timeout=2)
            raise
        finally:
            self._forget(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    @staticmethod
    def _collect(
        proc: subprocess.Popen, input: bytes | None, timeout: float, cap: int
    ) -> tuple[bytes, bytes]:
        """``proc``'s stdout and stderr until both close and it exits, ``input`` fed to it."""
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + timeout
        bufs = {"stdout": bytearray(), "stderr": bytearray()}
        pending = memoryview(input or b"")
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
            sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
            if proc.stdin is not None:
                if pending:
                    os.set_blocking(proc.stdin.fileno(), False)
                    sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
                else:
                    proc.stdin.close()
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                for key, _ in sel.select(min(left, 1.0)):
                    if key.data == "stdin":
                        try:
                            pending = pending[os.write(key.fd, pending[: 1 << 16]) :]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(key.fileobj)
                            key.fileobj.close()  # type: ignore[union-attr]
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif len(bufs[key.data]) + len(chunk) > cap:
                        raise OutputTooLarge(key.data, cap)
                    else:
                        bufs[key.data] += chunk
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired(proc.args, timeout) from None
        return bytes(bufs["stdout"]), bytes(bufs["stderr"])

    def kill_group(self, proc: subprocess.Popen) -> None:
        """SIGKILL ``proc``'s process group (it was started in its own session)."""
        with self._lock:
            self._expected.add(proc.pid)
            self._expected.update(p.pid for p in descendants(proc.pid))
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    def _forget(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if proc.returncode is not None:
                self._tracked.pop(proc.pid, None)
                self._apps.pop(proc.pid, None)
                self._expected.discard(proc.pid)

    # ---- reaping ----------------------------------------------------------------------------
    def reap(self) -> int:
        """Collect exited tracked children and orphan zombies. Returns how many orphans.

        Records a :class:`Crash` for a task app or an orphan that died of a crash signal the
        registry did not send.
        """
        me = os.getpid()
        reaped = 0
        with self._lock:
            for pid, proc in list(self._tracked.items()):
                if proc.poll() is None:
                    continue
                del self._tracked[pid]
                name = self._apps.pop(pid, None)
                if name is not None:
                    sig = crash_signal(proc.returncode, launcher=True)
                    self._note_death(pid, name, sig, proc.returncode)
                self._expected.discard(pid)
            for info in all_processes():
                if info.ppid != me or info.state != "Z" or info.pid in self._tracked:
                    continue
                try:
                    pid, status = os.waitpid(info.pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if pid != info.pid:
                    continue
                reaped += 1
                code = os.waitstatus_to_exitcode(status)
                self._note_death(pid, info.comm, crash_signal(code, launcher=False), code)
                self._expected.discard(pid)
        return reaped

    def reap_dying(self, timeout: float = 5.0) -> int:
        """:meth:`reap`, then wait up to ``timeout`` s for children that are dying to be reaped.

        A multi-threaded process killed by a signal shows as a zombie as soon as its main thread
        is gone, but ``waitpid`` reports it only once its other threads have exited too (and a
        core dump, if any, is written): measured at 15-30 ms for mousepad. Until then a reap
        sees nothing, so a crash in the last moments before scoring would be missed.

        A child is watched from the first time it is seen dying until it is reaped: between
        the kernel dequeuing its crash signal and the child becoming a zombie (a core dump can
        make that long) it is neither pending nor a zombie, and a check of the state alone would
        stop waiting there.

        A task app is often a launcher's child (``soffice`` -> ``oosplash`` -> ``soffice.bin``):
        its death reaches us as the launcher's exit status, once the launcher has reaped it and
        exited. So a dying process further down a child's tree is watched too, and when it is
        gone the child above it gets :data:`LAUNCHER_GRACE_S` to exit. A zombie its parent never
        reaps is waited for once, not on every call.
        """
        deadline = time.monotonic() + timeout
        reaped = self.reap()
        watched = self._dying()  # pid -> the child of ours above it (itself for a child)
        grace: dict[int, float] = {}  # child of ours -> until when its exit is awaited
        while (watched or grace) and time.monotonic() < deadline:
            time.sleep(0.002)
            reaped += self.reap()
            now = time.monotonic()
            for pid, top in (watched | self._dying()).items():
                if _alive_below_me(pid):
                    watched[pid] = top
                else:
                    watched.pop(pid, None)
                    if top != pid:
                        grace.setdefault(top, now + LAUNCHER_GRACE_S)
            grace = {
                top: until for top, until in grace.items() if until > now and _alive_below_me(top)
            }
        self._stuck |= {ident for pid in watched if (ident := _identity(pid)) is not None}
        return reaped

    def _dying(self) -> dict[int, int]:
        """Processes in our children's trees that are zombies nobody has reaped yet, or have a
        crash signal pending that they will die of, each mapped to the child of ours above it.

        The second case is the race a ``kill -9`` right before scoring runs into: ``kill(2)``
        returns once SIGKILL is *queued* (``SigPnd``/``ShdPnd`` in ``/proc/PID/status``); the
        target dies only when the scheduler next runs it, which on a loaded machine can be
        after the guest's last reap. Such a process is neither dead nor a zombie yet.
        """
        me = os.getpid()
        procs = all_processes()
        parent = {p.pid: p.ppid for p in procs}
        out = {}
        for p in procs:
            if p.pid == me or (p.pid, p.start_time) in self._stuck:
                continue
            top, hops = p.pid, 0
            while parent.get(top, 0) not in (me, 0) and hops < 64:
                top, hops = parent[top], hops + 1
            # the cheap tests first: /proc/PID/status is read only for our own trees
            if parent.get(top) == me and (p.state == "Z" or _crash_pending(p.pid)):
                out[p.pid] = top
        return out

    def _note_death(self, pid: int, name: str, sig: signal.Signals | None, status: int) -> None:
        """Record a crash (caller holds ``_lock``)."""
        if sig is None or pid in self._expected:
            return
        self.crash_count += 1
        crash = Crash(
            seq=self.crash_count,
            pid=pid,
            name=name,
            signal=sig.name,
            status=status,
            time=time.time(),
        )
        self.crashes = [*self.crashes[-(MAX_CRASH_RECORDS - 1) :], crash]
        log.warning("crash: %s", crash.describe())

    def wake(self) -> None:
        """Ask the reaper thread to run now. Async-signal-safe (a SIGCHLD handler may call it):
        it only writes a byte to a pipe, taking no lock."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except (BlockingIOError, OSError):
                pass

    def start_reaper(self, interval: float = 1.0) -> None:
        """Reap in a daemon thread: on :meth:`wake` and every ``interval`` seconds."""
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

        def loop() -> None:
            while not self._stop.is_set():
                ready, _, _ = select.select([self._wake_r], [], [], interval)
                if ready:
                    try:
                        while os.read(self._wake_r, 4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                try:
                    self.reap()
                except Exception:  # never let the reaper die
                    log.exception("reaper pass failed")

        self._thread = threading.Thread(target=loop, name="guest-reaper", daemon=True)
        self._thread.start()

    def stop_reaper(self) -> None:
        self._stop.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=2)
        fds = (self._wake_r, self._wake_w)
        self._wake_r = self._wake_w = -1  # before closing: a late wake() must not hit a reused fd
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    # ---- killing ----------------------------------------------------------------------------
    def kill_tree(
        self, keep: set[int] | None = None, *, grace: float = 0.3, keep_subtrees: bool = True
    ) -> int:
        """Kill every descendant of this process except ``keep`` (and, by default, their subtrees).

        SIGTERM first, up to ``grace`` seconds for them to exit, then SIGKILL; repeats for
        processes forked meanwhile. Returns how many processes were signalled.
        """
        keep = set(keep or ())
        signalled: set[tuple[int, int]] = set()
        me = os.getpid()

        def targets() -> list[ProcInfo]:
            procs = all_processes()
            spared = set(keep)
            if keep_subtrees:
                for pid in keep:
                    spared.update(p.pid for p in descendants(pid, procs))
            return [
                p
                for p in descendants(me, procs)
                if p.pid not in spared and p.state not in ("Z", "X")
            ]

        def send(p: ProcInfo, sig: int) -> None:
            with self._lock:
                self._expected.add(p.pid)
            _signal(p.pid, sig)
            signalled.add((p.pid, p.start_time))

        first = targets()
        for p in first:
            send(p, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while first and time.monotonic() < deadline:
            self.reap()
            if not any(is_alive(p.pid) for p in first):
                break
            time.sleep(0.01)
        for _ in range(5):
            left = targets()
            if not left:
                break
            for p in left:
                send(p, signal.SIGKILL)
            end = time.monotonic() + 1.0
            while time.monotonic() < end and any(is_alive(p.pid) for p in left):
                time.sleep(0.005)
            self.reap()
        self.reap()
        with self._lock:  # all dead and reaped (by us or their parents): pids may be reused now
            self._expected.clear()
        return len(signalled)

    def terminate(self, proc: subprocess.Popen | None, timeout: float = 2.0) -> None:
        """Stop one tracked child: SIGTERM, wait up to ``timeout``, SIGKILL; always reaps it."""
        if proc is None or proc.poll() is not None:
            return
        with self._lock:
            self._expected.add(proc.pid)
        try:
            proc.terminate()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        finally:
            self._forget(proc)


_CRASH_MASK = sum(1 << (int(s) - 1) for s in CRASH_SIGNALS)


def _alive_below_me(pid: int) -> bool:
    """Whether ``pid`` still exists below this process (a zombie counts: not reaped yet)."""
    me, hops = os.getpid(), 0
    while (info := read_proc(pid)) is not None and hops < 64:
        if info.ppid == me:
            return True
        pid, hops = info.ppid, hops + 1
    return False


def _identity(pid: int) -> tuple[int, int] | None:
    """``(pid, start time)``: a process's name that a reused pid does not share."""
    info = read_proc(pid)
    return None if info is None else (info.pid, info.start_time)


def _crash_pending(pid: int) -> bool:
    """Whether ``pid`` has a crash signal (:data:`CRASH_SIGNALS`) pending that it neither
    blocks nor handles: it is about to die of it."""
    try:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":" in line
        )
        pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
        spared = int(fields["SigBlk"], 16) | int(fields["SigCgt"], 16) | int(fields["SigIgn"], 16)
    except (OSError, KeyError, ValueError):
        return False
    kill = 1 << (signal.SIGKILL - 1)  # cannot be blocked, caught or ignored
    return bool(pending & kill or pending & _CRASH_MASK & ~spared)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
