"""The desktop user's home directory and temp directory: populate, restore, clean.

Deleting a home directory is dangerous, so the guest only ever restores a home that it
populated itself: populating writes :data:`MARKER` into it (and the template copy keeps it).
A non-empty home without the marker (say, a real user's home on a development machine) is
used as is and never wiped.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

#: Written into a home the guest populated; restoring requires it.
MARKER = ".osworld-gym-home"
#: The default home template shipped with the package.
SKEL = Path(__file__).with_name("skel")
#: Folders every home made from :data:`SKEL` has (as on OSWorld's Ubuntu image; git cannot
#: store empty folders, so they are created here).
XDG_DIRS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Public", "Templates",
            "Videos")
#: Names in the temp directory that a clean keeps (X11 sockets and locks).
TMP_KEEP = (".X11-unix", ".ICE-unix", ".font-unix", ".XIM-unix")


class HomeError(RuntimeError):
    """The home directory cannot be restored safely."""


def _clear(directory: Path, keep: set[Path]) -> None:
    """Delete everything inside ``directory`` (never the directory itself) except ``keep`` and
    the parents of anything in ``keep``."""
    with os.scandir(directory) as it:
        entries = list(it)
    for entry in entries:
        path = Path(entry.path)
        if path in keep:
            continue
        if any(path in k.parents for k in keep):
            if entry.is_dir(follow_symlinks=False):
                _clear(path, keep)
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            pass


def _copy_template(template: Path, home: Path) -> None:
    shutil.copytree(template, home, symlinks=True, dirs_exist_ok=True)
    if template.resolve() == SKEL.resolve():
        for name in XDG_DIRS:
            (home / name).mkdir(exist_ok=True)
    (home / MARKER).touch()


def _protected(paths: Iterable[Path | str | None], root: Path) -> set[Path]:
    out = set()
    for p in paths:
        if p is None:
            continue
        p = Path(os.path.abspath(p))
        if root == p or root in p.parents:
            out.add(p)
    return out


def prepare_home(home: Path, template: Path) -> bool:
    """Create and populate ``home`` from ``template`` if it is missing or empty.

    Returns True if the home is (now) restorable, i.e. carries :data:`MARKER`.
    """
    if not template.is_dir():
        raise HomeError(f"home template {template} is not a directory")
    home.mkdir(parents=True, exist_ok=True)
    if (home / MARKER).exists():
        return True
    if any(home.iterdir()):
        log.warning("home %s is not empty and was not created by the guest: it will be used as "
                    "is and never restored", home)
        return False
    _copy_template(template, home)
    log.info("populated home %s from %s", home, template)
    return True


def restore_home(home: Path, template: Path, protect: Iterable[Path | str | None] = ()) -> None:
    """Empty ``home`` (keeping its inode and anything in ``protect``) and copy ``template`` back."""
    home = Path(os.path.abspath(home))
    if not (home / MARKER).exists():
        raise HomeError(f"refusing to restore {home}: it was not populated by the guest (no "
                        f"{MARKER}); start the guest with an empty or missing --home")
    if home == Path("/") or len(home.parts) < 2:
        raise HomeError(f"refusing to restore {home}")
    _clear(home, _protected(protect, home))
    _copy_template(template, home)


def clean_tmp(tmp: Path, protect: Iterable[Path | str | None] = ()) -> None:
    """Delete the contents of the temp directory except X11 sockets/locks and ``protect``."""
    tmp = Path(os.path.abspath(tmp))
    keep = _protected(protect, tmp)
    keep.update(tmp / name for name in TMP_KEEP)
    keep.update(p for p in tmp.glob(".X*-lock"))
    keep.update(_protected(mount_points(), tmp))  # e.g. a checkout under /tmp bound into a sandbox
    _clear(tmp, keep)


def chown_tree(root: Path, uid: int, gid: int) -> int:
    """Give ``root`` and everything below it to ``uid:gid`` (symlinks themselves, never their
    targets; other mounts below ``root`` are not entered). Returns how many entries changed.

    The judge (namespace root) populates and restores the home; the player must own it.
    """
    changed = 0
    dev = os.lstat(root).st_dev
    stack = [str(root)]
    if os.lstat(root).st_uid != uid:
        os.lchown(root, uid, gid)
        changed += 1
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if st.st_uid != uid or st.st_gid != gid:
                    os.lchown(entry.path, uid, gid)
                    changed += 1
                if entry.is_dir(follow_symlinks=False) and st.st_dev == dev:
                    stack.append(entry.path)
            except FileNotFoundError:
                continue
    return changed


def mount_points() -> list[str]:
    """Mount points visible to this process (from /proc/self/mountinfo)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:  # octal escapes (\040 for a space) as the kernel writes them
            out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return out
