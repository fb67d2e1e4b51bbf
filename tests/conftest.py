"""Shared fixtures: real sandboxed desktops, shared per module because starting one costs ~1 s."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--osworld-examples",
        default=None,
        help="OSWorld's evaluation_examples folder for the official-task tests "
        "(default: $OSWORLD_EXAMPLES or ../shared/osworld/evaluation_examples)",
    )


def sandbox_processes() -> list[tuple[int, str]]:
    """(pid, cmdline) of every process on this machine that belongs to an osworld-gym desktop.

    A desktop's processes are bwrap (whose command line names the ``osworld-gym-*`` state dir),
    the guest server (``-m osworld_gym.guest``) and what they start (Xvfb, openbox, apps), all
    descendants of bwrap. We list bwrap/guest processes and their descendants.
    """
    procs: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        procs[int(entry.name)] = (ppid, cmd)
    roots = {
        pid
        for pid, (_, cmd) in procs.items()
        if "osworld-gym-" in cmd or "osworld_gym.guest" in cmd
    }
    found = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return sorted((pid, procs[pid][1]) for pid in found if pid != os.getpid())


@pytest.fixture(scope="module")
def local_env() -> Iterator:
    """A real local desktop env (built-in tasks, pyautogui actions), shared by a test module."""
    import gymnasium as gym
    import osworld_gym  # noqa: F401 - registers OSWorld-v0

    env = gym.make("OSWorld-v0", provider="local", tasks="builtin")
    try:
        yield env
    finally:
        env.close()
