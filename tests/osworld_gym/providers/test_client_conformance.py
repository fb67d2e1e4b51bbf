"""Every provider's client is a :class:`~osworld_gym.protocol.DesktopClient`, and behaves as one.

The same checks run over the local sandbox, a docker container, our guest reached by URL
(remote), a bare X server over VNC and the fake desktop: the env talks to each through the same
interface, so each must keep the same promises (shapes, timings, crash counts, what an action
returns, a second close). Real backends, small screens; the fake only beside them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from osworld_gym.errors import GuestError
from osworld_gym.protocol import DesktopClient
from osworld_gym.protocol.primitives import MoveTo
from osworld_gym.providers.base import Provider
from osworld_gym.providers.fake import FakeProvider
from osworld_gym.providers.local import LocalProvider
from osworld_gym.providers.remote import RemoteProvider
from tcp_guest import TOKEN, free_display, launch_guest

W, H = 640, 480


def _local(tmp: Path) -> Iterator[Provider]:
    yield LocalProvider(screen_size=(W, H))


def _fake(tmp: Path) -> Iterator[Provider]:
    yield FakeProvider(screen_size=(W, H))


def _remote(tmp: Path) -> Iterator[Provider]:
    guest = launch_guest(tmp, size=(W, H))
    try:
        yield RemoteProvider(screen_size=(W, H), url=guest.url, token=TOKEN)
    finally:
        guest.stop()


def _docker(tmp: Path) -> Iterator[Provider]:
    pytest.importorskip("docker", reason="the docker extra is not installed")
    from dockerd import daemon
    from osworld_gym.image.build import BuildOptions, build_image
    from osworld_gym.providers.docker import DockerProvider

    client = daemon()
    tag = (
        os.environ.get("OSWORLD_GYM_TEST_IMAGE_TAG")
        or build_image(BuildOptions(apps="minimal"), client=client).tag
    )
    yield DockerProvider(screen_size=(W, H), image=tag)


def _vnc(tmp: Path) -> Iterator[Provider]:
    pytest.importorskip("vncdotool", reason="the vnc extra is not installed")
    from osworld_gym.providers.vnc import VNCProvider
    from test_vnc import start_x11vnc

    for prog in ("Xvfb", "x11vnc"):
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} is not installed")
    (tmp / "Xauthority").touch()
    env = {**os.environ, "XAUTHORITY": str(tmp / "Xauthority"), "HOME": str(tmp)}
    display = free_display(400)
    xvfb = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", f"{W}x{H}x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs = [xvfb]
    try:
        deadline = time.monotonic() + 15
        while not Path(f"/tmp/.X11-unix/X{display[1:]}").exists():
            assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
            time.sleep(0.05)
        vnc, server = start_x11vnc(display, env, tmp / "x11vnc.log")
        procs.append(vnc)
        yield VNCProvider(screen_size=(W, H), vnc=server)
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=10)


BACKENDS = {"local": _local, "docker": _docker, "remote": _remote, "vnc": _vnc, "fake": _fake}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def started(request, tmp_path_factory) -> Iterator[tuple[str, Provider, DesktopClient]]:
    name = request.param
    if name != "fake":
        request.applymarker(pytest.mark.desktop)
    gen = BACKENDS[name](tmp_path_factory.mktemp(f"conformance-{name}"))
    provider = next(gen)
    try:
        client = provider.start()
        yield name, provider, client
    finally:
        provider.stop()
        gen.close()


def test_the_client_is_a_desktop_client(started):
    _, provider, client = started
    assert isinstance(client, DesktopClient)
    # an explicit implementation, not a stand-in that forwards unknown names somewhere
    assert "__getattr__" not in type(client).__dict__


def test_screens_are_rgb_arrays_of_the_screen_size_with_timings(started):
    _, _, client = started
    for cursor in (True, False):
        frame = client.screenshot_array(cursor=cursor)
        assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
        assert isinstance(client.last_timings, dict) and "capture_ms" in client.last_timings
        assert all(isinstance(v, float) for v in client.last_timings.values())
    assert client.screen_size() == (W, H)
    health = client.health()
    assert isinstance(health, dict)


def test_settled_frames_or_none_where_the_backend_cannot_tell(started):
    name, _, client = started
    settled = client.settled_screenshot_array(2.0)
    if name in ("local", "docker", "remote"):  # our guest server watches XDamage
        assert client.settle_supported and settled is not None
        frame, facts = settled
        assert frame.shape == (H, W, 3) and "settle_ms" in facts
        assert isinstance(client.last_settle_why, str)
    else:
        assert settled is None and not client.settle_supported


def test_actions_run_and_report_what_they_executed(started):
    _, _, client = started
    result = client.run_actions([MoveTo(x=W // 2, y=H // 2), MoveTo(x=W // 3, y=H // 3)])
    assert result["status"] == "success" and result["executed"] == 2
    assert isinstance(result["timings"]["exec_ms"], float)


def test_crash_counts_are_counts_where_the_backend_sees_crashes(started):
    name, _, client = started
    client.screenshot_array()
    if name == "vnc":  # no guest server: VNC cannot see processes
        assert client.crash_count is None
    else:
        assert isinstance(client.crash_count, int) and client.crash_count >= 0
    assert client.crashes_after(10**9) == []


def test_what_a_backend_cannot_do_is_a_clear_501(started):
    name, _, client = started
    if name != "vnc":
        assert client.execute(["true"])["returncode"] == 0
        return
    with pytest.raises(GuestError, match="needs a guest server") as e:
        client.execute(["true"])
    assert e.value.status == 501


def test_close_twice_is_harmless(started):
    name, provider, client = started
    client.close()
    client.close()
    provider.stop()
    provider.stop()
