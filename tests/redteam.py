"""What the red-team tests share: acting as the desktop's user (the player)."""

from __future__ import annotations


def player(env, command: str, timeout: float = 60) -> dict:
    """Run a shell command as the desktop user (the player), as a terminal would."""
    return env.unwrapped.provider.start().execute(command, shell=True, setup=True, timeout=timeout)


#: A fork bomb in Python: forks up to 2,000 sleeping children, then writes how many it got.
FORK_BOMB = """\
import os, time
n = 0
for i in range(2000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60); os._exit(0)
    n += 1
open(os.path.expanduser('~/forked'), 'w').write(str(n))
time.sleep(60)
"""


def fork_bomb(env) -> int:
    """Start :data:`FORK_BOMB` in the desktop as the player; how many children it forked."""
    import time

    client = env.unwrapped.provider.start()
    client.upload("/home/user/bomb.py", FORK_BOMB.encode())
    client.launch(["python3", "/home/user/bomb.py"])
    deadline = time.monotonic() + 60
    while (data := client.get_file("/home/user/forked")) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert data is not None, "the fork bomb never reported"
    return int(data)
