"""What a task's last step set off finishes before the judge reads the desktop.

OSWorld's VM freezes nothing: when a postconfig step ends a terminal (``killall
gnome-terminal-server``), its shell writes ``~/.bash_history`` a few ms later, before any getter
runs. Our evaluator holds the player's processes still while it reads, so without a wait the
shell would be frozen before it wrote. The guest lets what the steps set off finish first (the
settle signal, from the last step's start); the hold itself is unchanged.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import osworld_gym  # noqa: F401 - registers OSWorld-v0
import pytest
from redteam import player

pytestmark = [
    pytest.mark.desktop,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the judge's hold needs a root host (CI runs as root)"
    ),
]

#: A process of the agent's that, told to stop, works for a while (``argv[1]`` s of CPU) before
#: it writes what it has and exits: bash saving its history, an app saving.
FLUSHER = """
import signal, sys, time
def stop(*_):
    t = time.process_time()
    while time.process_time() - t < float(sys.argv[1]):
        pass
    with open("/home/user/flushed", "w") as f:
        f.write("flushed\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open("/home/user/flusher-ready", "w").close()
while True:
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def env():
    e = gym.make("OSWorld-v0", provider="local", tasks="builtin", screen_size=(1024, 768))
    e.reset(options={"task": "os-mkdir-001"})
    try:
        yield e
    finally:
        e.close()


def _client(env):
    return env.unwrapped.provider.start()


def _start_flusher(env, work_s: float) -> None:
    env.reset(options={"task": "os-mkdir-001"})
    _client(env).upload("/home/user/.flusher.py", FLUSHER.encode())
    # as the agent would from its terminal: detached, so the judge does not trust it
    out = player(env, f"setsid python3 ~/.flusher.py {work_s} </dev/null >/dev/null 2>&1 &")
    assert out["returncode"] == 0, out
    deadline = time.monotonic() + 30
    while not player(env, "ls ~/flusher-ready 2>/dev/null")["output"].strip():
        assert time.monotonic() < deadline, "the flusher did not start"
        time.sleep(0.1)


def test_a_process_a_postconfig_step_signals_finishes_before_the_judge_reads(env):
    _start_flusher(env, 0.3)
    # the postconfig step: signal it and return at once, as `killall` does
    assert player(env, "pkill -TERM -f [f]lusher.py")["returncode"] == 0
    # the evaluator's getter, right away: the player is held while it runs
    out = _client(env).execute("cat ~/flushed 2>/dev/null || echo missing", shell=True)
    assert out["output"] == "flushed\n", out


def test_after_the_agents_last_action_nothing_is_waited_for(env):
    """Only task steps are waited for: what the agent's own input set off is scored as it is
    when the judge reads (held half-finished), as before. The flusher needs 6 s of CPU after
    the agent's `pkill`; the action's own settle ends at most 3 s after it, and a wait of the
    judge's (up to 5 s more) would have let it write."""
    _start_flusher(env, 6.0)
    env.step("pyautogui.hotkey('ctrl', 'alt', 't')")
    env.step("pyautogui.write('pkill -TERM -f [f]lusher.py\\n')")  # the agent's last action
    out = _client(env).execute("cat ~/flushed 2>/dev/null || echo missing", shell=True)
    assert out["output"] == "missing\n", out
    # and it was flushing, not gone: once the hold is over it finishes
    deadline = time.monotonic() + 60
    while player(env, "cat ~/flushed 2>/dev/null")["output"] != "flushed\n":
        assert time.monotonic() < deadline, "the flusher never finished"
        time.sleep(0.5)
