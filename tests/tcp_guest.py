"""A guest server on TCP with its own Xvfb, reached by URL as a remote desktop would be.

Shared by the remote, VNC, conformance and remote-desktop trainer tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from osworld_gym.client import GuestClient
from osworld_gym.errors import GuestError

TOKEN = "remote-test-token-0123456789"
W, H = 1280, 720


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_display(start: int = 140) -> str:
    for n in range(start, start + 300):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return f":{n}"
    raise RuntimeError("no free X display number")


@dataclass
class TcpGuest:
    proc: subprocess.Popen
    url: str
    display: str
    home: Path
    log: Path

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def launch_guest(root: Path, size: tuple[int, int] = (W, H)) -> TcpGuest:
    """Our guest server on 127.0.0.1:<free port> with its own Xvfb; ``python`` on its PATH is
    this interpreter (which has pyautogui, as OSWorld's image has)."""
    for prog in ("Xvfb", "openbox", "xterm"):
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} is not installed")
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    # a wrapper, not a symlink: a symlinked venv python does not find its venv
    (bindir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python").chmod(0o755)
    (root / "token").write_text(TOKEN)
    (root / "Xauthority").touch()  # python-xlib (ours and pyautogui's) wants the file to exist
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "XAUTHORITY": str(root / "Xauthority"),
    }
    log = root / "guest.log"
    for _ in range(3):  # a display or port may be taken between our check and the start
        port, display = free_port(), free_display()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "osworld_gym.guest",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--token-file",
                    str(root / "token"),
                    "--start-x",
                    "--display",
                    display,
                    "--screen",
                    f"{size[0]}x{size[1]}x24",
                    "--home",
                    str(root / "home"),
                    "--tmp-dir",
                    str(root / "tmp"),
                    "--state-dir",
                    str(root / "state"),
                    "--exit-with-parent",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        guest = TcpGuest(proc, f"http://127.0.0.1:{port}", display, root / "home", log)
        with GuestClient(base_url=guest.url, token=TOKEN) as c:
            try:
                c.wait_ready(timeout=30)
                return guest
            except GuestError:
                guest.stop()
    pytest.fail(f"guest did not start: {log.read_text()[-2000:]}")


MKDIR_SOLUTION = [
    "pyautogui.hotkey('ctrl', 'alt', 't')",
    "time.sleep(2)",
    "pyautogui.write('mkdir -p ~/Desktop/projects\\n')",
    "time.sleep(1)",
]


def launch_guests(tmp_path_factory, n: int) -> Iterator[list[TcpGuest]]:
    """``n`` guest servers of their own (a module fixture's body), stopped at its end."""
    started: list[TcpGuest] = []
    try:
        for i in range(n):
            started.append(launch_guest(tmp_path_factory.mktemp(f"guest{i}")))
        yield started
    finally:
        for g in started:
            g.stop()
