"""Which guest paths ``/file`` and ``/setup/upload`` may touch, and how a file is handed out.

OSWorld's getters ask for absolute paths in the desktop user's home (``/home/user/x.xlsx``)
and setup steps write there or to ``/tmp``; nothing legitimate needs more. So:

* the *requested* path (``~`` expanded, relative to home, ``..`` folded) must lie in the home
  directory or ``/tmp``; anything else is refused with **403** -- that is the task's (or the
  caller's) request, not the agent's doing;
* the *file found there* must resolve (symlinks followed) inside those roots, be a regular file,
  be readable and be at most :data:`MAX_FILE_BYTES`: what the agent left at a result path is
  its own work, so a directory, a fifo, a ``chmod 000`` file, a symlink out of the desktop or a
  2 GiB sparse file is answered **422** (413 when too large) with the reason, which the host
  scores 0 instead of calling it an infrastructure error.

The file is opened (``O_NONBLOCK``, so a fifo cannot hang the request) and checked with
``fstat`` on that descriptor *before* any status line is sent, so a 200 always comes with the
file that was checked.
"""

from __future__ import annotations

import os
import posixpath
import stat
import threading
from pathlib import Path
from typing import BinaryIO

#: Largest file ``/file`` hands out; a bigger one is the agent's doing (the host caps lower).
MAX_FILE_BYTES = 1 << 30
#: Roots besides the desktop user's home that guest file transfers may use.
EXTRA_ROOTS = ("/tmp",)

#: status of a refused file the agent could have caused (the host scores those 0)
UNUSABLE = 422
TOO_LARGE = 413
OUTSIDE = 403


class FileRefused(Exception):
    """The path may not be served or written; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def allowed_roots(home: Path | str) -> tuple[str, ...]:
    return (posixpath.normpath(str(home)), *EXTRA_ROOTS)


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def requested_path(raw: str, home: Path | str) -> Path:
    """``raw`` as an absolute path inside the allowed roots (lexically), else 403.

    >>> str(requested_path("~/Desktop/a.txt", "/home/user"))
    '/home/user/Desktop/a.txt'
    >>> requested_path("/home/user/../../etc/shadow", "/home/user")
    Traceback (most recent call last):
    ...
    osworld_gym.guest.files.FileRefused: /etc/shadow is outside the desktop user's home and /tmp
    """
    if "\x00" in raw:
        raise FileRefused(400, "path contains a NUL byte")
    home = str(home)
    if raw == "~" or raw.startswith("~/"):
        raw = home + raw[1:]
    elif not raw.startswith("/"):
        raw = posixpath.join(home, raw)
    path = posixpath.normpath(raw)
    if not _within(path, allowed_roots(home)):
        raise FileRefused(OUTSIDE, f"{path} is outside the desktop user's home and /tmp")
    return Path(path)


def open_for_reading(
    path: Path, home: Path | str, max_bytes: int = MAX_FILE_BYTES
) -> tuple[BinaryIO, int]:
    """Open ``path`` (already checked by :func:`requested_path`) as ``(file, size)``.

    Raises:
        FileRefused: 404 if nothing is there, 422/413 if what is there is not a readable
            regular file within the roots and the size cap.
    """
    real = _realpath(path, UNUSABLE)
    if not os.path.lexists(path):
        raise FileRefused(404, f"file not found: {path}")
    if not _within(real, allowed_roots(os.path.realpath(home))) and not _within(
        real, allowed_roots(home)
    ):
        raise FileRefused(
            UNUSABLE, f"{path} resolves to {real}, outside the desktop user's home and /tmp"
        )
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileRefused(UNUSABLE, f"{path} is a dangling symlink") from None
    except IsADirectoryError:
        raise FileRefused(UNUSABLE, f"{path} is a directory, not a file") from None
    except OSError as e:
        raise FileRefused(UNUSABLE, f"{path} cannot be opened: {e.strerror}") from None
    try:
        # what was opened, not what the path said a moment ago: a directory the player swapped
        # for a symlink between the realpath above and the open is caught here
        opened = os.readlink(f"/proc/self/fd/{fd}")
        if not (
            _within(opened, allowed_roots(os.path.realpath(home)))
            or _within(opened, allowed_roots(home))
        ):
            raise FileRefused(
                UNUSABLE,
                f"{path} changed while it was opened (now {opened}, "
                "outside the desktop user's home and /tmp)",
            )
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused(UNUSABLE, f"{path} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(UNUSABLE, f"{path} is not a regular file (mode {st.st_mode:o})")
        if st.st_size > max_bytes:
            raise FileRefused(
                TOO_LARGE, f"{path} is {st.st_size} bytes, over the {max_bytes} byte limit"
            )
        if not _owner_can_read(st, home):
            raise FileRefused(
                UNUSABLE,
                f"{path} is not readable by the desktop user (mode {stat.S_IMODE(st.st_mode):03o})",
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _realpath(path: Path | str, status: int) -> str:
    """``os.path.realpath``, which raises when a link changes while it resolves (a player
    flipping a directory and a symlink): refused with ``status``, the agent's doing."""
    try:
        return os.path.realpath(path)
    except OSError as e:
        raise FileRefused(status, f"{path} changed while it was resolved ({e.strerror})") from None


def _owner_can_read(st: os.stat_result, home: Path | str) -> bool:
    """Whether the desktop user (the home's owner) may read a file of this status. The guest
    may be root, whose reads ignore permissions; a result the agent ``chmod 000``-ed is as
    unusable to the evaluator as it is on OSWorld's VM, where the server runs as the user."""
    try:
        owner = os.stat(home)
    except OSError:
        return True
    if st.st_uid == owner.st_uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid == owner.st_gid:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


def upload_target(raw: str, home: Path | str) -> Path:
    """Where ``/setup/upload`` may write ``raw``: inside the roots, its parent too once
    symlinks are followed (403 otherwise), and not a directory (400)."""
    path = requested_path(raw, home)
    parent = _realpath(path.parent, OUTSIDE)
    if not (
        _within(parent, allowed_roots(os.path.realpath(home)))
        or _within(parent, allowed_roots(home))
    ):
        raise FileRefused(
            OUTSIDE, f"{path.parent} resolves to {parent}, outside the desktop user's home and /tmp"
        )
    if path.is_dir():
        raise FileRefused(400, f"{path} is a directory")
    return path


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_upload(
    path: Path, data: bytes, home: Path | str, owner: tuple[int, int] | None = None
) -> None:
    """Write ``data`` to ``path`` (checked by :func:`upload_target`) as the judge, safely in a
    directory the player can change at the same time: the parents are walked from the root
    (home or ``/tmp``) one descriptor at a time with ``O_NOFOLLOW`` (made where missing, 0755,
    given to ``owner``), the data goes to a fresh ``O_EXCL`` temp file there, owned by
    ``owner`` from the start, and is renamed over the name (a symlink at the name is replaced,
    not followed). A symlink on the way is refused with 403.
    """
    root = next(
        r for r in sorted(allowed_roots(home), key=len, reverse=True) if _within(str(path), (r,))
    )
    parts = [x for x in str(path.parent)[len(root) :].split("/") if x]
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts:
            made = False
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                made = True
            except FileExistsError:
                pass
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise FileRefused(
                    OUTSIDE,
                    f"cannot write {path}: {part!r} on the way is not a directory ({e.strerror})",
                ) from None
            os.close(fd)
            fd = sub
            if made and owner is not None:
                os.fchown(fd, *owner)
        try:
            if stat.S_ISDIR(os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise FileRefused(400, f"{path} is a directory")
        except FileNotFoundError:
            pass
        tmp = f".{path.name}.upload-{os.getpid()}-{threading.get_ident()}"
        out = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=fd,
        )
        try:
            with open(out, "wb") as f:
                if owner is not None:
                    os.fchown(f.fileno(), *owner)
                f.write(data)
            os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
