"""Resource limits for one local desktop: memory, processes, home size.

An agent under RL will eventually fork-bomb or allocate until something breaks; that must hurt
only its own desktop. Each desktop gets a cgroup with two leaves:

* ``judge``: the guest server, Xvfb and evaluation commands. It is where the sandbox starts.
* ``player``: everything the agent can start (apps, the window manager and its terminals).
  The guest moves each player process there before it drops to the player's identity.

The desktop cgroup carries the total limit (what the host is protected by); the ``player``
leaf carries the total minus a reserve for the judge, so an agent that exhausts its own memory
or process budget cannot starve the guest that scores it (a starved judge would turn the
agent's own doing into an infrastructure error).

Where cgroups live:

* cgroup v2 (``/sys/fs/cgroup/cgroup.controllers`` lists ``memory`` and ``pids``): one tree,
  ``memory.max``/``memory.swap.max``/``pids.max``; the controllers are enabled in our parent's
  ``cgroup.subtree_control``.
* cgroup v1 (separate ``memory`` and ``pids`` hierarchies, as on this development machine):
  ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes`` where swap accounting exists)
  and ``pids.max``.
* Neither writable (not root, a read-only cgroupfs): :class:`DesktopCgroup.create` returns
  ``None`` and the caller falls back to per-process rlimits on player processes
  (``RLIMIT_AS`` per process and ``RLIMIT_NPROC`` per player uid, which all desktops sharing
  that host uid share); weaker, and logged as such.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class DesktopLimits:
    """Per-desktop limits (``None`` = unlimited). Defaults fit LibreOffice + Chromium tasks.

    Attributes:
        memory_bytes: RAM for the whole desktop (apps, X, guest, and its tmpfs files).
        pids: tasks (processes and threads: the kernel counts threads) for the whole desktop.
        judge_memory_reserve: part of ``memory_bytes`` the player can never take.
        judge_pids_reserve: part of ``pids`` the player can never take.
        home_bytes: size of the tmpfs that backs ``/home/user`` (root hosts only).
        tmp_bytes: size of the sandbox's ``/tmp`` and ``/dev/shm`` tmpfs each.
    """

    memory_bytes: int | None = 3 * GiB
    pids: int | None = 1024
    judge_memory_reserve: int = 256 * MiB
    judge_pids_reserve: int = 128
    home_bytes: int | None = 1 * GiB
    tmp_bytes: int | None = 1 * GiB

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "pids", "home_bytes", "tmp_bytes"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if self.memory_bytes is not None and self.memory_bytes <= self.judge_memory_reserve:
            raise ValueError(
                f"memory_bytes ({self.memory_bytes}) must exceed the judge's reserve "
                f"({self.judge_memory_reserve})"
            )
        if self.pids is not None and self.pids <= self.judge_pids_reserve:
            raise ValueError(
                f"pids ({self.pids}) must exceed the judge's reserve ({self.judge_pids_reserve})"
            )

    @property
    def player_memory(self) -> int | None:
        return None if self.memory_bytes is None else self.memory_bytes - self.judge_memory_reserve

    @property
    def player_pids(self) -> int | None:
        return None if self.pids is None else self.pids - self.judge_pids_reserve


def parse_size(value: int | str | None) -> int | None:
    """``"3g"``, ``"512m"``, ``"100k"``, ``1024`` → bytes; ``None`` stays ``None``.

    >>> parse_size("3g"), parse_size("512M"), parse_size(4096), parse_size(None)
    (3221225472, 536870912, 4096, None)
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a size must be bytes or a string like '3g', got {value!r}")
    s = value.strip().lower().removesuffix("b").removesuffix("i")
    scale = {"k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}.get(s[-1:], 1)
    digits = s[:-1] if s[-1:] in "kmgt" else s
    try:
        number = float(digits)
    except ValueError:
        raise ValueError(f"a size must be bytes or a string like '3g', got {value!r}") from None
    if not number > 0 or number != number or number == float("inf"):
        raise ValueError(f"a size must be positive, got {value!r}")
    return int(number * scale)


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path in the v1 hierarchy of ``controller``."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _num, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            return path
    raise OSError(f"no {controller} cgroup in /proc/self/cgroup")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass
class DesktopCgroup:
    """The cgroup(s) of one desktop: a directory per hierarchy with ``judge`` and ``player``.

    ``judge_procs`` / ``player_procs`` are the ``cgroup.procs`` files to join (one per hierarchy:
    v1 has two, v2 one).
    """

    version: int
    dirs: list[Path]

    @property
    def judge_procs(self) -> list[Path]:
        return [d / "judge" / "cgroup.procs" for d in self.dirs]

    @property
    def player_procs(self) -> list[Path]:
        return [d / "player" / "cgroup.procs" for d in self.dirs]

    @classmethod
    def create(cls, name: str, limits: DesktopLimits) -> DesktopCgroup | None:
        """Make the desktop's cgroups and set ``limits``; ``None`` where cgroups are unusable."""
        if limits.memory_bytes is None and limits.pids is None:
            return None
        try:
            v2 = CGROUP_ROOT / "cgroup.controllers"
            if v2.is_file() and {"memory", "pids"} <= set(v2.read_text().split()):
                return cls._create_v2(name, limits)
            if (CGROUP_ROOT / "memory").is_dir() and (CGROUP_ROOT / "pids").is_dir():
                return cls._create_v1(name, limits)
        except OSError as e:
            log.warning(
                "cannot create a cgroup for the desktop (%s); falling back to per-process "
                "rlimits for the player",
                e,
            )
            return None
        log.warning(
            "no writable cgroup memory+pids controllers; falling back to per-process "
            "rlimits for the player"
        )
        return None

    @classmethod
    def _create_v2(cls, name: str, limits: DesktopLimits) -> DesktopCgroup:
        # Under the cgroup root, not our own cgroup: a v2 cgroup that enables controllers for
        # its children may hold no processes itself, and ours holds us. Root-only, like v1.
        base = CGROUP_ROOT / "osworld-gym"
        base.mkdir(exist_ok=True)
        _enable_v2(CGROUP_ROOT)
        _enable_v2(base)
        d = base / name
        d.mkdir()
        cg = cls(2, [d])
        try:
            _enable_v2(d)
            for leaf, mem, pids in (
                ("judge", None, None),
                ("player", limits.player_memory, limits.player_pids),
            ):
                (d / leaf).mkdir()
                cls._limit_v2(d / leaf, mem, pids)
            cls._limit_v2(d, limits.memory_bytes, limits.pids)
        except OSError:
            cg.remove()
            raise
        return cg

    @staticmethod
    def _limit_v2(d: Path, mem: int | None, pids: int | None) -> None:
        if mem is not None:
            _write(d / "memory.max", str(mem))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
        if pids is not None:
            _write(d / "pids.max", str(pids))

    @classmethod
    def _create_v1(cls, name: str, limits: DesktopLimits) -> DesktopCgroup:
        mem = CGROUP_ROOT / "memory" / _own_cgroup("memory").lstrip("/") / "osworld-gym" / name
        pid = CGROUP_ROOT / "pids" / _own_cgroup("pids").lstrip("/") / "osworld-gym" / name
        cg = cls(1, [])
        try:
            for d in (mem, pid):
                d.mkdir(parents=True)
                cg.dirs.append(d)
                for leaf in ("judge", "player"):
                    (d / leaf).mkdir()
            for d, value in ((mem, limits.memory_bytes), (mem / "player", limits.player_memory)):
                if value is not None:
                    _write(d / "memory.limit_in_bytes", str(value))
                    if (d / "memory.memsw.limit_in_bytes").exists():  # no swapping past the limit
                        _write(d / "memory.memsw.limit_in_bytes", str(value))
            for d, value in ((pid, limits.pids), (pid / "player", limits.player_pids)):
                if value is not None:
                    _write(d / "pids.max", str(value))
        except OSError:
            cg.remove()
            raise
        return cg

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the cgroups once their processes are gone (kill them first)."""
        deadline = time.monotonic() + timeout
        for d in self.dirs:
            _rmdir_tree(d, deadline)
        self.dirs = []


def _rmdir_tree(d: Path, deadline: float) -> None:
    """rmdir a cgroup and its child cgroups, deepest first (EBUSY retried until ``deadline``)."""
    try:
        subs = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return
    for sub in subs:
        _rmdir_tree(Path(sub.path), deadline)
    while d.exists():
        try:
            d.rmdir()
        except FileNotFoundError:
            break
        except OSError:  # EBUSY while the last processes exit
            if time.monotonic() > deadline:
                log.warning("cgroup %s still busy; left behind", d)
                break
            time.sleep(0.01)


# ---- freezing the player during evaluation ---------------------------------------------------

#: The child cgroup of the player's freezer cgroup where the guest moves the processes it holds.
HELD = "held"


@dataclass
class PlayerFreezer:
    """A freezer cgroup for the player's processes, with a ``held`` child.

    Every player process joins :attr:`procs`. While an evaluation command runs, the guest (see
    :mod:`osworld_gym.guest.judging`) freezes the whole cgroup at once, moves every process it
    does not trust into ``held``, freezes ``held`` and thaws the rest: nothing the agent started
    runs while the judge reads the desktop, including processes forked during the scan (a
    frozen cgroup freezes its new children too). ``held`` is thawed afterwards.

    * cgroup v2: ``cgroup.freeze`` / ``cgroup.events`` (``frozen 1``) in the desktop's
      ``player`` cgroup, which stays a leaf for the controllers (``held`` enables none).
    * cgroup v1: the ``freezer`` hierarchy, ``freezer.state`` (``FROZEN``/``THAWED``).
    * Neither writable: :meth:`create` returns ``None`` and the guest falls back to SIGSTOPping
      player processes one by one (weaker: see the README's threat model).
    """

    version: int
    dir: Path
    #: made by us (v1, or v2 without limits): removed with the desktop
    owned: list[Path]

    @property
    def procs(self) -> Path:
        return self.dir / "cgroup.procs"

    @classmethod
    def create(cls, name: str, cgroup: DesktopCgroup | None) -> PlayerFreezer | None:
        try:
            if (CGROUP_ROOT / "cgroup.controllers").is_file():
                if cgroup is not None and cgroup.version == 2:
                    d = cgroup.dirs[0] / "player"
                    owned = []
                else:
                    base = CGROUP_ROOT / "osworld-gym"
                    base.mkdir(exist_ok=True)
                    owned = [base / f"{name}-freezer"]
                    d = owned[0] / "player"
                    d.mkdir(parents=True)
                (d / HELD).mkdir()
                if not (d / "cgroup.freeze").exists():
                    raise OSError("cgroup.freeze missing (kernel older than 5.2)")
                return cls(2, d, owned)
            root = CGROUP_ROOT / "freezer"
            if (root / "freezer.state").exists() or (root / "cgroup.procs").exists():
                top = root / _own_cgroup("freezer").lstrip("/") / "osworld-gym" / name
                d = top / "player"
                (d / HELD).mkdir(parents=True)
                return cls(1, d, [top])
        except OSError as e:
            log.warning(
                "no freezer cgroup for the player (%s): evaluation holds its processes "
                "with SIGSTOP instead",
                e,
            )
            return None
        log.warning(
            "no freezer cgroup for the player: evaluation holds its processes with SIGSTOP instead"
        )
        return None

    def remove(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        for d in self.owned:
            _rmdir_tree(d, deadline)
        if not self.owned:  # v2 inside the desktop's cgroup: only our child
            _rmdir_tree(self.dir / HELD, deadline)
        self.owned = []


def _enable_v2(d: Path) -> None:
    control = d / "cgroup.subtree_control"
    enabled = set(control.read_text().split())
    for ctrl in ("memory", "pids"):
        if ctrl not in enabled:
            _write(control, f"+{ctrl}")


# ---- home size ------------------------------------------------------------------------------

HOME_FSNAME = "osworld-gym-home"
OWNER_FILE = "owner.pid"


def mount_home_tmpfs(path: Path, options: str) -> None:
    """Mount a size-limited tmpfs at ``path`` (root hosts): the desktop's home cannot fill the
    host's disk, and its pages are charged to the desktop's memory cgroup. It is mounted on the
    host (not only inside the sandbox) so the host side keeps reading the home where it did."""
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, HOME_FSNAME, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if res.returncode != 0:
        raise OSError(f"cannot mount the home tmpfs at {path}: {res.stderr.strip()}")


def unmount(path: Path) -> None:
    res = subprocess.run(
        ["umount", "--lazy", str(path)], capture_output=True, text=True, timeout=30
    )
    if res.returncode != 0:
        log.warning("cannot unmount %s: %s", path, res.stderr.strip())


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def write_owner(state_dir: Path) -> None:
    """Record which process owns a state dir (pid and start time: pids are reused).

    Written whole or not at all (a temporary file renamed into place): another process's
    :func:`sweep_stale` may read it at any moment, and a half-written record must never read as
    a dead owner."""
    tmp = state_dir / f".{OWNER_FILE}.{os.getpid()}"
    tmp.write_text(f"{os.getpid()} {_start_time(os.getpid())}")
    os.replace(tmp, state_dir / OWNER_FILE)


def _owner_dead(state_dir: Path) -> bool:
    """Whether the state dir's owner record names a process that is gone. A dir without a
    readable record proves nothing (its owner may be between ``mkdtemp`` and
    :func:`write_owner`) and is left alone."""
    try:
        pid, start = (state_dir / OWNER_FILE).read_text().split()
        return _start_time(int(pid)) != start
    except (OSError, ValueError):
        return False


def _home_mounted(state: Path) -> bool:
    try:
        return any(
            line.split()[4] == str(state / "home")
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if HOME_FSNAME in line
        )
    except (OSError, IndexError):
        return False


def clean_state(state: Path, timeout: float = 1.0) -> None:
    """Unmount a desktop's home tmpfs, remove its cgroups (once their processes are gone, up to
    ``timeout`` s) and its state dir."""
    if _home_mounted(state):
        unmount(state / "home")
    remove_cgroups(state.name, timeout)
    shutil.rmtree(state, ignore_errors=True)


def remove_cgroups(name: str, timeout: float = 5.0) -> None:
    """Remove the cgroups of the desktop whose state (or docker run) dir is called ``name``,
    once their processes are gone (up to ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    for d in cgroup_dirs(name):
        _rmdir_tree(d, deadline)


def sweep_stale(root: Path) -> int:
    """Unmount the home tmpfs, remove the cgroups and the state dir of every desktop under
    ``root`` whose owning process died without cleaning up (and whose janitor, see
    :func:`start_janitor`, did not either). Returns how many."""
    swept = 0
    for state in root.glob("osworld-gym-*"):
        if not _owner_dead(state):
            continue
        clean_state(state)
        swept += 1
    if swept:
        log.info("removed %d desktop(s) left behind by dead processes", swept)
    return swept


def start_janitor(state: Path) -> subprocess.Popen[bytes]:
    """A process that cleans up ``state`` (:func:`clean_state`) when this one dies, however it
    dies (SIGKILL included): it waits for EOF on a pipe only we hold. Its own session, so a
    signal to our process group does not reach it. Close its stdin after a normal stop (which
    cleans up itself): it then finds nothing left and exits."""
    return subprocess.Popen(
        [sys.executable, "-I", __file__, "janitor", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _janitor(state: Path) -> None:
    sys.stdin.buffer.read()  # EOF: our owner closed the pipe or died
    if state.is_dir():
        clean_state(state, timeout=30.0)  # bwrap --die-with-parent is killing the desktop


def cgroup_dirs(name: str) -> list[Path]:
    """The existing cgroup directories of the desktop whose state (or run) dir is ``name``."""
    out = [CGROUP_ROOT / "osworld-gym" / name, CGROUP_ROOT / "osworld-gym" / f"{name}-freezer"]
    for ctrl in ("memory", "pids", "freezer"):
        try:
            out.append(CGROUP_ROOT / ctrl / _own_cgroup(ctrl).lstrip("/") / "osworld-gym" / name)
        except OSError:
            pass
    return [d for d in out if d.is_dir()]


if __name__ == "__main__":  # run as a file (stdlib only): the janitor of one desktop
    if len(sys.argv) == 3 and sys.argv[1] == "janitor":
        _janitor(Path(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} janitor STATE_DIR")
