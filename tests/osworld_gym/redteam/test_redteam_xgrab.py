"""Red team: a player's ``XGrabServer`` must not stall the judge (issue 17, item d).

Xvfb runs without authorization, so a process the player starts can grab the X server and
never let go. Before the fix every judge X request (screenshot, cursor, input) then blocked,
the step timed out and came back as ``infra_error``: an agent-caused failure hidden as the
infrastructure's. The guest's X connections are now impervious to grabs (XTEST GrabControl,
``osworld_gym.guest.xgrab``). The grabber here speaks the X protocol over a plain socket, so it
needs nothing but the desktop's ``python3``: any player can run it.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import osworld_gym  # noqa: F401  (registers OSWorld-v0)
import pytest
from redteam import player

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="judge separation needs a root host (CI runs as root)"
)

#: Connect to $DISPLAY without auth (as every desktop client may), then either grab the server
#: and hold it (``grab``: writes ~/xgrab.ok once the server answered after the grab) or make a
#: round trip and print "answered" (``probe``: shows whether an ordinary client is stalled).
XCLIENT = r"""
import os, socket, struct, sys, time
n = os.environ.get("DISPLAY", ":0").split(":", 1)[1].split(".")[0]
s = None
for addr in ("\0/tmp/.X11-unix/X" + n, "/tmp/.X11-unix/X" + n):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(addr); break
    except OSError:
        s = None
s.sendall(struct.pack("<BxHHHHxx", ord("l"), 11, 0, 0, 0))
head = s.recv(8)
assert head[0] == 1, head
need = struct.unpack("<H", head[6:8])[0] * 4
while need > 0:
    need -= len(s.recv(need))
def roundtrip():
    s.sendall(struct.pack("<BxH", 43, 1))  # GetInputFocus
    got = b""
    while len(got) < 32:
        got += s.recv(32 - len(got))
if sys.argv[1] == "grab":
    s.sendall(struct.pack("<BxH", 36, 1))  # GrabServer, never ungrabbed
    roundtrip()
    open(os.path.expanduser("~/xgrab.ok"), "w").write(str(os.getpid()))
    while True:
        time.sleep(60)
roundtrip()
print("answered")
"""


@pytest.fixture(scope="module")
def env():
    e = gym.make("OSWorld-v0", provider="local", tasks="builtin", screen_size=(1024, 768))
    e.reset(options={"task": "os-mkdir-001"})
    try:
        yield e
    finally:
        e.close()


def test_a_player_holding_an_x_server_grab_does_not_stall_the_step_or_the_score(env):
    obs, _ = env.reset(options={"task": "os-mkdir-001"})
    out = player(
        env,
        "rm -f ~/xgrab.ok; cat > ~/xclient.py <<'EOF'\n" + XCLIENT + "EOF\n"
        "setsid python3 ~/xclient.py grab </dev/null >/dev/null 2>~/xgrab.err &",
    )
    assert out["returncode"] == 0, out
    try:
        deadline = time.monotonic() + 20
        while player(env, "test -s ~/xgrab.ok")["returncode"] != 0:
            assert time.monotonic() < deadline, player(env, "cat ~/xgrab.err")
            time.sleep(0.3)
        # the attack is live: an ordinary client of the same desktop now gets no answer
        probe = player(env, "timeout 3 python3 ~/xclient.py probe; echo rc=$?")
        assert "answered" not in probe["output"] and "rc=124" in probe["output"], probe

        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = env.step("pyautogui.click(500, 400)")
        assert info["infra_error"] is None, info
        assert not terminated and not truncated and reward == 0.0
        assert obs["screenshot"].shape == (768, 1024, 3) and np.asarray(obs["screenshot"]).any()
        assert time.monotonic() - t0 < 20, "the step waited on the grab"

        _, reward, terminated, _, info = env.step("DONE")
        assert info["infra_error"] is None, info
        assert terminated and reward == 0.0  # unsolved: scored normally, not excluded
    finally:
        player(env, "kill -9 $(cat ~/xgrab.ok 2>/dev/null) 2>/dev/null; rm -f ~/xgrab.ok")
    # the grab died with its client: the desktop answers ordinary clients again
    probe = player(env, "timeout 5 python3 ~/xclient.py probe 2>&1; echo rc=$?; rm ~/xclient.py")
    assert "answered" in probe["output"], probe
