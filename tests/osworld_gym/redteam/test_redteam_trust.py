"""Red team: what the judge trusts to keep running during an evaluation command (issue 17,
second review). Each attack runs as the player (the desktop user, uid 1000, no capabilities)
through the real local provider; each succeeded before the trust rule was narrowed.
"""

from __future__ import annotations

import os
import shlex
import time

import gymnasium as gym
import pytest
from osworld_gym.errors import GuestError
from redteam import player

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="judge separation needs a root host (CI runs as root)"
)


@pytest.fixture(scope="module")
def env():
    e = gym.make("OSWorld-v0", provider="local", tasks="builtin", screen_size=(1024, 768))
    e.reset(options={"task": "os-mkdir-001"})
    try:
        yield e
    finally:
        e.close()


def judge(env, command: str, timeout: float = 60) -> dict:
    """A shell command the way an evaluator's ``vm_command_line`` runs it."""
    return env.unwrapped.provider.start().execute(command, shell=True, timeout=timeout)


def wait_served(env, port: int, path: str = "/", needle: str = "FORGED") -> str:
    """Wait until the player itself sees ``needle`` served on ``port``."""
    out = player(
        env,
        f"for i in $(seq 100); do curl -s -u :password "
        f"http://127.0.0.1:{port}{path} | grep -q {needle} && echo up && break; "
        f"sleep 0.2; done",
    )
    assert "up" in out["output"], (out, player(env, "ps -eo pid,ppid,tty,args")["output"])
    return out["output"]


def refused(env, port: int, path: str = "/") -> GuestError:
    with pytest.raises(GuestError) as e:
        judge(env, f"curl -s -u :password http://127.0.0.1:{port}{path}")
    assert e.value.status == 409, e.value
    return e.value


SERVICE = """[D-BUS Service]
Name=org.example.Forge
Exec=/usr/bin/socat TCP-LISTEN:1337,fork,reuseaddr SYSTEM:"cat /home/user/.forged"
"""


def test_a_relay_the_session_bus_starts_for_the_agent_is_not_trusted(env):
    """Finding 1: a session-bus service file in the player's home makes the bus (the desktop's
    infrastructure) start ``socat`` for it, with no terminal ancestor. It serves forged DevTools
    JSON on Chromium's port; the judge must refuse to believe it (409), not read it."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    client.upload(
        "/home/user/.local/share/dbus-1/services/org.example.Forge.service", SERVICE.encode()
    )
    client.upload("/home/user/.forged", b'HTTP/1.0 200 OK\r\n\r\n[{"url": "FORGED"}]\n')
    out = player(
        env,
        "dbus-send --session --print-reply --dest=org.example.Forge / "
        "org.example.Forge.Ping 2>&1; true",
    )
    wait_served(env, 1337, "/json/list")
    # the relay really is the bus's child, no terminal: what the old rule trusted
    tree = player(env, "ps -o ppid=,tty=,comm= -C socat")["output"].split()
    assert tree[1:3] == ["?", "socat"], (tree, out)
    assert "dbus-daemon" in player(env, f"ps -o comm= -p {tree[0]}")["output"], tree
    assert "socat" in str(refused(env, 1337, "/json/list"))


def test_a_relay_openbox_starts_for_the_agent_is_not_trusted(env):
    """Finding 1, through the window manager: a key binding in the player's own openbox
    config runs ``socat`` as openbox's child once the agent presses it."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    client.upload("/home/user/.forged", b"HTTP/1.0 200 OK\r\n\r\nFORGED\n")
    rc = (
        '<?xml version="1.0"?><openbox_config xmlns="http://openbox.org/3.4/rc">'
        '<keyboard><keybind key="W-F12"><action name="Execute"><command>'
        '/usr/bin/socat TCP-LISTEN:1338,fork,reuseaddr SYSTEM:"cat /home/user/.forged"'
        "</command></action></keybind></keyboard></openbox_config>"
    )
    client.upload("/home/user/.config/openbox/rc.xml", rc.encode())
    player(env, "openbox --reconfigure; sleep 0.5")
    env.step("pyautogui.hotkey('win', 'f12')")
    try:
        wait_served(env, 1338)
    except AssertionError:
        pytest.skip("this desktop's openbox does not read ~/.config/openbox/rc.xml")
    assert "socat" in str(refused(env, 1338))


FAKE_STATUS = (
    "<root><state>playing</state><information><category name='meta'>"
    "<info name='filename'>FORGED.wav</info></category></information></root>"
)


def test_vlc_serving_the_agents_http_src_is_not_trusted(env):
    """Finding 2: VLC is trusted whoever starts it, but ``--extraintf http --http-src ~/fake``
    makes it serve the agent's ``requests/status.xml``, which the VLC getter reads."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    client.upload("/home/user/fake/requests/status.xml", FAKE_STATUS.encode())
    argv = [
        "vlc",
        "-I",
        "dummy",
        "--extraintf",
        "http",
        "--http-host",
        "127.0.0.1",
        "--http-port",
        "8080",
        "--http-password",
        "password",
        "--http-src",
        "/home/user/fake",
    ]
    player(env, f"setsid {shlex.join(argv)} </dev/null >/dev/null 2>&1 &")
    wait_served(env, 8080, "/requests/status.xml")
    assert "vlc" in str(refused(env, 8080, "/requests/status.xml"))
    player(env, "pkill -x vlc; true")


def test_chromium_with_the_agents_library_path_is_not_trusted_but_a_clean_one_is(env):
    """Finding 2: ``LD_LIBRARY_PATH`` (or ``LD_PRELOAD``) in an agent-started Chromium's
    environment lets the agent's code answer DevTools (here a copy of a library it links, from
    the home: the agent's own would do anything); the same browser started clean is a real
    browser reporting its real state, and is believed."""
    env.reset(options={"task": "os-mkdir-001"})
    start = (
        "setsid {env} chromium --headless=new --no-sandbox --user-data-dir=/tmp/h17-{n} "
        "--remote-debugging-port={port} about:blank </dev/null >/dev/null 2>&1 &"
    )
    player(
        env,
        "mkdir -p ~/lib && cp /lib/x86_64-linux-gnu/libz.so.1 ~/lib/ && "
        + start.format(env="env LD_LIBRARY_PATH=/home/user/lib", n="a", port=1339),
    )
    wait_served(env, 1339, "/json/version", "Browser")
    assert "chromium" in str(refused(env, 1339, "/json/version"))
    player(env, "pkill -f h17-[a]; " + start.format(env="", n="b", port=1340))
    wait_served(env, 1340, "/json/version", "Browser")
    assert "Browser" in judge(env, "curl -s http://127.0.0.1:1340/json/version")["output"]
    player(env, "pkill -f h17-[b]; true")


def test_a_process_a_trusted_one_forks_during_the_hold_cannot_write_the_result(env):
    """Finding 3: the trusted set was taken once, at the start of the hold, and new children
    of trusted processes ran free. Here a trusted process (a setup root: the agent would get
    one to spawn for it another way, e.g. an app's handler) starts a writer 1 s into the
    evaluation command; the command must not see what the writer writes while it runs, and
    the writer, frozen, writes after it."""
    env.reset(options={"task": "os-mkdir-001"})
    client = env.unwrapped.provider.start()
    player(env, "rm -f ~/Desktop/forged ~/.go")
    # it writes 0.2 s after it starts: the watcher polls every millisecond (a process forked
    # during a hold runs until the watcher sees it: see Freezer._watch)
    writer = "import time; time.sleep(0.2); open('/home/user/Desktop/forged', 'w').write('FORGED')"
    # it forks once the evaluation command is running (it touches ~/.go), so during the hold
    client.launch(
        [
            "python3",
            "-c",
            "import os, subprocess, time\n"
            "while not os.path.exists('/home/user/.go'): time.sleep(0.05)\n"
            f"subprocess.run(['python3', '-c', {writer!r}])",
        ]
    )
    time.sleep(0.5)
    out = judge(env, "touch ~/.go; sleep 3; cat ~/Desktop/forged 2>/dev/null || echo clean")
    assert out["output"] == "clean\n", out
    deadline = time.monotonic() + 10  # thawed afterwards: it was held, not killed
    while "FORGED" not in player(env, "cat ~/Desktop/forged 2>/dev/null; true")["output"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
