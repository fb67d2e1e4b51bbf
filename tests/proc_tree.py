"""Process-tree helpers for the tests that prove desktops leave nothing behind."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def descendants(roots: int | Iterable[int]) -> set[int]:
    """PIDs of every process below ``roots`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    todo = [roots] if isinstance(roots, int) else list(roots)
    out: set[int] = set()
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pids: Iterable[int]) -> set[int]:
    """The PIDs that still run (zombies count as gone)."""
    out = set()
    for p in pids:
        try:
            if Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.add(p)
        except (OSError, IndexError):
            pass
    return out
