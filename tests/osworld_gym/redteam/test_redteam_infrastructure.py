"""Red team, the desktop's infrastructure across episodes, on real desktops.

The window manager, the session bus (and the AT-SPI services it activates) and the profile's
panels run as the desktop user, so the agent may ``ptrace`` them, bind a relay at the bus
socket's path, or change what the X server keeps (root window properties such as AT-SPI's bus
address, the keyboard mapping). Before this round they survived ``reset()``: whatever the agent
did to them reached the next episode, another agent's. Now a reset starts them afresh and puts
the X server's state back.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import sandbox_processes
from redteam import player

pytestmark = pytest.mark.desktop

INFRA = ("openbox", "dbus-daemon", "tint2", "at-spi-bus-launcher", "at-spi2-registryd")

#: The player changes keycode 38 to the keysym "b" through libX11, as xmodmap would.
REMAP = """
import ctypes
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
d = x.XOpenDisplay(None)
syms = (ctypes.c_ulong * 1)(0x62)
x.XChangeKeyboardMapping(ctypes.c_void_p(d), 38, 1, syms, 1)
x.XCloseDisplay(ctypes.c_void_p(d))
"""
#: Prints the first keysym of keycode 38.
KEYSYM = """
import ctypes
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XGetKeyboardMapping.restype = ctypes.POINTER(ctypes.c_ulong)
d = x.XOpenDisplay(None)
n = ctypes.c_int()
print(hex(x.XGetKeyboardMapping(ctypes.c_void_p(d), 38, 1, ctypes.byref(n))[0]))
"""


def _infra(env) -> dict[str, int]:
    out = player(env, "ps -eo pid=,comm=")["output"].split("\n")
    found = {}
    for line in out:
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith(tuple(n[:15] for n in INFRA)):
            found.setdefault(parts[1], int(parts[0]))
    return found


def _py(env, script: str) -> str:
    out = player(env, f"python3 - <<'EOF'\n{textwrap.dedent(script)}\nEOF")
    assert out["returncode"] == 0, out
    return out["output"].strip()


def test_infrastructure_the_agent_traced_is_not_the_next_episodes(local_env):
    """The agent can ptrace the window manager during its episode (same uid); the next
    episode gets a new window manager, bus, panels and AT-SPI services."""
    local_env.reset(options={"task": "os-write-file-001"})
    player(local_env, "ls /usr/share/applications >/dev/null; true")
    local_env.unwrapped.provider.start().accessibility()  # AT-SPI running too
    before = _infra(local_env)
    assert "openbox" in before and "dbus-daemon" in before, before
    traced = _py(
        local_env,
        f"""
        import ctypes, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        pid = {before["openbox"]}
        ok = libc.ptrace(16, pid, 0, 0) == 0  # PTRACE_ATTACH
        os.waitpid(pid, 0) if ok else None
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        print(ok)
        """,
    )
    assert traced == "True"  # within its episode the agent can take it over
    local_env.reset(options={"task": "os-write-file-001"})
    local_env.unwrapped.provider.start().accessibility()
    after = _infra(local_env)
    assert set(after) >= {"openbox", "dbus-daemon"}, after
    assert not set(before.values()) & set(after.values()), (before, after)


def _listeners(path: str) -> str:
    """The commands of the processes listening on a unix socket bound at ``path`` in the
    newest desktop (its network namespace's /proc/net/unix, read through its guest)."""
    procs = sandbox_processes()
    guest = max(pid for pid, cmd in procs if "-m osworld_gym.guest" in cmd)
    inodes = {
        f"socket:[{fields[6]}]"
        for line in Path(f"/proc/{guest}/net/unix").read_text().splitlines()[1:]
        if len(fields := line.split()) >= 8 and fields[-1] == path and fields[5] == "01"
    }
    found = []
    for pid, cmd in procs:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if fd.readlink().as_posix() in inodes:
                    found.append(cmd)
                    break
            except OSError:
                continue
    return " | ".join(found)


def test_a_relay_the_agent_binds_at_the_bus_socket_does_not_survive_a_reset(local_env):
    """The bus socket lives in the player's runtime dir: the agent may replace it with a
    listener of its own (a relay that rewrites what the judge's AT-SPI reads). A reset
    empties the runtime dir and the fresh bus binds it again."""
    local_env.reset(options={"task": "os-write-file-001"})
    bus = player(local_env, "printf %s $DBUS_SESSION_BUS_ADDRESS")["output"]
    path = bus.removeprefix("unix:path=")
    out = player(
        local_env,
        f'rm -f {path} && (setsid python3 -c "import socket, time; s = socket.socket('
        f"socket.AF_UNIX); s.bind('{path}'); s.listen(); time.sleep(600)\" "
        # until the relay has bound (python starts in 0.1 s idle, once took over 0.5 s in CI)
        f"</dev/null >/dev/null 2>&1 &) && for i in $(seq 200); do [ -S {path} ] && break; "
        "sleep 0.1; done && ls -l " + path,
    )
    assert out["returncode"] == 0, out
    assert "python3" in _listeners(path), _listeners(path)
    local_env.reset(options={"task": "os-write-file-001"})
    ok = player(
        local_env,
        "sleep 1; dbus-send --session --dest=org.freedesktop.DBus --print-reply / "
        "org.freedesktop.DBus.GetId",
    )
    assert ok["returncode"] == 0 and "string" in ok["output"], ok
    assert "python3" not in _listeners(path)


def test_root_properties_and_key_mappings_the_agent_set_do_not_survive_a_reset(local_env):
    """Root window properties (AT-SPI's bus address, read by every accessible app) and the
    keyboard mapping are the X server's, which outlives every process: a reset puts them
    back as they were when the desktop started."""
    local_env.reset(options={"task": "os-write-file-001"})
    out = player(
        local_env,
        "xprop -root -f AT_SPI_BUS 8s -set AT_SPI_BUS unix:path=/tmp/agents-bus && "
        "xprop -root -f FORGED 8s -set FORGED yes && xprop -root AT_SPI_BUS FORGED",
    )
    assert "/tmp/agents-bus" in out["output"] and '"yes"' in out["output"], out
    _py(local_env, REMAP)
    assert _py(local_env, KEYSYM) == "0x62"  # the agent's "b" on the "a" key
    local_env.reset(options={"task": "os-write-file-001"})
    out = player(local_env, "xprop -root AT_SPI_BUS FORGED")
    assert "/tmp/agents-bus" not in out["output"] and '"yes"' not in out["output"], out
    assert _py(local_env, KEYSYM) == "0x61"  # "a" again
