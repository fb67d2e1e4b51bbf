"""Who owns a container, and removing the ones nobody owns any more.

Every container the docker provider starts carries labels naming its owner: the host name, the
owning process's PID and that process's start time (so a recycled PID is not mistaken for the
owner). Cleanup only ever looks at containers labelled ``osworld-gym.managed=true``.

A container of ours goes away when

* its provider stops (``env.close()``), or the interpreter exits (atexit);
* the owner gets SIGTERM (a handler removes the containers, then chains to the previous one)
  or dies on SIGINT (KeyboardInterrupt ends the program: atexit); a SIGINT that the program
  catches, as a notebook does, leaves its desktops alone;
* the owner dies in any other way, SIGKILL included: the container's watchdog sees the owner's
  lock released and stops it, and Docker removes it (our image; OSWorld's image has no
  watchdog);
* :func:`cleanup_stale` finds its owner dead (run at the first container start of each
  process, and by ``osworld-gym image prune``).

>>> labels = owner_labels()
>>> labels["osworld-gym.managed"], labels["osworld-gym.owner-pid"] == str(os.getpid())
('true', True)
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osworld_gym.guest.processes import read_proc

log = logging.getLogger(__name__)

LABEL_MANAGED = "osworld-gym.managed"
LABEL_OWNER_HOST = "osworld-gym.owner-host"
LABEL_OWNER_PID = "osworld-gym.owner-pid"
LABEL_OWNER_START = "osworld-gym.owner-start"
#: the host run directory bind-mounted into the container (removed with a stale container)
LABEL_RUN_DIR = "osworld-gym.run-dir"
#: ``desktop`` (our image) or ``osworld-vm`` (OSWorld's QEMU image)
LABEL_KIND = "osworld-gym.kind"
#: prefix of the run directories the provider creates (cleanup removes nothing else)
RUN_DIR_PREFIX = "osworld-gym-docker-"
#: file in a run directory naming its owner (the labels, as JSON)
OWNER_FILE = "owner.json"


def _start_time(pid: int) -> str:
    info = read_proc(pid) if os.path.isdir("/proc") else None
    return str(info.start_time) if info is not None else ""


def owner_labels(kind: str = "desktop") -> dict[str, str]:
    """Labels that tie a new container to this process."""
    pid = os.getpid()
    return {
        LABEL_MANAGED: "true",
        LABEL_OWNER_HOST: socket.gethostname(),
        LABEL_OWNER_PID: str(pid),
        LABEL_OWNER_START: _start_time(pid),
        LABEL_KIND: kind,
    }


def owner_alive(labels: dict[str, str]) -> bool | None:
    """Whether the owner named by ``labels`` still runs; None if it cannot be told from here
    (another host)."""
    if labels.get(LABEL_OWNER_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(LABEL_OWNER_PID, ""))
    except ValueError:
        return False
    start = labels.get(LABEL_OWNER_START, "")
    now = _start_time(pid)
    if not now:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not start  # no /proc: trust the pid only when no start time was recorded
    return not start or now == start


def remove_run_dir(path: str | None) -> None:
    """Delete a provider's run directory, and nothing that does not look like one, with the
    desktop's cgroups named after it (a root host's; see ``DockerProvider._cgroups``), which
    may outlive the directory (the owner's janitor removed it while the container ran on)."""
    if not path or not Path(path).name.startswith(RUN_DIR_PREFIX):
        return
    from osworld_gym.providers.limits import remove_cgroups

    remove_cgroups(Path(path).name)
    if Path(path).is_dir():
        shutil.rmtree(path, ignore_errors=True)


def write_owner_file(run_dir: Path, labels: dict[str, str]) -> None:
    """Record the owner in a run directory, so that cleanup can find directories whose
    container is already gone (stopped by its watchdog)."""
    (run_dir / OWNER_FILE).write_text(json.dumps(labels))


def _stale_run_dirs(roots: list[Path], include_live: bool) -> list[Path]:
    out = []
    for root in roots:
        for d in root.glob(f"{RUN_DIR_PREFIX}*"):
            try:
                labels = json.loads((d / OWNER_FILE).read_text())
            except (OSError, ValueError):
                continue  # not ours, or still being created
            if owner_alive(labels) is False or (include_live and owner_alive(labels)):
                out.append(d)
    return out


def cleanup_stale(
    client: Any,
    *,
    include_live: bool = False,
    include_other_hosts: bool = False,
    run_roots: list[Path] | None = None,
) -> list[str]:
    """Remove our containers whose owner is dead, their run directories, and run directories
    of dead owners whose container is already gone.

    Args:
        client: a docker SDK client.
        include_live: also remove containers of owners that still run on this host.
        include_other_hosts: also remove containers whose owner was on another host (e.g. a
            shared Docker daemon); their liveness cannot be checked from here.
        run_roots: where run directories are looked for (default: the system temp dir).

    Returns:
        Short ids of the removed containers.
    """
    import docker.errors

    roots = run_roots or [Path(tempfile.gettempdir())]
    candidates = _stale_run_dirs(roots, include_live)
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=true"}):
        labels = c.labels or {}
        alive = owner_alive(labels)
        if alive is None and not include_other_hosts:
            continue
        if alive and not include_live:
            continue
        try:
            c.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: removal already in progress
                log.warning("could not remove container %s: %s", c.short_id, e)
                continue
        remove_run_dir(labels.get(LABEL_RUN_DIR))
        removed.append(c.short_id)
        log.info(
            "removed container %s of %s pid %s",
            c.short_id,
            labels.get(LABEL_OWNER_HOST),
            labels.get(LABEL_OWNER_PID),
        )
    for d in candidates:
        remove_run_dir(str(d))
    return removed


# ---- removal when the owner exits ----------------------------------------------------------
#: container id -> run directory, for every container this process started and not yet removed
_LIVE: dict[str, str | None] = {}
_LIVE_LOCK = threading.RLock()  # re-entrant: the signal handler runs in the main thread
_PREVIOUS: dict[int, Any] = {}
#: methods called in a forked child (the child does not own its parent's containers); weak, so
#: that registering does not keep a provider alive
_AT_FORK: list[weakref.WeakMethod] = []


def register(container_id: str, run_dir: str | None) -> None:
    """Remember a container to remove at exit or on SIGTERM; installs the handlers once."""
    with _LIVE_LOCK:
        _LIVE[container_id] = run_dir
    install_signal_handlers()


def unregister(container_id: str) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(container_id, None)


def remove_all_now() -> None:
    """Force-remove every container this process started (fresh client: safe in a handler)."""
    with _LIVE_LOCK:
        items = list(_LIVE.items())
        _LIVE.clear()
    if not items:
        return
    try:
        import docker

        client = docker.from_env(timeout=20)
    except Exception:
        log.exception("cannot reach Docker to remove containers %s", [i for i, _ in items])
        return
    for cid, run_dir in items:
        try:
            client.api.remove_container(cid, force=True)
        except Exception as e:  # noqa: BLE001 - gone already, or removal in progress
            log.debug("removing %s: %s", cid[:12], e)
        remove_run_dir(run_dir)
    client.close()


def _on_signal(signum: int, frame: Any) -> None:
    previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    dies = previous in (signal.SIG_DFL, None)
    if signum == signal.SIGTERM or dies:
        remove_all_now()
    if callable(previous):
        previous(signum, frame)
    elif dies:  # re-deliver with the default action (terminate)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """Chain our SIGTERM/SIGINT handler in front of the current ones (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        current = signal.getsignal(sig)
        if current is _on_signal or current == signal.SIG_IGN:
            continue
        _PREVIOUS[sig] = current
        signal.signal(sig, _on_signal)


def at_fork_in_child(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in forked children while its object lives (e.g. to drop
    inherited lock file descriptors)."""
    _AT_FORK[:] = [m for m in _AT_FORK if m() is not None]
    _AT_FORK.append(weakref.WeakMethod(method))


def _forked() -> None:
    global _LIVE_LOCK
    _LIVE_LOCK = threading.RLock()  # another thread may have held it at the fork
    _LIVE.clear()
    for ref in _AT_FORK:
        fn = ref()
        if fn is None:
            continue
        try:
            fn()
        except Exception:
            log.debug("at-fork hook failed", exc_info=True)


os.register_at_fork(after_in_child=_forked)
atexit.register(remove_all_now)
