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
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

#: Written into a home the guest populated; restoring requires it.
MARKER = ".osworld-gym-home"
#: The default home template shipped with the package.
SKEL = Path(__file__).with_name("skel")
#: Folders every home made from :data:`SKEL` has (as on OSWorld's Ubuntu image; git cannot
#: store empty folders, so they are created here).
XDG_DIRS = (
    "Desktop",
    "Documents",
    "Downloads",
    "Music",
    "Pictures",
    "Public",
    "Templates",
    "Videos",
)
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


#: open flags of a directory the judge walks into: never through a symlink
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Deepest directory level :func:`chown_tree` and :func:`_copy_template` walk into.
MAX_DEPTH = 128


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _make_dir(name: str, dir_fd: int, mode: int) -> int:
    """Open the real directory ``name`` in ``dir_fd``, creating it; whatever else is there (a
    symlink or file the player planted meanwhile) is removed first, never followed."""
    for _ in range(3):
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
        except FileExistsError:
            pass
        try:
            return _open_dir(name, dir_fd)
        except (NotADirectoryError, OSError) as e:  # ELOOP: a symlink; ENOTDIR: a file
            if isinstance(e, FileNotFoundError):
                continue
            os.unlink(name, dir_fd=dir_fd)
    raise HomeError(f"cannot make the directory {name!r}: it keeps being replaced")


def _copy_into(src: Path, dst_fd: int, owner: tuple[int, int] | None, depth: int) -> None:
    """Copy the contents of ``src`` (the template: trusted) into the directory ``dst_fd`` by
    name relative to it, never following a symlink in the destination."""
    with os.scandir(src) as it:
        entries = list(it)
    for entry in entries:
        name = entry.name
        if entry.is_symlink():
            try:
                os.unlink(name, dir_fd=dst_fd)
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                pass
            os.symlink(os.readlink(entry.path), name, dir_fd=dst_fd)
            if owner is not None:
                os.chown(name, *owner, dir_fd=dst_fd, follow_symlinks=False)
        elif entry.is_dir():
            if depth >= MAX_DEPTH:
                raise HomeError(f"home template {src} is deeper than {MAX_DEPTH} levels")
            fd = _make_dir(name, dst_fd, entry.stat().st_mode & 0o7777)
            try:
                if owner is not None:
                    os.fchown(fd, *owner)
                _copy_into(Path(entry.path), fd, owner, depth + 1)
            finally:
                os.close(fd)
        elif entry.is_file():
            try:  # O_EXCL | O_NOFOLLOW: a planted name is replaced, never written through
                os.unlink(name, dir_fd=dst_fd)
            except FileNotFoundError:
                pass
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                entry.stat().st_mode & 0o7777,
                dir_fd=dst_fd,
            )
            with open(fd, "wb") as out, open(entry.path, "rb") as data:
                if owner is not None:
                    os.fchown(out.fileno(), *owner)
                shutil.copyfileobj(data, out)
            st = entry.stat()
            os.utime(
                name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst_fd, follow_symlinks=False
            )


def _copy_template(template: Path, home: Path, owner: tuple[int, int] | None = None) -> None:
    """Copy ``template`` into ``home`` (owned by ``owner`` where given) through directory
    descriptors: a symlink the player plants in the home meanwhile is replaced, not followed
    (the judge writing the template through ``~/Desktop -> /etc`` would write as root)."""
    home_fd = _open_dir(str(home))
    try:
        _copy_into(template, home_fd, owner, 0)
        if template.resolve() == SKEL.resolve():
            for name in XDG_DIRS:
                fd = _make_dir(name, home_fd, 0o755)
                if owner is not None:
                    os.fchown(fd, *owner)
                os.close(fd)
        try:
            os.unlink(MARKER, dir_fd=home_fd)
        except FileNotFoundError:
            pass
        os.close(
            os.open(
                MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=home_fd
            )
        )
    finally:
        os.close(home_fd)


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
        log.warning(
            "home %s is not empty and was not created by the guest: it will be used as "
            "is and never restored",
            home,
        )
        return False
    _copy_template(template, home)
    log.info("populated home %s from %s", home, template)
    return True


def restore_home(home: Path, template: Path, protect: Iterable[Path | str | None] = ()) -> None:
    """Empty ``home`` (keeping its inode and anything in ``protect``) and copy ``template`` back."""
    home = Path(os.path.abspath(home))
    if not (home / MARKER).exists():
        raise HomeError(
            f"refusing to restore {home}: it was not populated by the guest (no "
            f"{MARKER}); start the guest with an empty or missing --home"
        )
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

    The judge (namespace root) populates and restores the home; the player must own it. The
    walk goes through directory descriptors (``O_NOFOLLOW``, ``fchownat`` relative to them), so
    a player process that swaps a directory for a symlink mid-walk redirects nothing: the swap
    is seen as a symlink and only the link itself changes owner.
    """
    fd = _open_dir(str(root))
    try:
        return _chown_dir(fd, uid, gid, os.fstat(fd).st_dev, 0)
    finally:
        os.close(fd)


def _chown_dir(dfd: int, uid: int, gid: int, dev: int, depth: int) -> int:
    changed = 0
    st = os.fstat(dfd)
    if st.st_uid != uid or st.st_gid != gid:
        os.fchown(dfd, uid, gid)
        changed += 1
    with os.scandir(dfd) as it:
        names = [e.name for e in it]
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                if st.st_uid != uid or st.st_gid != gid:
                    os.chown(name, uid, gid, dir_fd=dfd, follow_symlinks=False)
                    changed += 1
                continue
            if st.st_dev != dev or depth >= MAX_DEPTH:
                continue
            try:
                sub = _open_dir(name, dfd)
            except OSError:  # swapped for a symlink or a file since the stat: not entered
                continue
            try:
                changed += _chown_dir(sub, uid, gid, dev, depth + 1)
            finally:
                os.close(sub)
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
