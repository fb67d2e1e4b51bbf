"""The remote provider and the OSWorld-compat client, against our real guest server on TCP.

One guest per module: ``python -m osworld_gym.guest --host 127.0.0.1 --port N --start-x`` on its
own Xvfb display. The remote provider reaches it by URL exactly as it would reach a guest on
another machine. For the OSWorld-compat client the same server stands in for OSWorld's: the
client renders actions as pyautogui code and POSTs ``python -c ...`` to ``/execute``, which our
server runs with a ``python`` that has pyautogui (this test venv's). The only difference from
OSWorld's server is that ours insists on a token, so the compat client is given one here.
"""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from osworld_gym.client import OSWORLD_PYAUTOGUI_PREFIX, GuestClient, OSWorldCompatClient
from osworld_gym.errors import GuestError
from osworld_gym.protocol.primitives import Click, Hotkey, MoveTo, Press, TypeText, Wait
from osworld_gym.providers import make_provider
from osworld_gym.providers.remote import RemoteProvider
from tcp_guest import MKDIR_SOLUTION, TOKEN, H, TcpGuest, W, launch_guest

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def guest(tmp_path_factory) -> TcpGuest:
    g = launch_guest(tmp_path_factory.mktemp("tcp-guest"))
    yield g
    g.stop()


#: os-mkdir-001 solved through the GUI with ``~``: this guest's home is a temp dir, not
#: /home/user as in the built-in oracle (which only a sandboxed or containerised desktop has)


def wait_file(path: Path, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in (got := path.read_text()):
            return got
        time.sleep(0.1)
    raise AssertionError(
        f"{path} never contained {text!r}: {path.read_text() if path.exists() else 'missing'}"
    )


def open_xterm(client: GuestClient, guest: TcpGuest) -> None:
    """An xterm under the pointer, focused (so typed keys reach it)."""
    client.reset_desktop()  # kills this desktop's apps only (never pkill: the guest is on the host)
    client.launch(["xterm", "-geometry", "80x20+0+0"])
    deadline = time.monotonic() + 15
    while "XTerm" not in client.execute(["wmctrl", "-lx"])["output"]:
        assert time.monotonic() < deadline, "xterm did not appear"
        time.sleep(0.1)
    client.activate_window("xterm", by_class=True)


# ---- remote provider ----------------------------------------------------------------------------
def test_remote_provider_runs_a_task_on_our_guest_by_url(guest):
    env = gym.make(
        "OSWorld-v0",
        provider="remote",
        tasks="builtin",
        screen_size=(W, H),
        max_steps=20,
        provider_kwargs={"url": guest.url, "token": TOKEN},
    )
    try:
        assert isinstance(env.unwrapped.provider, RemoteProvider)
        obs, info = env.reset(options={"task": "os-mkdir-001"})
        assert obs["screenshot"].shape == (H, W, 3)
        for action in MKDIR_SOLUTION:
            *_, info = env.step(action)
            assert info["action_error"] is None and info["infra_error"] is None
        _, reward, terminated, _, _ = env.step("DONE")
        assert terminated and reward == 1.0
        assert (guest.home / "Desktop" / "projects").is_dir()
        env.reset(options={"task": "os-mkdir-001"})  # the guest's reset restores the home
        assert not (guest.home / "Desktop" / "projects").exists()
        _, reward, *_ = env.step("DONE")
        assert reward == 0.0
    finally:
        env.close()
    assert guest.proc.poll() is None, "closing the env must leave a remote desktop running"


def test_remote_provider_refuses_our_guest_without_token_and_reports_a_wrong_one(guest):
    with pytest.raises(ValueError, match="token"):
        make_provider("remote", url=guest.url)
    p = make_provider("remote", url=guest.url, token="wrong", start_timeout=5)
    with pytest.raises(GuestError) as e:
        p.start()
    assert e.value.status == 401 and not p.running


def test_remote_provider_reset_modes():
    with pytest.raises(ValueError, match="cannot reset"):
        RemoteProvider(url="http://127.0.0.1:5000", osworld_compat=True, reset="guest")
    with pytest.raises(ValueError, match="http"):
        RemoteProvider(url="127.0.0.1:5000", token="t")
    assert RemoteProvider(url="http://127.0.0.1:5000", token="t").reset == "guest"


def test_remote_reset_hook_is_called_between_episodes(guest):
    calls = []
    p = RemoteProvider(url=guest.url, token=TOKEN, reset=lambda prov: calls.append(prov))
    try:
        p.start()
        p.reset_state()
        assert calls == [p]
    finally:
        p.stop()


# ---- OSWorld-compat client ----------------------------------------------------------------------
def test_compat_client_sends_osworlds_execute_command():
    c = OSWorldCompatClient("http://127.0.0.1:5000")
    cmd = c.pyautogui_command([Click(10, 20), TypeText("a<b"), Press("<")])
    assert cmd[:2] == ["python", "-c"]
    assert cmd[2].startswith("import pyautogui; import time; pyautogui.FAILSAFE = False; ")
    assert cmd[2] == OSWORLD_PYAUTOGUI_PREFIX + "\n".join(
        [
            "pyautogui.click(x=10, y=20, button='left', clicks=1)",
            "pyautogui.write('a')",
            "pyautogui.hotkey('shift', ',')",
            "pyautogui.write('b')",
            "pyautogui.hotkey('shift', ',')",
        ]
    )
    c.close()


def test_compat_client_cannot_reset_a_desktop():
    with OSWorldCompatClient("http://127.0.0.1:5000") as c, pytest.raises(GuestError) as e:
        c.reset_desktop()
    assert e.value.status == 501 and "restart" in str(e.value)


def test_compat_client_observes_png_screenshots_and_acts_with_pyautogui(guest, tmp_path):
    ours = GuestClient(base_url=guest.url, token=TOKEN)
    compat = OSWorldCompatClient(guest.url, token=TOKEN)
    try:
        compat.wait_ready(timeout=10)
        frame = compat.screenshot_array()
        assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
        # the PNG path and our raw path show the same screen (the cursor is drawn in both)
        assert np.mean(frame != ours.screenshot_array(cursor=True)) < 0.01

        open_xterm(ours, guest)
        out = tmp_path / "typed.txt"
        result = compat.run_actions(
            [MoveTo(200, 100), Wait(0.2), TypeText(f"echo 'x<y>z' > {out}"), Press("enter")]
        )
        assert result["executed"] == 3 and result["timings"]["exec_ms"] > 0
        assert wait_file(out, "x<y>z") == "x<y>z\n"
        compat.run_actions([Hotkey(("ctrl", "d"))])  # exit the shell: the xterm closes
        deadline = time.monotonic() + 10
        while "XTerm" in ours.execute(["wmctrl", "-lx"])["output"]:
            assert time.monotonic() < deadline, "ctrl+d did not reach the xterm"
            time.sleep(0.1)
    finally:
        ours.close()
        compat.close()


def test_compat_client_reports_pyautogui_failures_as_guest_errors(guest):
    with (
        OSWorldCompatClient(guest.url, token=TOKEN, python="/nonexistent/python") as c,
        pytest.raises(GuestError),
    ):
        c.run_actions([MoveTo(1, 1)])


def test_remote_provider_in_osworld_compat_mode_runs_a_task(guest):
    """The whole env through the compat client: actions as pyautogui code over /execute."""
    env = gym.make(
        "OSWorld-v0",
        provider="remote",
        tasks="builtin",
        screen_size=(W, H),
        max_steps=20,
        provider_kwargs={"url": guest.url, "token": TOKEN, "osworld_compat": True},
    )
    try:
        GuestClient(base_url=guest.url, token=TOKEN).reset_desktop()  # compat cannot reset
        env.reset(options={"task": "os-mkdir-001"})
        for action in MKDIR_SOLUTION:
            *_, info = env.step(action)
            assert info["action_error"] is None and info["infra_error"] is None, info
        _, reward, terminated, _, _ = env.step("DONE")
        assert terminated and reward == 1.0
    finally:
        env.close()
