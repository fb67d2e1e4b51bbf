"""The google-chrome shim: OSWorld's Chrome steps run Debian's Chromium unchanged.

On the real local desktop: ``launch ["google-chrome", "--remote-debugging-port=1337"]`` starts
Chromium with Chrome's profile directory, DevTools answer on 1337 (and 9222 through the tasks'
``socat``), ``~/.config/google-chrome/Default/Preferences`` is written, and ``launch ["pkill",
"chrome"]`` stops it, after which the same launch works again (OSWorld's postconfig pattern).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import ROOT
from tcp_guest import free_port

SHIMS = ROOT / "packages/osworld_gym/src/osworld_gym/guest/shims"
needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Chromium is not installed (apt-get install -y chromium)",
)

DEVTOOLS_VERSION = (
    "import json, sys, urllib.request\n"
    "try:\n"
    "    r = urllib.request.urlopen('http://127.0.0.1:%d/json/version', timeout=2)\n"
    "    print(json.loads(r.read())['Browser'])\n"
    "except Exception as e:\n"
    "    print('DOWN', e)\n"
)


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.25)


def launch_chrome_task(*extra_steps: dict) -> dict:
    return {
        "id": "chrome-shim",
        "instruction": "use the browser",
        "related_apps": ["chrome"],
        "config": [
            {
                "type": "launch",
                "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]},
            },
            {
                "type": "launch",
                "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]},
            },
            *extra_steps,
        ],
        "evaluator": {"func": "infeasible"},
    }


@pytest.mark.desktop
@pytest.mark.slow
@needs_chromium
def test_osworld_chrome_steps_on_the_local_desktop(local_env):
    local_env.reset(options={"task": launch_chrome_task()})
    client = local_env.unwrapped.provider.start()

    def devtools(port: int) -> str:
        return client.execute(["python3", "-c", DEVTOOLS_VERSION % port])["output"]

    def sh(command: str) -> str:
        return client.execute(command, shell=True)["output"]

    wait_for(lambda: devtools(1337).startswith("Chrome/"), what="DevTools on 1337")
    assert devtools(9222).startswith("Chrome/")  # through the task's socat
    assert sh("pgrep -x chrome | wc -l").strip() == "1"  # the process `pkill chrome` finds
    assert "--user-data-dir=/home/user/.config/google-chrome" in sh("pgrep -a chromium")
    preferences = "/home/user/.config/google-chrome/Default/Preferences"
    wait_for(lambda: client.get_file(preferences) is not None, what="Chrome's Preferences")

    # OSWorld's postconfig: pkill chrome, relaunch, sleep, then read the profile
    client.launch(["pkill", "chrome"])
    wait_for(
        lambda: sh("pgrep chromium || true").strip() == "", timeout=20, what="Chromium to exit"
    )
    assert devtools(1337).startswith("DOWN")
    json.loads(client.get_file(preferences))  # written completely on the clean shutdown
    client.launch(["google-chrome", "--remote-debugging-port=1337"])
    wait_for(lambda: devtools(1337).startswith("Chrome/"), what="DevTools after the relaunch")


@pytest.mark.slow
@needs_chromium
def test_shim_flags_supervisor_name_and_signal_forwarding(tmp_path):
    """Headless on this machine: the task's flags pass through, the supervisor is named
    ``chrome`` and a TERM to it stops Chromium cleanly (profile written)."""
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [
            str(SHIMS / "google-chrome-stable"),
            "--headless",
            f"--remote-debugging-port={port}",
            "about:blank",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        wait_for(answers, what="DevTools on the task's port")
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "chrome"
        children = subprocess.run(
            ["pgrep", "-a", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout
        assert f"--user-data-dir={tmp_path}/.config/google-chrome" in children
        assert "--remote-debugging-port=1337" not in children  # the task named its own port
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) in (0, 143, -15)
        assert (tmp_path / ".config/google-chrome/Default/Preferences").is_file()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
