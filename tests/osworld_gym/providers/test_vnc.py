"""VNC transport against a real VNC server: x11vnc on an Xvfb display.

Screenshots come from RFB framebuffer updates and must equal the X display's own pixels; input
goes as RFB key and pointer events and must reach the X server (text typed into an xterm runs,
the pointer moves and buttons press). Without a guest URL, setup and evaluation are
unavailable and say so; with one, a whole task runs with pixels and input over VNC.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import mss
import numpy as np
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.errors import GuestError
from osworld_gym.protocol.primitives import Click, MouseDown, MouseUp, MoveTo, Press, TypeText
from Xlib import X
from Xlib import display as xdisplay

pytest.importorskip("vncdotool", reason="the vnc extra is not installed")
from osworld_gym.providers.vnc import VNCClient, VNCProvider
from tcp_guest import MKDIR_SOLUTION, TOKEN, free_display, free_port, launch_guest

pytestmark = pytest.mark.desktop

for _prog in ("Xvfb", "x11vnc", "xterm"):
    if shutil.which(_prog) is None:
        pytest.skip(
            f"{_prog} is not installed (apt-get install xvfb x11vnc xterm)", allow_module_level=True
        )

W, H = 800, 600


@dataclass
class VncDesktop:
    display: str
    server: str
    procs: list[subprocess.Popen]
    env: dict[str, str]


def start_x11vnc(display: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """x11vnc on ``display``, loopback only, no password, cursor not drawn into the frame."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                "x11vnc",
                "-display",
                display,
                "-rfbport",
                str(port),
                "-localhost",
                "-nopw",
                "-forever",
                "-shared",
                "-nocursor",
                "-quiet",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 20
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"127.0.0.1::{port}"
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"x11vnc did not start: {log.read_text()[-1500:]}")
        time.sleep(0.05)


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def desk(tmp_path_factory) -> VncDesktop:
    """Xvfb + x11vnc + an xterm at the top left (no window manager: keys go under the pointer)."""
    root = tmp_path_factory.mktemp("vnc")
    (root / "Xauthority").touch()
    env = {**os.environ, "XAUTHORITY": str(root / "Xauthority"), "HOME": str(root)}
    display = free_display(300)
    xvfb = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", f"{W}x{H}x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs = [xvfb]
    try:
        n = display[1:]
        deadline = time.monotonic() + 15
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
            time.sleep(0.05)
        vnc, server = start_x11vnc(display, env, root / "x11vnc.log")
        procs.append(vnc)
        procs.append(
            subprocess.Popen(
                [
                    "xterm",
                    "-display",
                    display,
                    "-geometry",
                    "80x24+0+0",
                    "-e",
                    "bash",
                    "--norc",
                    "--noprofile",
                ],
                env={**env, "PS1": "$ "},
                cwd=root,
            )
        )
        yield VncDesktop(display, server, procs, env)
    finally:
        stop(procs)


def x_frame(display: str) -> np.ndarray:
    with (getattr(mss, "MSS", None) or mss.mss)(display=display) as s:
        return np.array(s.grab(s.monitors[1]))[:, :, 2::-1]


def test_screenshots_over_vnc_are_the_x_display(desk):
    with VNCClient(desk.server, timeout=20) as c:
        c.wait_ready(timeout=20)
        deadline = time.monotonic() + 10
        while True:  # x11vnc polls the screen: wait until its framebuffer has caught up
            frame, truth = c.screenshot_array(), x_frame(desk.display)
            if np.array_equal(frame, truth):
                break
            assert time.monotonic() < deadline, f"{np.mean(frame != truth):.4f} of pixels differ"
            time.sleep(0.2)
        assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
        assert frame.std() > 0, "the xterm should be visible, not a blank screen"
        assert c.screen_size() == (W, H)


def test_text_typed_over_vnc_runs_in_the_xterm(desk, tmp_path):
    out = tmp_path / "typed.txt"
    with VNCClient(desk.server, timeout=20) as c:
        c.run_actions([MoveTo(100, 100), TypeText(f"echo 'Hi, VNC! 42' > {out}"), Press("enter")])
        deadline = time.monotonic() + 10
        while not (out.exists() and out.read_text()):
            assert time.monotonic() < deadline, "the typed command never ran"
            time.sleep(0.1)
    assert out.read_text() == "Hi, VNC! 42\n"


def test_pointer_events_over_vnc_move_and_press(desk, monkeypatch):
    monkeypatch.setenv("XAUTHORITY", desk.env["XAUTHORITY"])  # python-xlib wants the file
    d = xdisplay.Display(desk.display)
    try:
        root = d.screen().root
        with VNCClient(desk.server, timeout=20) as c:
            c.run_actions([MoveTo(321, 123)])
            c.screenshot_array()  # a round trip: the server has processed the events before it
            p = root.query_pointer()
            assert (p.root_x, p.root_y) == (321, 123)
            c.run_actions([MouseDown("left")])
            c.screenshot_array()
            assert root.query_pointer().mask & X.Button1Mask
            c.run_actions([MouseUp("left"), Click(400, 300, button="right")])
            c.screenshot_array()
            p = root.query_pointer()
            assert not p.mask & (X.Button1Mask | X.Button3Mask)
            assert (p.root_x, p.root_y) == (400, 300)
    finally:
        d.close()


def test_without_a_guest_url_setup_and_evaluation_are_unavailable(desk):
    p = VNCProvider(screen_size=(W, H), vnc=desk.server, start_timeout=20)
    try:
        client = p.start()
        assert client.screenshot_array().shape == (H, W, 3)
        with pytest.raises(GuestError, match="guest_url") as e:
            client.execute(["true"])
        assert e.value.status == 501
        p.reset_state()  # nothing to reset with: a warning, not an error
    finally:
        p.stop()
    assert not p.running


def test_a_task_runs_with_pixels_and_input_over_vnc_and_the_rest_over_the_guest(tmp_path):
    guest = launch_guest(tmp_path / "guest", size=(W, H))
    env_x = {**os.environ, "XAUTHORITY": str(tmp_path / "guest" / "Xauthority")}
    vnc, server = start_x11vnc(guest.display, env_x, tmp_path / "x11vnc.log")
    env = gym.make(
        "OSWorld-v0",
        provider="vnc",
        tasks="builtin",
        screen_size=(W, H),
        max_steps=20,
        provider_kwargs={"vnc": server, "guest_url": guest.url, "token": TOKEN},
    )
    try:
        obs, _ = env.reset(options={"task": "os-mkdir-001"})
        assert obs["screenshot"].shape == (H, W, 3)
        for action in MKDIR_SOLUTION:
            *_, info = env.step(action)
            assert info["action_error"] is None and info["infra_error"] is None, info
        _, reward, terminated, _, _ = env.step("DONE")
        assert terminated and reward == 1.0
        env.reset(options={"task": "os-mkdir-001"})  # reset through the guest
        _, reward, *_ = env.step("DONE")
        assert reward == 0.0
    finally:
        env.close()
        stop([vnc])
        guest.stop()
