"""What a local desktop's sandbox is made of: identities and the file system it sees.

Two trust levels share one desktop (see the README's threat model):

* the **judge**: the guest server, Xvfb, evaluation commands, their socket, token and state;
* the **player**: the agent's apps, its terminal and anything it starts there.

**Identities.** When the host runs as root, the sandbox gets a user namespace with *two*
mappings, written by us before bubblewrap joins it (``bwrap --userns FD``):

* namespace uid 0 (the judge) → host uid 0. The judge keeps root's file access on the host
  paths it needs (the interpreter under ``/root/.pyenv``, the checkout), and its capabilities
  are confined to the namespace;
* namespace uid 1000 (``user``, the player) → :data:`PLAYER_HOST_ID`, an unprivileged host id
  that owns no host file. The guest drops to it (``setpriv --reuid 1000``) for every player
  process, with no capabilities and ``no_new_privs``.

The kernel then enforces the separation: a uid-1000 process cannot signal or ptrace uid-0
processes (the guest, Xvfb, evaluator commands), cannot read their ``/proc/PID/*``, and cannot
enter the judge's 0700 directories (``/run/osworld`` with the socket and token, the guest's
state dir, the interpreter and checkout). Only a privileged writer may install a two-line
``uid_map``, hence "host is root". Without root (``judge_separation=False`` or a non-root host)
the sandbox falls back to one identity mapped to the caller: the player is then the judge, as
before this module existed; that mode is logged as a warning, reported as
``info["separated"] is False`` and refused by the trainer unless it is told otherwise.

**File system.** The sandbox binds an allowlist instead of ``/``: :data:`HOST_DIRS` read-only,
``/etc`` read-only with its secrets masked, fonts' caches, our own ``/tmp``, ``/run``, ``/home``.
The judge's interpreter and checkout are bound at their own paths below a 0700 directory the
player cannot enter. The task cache, gold files, task JSON and everything else of the host simply
do not exist inside.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

#: The player's uid/gid inside the sandbox (OSWorld tasks hard-code /home/user, uid 1000).
PLAYER_ID = 1000
#: The host uid/gid the player maps to: unprivileged and owning no host file. Far above the
#: ranges /etc/subuid usually hands out (100000 + 65536 n), below the 32-bit overflow ids.
PLAYER_HOST_ID = 2_000_001_000

#: Host directories the player may read (bound read-only where they exist; symlinks kept).
HOST_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/var/cache/fontconfig",
    "/var/lib/dbus",
    # the task python (guest/task_python.py): task-author `python -c ...` steps
    "/opt/osworld-gym-task-python",
)
#: Files under /etc replaced by an empty file (unreadable for the player anyway: defence in depth).
ETC_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/sudoers",
)
#: Directories under /etc replaced by an empty tmpfs.
ETC_SECRET_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d")
#: Directories the sandbox creates empty (tmpfs) and populates itself.
SANDBOX_DIRS = ("/tmp", "/var/tmp", "/run", "/home", "/dev/shm")


class UserNamespaceError(OSError):
    """The two-identity user namespace could not be made."""


def two_identity_userns(player_host_id: int = PLAYER_HOST_ID, timeout: float = 5.0) -> int:
    """A user namespace mapping uid/gid 0 → host 0 and 1000 → ``player_host_id``; returns an
    O_RDONLY fd of it for ``bwrap --userns`` (the caller closes it).

    A short-lived ``unshare --user`` holder creates the namespace; we (root) write its maps,
    open it and let the holder exit: the open fd keeps the namespace alive.
    """
    if os.geteuid() != 0:
        raise UserNamespaceError(
            "a two-identity sandbox needs a root host (uid_map with two "
            "lines); run as root or pass judge_separation=False"
        )
    holder = subprocess.Popen(["unshare", "--user", "sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        mine = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + timeout
        while True:
            try:
                if os.readlink(f"/proc/{holder.pid}/ns/user") != mine:
                    break
            except OSError:
                pass
            if holder.poll() is not None or time.monotonic() > deadline:
                raise UserNamespaceError(
                    f"unshare --user did not make a namespace (status {holder.poll()})"
                )
            time.sleep(0.002)
        for kind in ("uid", "gid"):
            Path(f"/proc/{holder.pid}/{kind}_map").write_text(
                f"0 0 1\n{PLAYER_ID} {player_host_id} 1\n"
            )
        return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise UserNamespaceError(f"cannot make the sandbox's user namespace: {e}") from e
    finally:
        holder.kill()
        holder.wait(timeout=timeout)


def parent_dirs(path: str) -> list[str]:
    """``--dir`` arguments for the ancestors of ``path``: bwrap makes missing parents mode 0700
    when it runs as (namespace) root, which would lock the player out of e.g. ``/var/cache``.

    >>> parent_dirs("/var/cache/fontconfig")
    ['--dir', '/var', '--dir', '/var/cache']
    """
    parts = PurePosixPath(path).parts[1:-1]
    return [a for i in range(len(parts)) for a in ("--dir", "/" + "/".join(parts[: i + 1]))]


def host_dir_args() -> list[str]:
    """bwrap arguments binding :data:`HOST_DIRS` (symlinks such as ``/bin -> usr/bin`` kept)."""
    args: list[str] = []
    for path in HOST_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += [*parent_dirs(path), "--ro-bind", path, path]
    for path in ETC_SECRET_DIRS:
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path, "--remount-ro", path]
    return args


def etc_masks(empty: Path) -> list[str]:
    """bwrap arguments hiding :data:`ETC_SECRETS` behind the empty file ``empty``."""
    args: list[str] = []
    for path in ETC_SECRETS:
        if os.path.isfile(path) and not os.path.islink(path):
            args += ["--ro-bind", str(empty), path]
    return args


def filesystem_args(
    *,
    home: Path,
    run: Path,
    empty: Path,
    passwd: Path,
    group: Path,
    shims: Path,
    shims_at: str,
    tmp_bytes: int | None,
) -> list[str]:
    """bwrap arguments for everything the sandbox sees but the judge's own paths: the host
    allowlist, ``/etc`` with our passwd/group and its secrets masked, sticky world-writable
    temp dirs, the home at ``/home/user``, the judge's run dir (0700) at ``/run/osworld``, the
    player's runtime dir, and the program shims at ``shims_at``."""
    args = [*host_dir_args(), *etc_masks(empty), "--dev", "/dev", "--proc", "/proc"]
    for path in ("/tmp", "/dev/shm", "/var/tmp"):  # world-writable and sticky, as on a host
        args += [*parent_dirs(path), "--perms", "1777"]
        if tmp_bytes is not None:
            args += ["--size", str(tmp_bytes)]
        args += ["--tmpfs", path]
    return args + [
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/home",
        "--bind",
        str(home),
        "/home/user",
        "--bind",
        str(run),
        "/run/osworld",
        "--dir",
        "/run/user",
        "--perms",
        "0700",
        "--dir",
        f"/run/user/{PLAYER_ID}",
        *parent_dirs(shims_at),
        "--ro-bind",
        str(shims),
        shims_at,
        "--ro-bind",
        str(passwd),
        "/etc/passwd",
        "--ro-bind",
        str(group),
        "/etc/group",
    ]


def _visible_roots() -> list[str]:
    return [p for p in HOST_DIRS if os.path.exists(p)]


def guard_dir(path: str) -> str | None:
    """The directory to create with mode 0700 so the player cannot reach ``path``.

    ``None`` when ``path`` lies inside a host directory the player sees anyway (e.g. a Python
    under ``/usr``): it cannot be hidden, and the caller warns if it matters.

    >>> guard_dir("/root/.pyenv/versions/3.11.9"), guard_dir("/tmp/ci/repo/.venv")
    ('/root', '/tmp/ci')
    >>> guard_dir("/usr/lib/python3.11") is None
    True
    """
    visible = _visible_roots() + ["/usr", "/etc"]
    containers = list(SANDBOX_DIRS)
    parts = PurePosixPath(path).parts
    for i in range(2, len(parts) + 1):
        cand = "/" + "/".join(parts[1:i])
        if any(cand == v or cand.startswith(v + "/") for v in visible):
            return None
        if cand in containers or any(v.startswith(cand + "/") for v in visible + containers):
            continue
        return cand
    return None


def judge_mounts(paths: list[str]) -> tuple[list[str], list[str]]:
    """bwrap arguments binding the judge's ``paths`` (read-only, at their own paths) below 0700
    guard directories; and the paths that had to stay visible to the player."""
    args: list[str] = []
    guards: set[str] = set()
    exposed: list[str] = []
    for path in sorted(set(paths)):
        guard = guard_dir(path)
        if guard is None:
            exposed.append(path)
            continue
        if guard not in guards:
            guards.add(guard)
            args += ["--perms", "0700", "--dir", guard]
        args += ["--ro-bind", path, path]
    return args, exposed


def judge_python_paths() -> list[str]:
    """Host paths the guest's Python needs inside the sandbox: the interpreter, the virtual
    environment and this package's checkout, minus what the allowlist shows anyway (``/usr``).

    They are bound at their own paths below 0700 directories (judge only, see
    :func:`~osworld_gym.providers.sandbox.judge_mounts`).
    """
    import osworld_gym

    wanted = {
        sys.prefix,
        sys.base_prefix,
        os.path.realpath(sys.executable),
        str(Path(osworld_gym.__file__).resolve().parent.parent),
    }
    visible = [p for p in HOST_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    out: set[str] = set()
    for p in wanted:
        p = os.path.realpath(p)
        if os.path.isfile(p):
            p = os.path.dirname(p)
        if not any(p == v or p.startswith(v + "/") for v in visible):
            out.add(p)
    # drop paths inside other bound paths
    return sorted(p for p in out if not any(p != q and p.startswith(q + "/") for q in out))
