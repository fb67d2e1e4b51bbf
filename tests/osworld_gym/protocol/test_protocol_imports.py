"""The guest and the protocol stay light: what the server inside a desktop imports, and what
``import osworld_gym`` still registers."""

from __future__ import annotations

import subprocess
import sys

import pytest

HOST_SIDE = (
    "gymnasium",
    "osworld_gym.env",
    "osworld_gym.actions",
    "osworld_gym.client",
    "osworld_gym.providers",
    "osworld_gym.tasks",
    "osworld_gym.evaluators",
    "httpx",
)


def imported_by(*args: str) -> set[str]:
    """Every module a fresh interpreter imports for ``args`` (``python -X importtime ARGS``)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    } - {"package"}


def test_the_guest_server_imports_nothing_host_side():
    mods = imported_by("-m", "osworld_gym.guest", "--help")
    assert "osworld_gym.guest.server" in mods and "osworld_gym.protocol.primitives" in mods
    leaked = sorted(m for m in mods if m.startswith(HOST_SIDE))
    assert not leaked, leaked


def test_the_protocol_imports_only_the_standard_library():
    mods = imported_by(
        "-c",
        "import osworld_gym.protocol.primitives, osworld_gym.protocol.routes,"
        " osworld_gym.protocol.input, osworld_gym.protocol.client",
    )
    assert "osworld_gym.protocol.input" in mods
    third_party = sorted(
        m for m in mods if m.split(".")[0] in {"numpy", "Xlib", "gymnasium", "httpx", "PIL"}
    )
    assert not third_party, third_party


@pytest.mark.parametrize(
    "code",
    [
        "import gymnasium as gym; import osworld_gym",
        "import osworld_gym; import gymnasium as gym",
        (
            "import osworld_gym; from gymnasium.envs.registration import registry; import "
            "gymnasium as gym"
        ),
    ],
)
def test_osworld_v0_is_registered_whichever_is_imported_first(code):
    check = (
        f"{code}\nassert 'OSWorld-v0' in gym.registry\n"
        "env = gym.make('OSWorld-v0', provider='fake', screen_size=(64, 48))\n"
        "print(type(env.unwrapped).__name__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "OSWorldEnv"


def test_keysyms_resolve_the_same_as_python_xlib():
    from osworld_gym.protocol.input import key_keysym
    from osworld_gym.protocol.keys import X_KEYSYM
    from Xlib import XK

    XK.load_keysym_group("xf86")
    for name in ("ctrl", "enter", "f5", "pageup", "volumeup", "a", "Z", "/"):
        expected = XK.string_to_keysym(X_KEYSYM[name])
        if expected == 0:
            expected = XK.string_to_keysym("XF86_" + X_KEYSYM[name][4:])
        assert key_keysym(name) == expected, name
