"""The embedded default: a real desktop on this machine, inside a bubblewrap sandbox.

Each :class:`LocalProvider` runs our guest server as the supervisor of its own desktop (Xvfb on
``:0``, openbox, the task's apps) inside ``bwrap`` with

* its own user namespace, where the desktop user is ``user`` (uid 1000) and the home directory is
  ``/home/user`` (OSWorld tasks hard-code both), backed by a private, size-limited host tmpfs;
* two identities (judge and player, see :mod:`~osworld_gym.providers.sandbox`): the guest,
  Xvfb and evaluation commands run as namespace root, the agent's apps as uid 1000 mapped to an
  unprivileged host uid; the player cannot signal, trace or impersonate the judge, nor reach
  its socket, token or state;
* an allowlist of host directories (``/usr``, ``/etc`` minus secrets, ...) instead of ``/``:
  the task cache, gold files, task JSON and this package's checkout are not there for the player;
* a cgroup with memory and pids limits (:mod:`~osworld_gym.providers.limits`), a freezer
  cgroup for the player (everything the agent started is frozen while the judge evaluates,
  see :mod:`~osworld_gym.guest.judging`) and a janitor that cleans both and the home mount
  up if this process is SIGKILLed;
* its own network namespace (loopback only), so Chromium's 9222/1337, VLC's 8080 and X's ``:0``
  never clash between envs and nothing inside reaches the network;
* its own PID, IPC and UTS namespaces and a private ``/tmp``; what it sees of the host is
  read-only;
* ``--die-with-parent``: if the Python process dies, however it dies, the whole desktop dies.

The host reaches the guest only through a unix socket in a private run directory, with a
per-desktop token.

>>> p = LocalProvider(screen_size=(1280, 720))   # nothing starts until start() or env.reset()
>>> p.running
False
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from osworld_gym.client import GuestClient
from osworld_gym.errors import InfraError, MissingDependencyError
from osworld_gym.providers import sandbox as sbx
from osworld_gym.providers.base import Provider
from osworld_gym.providers.capabilities import (
    DEFAULT_PROFILE,
    PROFILE_ENV,
    PROFILES,
    Capabilities,
    local_capabilities,
)
from osworld_gym.providers.limits import (
    DesktopCgroup,
    DesktopLimits,
    PlayerFreezer,
    mount_home_tmpfs,
    parse_size,
    start_janitor,
    sweep_stale,
    unmount,
    write_owner,
)

log = logging.getLogger(__name__)

#: program -> Debian package providing it
SYSTEM_PROGRAMS: dict[str, str] = {"Xvfb": "xvfb", "openbox": "openbox", "wmctrl": "wmctrl"}
SANDBOX_PROGRAMS: dict[str, str] = {"bwrap": "bubblewrap"}

_SHIMS = Path(__file__).resolve().parent.parent / "guest" / "shims"
_python_paths = sbx.judge_python_paths  # kept for callers and tests of the old name
#: Where the shims appear inside the sandbox (the package checkout itself is judge-only).
SANDBOX_SHIMS = "/opt/osworld-gym/shims"
_LIVE: weakref.WeakSet[LocalProvider] = weakref.WeakSet()
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osworld-gym-spawner")


def _fresh_spawner_after_fork() -> None:
    # a forked child (a vector env worker) inherits the executor but not its thread
    global _SPAWNER
    _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osworld-gym-spawner")


os.register_at_fork(after_in_child=_fresh_spawner_after_fork)
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def check_system(sandbox: bool = True, profile: str = DEFAULT_PROFILE) -> None:
    """One :class:`MissingDependencyError` naming every missing program and the apt command."""
    needed = {**SYSTEM_PROGRAMS, **(SANDBOX_PROGRAMS if sandbox else {})}
    missing = {prog: pkg for prog, pkg in needed.items() if shutil.which(prog) is None}
    if profile == "ubuntu":
        from osworld_gym.guest.profiles import missing_programs

        missing.update(missing_programs())
    if missing:
        pkgs = " ".join(sorted(set(missing.values())))
        raise MissingDependencyError(
            f"the local desktop needs {', '.join(sorted(missing))}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed. "
            f"Install with: sudo apt-get install -y {pkgs}"
        )


class LocalProvider(Provider):
    """A desktop in a bubblewrap sandbox on this machine.

    Args:
        screen_size: virtual screen in pixels.
        depth: colour depth of the Xvfb screen.
        sandbox: run inside bubblewrap (default). ``False`` runs Xvfb and the apps directly on
            the host, sharing its network, home-less tmp dirs and process table; it is an
            explicit opt-in for machines without user namespaces and logs a warning.
        root_dir: where per-desktop state directories go (default: the system temp dir).
        start_timeout: seconds to wait for the guest server to answer.
        home_template: directory copied into ``/home/user`` on every reset (default: ours).
        profile: the desktop's look: ``"openbox"`` (bare, fastest) or ``"ubuntu"`` (OSWorld's
            Ubuntu 22.04 look: top bar, dock, Yaru, GNOME Terminal, Nautilus, dconf). Default:
            ``$OSWORLD_GYM_PROFILE``, else ``"ubuntu"``.
        extra_binds: ``{host_path: sandbox_path}`` read-only binds. They are visible to the
            player too: never bind a task cache or gold files.
        judge_separation: run the guest and evaluation as namespace root and the agent's apps
            as an unprivileged uid (see :mod:`~osworld_gym.providers.sandbox`). ``None``
            (default): on where it can be (a root host), else off with a warning. ``True``
            raises where it cannot be had. ``False``: one identity (not safe for RL).
        player_host_id: the host uid/gid the desktop user maps to under judge separation.
        memory_limit: RAM for the whole desktop, bytes or ``"3g"``; ``None``: unlimited.
        pids_limit: processes + threads for the whole desktop; ``None``: unlimited.
        home_size: size of the tmpfs backing ``/home/user`` (root hosts; else a plain
            directory); ``None``: a plain directory.
        tmp_size: size of the sandbox's ``/tmp`` and ``/dev/shm``; ``None``: tmpfs default.
    """

    name = "local"

    @classmethod
    def capabilities(cls, profile: str | None = None) -> Capabilities:
        """This machine as the sandbox sees it (:func:`.capabilities.local_capabilities`)."""
        return local_capabilities(profile)

    def __init__(
        self,
        screen_size: tuple[int, int] = (1920, 1080),
        *,
        depth: int = 24,
        sandbox: bool = True,
        root_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        home_template: str | os.PathLike[str] | None = None,
        extra_binds: dict[str, str] | None = None,
        profile: str | None = None,
        judge_separation: bool | None = None,
        player_host_id: int = sbx.PLAYER_HOST_ID,
        memory_limit: int | str | None = "3g",
        pids_limit: int | None = 1024,
        home_size: int | str | None = "1g",
        tmp_size: int | str | None = "1g",
    ):
        super().__init__(screen_size)
        self.depth = depth
        self.sandbox = sandbox
        self.root_dir = Path(root_dir) if root_dir else None
        self.start_timeout = start_timeout
        self.home_template = Path(home_template) if home_template else None
        self.extra_binds = dict(extra_binds or {})
        self.profile = profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
        if self.profile not in PROFILES:
            raise ValueError(
                f"unknown desktop profile {self.profile!r} (from "
                f"{'profile=' if profile else '$' + PROFILE_ENV}); use one of "
                f"{', '.join(PROFILES)}"
            )
        self.judge_separation = judge_separation
        self.player_host_id = int(player_host_id)
        self.limits = DesktopLimits(
            memory_bytes=parse_size(memory_limit),
            pids=pids_limit,
            home_bytes=parse_size(home_size),
            tmp_bytes=parse_size(tmp_size),
        )
        self._cgroup: DesktopCgroup | None = None
        self._freezer: PlayerFreezer | None = None
        self._janitor: subprocess.Popen[bytes] | None = None
        self._home_mounted = False
        self.separated = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._client: GuestClient | None = None
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def state_dir(self) -> Path | None:
        """Host directory holding this desktop's home (``home/``), socket and logs (``run/``)."""
        return self._dir

    @property
    def pid(self) -> int | None:
        """PID of the sandbox's outermost process on the host (kill it and the desktop is gone)."""
        return self._proc.pid if self._proc else None

    def start(self) -> GuestClient:
        with self._lock:
            if self.running and self._client is not None:
                return self._client
            self._stop_locked()
            check_system(self.sandbox, self.profile or DEFAULT_PROFILE)
            if not self.sandbox:
                log.warning(
                    "LocalProvider(sandbox=False): the desktop shares this machine's network, "
                    "process table and files; use it only where bubblewrap cannot run"
                )
            t0 = time.monotonic()
            if self.sandbox and os.geteuid() == 0:  # what SIGKILLed owners left mounted
                sweep_stale(self.root_dir or Path(tempfile.gettempdir()))
            self._dir = Path(tempfile.mkdtemp(prefix="osworld-gym-", dir=self.root_dir))
            write_owner(self._dir)
            if self.sandbox and os.geteuid() == 0:  # mounts and cgroups outlive a SIGKILL
                self._janitor = start_janitor(self._dir)
            home, run = self._dir / "home", self._dir / "run"
            home.mkdir()
            run.mkdir(mode=0o700)
            token = secrets.token_urlsafe(24)
            token_file = run / "token"
            token_file.write_text(token)
            token_file.chmod(0o600)
            userns_fd: int | None = None
            try:
                if self.sandbox:
                    userns_fd = self._prepare_isolation(home, run)
                logf = open(run / "guest.log", "wb")  # noqa: SIM115 - owned by the child process
                try:
                    # bwrap's --die-with-parent follows the *thread* that forks it; fork from one
                    # long-lived thread so a desktop outlives the thread that happened to start it
                    self._proc = _SPAWNER.submit(
                        subprocess.Popen,
                        self._command(home, run, userns_fd),
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        env=self._host_env(home),
                        pass_fds=() if userns_fd is None else (userns_fd,),
                    ).result()
                finally:
                    logf.close()
            except Exception:
                self._stop_locked()
                raise
            finally:
                if userns_fd is not None:
                    os.close(userns_fd)
            _LIVE.add(self)
            client = GuestClient(uds=str(run / "guest.sock"), token=token)
            try:
                self._wait_for_socket(run / "guest.sock")
                client.wait_ready(timeout=max(1.0, self.start_timeout - (time.monotonic() - t0)))
                client.reset_desktop(restore_home=True)
            except Exception as e:
                tail = self.log_tail()
                self._stop_locked()
                raise InfraError(
                    f"local desktop did not start: {e}\n--- guest log ---\n{tail}"
                ) from e
            self._client = client
            log.info("local desktop up in %.0f ms (%s)", 1000 * (time.monotonic() - t0), self._dir)
            return client

    def reset_state(self) -> None:
        if self._client is None or not self.running:
            raise InfraError("the local desktop is not running; call start() first")
        self._client.reset_desktop(restore_home=True)

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            tree = _descendants(proc.pid)
            try:  # the whole session: bwrap, or in no-sandbox mode the guest and its children
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for pid in tree:  # apps in their own sessions die with the namespace; don't wait for it
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.error("sandbox process %d did not exit after SIGKILL", proc.pid)
            deadline = time.monotonic() + 5
            while (left := [p for p in tree if _running(p)]) and time.monotonic() < deadline:
                time.sleep(0.01)
            if left:
                log.error("desktop processes %s survived SIGKILL", left)
        if self._home_mounted and self._dir is not None:
            unmount(self._dir / "home")
            self._home_mounted = False
        if self._freezer is not None:
            self._freezer.remove()
            self._freezer = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._janitor is not None:  # nothing left for it: let it go
            if self._janitor.stdin is not None:
                self._janitor.stdin.close()
            try:
                self._janitor.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("the desktop's janitor (pid %d) did not exit", self._janitor.pid)
            self._janitor = None
        _LIVE.discard(self)

    def log_tail(self, n_bytes: int = 4000) -> str:
        """The end of the guest's log (startup errors, crashes)."""
        if self._dir is None:
            return ""
        try:
            data = (self._dir / "run" / "guest.log").read_bytes()
        except OSError:
            return ""
        return data[-n_bytes:].decode("utf-8", "replace")

    # -- construction --------------------------------------------------------------------------

    def _prepare_isolation(self, home: Path, run: Path) -> int | None:
        """Identities, home tmpfs and cgroup for a sandboxed desktop; returns the userns fd
        (``None``: the one-identity fallback)."""
        assert self._dir is not None
        want = self.judge_separation
        fd: int | None = None
        if want is None or want:
            try:
                fd = sbx.two_identity_userns(self.player_host_id)
            except sbx.UserNamespaceError as e:
                if want:
                    raise InfraError(f"judge separation is unavailable: {e}") from e
                log.warning(
                    "LocalProvider: %s; the desktop user IS the judge (it can forge "
                    "scores): do not train on this machine",
                    e,
                )
        else:
            log.warning(
                "LocalProvider(judge_separation=False): the desktop user is the judge "
                "(it can forge scores and, on a root host, read root's files)"
            )
        self.separated = fd is not None
        try:
            self._limit(home, run)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        return fd

    def _limit(self, home: Path, run: Path) -> None:
        """The size-limited home and the desktop's cgroup."""
        assert self._dir is not None
        if os.geteuid() == 0 and self.limits.home_bytes is not None:
            uid = self.player_host_id if self.separated else 0
            nr_inodes = max(4096, self.limits.home_bytes // 8192)
            try:
                mount_home_tmpfs(
                    home,
                    f"size={self.limits.home_bytes},nr_inodes={nr_inodes},"
                    f"mode=0755,uid={uid},gid={uid}",
                )
            except OSError as e:
                raise InfraError(str(e)) from e
            self._home_mounted = True
        elif self.separated:
            os.chown(home, self.player_host_id, self.player_host_id)
        self._cgroup = DesktopCgroup.create(self._dir.name, self.limits)
        if self.separated:  # one identity: the player could thaw itself anyway
            self._freezer = PlayerFreezer.create(self._dir.name, self._cgroup)
        (self._dir / "empty").write_bytes(b"")
        if self._cgroup is not None:
            for i, _ in enumerate(self._cgroup.player_procs):
                (run / f"player-cgroup-{i}.procs").touch()

    def _guest_args(self, home: str, run: str, display: str) -> list[str]:
        w, h = self.screen_size
        args = [
            sys.executable,
            "-m",
            "osworld_gym.guest",
            "--uds",
            f"{run}/guest.sock",
            "--token-file",
            f"{run}/token",
            "--display",
            display,
            "--screen",
            f"{w}x{h}x{self.depth}",
            "--start-x",
            "--wm",
            self.profile,
            "--home",
            home,
        ]
        if self.home_template is not None:
            args += ["--home-template", str(self.home_template)]
        if self.sandbox:  # /tmp is the sandbox's own: a reset may empty it
            args += ["--clean-tmp"]
        else:  # the host's /tmp is shared: give the apps a private TMPDIR, die with this process
            assert self._dir is not None
            (self._dir / "tmp").mkdir(exist_ok=True)
            args += ["--tmp-dir", str(self._dir / "tmp"), "--exit-with-parent"]
        if self.sandbox and self.separated:
            args += [
                "--player-uid",
                str(sbx.PLAYER_ID),
                "--player-gid",
                str(sbx.PLAYER_ID),
                "--runtime-dir",
                f"/run/user/{sbx.PLAYER_ID}",
            ]
            if self._cgroup is not None:
                for i, _ in enumerate(self._cgroup.player_procs):
                    args += ["--player-cgroup", f"{run}/player-cgroup-{i}.procs"]
            if self._freezer is not None:
                args += [
                    "--player-cgroup",
                    f"{run}/freezer/cgroup.procs",
                    "--player-freezer",
                    f"{run}/freezer",
                    "--player-freezer-version",
                    str(self._freezer.version),
                ]
            else:
                if self.limits.player_memory is not None:
                    args += ["--player-max-memory", str(self.limits.player_memory)]
                if self.limits.player_pids is not None:
                    args += ["--player-max-procs", str(self.limits.player_pids)]
        return args

    def _command(self, home: Path, run: Path, userns_fd: int | None = None) -> list[str]:
        if not self.sandbox:
            return self._guest_args(str(home), str(run), _free_display())
        assert self._dir is not None
        if userns_fd is None:  # one identity: the caller's uid maps to the desktop user
            cmd = [
                "bwrap",
                "--die-with-parent",
                "--unshare-all",
                "--unshare-user",
                "--uid",
                str(sbx.PLAYER_ID),
                "--gid",
                str(sbx.PLAYER_ID),
            ]
        else:  # two identities; no cgroup namespace, so the guest can still move pids
            cmd = [
                "bwrap",
                "--die-with-parent",
                "--userns",
                str(userns_fd),
                "--unshare-pid",
                "--unshare-net",
                "--unshare-ipc",
                "--unshare-uts",
                "--cap-add",
                "ALL",
            ]
        empty = self._dir / "empty"
        if not empty.exists():
            empty.write_bytes(b"")
        cmd += [
            "--hostname",
            "osworld",
            *sbx.filesystem_args(
                home=home,
                run=run,
                empty=empty,
                passwd=self._etc_file("passwd"),
                group=self._etc_file("group"),
                shims=_SHIMS,
                shims_at=SANDBOX_SHIMS,
                tmp_bytes=self.limits.tmp_bytes,
            ),
        ]
        judge_args, exposed = sbx.judge_mounts(_python_paths())
        cmd += judge_args
        if exposed:
            log.info(
                "the guest's Python paths %s lie in host directories the desktop sees", exposed
            )
        if self._cgroup is not None and userns_fd is not None:
            for i, procs in enumerate(self._cgroup.player_procs):
                cmd += ["--bind", str(procs), f"/run/osworld/player-cgroup-{i}.procs"]
        if self._freezer is not None and userns_fd is not None:
            cmd += ["--bind", str(self._freezer.dir), "/run/osworld/freezer"]
        for src, dst in self.extra_binds.items():
            cmd += ["--ro-bind", str(src), dst]
        cmd += ["--clearenv"]
        env = {
            "HOME": "/home/user",
            "USER": "user",
            "LOGNAME": "user",
            "SHELL": "/bin/bash",
            "PATH": f"{SANDBOX_SHIMS}:{_PATH}",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "XDG_RUNTIME_DIR": f"/run/user/{sbx.PLAYER_ID}",
            "DISPLAY": ":0",
            "NO_AT_BRIDGE": "0",
            "XDG_SESSION_TYPE": "x11",
        }
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        cmd += ["--chdir", "/", "--"]
        cmd += self._guest_args("/home/user", "/run/osworld", ":0")
        if self._cgroup is not None:  # the sandbox starts in the judge's cgroup
            joins = " && ".join(
                f"echo $$ > {shlex.quote(str(p))}" for p in self._cgroup.judge_procs
            )
            cmd = ["sh", "-c", f'{joins} && exec "$@"', "sh", *cmd]
        return cmd

    def _host_env(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        if not self.sandbox:
            env.update(HOME=str(home), PATH=f"{_SHIMS}:{env.get('PATH', _PATH)}")
        return env

    def _etc_file(self, name: str) -> Path:
        assert self._dir is not None
        path = self._dir / name
        if name == "passwd":
            path.write_text(
                "root:x:0:0:root:/root:/bin/bash\n"
                "user:x:1000:1000:user:/home/user:/bin/bash\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            )
        else:
            path.write_text("root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n")
        return path

    def _wait_for_socket(self, sock: Path) -> None:
        deadline = time.monotonic() + self.start_timeout
        delay = 0.005
        while not sock.exists():
            if self._proc is not None and self._proc.poll() is not None:
                raise InfraError(f"the sandbox exited with status {self._proc.returncode}")
            if time.monotonic() > deadline:
                raise InfraError(f"no guest socket after {self.start_timeout:.0f} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _descendants(root: int) -> list[int]:
    """PIDs of every process below ``root`` (read from /proc; the sandbox's are visible here)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _free_display() -> str:
    """A display number with no X server (for the no-sandbox mode, which shares /tmp/.X11-unix)."""
    for n in range(90, 400):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return f":{n}"
    raise InfraError("no free X display number between :90 and :399")


@atexit.register
def _stop_all() -> None:
    for provider in list(_LIVE):
        try:
            provider.stop()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            log.exception("stopping %r at exit failed", provider)
