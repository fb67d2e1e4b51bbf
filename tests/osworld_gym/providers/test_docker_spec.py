"""The docker provider's container specs, ownership rules and image recipe, without a daemon.

OSWorld's image (``happysixd/osworld-docker``, a QEMU VM of ~24 GB) cannot be fetched here, so
its path through the provider is checked with a **fake at the docker SDK call boundary only**
(``docker_client=`` gets an object with ``images.get``, ``containers.run`` and
``containers.list``): the spec passed to ``containers.run`` is compared with OSWorld's, and the
fake "VM" behind the published port is a real HTTP server answering ``/screenshot`` and
``/execute``, so readiness polling, the compat client and the restart-on-reset are exercised for
real. Our own image runs under a real Docker daemon in ``test_docker.py``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

docker = pytest.importorskip("docker", reason="the docker extra is not installed")

from osworld_gym.client import OSWORLD_PYAUTOGUI_PREFIX, OSWorldCompatClient
from osworld_gym.errors import MissingDependencyError
from osworld_gym.image import APPS, containers, default_tag, render_dockerfile
from osworld_gym.image.recipe import SYSTEM_PACKAGES
from osworld_gym.protocol.primitives import Click, TypeText
from osworld_gym.providers import make_provider
from osworld_gym.providers.docker import (
    OSWORLD_IMAGE,
    DockerProvider,
    desktop_container_spec,
    osworld_container_spec,
    published_ports,
)


# ---- specs --------------------------------------------------------------------------------------
def test_our_desktop_container_has_no_network_no_ports_and_our_labels():
    labels = containers.owner_labels()
    spec = desktop_container_spec(
        "osworld-gym:t",
        "/tmp/osworld-gym-docker-x",
        (1280, 720),
        cpus=2,
        mem_limit="3g",
        extra_binds={"/cache": "/cache"},
        home_template="/tpl",
        labels=labels,
    )
    assert spec["network_mode"] == "none" and "ports" not in spec
    assert spec["auto_remove"] and spec["detach"]
    assert spec["command"] == [
        "--screen",
        "1280x720x24",
        "--wm",
        "ubuntu",
        "--home-template",
        "/opt/osworld-gym-home-template",
    ]
    assert spec["volumes"] == {
        "/tmp/osworld-gym-docker-x": {"bind": "/run/osworld", "mode": "rw"},
        "/tpl": {"bind": "/opt/osworld-gym-home-template", "mode": "ro"},
        "/cache": {"bind": "/cache", "mode": "ro"},
    }
    assert spec["labels"]["osworld-gym.managed"] == "true"
    assert spec["labels"]["osworld-gym.owner-pid"] == str(os.getpid())
    assert spec["labels"]["osworld-gym.run-dir"] == "/tmp/osworld-gym-docker-x"
    assert spec["nano_cpus"] == 2_000_000_000 and spec["mem_limit"] == "3g"


def test_the_desktops_cgroups_are_bound_read_write_and_named_to_the_guest():
    """What a root host's provider passes (``DockerProvider._cgroups``); no setuid program
    raises anyone in any of our containers."""
    spec = desktop_container_spec(
        "osworld-gym:t",
        "/tmp/osworld-gym-docker-x",
        (800, 600),
        cgroup_binds={
            "/sys/fs/cgroup/pids/d/player/cgroup.procs": "/run/osworld-judge/cgroup/player-0.procs"
        },
        guest_args=["--player-cgroup", "/run/osworld-judge/cgroup/player-0.procs"],
    )
    assert spec["volumes"]["/sys/fs/cgroup/pids/d/player/cgroup.procs"] == {
        "bind": "/run/osworld-judge/cgroup/player-0.procs",
        "mode": "rw",
    }
    assert spec["command"][-2:] == ["--player-cgroup", "/run/osworld-judge/cgroup/player-0.procs"]
    assert spec["security_opt"] == ["no-new-privileges"]
    # on cgroup v2 a private cgroup namespace would refuse the moves into the bound cgroups
    assert spec["cgroupns"] == "host"
    assert "cgroupns" not in desktop_container_spec("osworld-gym:t", "/tmp/r", (800, 600))


def test_the_profile_is_passed_to_the_guest_and_every_image_carries_ubuntus_packages(monkeypatch):
    spec = desktop_container_spec("osworld-gym:x", "/tmp/r", (1920, 1080), profile="openbox")
    assert spec["command"] == ["--screen", "1920x1080x24", "--wm", "openbox"]
    assert desktop_container_spec("osworld-gym:x", "/tmp/r", (1920, 1080))["command"] == [
        "--screen",
        "1920x1080x24",
        "--wm",
        "ubuntu",
    ]  # the default profile
    from osworld_gym.guest.profiles import UBUNTU_PROGRAMS, UBUNTU_THEMES

    for apps in APPS:  # the default profile must start in the minimal image too
        packages = set(SYSTEM_PACKAGES) | set(APPS[apps])
        assert set(UBUNTU_PROGRAMS.values()) | set(UBUNTU_THEMES.values()) <= packages, apps
    monkeypatch.delenv("OSWORLD_GYM_PROFILE", raising=False)
    assert DockerProvider(docker_client=object()).profile == "ubuntu"
    monkeypatch.setenv("OSWORLD_GYM_PROFILE", "openbox")
    assert DockerProvider(docker_client=object()).profile == "openbox"
    assert DockerProvider(profile="ubuntu", docker_client=object()).profile == "ubuntu"
    with pytest.raises(ValueError, match="unknown desktop profile 'kde'"):
        DockerProvider(profile="kde", docker_client=object())


def test_osworld_container_is_started_the_way_osworld_starts_it():
    spec = osworld_container_spec(OSWORLD_IMAGE, "/vm/Ubuntu.qcow2", kvm=True)
    assert spec["environment"] == {"DISK_SIZE": "32G", "RAM_SIZE": "4G", "CPU_CORES": "4"}
    assert spec["cap_add"] == ["NET_ADMIN"] and spec["devices"] == ["/dev/kvm"]
    assert spec["volumes"] == {"/vm/Ubuntu.qcow2": {"bind": "/System.qcow2", "mode": "ro"}}
    # every OSWorld port on a free host port that Docker picks, loopback only
    assert spec["ports"] == {f"{p}/tcp": ("127.0.0.1", None) for p in (5000, 9222, 8006, 8080)}
    no_kvm = osworld_container_spec(
        OSWORLD_IMAGE, "/vm/Ubuntu.qcow2", kvm=False, ram_size="8G", cpu_cores=2
    )
    assert "devices" not in no_kvm and no_kvm["environment"]["KVM"] == "N"
    assert no_kvm["environment"]["RAM_SIZE"] == "8G" and no_kvm["environment"]["CPU_CORES"] == "2"


def test_published_ports_are_read_from_the_container():
    attrs = {
        "NetworkSettings": {
            "Ports": {
                "5000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49153"}],
                "9222/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49154"}],
                "8006/tcp": None,
            }
        }
    }
    assert published_ports(attrs) == {"server": 49153, "chromium": 49154}


def test_docker_provider_options_are_checked_early():
    with pytest.raises(ValueError, match="vm_path"):
        DockerProvider(image=OSWORLD_IMAGE)
    p = make_provider("docker", screen_size=(640, 480))
    assert p.image == default_tag("minimal") and not p.osworld and not p.running


# ---- ownership ----------------------------------------------------------------------------------
def test_owner_liveness_uses_pid_start_time_and_host():
    me = containers.owner_labels()
    assert containers.owner_alive(me) is True
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert containers.owner_alive({**me, "osworld-gym.owner-pid": str(dead.pid)}) is False
    recycled = {**me, "osworld-gym.owner-start": "1"}  # same pid, another process's start time
    assert containers.owner_alive(recycled) is False
    assert containers.owner_alive({**me, "osworld-gym.owner-host": "elsewhere"}) is None


def test_cleanup_only_removes_run_dirs_it_created(tmp_path):
    mine = tmp_path / "osworld-gym-docker-abc"
    other = tmp_path / "precious"
    mine.mkdir()
    other.mkdir()
    containers.remove_run_dir(str(mine))
    containers.remove_run_dir(str(other))
    assert not mine.exists() and other.exists()


# ---- recipe -------------------------------------------------------------------------------------
def test_recipe_installs_the_desktop_the_apps_the_user_and_the_guest():
    minimal, full = render_dockerfile("minimal"), render_dockerfile("full")
    for pkg in ("xvfb", "openbox", "wmctrl", "python3-venv", "sudo", "xterm", "mousepad"):
        assert pkg in minimal
    for pkg in ("libreoffice-calc", "chromium", "vlc"):
        assert pkg not in minimal and pkg in full
    assert "useradd -u 1000" in minimal and "user:password" in minimal
    # the player gets no sudo rights: `sudo` is the shim that runs the command as the user
    assert "-G sudo" not in minimal and 'ln -sf "$shims/sudo" /usr/local/bin/sudo' in minimal
    assert "--no-index" in minimal  # pip never needs PyPI inside the build
    assert "torch" not in minimal and set(APPS) == {"minimal", "full"}
    with pytest.raises(ValueError):
        render_dockerfile("huge")


# ---- OSWorld's image through a fake docker SDK boundary ---------------------------------------
class FakeVM:
    """What OSWorld's guest server answers: ``/screenshot`` (PNG) and ``/execute``."""

    def __init__(self):
        self.executed: list[dict] = []
        png = io.BytesIO()
        Image.new("RGB", (64, 48), (10, 20, 30)).save(png, "PNG")
        vm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def _send(self, body: bytes, ctype: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                assert self.path == "/screenshot"
                self._send(png.getvalue(), "image/png")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                vm.executed.append(body)
                self._send(
                    json.dumps(
                        {"status": "success", "output": "", "error": "", "returncode": 0}
                    ).encode(),
                    "application/json",
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakeContainer:
    def __init__(self, kwargs: dict, vm: FakeVM):
        self.kwargs, self.vm = kwargs, vm
        self.id = secrets.token_hex(32)
        self.short_id = self.id[:12]
        self.labels = kwargs.get("labels", {})
        self.status = "running"
        self.removed = False
        ports = {
            k: [{"HostIp": "127.0.0.1", "HostPort": str(vm.port + 10000 * (k != "5000/tcp"))}]
            for k in kwargs["ports"]
        }
        self.attrs = {"NetworkSettings": {"Ports": ports}}

    def reload(self) -> None:
        if self.removed:
            raise docker.errors.NotFound("removed")

    def remove(self, force: bool = False) -> None:
        self.removed = True
        self.vm.stop()

    def logs(self, tail: int = 50) -> bytes:
        return b""


class FakeDockerSDK:
    """The docker SDK surface the provider calls, and nothing else."""

    def __init__(self):
        self.runs: list[FakeContainer] = []
        sdk = self

        class Images:
            def get(self, name):
                return object()

        class Containers:
            def run(self, **kwargs):
                sdk.runs.append(FakeContainer(kwargs, FakeVM()))
                return sdk.runs[-1]

            def list(self, **kwargs):
                return []

        self.images, self.containers = Images(), Containers()


def test_osworld_image_runs_with_osworlds_spec_and_is_replaced_on_reset(tmp_path, caplog):
    qcow2 = tmp_path / "Ubuntu.qcow2"
    qcow2.write_bytes(b"QFI\xfb")
    sdk = FakeDockerSDK()
    p = DockerProvider(
        image=OSWORLD_IMAGE, vm_path=qcow2, kvm=False, docker_client=sdk, start_timeout=10
    )
    with caplog.at_level(logging.WARNING):
        client = p.start()
    assert "KVM=N" in caplog.text
    spec = dict(sdk.runs[0].kwargs)
    labels = spec.pop("labels")
    assert spec == {
        k: v
        for k, v in osworld_container_spec(OSWORLD_IMAGE, str(qcow2), kvm=False).items()
        if k != "labels"
    }
    assert labels["osworld-gym.kind"] == "osworld-vm" and labels["osworld-gym.managed"] == "true"
    assert isinstance(client, OSWorldCompatClient)
    assert p.ports["server"] == sdk.runs[0].vm.port
    assert client.base_url == f"http://127.0.0.1:{sdk.runs[0].vm.port}"
    assert client.screenshot_array().shape == (48, 64, 3)
    client.run_actions([Click(5, 6), TypeText("hi")])
    assert sdk.runs[0].vm.executed == [
        {
            "command": [
                "python",
                "-c",
                OSWORLD_PYAUTOGUI_PREFIX + "pyautogui.click(x=5, y=6, button='left', "
                "clicks=1)\npyautogui.write('hi')",
            ],
            "shell": False,
        }
    ]

    p.reset_state()  # the first reset after a start finds a fresh VM
    assert len(sdk.runs) == 1
    p.reset_state()  # a used VM is replaced, and the env's client follows it
    assert len(sdk.runs) == 2 and sdk.runs[0].removed
    assert p.start() is client and client.base_url.endswith(f":{sdk.runs[1].vm.port}")
    assert np.array_equal(client.screenshot_array()[0, 0], [10, 20, 30])
    p.stop()
    assert sdk.runs[1].removed and not p.running


def test_osworld_image_needs_its_vm_file(tmp_path):
    p = DockerProvider(
        image=OSWORLD_IMAGE, vm_path=tmp_path / "missing.qcow2", docker_client=FakeDockerSDK()
    )
    with pytest.raises(MissingDependencyError, match="Ubuntu.qcow2"):
        p.start()


# ---- the examples in the docstrings -------------------------------------------------------------
BACKEND_MODULES = [
    "osworld_gym.client",
    "osworld_gym.providers.docker",
    "osworld_gym.providers.remote",
    "osworld_gym.providers.vnc",
    "osworld_gym.image",
    "osworld_gym.image.recipe",
    "osworld_gym.image.containers",
    "osworld_gym.image.build",
    "osworld_gym.image.cli",
]


@pytest.mark.parametrize("name", BACKEND_MODULES)
def test_backend_docstring_examples(name: str):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


# ---- what the desktops offer tasks: configured, never assumed ---------------------------------
def test_osworlds_vm_image_counts_only_with_its_disk_and_apps_picks_our_image():
    with pytest.raises(ValueError, match="pass vm_path="):
        DockerProvider.config_capabilities({"image": OSWORLD_IMAGE})
    caps = DockerProvider.config_capabilities({"vm_path": "/vm/Ubuntu.qcow2"})
    assert caps.vscode and caps.network and caps.source == "OSWorld's VM image (/vm/Ubuntu.qcow2)"
    assert DockerProvider(apps="full").image == default_tag("full")
    assert DockerProvider().image == default_tag("minimal")


def test_an_image_manifest_classifies_tasks_as_the_desktop_it_was_probed_on():
    """The manifest is :func:`local_capabilities` run inside the image: probed here, it must
    classify every official task exactly as this machine's local desktop does."""
    from osworld_examples import OFFICIAL, PRESENT, SKIP_REASON
    from osworld_gym.providers.manifest import manifest_capabilities, probe
    from osworld_gym.support import classify, local_capabilities
    from osworld_gym.support.coverage import official_tasks

    if not PRESENT:
        pytest.skip(SKIP_REASON)
    manifest = json.loads(json.dumps(probe("full")))  # as written into the image and read back
    for profile in ("ubuntu", "openbox"):
        local = local_capabilities(profile)
        image = manifest_capabilities(manifest, profile=profile, network="none")
        assert image.apps == local.apps and image.gsettings == local.gsettings
        for _, raw in official_tasks(OFFICIAL):
            a, b = classify(raw, local), classify(raw, image)
            assert a.supported == b.supported, (raw["id"], a.reason, b.reason)
