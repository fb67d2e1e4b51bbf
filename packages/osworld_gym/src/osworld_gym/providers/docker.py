"""Desktops in Docker containers: our image, or OSWorld's QEMU image.

**Our image** (``osworld-gym image build``; the default ``image``): one container per env runs
our guest server as the supervisor of Xvfb, openbox and the apps. Judge and player are apart as
in the local sandbox (README "Threat model"): the guest (and Xvfb) run as the container's root,
every app and command of the desktop user ``user`` (uid 1000, home ``/home/user``) with no
capabilities and ``no_new_privs``; ``user`` has no sudo rights (``sudo`` is the guest's shim,
which runs the command as ``user``); the run directory stays the host user's, 0700. The guest
says so in its health (``separated``), and :attr:`DockerProvider.separated` is what it says:
``False`` when the host user is uid 1000 itself (no second identity for the judge: the guest
runs as ``user``), or with an image built before this. On a root host the desktop gets the
local provider's cgroups (``limits``: memory and pids with a judge reserve, the player's
freezer), made here and bound into the container; elsewhere evaluation commands hold the player
with SIGSTOP (the weaker mode of :mod:`~osworld_gym.guest.judging`). The container has no network
(``network="none"``, like the local sandbox) and publishes no port: the host creates a private
run directory with the guest's token, bind-mounts it at ``/run/osworld``, and talks to the
guest's unix socket there, so :class:`~osworld_gym.client.GuestClient` works unchanged. A reset
between episodes is the guest's reset endpoint (kill apps, restore home): milliseconds, no
container restart. See :mod:`osworld_gym.image.containers` for how containers are removed when
their owner goes away, whatever the way.

**OSWorld's image** (``image="happysixd/osworld-docker"`` with ``vm_path`` to its
``Ubuntu.qcow2``): started the way OSWorld starts it (``DISK_SIZE``/``RAM_SIZE``/``CPU_CORES``,
``NET_ADMIN``, ``/dev/kvm`` when present, the qcow2 read-only at ``/System.qcow2``, ports 5000,
9222, 8006 and 8080 published on free host ports; bound to 127.0.0.1 by default, unlike
OSWorld, because its guest server has no authentication). The client is
:class:`~osworld_gym.client.OSWorldCompatClient`; as in OSWorld, every reset after a used
episode replaces the container (a VM boot).

>>> p = DockerProvider(screen_size=(1280, 720))      # nothing starts before start()/env.reset()
>>> p.running, p.image.startswith("osworld-gym:")
(False, True)
>>> spec = desktop_container_spec("osworld-gym:x", "/tmp/osworld-gym-docker-1", (1280, 720))
>>> spec["network_mode"], spec["command"], spec["volumes"]["/tmp/osworld-gym-docker-1"]["bind"]
('none', ['--screen', '1280x720x24', '--wm', 'ubuntu'], '/run/osworld')
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from osworld_gym.client import GuestClient, OSWorldCompatClient
from osworld_gym.errors import InfraError, MissingDependencyError
from osworld_gym.image import containers
from osworld_gym.image.recipe import default_tag
from osworld_gym.providers.base import Provider
from osworld_gym.providers.capabilities import (
    DEFAULT_PROFILE,
    PROFILE_ENV,
    PROFILES,
    Capabilities,
)
from osworld_gym.providers.capabilities import OSWORLD_IMAGE as OSWORLD_CAPABILITIES
from osworld_gym.providers.limits import DesktopCgroup, DesktopLimits, PlayerFreezer, start_janitor
from osworld_gym.providers.manifest import image_capabilities

log = logging.getLogger(__name__)

#: OSWorld's QEMU-in-Docker image.
OSWORLD_IMAGE = "happysixd/osworld-docker"
#: OSWorld's container ports: guest server, Chrome DevTools, web VNC viewer, VLC HTTP.
OSWORLD_PORTS: dict[str, int] = {"server": 5000, "chromium": 9222, "vnc": 8006, "vlc": 8080}
#: Where the run directory appears inside our containers.
RUN_MOUNT = "/run/osworld"
#: Where the desktop's cgroup files appear inside our containers: below the judge's state dir,
#: which the entrypoint makes root's 0700 before anything runs as the player.
JUDGE_CGROUP_MOUNT = "/run/osworld-judge/cgroup"
HOME_TEMPLATE_MOUNT = "/opt/osworld-gym-home-template"

_stale_checked = False


def _image(image: str | None, apps: str | None, vm_path: Any) -> str:
    """The image a provider configured with ``image``, ``apps`` and ``vm_path`` runs."""
    if image is not None:
        return image
    if vm_path is not None:
        return OSWORLD_IMAGE
    return default_tag(apps or "minimal")


def _is_osworld_image(image: str) -> bool:
    """OSWorld's QEMU-in-Docker image (``happysixd/osworld-docker`` or a mirror of it)."""
    return image.split(":")[0].endswith("osworld-docker")


def desktop_container_spec(
    image: str,
    run_dir: str,
    screen_size: tuple[int, int],
    *,
    depth: int = 24,
    network: str = "none",
    shm_size: str = "1g",
    cpus: float | None = None,
    mem_limit: str | None = None,
    extra_binds: dict[str, str] | None = None,
    home_template: str | None = None,
    profile: str = "ubuntu",
    labels: dict[str, str] | None = None,
    cgroup_binds: dict[str, str] | None = None,
    guest_args: list[str] | None = None,
) -> dict[str, Any]:
    """``containers.run`` arguments for a desktop of our image (``cgroup_binds``: host cgroup
    files and directories bound read-write below :data:`JUDGE_CGROUP_MOUNT`; ``guest_args``:
    more arguments for the guest)."""
    w, h = screen_size
    command = ["--screen", f"{w}x{h}x{depth}", "--wm", profile, *(guest_args or [])]
    volumes: dict[str, dict[str, str]] = {run_dir: {"bind": RUN_MOUNT, "mode": "rw"}}
    if home_template is not None:
        volumes[str(Path(home_template).resolve())] = {"bind": HOME_TEMPLATE_MOUNT, "mode": "ro"}
        command += ["--home-template", HOME_TEMPLATE_MOUNT]
    for src, dst in (extra_binds or {}).items():
        volumes[str(Path(src).resolve())] = {"bind": dst, "mode": "ro"}
    for src, dst in (cgroup_binds or {}).items():
        volumes[src] = {"bind": dst, "mode": "rw"}
    spec: dict[str, Any] = {
        "image": image,
        "command": command,
        "detach": True,
        "auto_remove": True,
        "network_mode": network,
        "hostname": "osworld",
        "shm_size": shm_size,
        "volumes": volumes,
        "labels": {**(labels or {}), containers.LABEL_RUN_DIR: run_dir},
        # no setuid program (sudo, su, mount) raises anyone: the guest starts as root and drops
        "security_opt": ["no-new-privileges"],
    }
    if cgroup_binds:
        # the bound cgroups lie outside a private cgroup namespace's root (Docker's default on
        # cgroup v2), and with nsdelegate the kernel refuses to move a process into them there
        spec["cgroupns"] = "host"
    if cpus is not None:
        spec["nano_cpus"] = int(cpus * 1e9)
    if mem_limit is not None:
        spec["mem_limit"] = mem_limit
    return spec


def osworld_container_spec(
    image: str,
    vm_path: str,
    *,
    ram_size: str = "4G",
    cpu_cores: int = 4,
    disk_size: str = "32G",
    kvm: bool = True,
    host_ip: str = "127.0.0.1",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``containers.run`` arguments for OSWorld's QEMU image, as OSWorld's docker provider
    passes them (ports published on Docker-chosen free host ports of ``host_ip``).

    >>> s = osworld_container_spec(OSWORLD_IMAGE, "/vm/Ubuntu.qcow2", kvm=False)
    >>> s["environment"]["KVM"], s["volumes"]["/vm/Ubuntu.qcow2"], s["ports"]["5000/tcp"]
    ('N', {'bind': '/System.qcow2', 'mode': 'ro'}, ('127.0.0.1', None))
    """
    env = {"DISK_SIZE": disk_size, "RAM_SIZE": ram_size, "CPU_CORES": str(cpu_cores)}
    spec: dict[str, Any] = {
        "image": image,
        "detach": True,
        "environment": env,
        "cap_add": ["NET_ADMIN"],
        "volumes": {os.path.abspath(vm_path): {"bind": "/System.qcow2", "mode": "ro"}},
        "ports": {f"{port}/tcp": (host_ip, None) for port in OSWORLD_PORTS.values()},
        "labels": dict(labels or {}),
    }
    if kvm:
        spec["devices"] = ["/dev/kvm"]
    else:
        env["KVM"] = "N"
    return spec


def published_ports(attrs: dict[str, Any]) -> dict[str, int]:
    """``{"server": host_port, ...}`` from a started container's ``attrs``."""
    bindings = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    out = {}
    for name, port in OSWORLD_PORTS.items():
        for b in bindings.get(f"{port}/tcp") or []:
            if b.get("HostPort"):
                out[name] = int(b["HostPort"])
                break
    return out


class DockerProvider(Provider):
    """A desktop in a Docker container.

    Args:
        screen_size: Xvfb screen of our image (OSWorld's VM is 1920x1080 whatever is asked).
        image: our image's tag (default: the build of this version with app set ``apps``), or
            OSWorld's.
        apps: the app set of our image when ``image`` is not given (``osworld-gym image build
            --apps``): ``"minimal"`` (default; xterm and mousepad) or ``"full"``.
        vm_path: OSWorld's ``Ubuntu.qcow2``; setting it (or an ``osworld-docker`` image)
            selects OSWorld's way of running a container.
        network: network of our containers: ``"none"`` (default; tasks get files through the
            guest) or a Docker network such as ``"bridge"``.
        start_timeout: seconds until the guest must answer (default 60; OSWorld's VM 300).
        root_dir: where the run directories go (default: the system temp dir).
        shm_size, cpus, mem_limit: container resources (``/dev/shm`` for Chromium, CPU, memory).
        extra_binds: ``{host_path: container_path}`` read-only binds (e.g. a task file cache).
        home_template: host directory copied into ``/home/user`` on every reset.
        profile: desktop profile of our image, ``"openbox"`` or ``"ubuntu"``; as
            :class:`~osworld_gym.providers.local.LocalProvider` (default: ``$OSWORLD_GYM_PROFILE``,
            else ``"ubuntu"``). Every image of ours carries both.
        owner_watchdog: stop the container when this process dies, even by SIGKILL.
        ram_size, cpu_cores, disk_size: OSWorld's VM resources (its env variables).
        kvm: give OSWorld's VM ``/dev/kvm`` (default: when present; without it QEMU emulates,
            which is far slower).
        host_ip: address OSWorld's ports are published on.
        limits: memory and pids of the desktop on a root host with writable cgroups (default
            :class:`~osworld_gym.providers.limits.DesktopLimits`: 3 GiB, 1024 tasks, a reserve
            for the judge), as for the local provider: the container's processes move into
            the desktop's cgroups (judge and player apart) and the player gets a freezer
            cgroup, so ``mem_limit`` then bounds nothing. Elsewhere: ``mem_limit`` only, and
            evaluation holds the player with SIGSTOP.
        start_attempts: containers to try before :meth:`start` gives up (a desktop can die
            while it starts; the error of the last attempt is raised).
        docker_client: a docker SDK client (default: ``docker.from_env()``).
    """

    name = "docker"
    #: judge and player apart (README "Threat model"): what our image's guest reports once a
    #: container is up (``False`` before, and for OSWorld's VM, whose guest runs as its user)
    separated = False

    @classmethod
    def capabilities(cls, profile: str | None = None) -> Capabilities:
        """What containers of the default image (our ``minimal`` build of this version, no
        network) offer tasks: read from the image's manifest (see :meth:`config_capabilities`).

        Raises:
            MissingDependencyError: no daemon, the image is absent or has no manifest.
        """
        return cls.config_capabilities({}, profile)

    @classmethod
    def config_capabilities(
        cls, provider_kwargs: dict[str, Any] | None = None, profile: str | None = None
    ) -> Capabilities:
        """What containers made with ``provider_kwargs`` offer tasks, never assumed: OSWorld's
        VM image only with ``vm_path``; our image (``image``, default the ``minimal`` build) from
        the manifest its build wrote into it (:mod:`.manifest`), with the container's
        ``network`` (``"none"``: no website) and desktop ``profile``.

        Raises:
            ValueError: OSWorld's image without ``vm_path``, or an unknown profile.
            MissingDependencyError: no daemon, the image is absent or has no manifest.
        """
        kwargs = provider_kwargs or {}
        vm_path = kwargs.get("vm_path")
        image = _image(kwargs.get("image"), kwargs.get("apps"), vm_path)
        if vm_path is not None or _is_osworld_image(image):
            if vm_path is None:
                raise ValueError(
                    f"{image} runs OSWorld's VM: pass vm_path= with its Ubuntu.qcow2 (its tasks "
                    "are counted only with the VM disk given)"
                )
            return replace(OSWORLD_CAPABILITIES, source=f"OSWorld's VM image ({vm_path})")
        profile = kwargs.get("profile") or profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
        if profile not in PROFILES:
            raise ValueError(f"unknown desktop profile {profile!r}; use one of {PROFILES}")
        return image_capabilities(
            image,
            profile=profile,
            network=kwargs.get("network", "none"),
            client=kwargs.get("docker_client"),
        )

    def desktop_capabilities(self) -> Capabilities:
        """What this provider's containers offer tasks (:meth:`config_capabilities`)."""
        kwargs: dict[str, Any] = {
            "image": self.image,
            "vm_path": self.vm_path,
            "network": self.network,
            "profile": self.profile,
            "docker_client": self._docker,
        }
        return self.config_capabilities(kwargs)

    def __init__(
        self,
        screen_size: tuple[int, int] = (1920, 1080),
        *,
        image: str | None = None,
        apps: str | None = None,
        vm_path: str | os.PathLike[str] | None = None,
        depth: int = 24,
        network: str = "none",
        start_timeout: float | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        shm_size: str = "1g",
        cpus: float | None = None,
        mem_limit: str | None = None,
        extra_binds: dict[str, str] | None = None,
        home_template: str | os.PathLike[str] | None = None,
        profile: str | None = None,
        owner_watchdog: bool = True,
        ram_size: str = "4G",
        cpu_cores: int = 4,
        disk_size: str = "32G",
        kvm: bool | None = None,
        host_ip: str = "127.0.0.1",
        start_attempts: int = 2,
        limits: DesktopLimits | None = None,
        docker_client: Any = None,
    ):
        super().__init__(screen_size)
        self.image = _image(image, apps, vm_path)
        self.osworld = vm_path is not None or _is_osworld_image(self.image)
        if self.osworld and vm_path is None:
            raise ValueError(
                f"{self.image} runs OSWorld's VM: pass vm_path= with its Ubuntu.qcow2 "
                "(from the xlangai/ubuntu_osworld dataset on Hugging Face, unzipped)"
            )
        self.vm_path = os.path.abspath(vm_path) if vm_path is not None else None
        self.depth, self.network, self.shm_size = depth, network, shm_size
        self.start_timeout = start_timeout or (300.0 if self.osworld else 60.0)
        self.root_dir = Path(root_dir) if root_dir else None
        self.cpus, self.mem_limit = cpus, mem_limit
        self.extra_binds = dict(extra_binds or {})
        self.home_template = str(home_template) if home_template else None
        self.owner_watchdog = owner_watchdog
        self.profile = profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
        if self.profile not in PROFILES:
            raise ValueError(
                f"unknown desktop profile {self.profile!r} (from "
                f"{'profile=' if profile else '$' + PROFILE_ENV}); use one of "
                f"{', '.join(PROFILES)}"
            )
        self.ram_size, self.cpu_cores, self.disk_size = ram_size, cpu_cores, disk_size
        self.kvm = kvm
        self.host_ip = host_ip
        self.start_attempts = max(1, start_attempts)
        #: host ports of OSWorld's container (``server``, ``chromium``, ``vnc``, ``vlc``)
        self.ports: dict[str, int] = {}
        #: seconds the last :meth:`start` took, container creation and guest readiness apart
        self.timings: dict[str, float] = {}
        self._docker = docker_client
        self._container: Any = None
        self._client: GuestClient | None = None
        self._dir: Path | None = None
        self.limits = limits or DesktopLimits()
        self._cgroup: DesktopCgroup | None = None
        self._freezer: PlayerFreezer | None = None
        self._janitor: Any = None
        self._lock_fd: int | None = None
        self._fresh = False
        self._lock = threading.Lock()
        containers.at_fork_in_child(self._forget_in_child)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    @property
    def running(self) -> bool:
        if self._container is None or self._client is None:
            return False
        import docker
        import docker.errors

        try:
            self._container.reload()
        except docker.errors.DockerException:  # removed, or the daemon is gone
            return False
        return self._container.status == "running"

    def start(self) -> GuestClient:
        with self._lock:
            if self._client is not None and self.running:
                return self._client
            self._stop_locked(keep_client=self.osworld)
            for attempt in range(1, self.start_attempts + 1):
                try:
                    self._start_locked()
                    break
                except InfraError as e:  # a desktop that died while starting: try a new one
                    if attempt == self.start_attempts:
                        raise
                    log.warning(
                        "docker desktop start %d/%d failed, retrying: %s",
                        attempt,
                        self.start_attempts,
                        e,
                    )
            assert self._client is not None
            return self._client

    def reset_state(self) -> None:
        if self._client is None:
            raise InfraError("the docker desktop is not running; call start() first")
        if not self.osworld:
            self._client.reset_desktop(restore_home=True)
            return
        with self._lock:  # OSWorld's guest cannot reset: a used VM is replaced, as OSWorld does
            if self._fresh:
                self._fresh = False
                return
            self._stop_locked(keep_client=True)
            self._start_locked()
            self._fresh = False

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def log_tail(self, n_bytes: int = 4000) -> str:
        """The end of the guest's log (our image) or of the container's output (OSWorld's)."""
        if not self.osworld and self._dir is not None:
            try:
                return (self._dir / "guest.log").read_bytes()[-n_bytes:].decode("utf-8", "replace")
            except OSError:
                return ""
        try:
            return self._container.logs(tail=50).decode("utf-8", "replace")[-n_bytes:]
        except Exception:  # noqa: BLE001 - best effort for an error message
            return ""

    # -- internals -------------------------------------------------------------------------------
    def _client_docker(self) -> Any:
        if self._docker is None:
            from osworld_gym.image.build import docker_client

            self._docker = docker_client()
        return self._docker

    def _start_locked(self) -> None:
        global _stale_checked
        import docker
        import docker.errors

        dk = self._client_docker()
        if not _stale_checked:
            _stale_checked = True
            try:
                roots = [Path(tempfile.gettempdir())] + ([self.root_dir] if self.root_dir else [])
                containers.cleanup_stale(dk, run_roots=roots)
            except Exception as e:  # noqa: BLE001 - cleanup must never block a start
                log.warning("cleaning up stale containers failed: %s", e)
        try:
            dk.images.get(self.image)
        except docker.errors.ImageNotFound:
            hint = (
                "build it with `osworld-gym image build`"
                if not self.osworld
                else f"pull it with `docker pull {self.image}`"
            )
            raise MissingDependencyError(f"docker image {self.image} is not here; {hint}") from None
        t0 = time.monotonic()
        spec = self._osworld_spec() if self.osworld else self._desktop_spec()
        try:
            self._container = dk.containers.run(**spec)
        except Exception as e:
            self._stop_locked(keep_client=self.osworld)
            if isinstance(e, docker.errors.DockerException):
                raise InfraError(f"docker could not start {self.image}: {e}") from e
            raise
        containers.register(self._container.id, str(self._dir) if self._dir else None)
        t1 = time.monotonic()
        try:
            if self.osworld:
                self._connect_osworld()
            else:
                self._connect_desktop(t0)
        except Exception as e:
            tail = self.log_tail()
            self._stop_locked(keep_client=self.osworld)
            if isinstance(e, InfraError):
                raise InfraError(f"docker desktop did not start: {e}\n--- log ---\n{tail}") from e
            raise
        self._fresh = True
        self.timings = {
            "container_s": t1 - t0,
            "ready_s": time.monotonic() - t1,
            "start_s": time.monotonic() - t0,
        }
        log.info(
            "docker desktop %s up in %.2f s (%s)",
            self._container.short_id,
            self.timings["start_s"],
            self.image,
        )

    def _desktop_spec(self) -> dict[str, Any]:
        prefix = containers.RUN_DIR_PREFIX
        self._dir = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root_dir))
        token = secrets.token_urlsafe(24)
        token_file = self._dir / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        self._token = token
        if self.owner_watchdog:
            fd = os.open(self._dir / "owner.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        labels = containers.owner_labels("desktop")
        containers.write_owner_file(self._dir, labels)
        binds, args = self._cgroups()
        return desktop_container_spec(
            self.image,
            str(self._dir),
            self.screen_size,
            depth=self.depth,
            network=self.network,
            shm_size=self.shm_size,
            cpus=self.cpus,
            mem_limit=self.mem_limit,
            extra_binds=self.extra_binds,
            home_template=self.home_template,
            profile=self.profile or DEFAULT_PROFILE,
            labels=labels,
            cgroup_binds=binds,
            guest_args=args,
        )

    def _cgroups(self) -> tuple[dict[str, str], list[str]]:
        """On a root host: the desktop's cgroups (limits, judge and player apart) and the
        player's freezer, as binds and guest arguments (the entrypoint puts itself, and so the
        guest, into the judge's). A janitor removes them if this process dies."""
        if os.geteuid() != 0:  # the entrypoint separates only a run dir not owned by uid 1000
            return {}, []
        assert self._dir is not None
        self._cgroup = DesktopCgroup.create(self._dir.name, self.limits)
        self._freezer = PlayerFreezer.create(self._dir.name, self._cgroup)
        binds: dict[str, str] = {}
        args: list[str] = []
        if self._cgroup is not None:
            for i, (judge, player) in enumerate(
                zip(self._cgroup.judge_procs, self._cgroup.player_procs, strict=True)
            ):
                binds[str(judge)] = f"{JUDGE_CGROUP_MOUNT}/judge-{i}.procs"
                binds[str(player)] = f"{JUDGE_CGROUP_MOUNT}/player-{i}.procs"
                args += ["--player-cgroup", f"{JUDGE_CGROUP_MOUNT}/player-{i}.procs"]
        if self._freezer is not None:
            binds[str(self._freezer.dir)] = f"{JUDGE_CGROUP_MOUNT}/freezer"
            args += [
                "--player-cgroup",
                f"{JUDGE_CGROUP_MOUNT}/freezer/cgroup.procs",
                "--player-freezer",
                f"{JUDGE_CGROUP_MOUNT}/freezer",
                "--player-freezer-version",
                str(self._freezer.version),
            ]
        if binds:
            self._janitor = start_janitor(self._dir)
        return binds, args

    def _osworld_spec(self) -> dict[str, Any]:
        assert self.vm_path is not None
        if not os.path.isfile(self.vm_path):
            raise MissingDependencyError(
                f"OSWorld's VM image {self.vm_path} does not exist: download Ubuntu.qcow2.zip from "
                "the xlangai/ubuntu_osworld dataset on Hugging Face and unzip it"
            )
        kvm = os.path.exists("/dev/kvm") if self.kvm is None else self.kvm
        if not kvm:
            log.warning(
                "no /dev/kvm: OSWorld's VM runs without hardware virtualisation "
                "(KVM=N) and will be much slower"
            )
        return osworld_container_spec(
            self.image,
            self.vm_path,
            ram_size=self.ram_size,
            cpu_cores=self.cpu_cores,
            disk_size=self.disk_size,
            kvm=kvm,
            host_ip=self.host_ip,
            labels=containers.owner_labels("osworld-vm"),
        )

    def _connect_desktop(self, t0: float) -> None:
        import docker
        import docker.errors

        assert self._dir is not None
        sock = self._dir / "guest.sock"
        delay = 0.005
        while not sock.exists():
            if time.monotonic() - t0 > self.start_timeout:
                raise InfraError(f"no guest socket after {self.start_timeout:.0f} s")
            try:
                self._container.reload()
                status = self._container.status
            except docker.errors.NotFound:
                status = "removed"
            if status not in ("created", "running"):
                raise InfraError(f"the container exited ({status}) before its guest was up")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        client = GuestClient(uds=str(sock), token=self._token)
        try:
            client.wait_ready(timeout=max(1.0, self.start_timeout - (time.monotonic() - t0)))
            self.separated = client.health().get("separated") is True
        except Exception:
            client.close()
            raise
        if not self.separated:
            log.warning(
                "docker desktop %s: judge and player are NOT separated (the host user "
                "is uid %d, the player's, or the image predates separation: rebuild it)",
                self._container.short_id,
                self._dir.stat().st_uid,
            )
        self._client = client

    def _connect_osworld(self) -> None:
        self._container.reload()
        self.ports = published_ports(self._container.attrs)
        if "server" not in self.ports:
            raise InfraError(f"docker published no host port for 5000: {self.ports}")
        url = f"http://{self.host_ip}:{self.ports['server']}"
        if isinstance(self._client, OSWorldCompatClient):
            self._client.retarget(url)  # the env keeps its client across VM replacements
        else:
            self._client = OSWorldCompatClient(url)
        self._client.wait_ready(timeout=self.start_timeout)

    def _stop_locked(self, keep_client: bool = False) -> None:
        if self._client is not None and not keep_client:
            self._client.close()
            self._client = None
        container, self._container = self._container, None
        if container is not None:
            import docker
            import docker.errors

            containers.unregister(container.id)
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if e.status_code != 409:  # 409: auto-removal already in progress
                    log.warning("could not remove container %s: %s", container.short_id, e)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._freezer is not None:
            self._freezer.remove()
            self._freezer = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._dir is not None:
            containers.remove_run_dir(str(self._dir))
            self._dir = None
        if self._janitor is not None:  # nothing left for it: let it go
            self._janitor.stdin.close()
            try:
                self._janitor.wait(timeout=10)
            except Exception:  # noqa: BLE001 - it exits on its own
                pass
            self._janitor = None
        self.ports = {}

    def _forget_in_child(self) -> None:
        """In a forked child: drop the inherited lock fd (the parent keeps its lock); the
        parent owns the container."""
        if self._lock_fd is not None:
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
        self._lock_fd = None
        if self._janitor is not None:
            try:
                self._janitor.stdin.close()  # our copy of the pipe: the owner's is its own
            except OSError:
                pass
        self._container = None
        self._client = None
        self._dir = None
        self._cgroup = self._freezer = self._janitor = None
