"""When has the desktop finished reacting to an action? Ask the X server and the kernel.

The host used to poll screenshots until the picture had been still for 0.3 s (and waited a
whole second when nothing changed). Inside the guest we can watch what actually produces
pixels, so the wait ends as soon as everything involved has gone idle:

* **XDamage** on the root window, on a connection of its own (the judge's, never the
  player's): every drawing operation that reaches the screen, from any client, reports damage.
  A round trip (``XSync``) before each look makes the answer exact: every damage the server
  made before it is in our queue.
* **The desktop's processes** (the guest's descendants: Xvfb, the window manager, the task
  apps and what they spawn): their CPU time, their number, and whether any of them is
  *runnable* (state ``R``) or in disk sleep (``D``). A process that has been handed the input
  but not yet scheduled -- a loaded machine -- is runnable, so load makes the wait longer,
  never shorter. Before declaring the desktop idle every *thread* is checked, not just main
  threads (a renderer's compositor thread may be the one still working).
* **Timers about to fire**: when the action made something draw and then everything went idle,
  the main threads that ran since the input are asked when they will wake next (the timeout
  of the ``poll``/``select`` they sleep in, :mod:`~osworld_gym.guest.wakeups`); one due within
  ``timer_s`` is waited for, and the next one too as long as the last one led to drawing
  (LibreOffice lays out an edit from one timer, then redraws its toolbars and status bar from
  another, 300 ms later). Not asked: a thread asleep since before the input (on a timer of its
  own: a clock, a caret), the X server and the panels (they never draw from timers what an
  input did), and processes the action started: they are starting up, and GTK apps arm timer
  after timer for the accessibility bus, their settings and their caret, which held mousepad's
  file open to 0.7-0.8 s for nothing visible.
* **Work in slices**: a main thread that ran since the input and sleeps at most ``CHUNK_S``
  between wake-ups is working through a job (LibreOffice's layout and word count after an edit
  run from a 10 ms timer and draw only at the end) and counts as busy, for up to
  ``CHUNKED_BUDGET_S`` (GTK's file dialog wakes as often, doing nothing, and is waited for too).
  This holds for launched processes too: LibreOffice, once its window is up, lays out its ruler
  and status bar so, drawing them 0.5-0.8 s after its first full paint.
* **Launches**: when a process appeared after the input and nothing has been drawn since it
  appeared (a typed command's echo came before), the wait goes on, up to ``first_change_s``
  after the input, for its window: an app idle between bursts of CPU (reading files, waiting
  for the bus) must not end the wait.

The desktop has settled when no damage and no CPU activity were seen for ``quiet_s`` and no
thread is runnable. What this cannot see: a timer due later than ``timer_s`` or armed when
nothing was drawn (a tooltip after hovering for half a second; a caret's blink), a timer armed
by one that drew nothing, one of a process asleep since before the input, a timer due after
an earlier one that drew nothing, a timer of a process the action started (its work in
slices is seen), and processes outside the guest's tree. What it cannot tell
apart: a timer that will draw from one that will not (GNOME Terminal arms one of 0.1-0.3 s
after some typed commands that draws nothing; it is waited for).
The benchmark's stale-frame check (``benchmarks/bench_turn_latency.py``) measures what that
costs.

Usage (in the guest)::

    signal = SettleSignal(":0")
    signal.mark_input()          # just before injecting input
    xinput.run(actions)
    facts = signal.wait(max_s=3.0)   # then capture the screen
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from Xlib import X
from Xlib import display as xdisplay
from Xlib.protocol import rq

from osworld_gym.guest.wakeups import next_wakeup
from osworld_gym.guest.xgrab import make_impervious
from osworld_gym.protocol.input import CALL_PAUSE_S

log = logging.getLogger(__name__)

#: Seconds without damage and without CPU activity after which the desktop counts as idle.
QUIET_S = 0.05
#: Seconds between looks (each look is one X round trip and one read of the desktop's /proc).
POLL_S = 0.01
#: How long a launch (a new process, nothing drawn yet) may take to draw before we stop waiting.
FIRST_CHANGE_S = 1.0

#: A main thread asleep with a timeout this short (or shorter) is about to run a timer, which
#: may draw: wait for it (LibreOffice updates its toolbars and status bar from a 300 ms timer
#: after an edit). Longer ones are mostly a caret's blink (GTK: 400/800 ms; LibreOffice and
#: Chromium: 500 ms): waiting for those made every mousepad turn 0.6-0.8 s, for no change of
#: what the frame shows beyond the caret.
TIMER_S = 0.32
#: At most this long in all is spent waiting for timers in one settle (a timer that draws may
#: arm the next, e.g. a blinking caret: followed until ``max_s`` otherwise).
TIMER_BUDGET_S = 0.4

#: A main thread asleep for at most this long is working through a job in slices between its
#: events (LibreOffice's idle layout and word count run from a 10 ms timer): still busy...
CHUNK_S = 0.03
#: ...for at most this long after it was first seen in one settle (GTK's file dialog polls that
#: fast for seconds; an app that does so forever must not hold every turn to ``max_s``). Its
#: CPU share does not tell the two apart: LibreOffice's job runs at 3-4 %, the dialog at 2-3 %.
CHUNKED_BUDGET_S = 0.8
#: Looks at an event loop before deciding it is not working in slices (see ``_chunk_due``).
CHUNK_LOOKS = 3

_DAMAGE_REPORT_NON_EMPTY = 3


class _DamageQueryVersion(rq.ReplyRequest):
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(0),
        rq.RequestLength(),
        rq.Card32("major_version"),
        rq.Card32("minor_version"),
    )
    _reply = rq.Struct(
        rq.ReplyCode(),
        rq.Pad(1),
        rq.Card16("sequence_number"),
        rq.ReplyLength(),
        rq.Card32("major_version"),
        rq.Card32("minor_version"),
        rq.Pad(16),
    )


class _DamageCreate(rq.Request):
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(1),
        rq.RequestLength(),
        rq.Card32("damage"),
        rq.Card32("drawable"),
        rq.Card8("level"),
        rq.Pad(3),
    )


class _DamageSubtract(rq.Request):
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(3),
        rq.RequestLength(),
        rq.Card32("damage"),
        rq.Card32("repair"),
        rq.Card32("parts"),
    )


class DamageUnavailable(RuntimeError):
    """The X server has no DAMAGE extension (the host falls back to polling screenshots)."""


class DamageMonitor:
    """Reports whether anything was drawn on the screen since the last look.

    Uses the DAMAGE extension at report level *non-empty*: the server sends one event when the
    damaged region of the root window becomes non-empty, and we empty it again after each
    event. Looking is ``sync; drain; subtract``: a drawing after the subtract makes a new event,
    which the next look's round trip is sure to bring, so no drawing goes unseen.
    The requests are spelled out here (python-xlib's own damage module is not loaded by every
    version that may be installed). Not thread-safe: :class:`SettleSignal` serialises calls.
    """

    def __init__(self, display_name: str):
        # grab-proof like every judge connection: a player's XGrabServer must not stall it
        self._d = make_impervious(xdisplay.Display(display_name))
        info = self._d.query_extension("DAMAGE")
        if info is None or not info.present:
            self._d.close()
            raise DamageUnavailable(f"X server {display_name} lacks the DAMAGE extension")
        self._opcode = info.major_opcode
        self._event = info.first_event  # DamageNotify is event 0 of the extension
        _DamageQueryVersion(
            display=self._d.display, opcode=self._opcode, major_version=1, minor_version=1
        )
        self._damage = self._d.display.allocate_resource_id()
        _DamageCreate(
            display=self._d.display,
            opcode=self._opcode,
            damage=self._damage,
            drawable=self._d.screen().root.id,
            level=_DAMAGE_REPORT_NON_EMPTY,
        )
        self._d.sync()
        self.look()  # forget what was drawn before we started

    def look(self) -> bool:
        """True if anything was drawn since the previous look."""
        self._d.sync()
        drawn = False
        while self._d.pending_events():
            ev = self._d.next_event()
            if (ev.type & 0x7F) == self._event:
                drawn = True
        if drawn:
            _DamageSubtract(
                display=self._d.display,
                opcode=self._opcode,
                damage=self._damage,
                repair=X.NONE,
                parts=X.NONE,
            )
            self._d.flush()
        return drawn

    def close(self) -> None:
        try:
            self._d.close()
        except Exception:  # noqa: BLE001 - the X server may be gone already
            log.debug("closing the damage connection failed", exc_info=True)


@dataclass(frozen=True)
class ProcSample:
    """The desktop's processes at one moment."""

    pids: frozenset[int]
    #: utime + stime + cutime + cstime of all of them, in clock ticks (children's time counts,
    #: so a short-lived ``ls`` that came and went still shows as activity).
    ticks: int
    #: Processes whose main thread is runnable or in disk sleep.
    busy: frozenset[int]
    #: Each process's ticks (as in ``ticks``), to say which one was active.
    per_pid: dict[int, int] = field(default_factory=dict, compare=False)


def _stat(pid: int | str, task: str | None = None) -> list[str] | None:
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


class ProcessActivity:
    """Samples the processes below ``root`` (the guest: Xvfb, WM, apps), minus ``exclude()``
    (e.g. the recorder's encoder, which is busy by design)."""

    def __init__(self, root: int | None = None, exclude: Callable[[], set[int]] = lambda: set()):
        """``exclude()`` names processes whose whole subtree is left out."""
        self.root = os.getpid() if root is None else root
        self.exclude = exclude

    def sample(self) -> ProcSample:
        parent: dict[int, int] = {}
        ticks: dict[int, int] = {}
        busy: set[int] = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            f = _stat(name)
            if f is None or len(f) < 15:
                continue
            pid = int(name)
            parent[pid] = int(f[1])
            ticks[pid] = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
            if f[0] in ("R", "D"):
                busy.add(pid)
        ours = self._descendants(parent, self.exclude())
        return ProcSample(
            frozenset(ours),
            sum(ticks[p] for p in ours),
            frozenset(busy & ours),
            {p: ticks[p] for p in ours},
        )

    def _descendants(self, parent: dict[int, int], skip: set[int]) -> set[int]:
        children: dict[int, list[int]] = {}
        for pid, ppid in parent.items():
            children.setdefault(ppid, []).append(pid)
        out: set[int] = set()
        stack = [self.root]
        while stack:
            for c in children.get(stack.pop(), ()):
                if c not in out and c not in skip:
                    out.add(c)
                    stack.append(c)
        return out

    @staticmethod
    def busy_threads(pids: frozenset[int]) -> list[int]:
        """Processes with any thread runnable or in disk sleep (one read per thread)."""
        out = []
        for pid in pids:
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tasks:
                f = _stat(pid, tid)
                if f is not None and f[0] in ("R", "D"):
                    out.append(pid)
                    break
        return out


def _schedstat(pid: int, field_: int) -> int | None:
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[field_])
    except (OSError, IndexError, ValueError):
        return None


def _runs(pid: int) -> int | None:
    """How many times the main thread of ``pid`` has been scheduled (``/proc/PID/schedstat``,
    exact, unlike CPU ticks: a 1 ms reaction to an event counts)."""
    return _schedstat(pid, 2)


@dataclass
class InputMark:
    at: float
    sample: ProcSample
    #: Each main thread's run count at the input: one that has not run since is asleep on a
    #: timeout it set before the input, which is not the input's doing.
    runs: dict[int, int | None] = field(default_factory=dict)


def _comm(pid: int) -> str:
    """The process's name, as the trace may show it: printable ASCII without the trace's own
    separators (the player names its processes: a newline would forge a header)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            raw = f.read().rstrip(b"\n")
    except OSError:
        return "?"
    return "".join(chr(b) if 0x21 <= b < 0x7F and chr(b) not in "[],@" else "?" for b in raw)


class _Why:
    """What kept a wait going, look by look, merged into spans: ``cause[processes]@from-to``
    in ms since the input, e.g. ``damage@12-40 cpu[tint2]@12-95 timer+90[mousepad]@150``.

    Causes: ``damage`` (something was drawn), ``cpu`` (processes used CPU), ``runnable`` (a main
    thread was runnable), ``spawn`` (a process appeared), ``launch`` (waiting for a new
    process's first drawing), ``thread`` (some thread was runnable), ``chunk``/``timer`` (an
    event loop about to wake was waited for, ``+ms`` its timeout); and what was *not* waited
    for: ``server-only`` (only the X server was runnable and a fresh look saw no drawing). At the
    end,
    when something was drawn, ``asleep`` says in which call each main thread that ran since
    the input sleeps (syscall number, timeout in ms or ``-``).
    """

    MAX_SPANS = 40

    def __init__(self, start: float):
        self.start = start
        self.spans: list[list] = []  # [cause, names, first ms, last ms]

    def add(self, now: float, cause: str, pids: Iterable[int] = ()) -> None:
        ms = round(1000 * (now - self.start))
        names = ",".join(sorted({_comm(p) for p in list(pids)[:6]}))
        for span in reversed(self.spans[-4:]):  # causes interleave: merge with a recent one
            if span[0] == cause and span[1] == names:
                span[3] = ms
                return
        if len(self.spans) < self.MAX_SPANS:
            self.spans.append([cause, names, ms, ms])

    def text(self) -> str:
        return " ".join(
            f"{c}{f'[{n}]' if n else ''}@{a}" + (f"-{b}" if b != a else "")
            for c, n, a, b in self.spans
        )


class SettleSignal:
    """Waits until the desktop has gone idle after input. Thread-safe (one lock)."""

    def __init__(
        self,
        display_name: str,
        exclude: Callable[[], set[int]] = lambda: set(),
        quiet_s: float = QUIET_S,
        poll_s: float = POLL_S,
        first_change_s: float = FIRST_CHANGE_S,
        timer_s: float = TIMER_S,
        timerless: Callable[[], set[int]] = lambda: set(),
        server: Callable[[], set[int]] = lambda: set(),
    ):
        """``timerless()`` names desktop processes whose timers never draw the input's effect:
        the X server (it draws only what clients ask, at once) and the profile's panels (their
        timers tick the clock; they redraw their task lists on X events at once). Their
        runnable threads and CPU still count as activity. ``server()`` names the X server:
        when it is the only runnable process at the end of a wait, a fresh damage look decides
        instead (it is runnable on our own round trips)."""
        self.damage = DamageMonitor(display_name)
        self.procs = ProcessActivity(exclude=exclude)
        self.timerless, self.server = timerless, server
        self.quiet_s, self.poll_s, self.first_change_s = quiet_s, poll_s, first_change_s
        self.timer_s = timer_s
        self._lock = threading.Lock()
        self._mark: InputMark | None = None
        self._drawn_since_mark = False
        #: Why the last wait lasted as long as it did (see :class:`_Why`).
        self.last_why = ""
        self._why = _Why(0.0)

    def mark_input(self) -> None:
        """Call just before injecting input: what happens from now on is the input's doing."""
        with self._lock:
            self.damage.look()
            self._drawn_since_mark = False
            sample = self.procs.sample()
            self._mark = InputMark(time.monotonic(), sample, {p: _runs(p) for p in sample.pids})

    def input_mark(self) -> InputMark | None:
        """The mark of the last :meth:`mark_input` not yet waited for (None if there is none)."""
        with self._lock:
            return self._mark

    def mark(self) -> InputMark:
        """A mark for :meth:`wait`'s ``since``: like :meth:`mark_input`, but kept by the caller,
        so that a wait for what the judge's own steps set off never takes an action's mark."""
        with self._lock:
            sample = self.procs.sample()
            return InputMark(time.monotonic(), sample, {p: _runs(p) for p in sample.pids})

    def wait(
        self,
        max_s: float = 3.0,
        since: InputMark | None = None,
        shared: bool = False,
        timers: bool = True,
    ) -> dict[str, float]:
        """Block until the desktop is idle (or ``max_s`` after the last input); timing facts.

        ``since``: a :meth:`mark` to wait from instead of the last :meth:`mark_input` (which is
        then left for the next wait). Drawing is counted from the first look of this wait;
        ``shared``: it counts for the last :meth:`mark_input` as well (a wait between the calls
        of the action that input began: its looks take the drawing the action's own wait would
        otherwise see). ``timers=False``: the wait ends once the desktop's processes are idle,
        without following event-loop timers or work in slices (what those draw is for a frame;
        an app has handled its input, and what that input posted, before it goes idle).

        Facts: ``settle_ms`` (this wait), ``since_input_ms``, ``settle_looks``, ``settle_capped``
        (1.0 when ``max_s`` ran out), ``screen_changed`` (1.0 when anything was drawn since the
        input), ``settle_launch`` (1.0 when a process appeared after the input),
        ``settle_timers`` (how many event-loop timers were waited for).
        """
        with self._lock:
            if since is None:
                return self._wait(max_s, self._mark, timers)
            kept, self._mark = self._mark, since
            kept_drawn, self._drawn_since_mark = self._drawn_since_mark, False
            try:
                return self._wait(max_s, since, timers)
            finally:
                drawn = shared and self._drawn_since_mark
                self._mark, self._drawn_since_mark = kept, kept_drawn or drawn

    def _wait(self, max_s: float, mark: InputMark | None, timers_too: bool) -> dict[str, float]:
        t0 = time.monotonic()
        mark = mark or InputMark(t0, self.procs.sample())
        start, base = mark.at, mark.sample
        timerless, server = self.timerless(), self.server()
        last_activity = t0
        prev = base
        looks = 0
        launched = capped = False
        drawn_after_launch = True
        timers: list[int] = []
        draws = draws_before_timer = 0
        chunked_since: float | None = None
        #: the timer or slice being waited for: (pid, its main thread's runs then, when due)
        held: tuple[int, int | None, float] | None = None

        def active(at: float) -> float:
            # activity starts the quiet period again, but never ends the wait for a timer whose
            # thread has not run since: other processes' CPU while it sleeps (the X server
            # answering our own looks) once ended a 250 ms timer's wait at 146 ms
            nonlocal held
            if held is not None:
                pid, runs, due = held
                if _runs(pid) == runs:
                    return max(at, due)
                held = None
            return at

        why = self._why = _Why(start)
        while True:
            now = time.monotonic()
            cur = self.procs.sample()
            drawn = self.damage.look()  # after the sample: a drawing by a new process counts
            looks += 1
            if new := cur.pids - prev.pids - base.pids:  # a process started since the last look
                launched, drawn_after_launch = True, False
                why.add(now, "spawn", new)
            if drawn:
                self._drawn_since_mark = drawn_after_launch = True
                draws += 1
                why.add(now, "damage")
            if cur.busy:
                why.add(now, "runnable", cur.busy)
            if cur.ticks != prev.ticks:
                why.add(
                    now,
                    "cpu",
                    {p for p, t in cur.per_pid.items() if t != prev.per_pid.get(p, t)}
                    or prev.pids - cur.pids,
                )
            if drawn or cur.busy or cur.ticks != prev.ticks or cur.pids != prev.pids:
                last_activity = active(now)
            prev = cur
            if now - start >= max_s:
                capped = True
                break
            # a launch (even behind a typed command's echo) has not drawn yet: its window may
            # come after a pause (files, the bus), so keep waiting a while
            waiting_for_window = not drawn_after_launch and now - start < self.first_change_s
            if now - last_activity >= self.quiet_s and waiting_for_window:
                why.add(now, "launch")
            if now - last_activity >= self.quiet_s and not waiting_for_window:
                busy = ProcessActivity.busy_threads(cur.pids)
                if busy and set(busy) <= server and not self.damage.look():
                    # only the X server is runnable, most likely still on our own round trip
                    # (it answers, then is preempted on a loaded machine): what it does for
                    # others that shows is drawing, and a fresh look saw none
                    why.add(now, "server-only", busy)
                    busy = []
                elif busy and set(busy) <= server:  # that look saw drawing: activity
                    self._drawn_since_mark = drawn_after_launch = True
                    draws += 1
                    why.add(now, "damage")
                # processes the action started (a launch): their timers are their start-up's
                started = cur.pids - base.pids
                if busy:
                    why.add(now, "thread", busy)
                    last_activity = active(time.monotonic())
                elif (
                    timers_too
                    and (chunked_since is None or now - chunked_since < CHUNKED_BUDGET_S)
                    and self._drawn_since_mark
                    and (
                        soon := self._chunk_due(
                            cur.pids, mark, timerless, chunked_since is not None
                        )
                    )
                    is not None
                ):
                    # an event loop waking every few ms is working through a job in slices
                    # (LibreOffice lays out and counts words so, at 1-4 % CPU): busy, not idle
                    chunked_since = now if chunked_since is None else chunked_since
                    why.add(now, f"chunk+{round(1000 * soon[0])}", {soon[1]})
                    last_activity = time.monotonic() + soon[0]
                    held = (soon[1], _runs(soon[1]), last_activity)
                elif (
                    timers_too
                    and draws > draws_before_timer
                    and sum(timers) < 1000 * TIMER_BUDGET_S
                    and (soon := self._timer_due(cur.pids - started, mark, timerless)) is not None
                ):
                    # something drew since the input (or since the last timer we waited for)
                    # and a timer is about to fire: let it fire, then look again. A timer that
                    # draws nothing ends this (periodic timers would hold us to max_s).
                    draws_before_timer = draws
                    due = min(soon[0], TIMER_BUDGET_S - sum(timers) / 1000)
                    timers.append(round(1000 * due))
                    why.add(now, f"timer+{round(1000 * due)}", {soon[1]})
                    last_activity = time.monotonic() + due
                    held = (soon[1], _runs(soon[1]), last_activity)
                else:
                    if self._drawn_since_mark:
                        self._note_sleepers(why, now, cur.pids - timerless, mark)
                    break
            time.sleep(self.poll_s)
        self._mark = None
        end = time.monotonic()
        self.last_why = why.text()
        return {
            "settle_ms": 1000 * (end - t0),
            "since_input_ms": 1000 * (end - start),
            "settle_looks": float(looks),
            "settle_capped": float(capped),
            "screen_changed": float(self._drawn_since_mark),
            "settle_launch": float(launched),
            "settle_timers": float(len(timers)),
        }

    @staticmethod
    def _note_sleepers(why: _Why, now: float, pids: frozenset[int], mark: InputMark) -> None:
        """For the trace: how the main threads that ran since the input sleep as the wait ends
        (``asleep[name:syscall+timeout ms]``; ``-`` no timeout we can read), at most six."""
        notes = []
        for pid in sorted(pids):
            before = mark.runs.get(pid)
            if before is None or _runs(pid) == before:
                continue
            try:
                with open(f"/proc/{pid}/syscall") as f:
                    nr = f.read().split(" ", 1)[0].strip()
            except OSError:
                continue
            t = next_wakeup(pid)
            notes.append(f"{_comm(pid)}:{nr}+{'-' if t is None else round(1000 * t)}")
            if len(notes) == 6:
                break
        if notes:
            why.add(now, "asleep")
            why.spans[-1][1] = ";".join(notes)

    def _chunk_due(
        self, pids: frozenset[int], mark: InputMark, timerless: set[int], chunking: bool
    ) -> tuple[float, int] | None:
        """:meth:`_timer_due` within ``CHUNK_S``, looked at up to ``CHUNK_LOOKS`` times a few ms
        apart: between its slices LibreOffice's main thread now and then waits on a lock or a
        socket without a timeout for a moment, and one look there ended the wait before its
        ruler and status bar were drawn (a launch on the ubuntu profile). Only a loop already
        seen ``chunking`` gets the extra looks: every other turn that drew would pay them."""
        for i in range(CHUNK_LOOKS if chunking else 1):
            if i:
                time.sleep(CHUNK_S / 8)
            if (soon := self._timer_due(pids, mark, timerless, CHUNK_S)) is not None:
                return soon
        return None

    def _timer_due(
        self,
        pids: frozenset[int],
        mark: InputMark,
        timerless: set[int],
        within: float | None = None,
    ) -> tuple[float, int] | None:
        """The soonest wake-up, if within ``within`` (default ``timer_s``) seconds, of a desktop
        process's main thread that ran since the input (so may have armed it in reaction to
        it), not one of ``timerless``: ``(seconds, pid)``."""
        within = self.timer_s if within is None else within
        soonest = None
        for pid in pids - timerless:
            before = mark.runs.get(pid)
            if before is not None and _runs(pid) == before:
                continue  # asleep since before the input: a timer of its own (a clock, a caret)
            t = next_wakeup(pid)
            if t is not None and t <= within and (soonest is None or t < soonest[0]):
                soonest = (t, pid)
        return soonest

    def close(self) -> None:
        with self._lock:
            self.damage.close()


class Pacer:
    """The pause between two calls of one action (see :meth:`XInput.run
    <osworld_gym.guest.xinput.XInput.run>`): until the desktop has reacted to the call before,
    at most ``max_s`` after that call began and ``budget_s`` in all.

    pyautogui, as OSWorld's VM runs an agent's code, sleeps 0.1 s after every call; sending
    the next call's input at once let it overtake what the previous one had set off: Impress
    starts text editing on Return from a posted event, GTK3 LibreOffice runs posted events only
    when no X input is pending, and every Return typed meanwhile was taken for "start editing"
    (``press('enter'); write('a\\nb')`` gave ``ab``). Each pause is one settle wait from a mark
    taken before the call (the action's own :meth:`~SettleSignal.mark_input` for the first, so
    an action of one call pays nothing); what it sees drawn counts for the action's own settle.
    Without a signal (no DAMAGE extension) each pause is pyautogui's own, ``CALL_PAUSE_S``."""

    def __init__(self, signal: SettleSignal | None, max_s: float, budget_s: float):
        self.signal, self.max_s, self.budget_s = signal, max_s, budget_s
        self.spent_s = 0.0
        self.count = 0
        self._mark: InputMark | None = None

    def __call__(self) -> None:
        left = self.budget_s - self.spent_s
        if left <= 0:
            return
        t0 = time.monotonic()
        if self.signal is None:
            time.sleep(min(CALL_PAUSE_S, left))
        else:
            since = self._mark or self.signal.input_mark() or self.signal.mark()
            facts = self.signal.wait(min(self.max_s, left), since=since, shared=True, timers=False)
            log.debug("paced %.0f ms: %s", facts["settle_ms"], self.signal.last_why)
            self._mark = self.signal.mark()
        self.spent_s += time.monotonic() - t0
        self.count += 1
