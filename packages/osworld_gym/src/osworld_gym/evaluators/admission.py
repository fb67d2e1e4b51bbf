"""Bounded work on the agent's files: what a file may unpack to before a parser sees it.

A result file is capped at :data:`~osworld_gym.protocol.client.MAX_FILE_BYTES` on the wire, but
what it unpacks to is not: a 1 MiB ``.docx`` whose ``word/document.xml`` inflates to 1 GiB of
zeros made python-docx hold the gigabyte (and a zip header may lie about the size, which
:mod:`zipfile` only notices after inflating everything); a 200-byte PNG may declare 100,000 x
100,000 pixels. Every file the agent leaves is admitted here as it comes onto the host (the one
door: :func:`~osworld_gym.evaluators.getters.file.get_vm_file`), before any getter or metric
parses it:

* a zip container (OOXML, OpenDocument, ``.zip``): at most :data:`MAX_MEMBERS` parts, each
  declaring at most :data:`MAX_UNPACKED` bytes and all together as much; then each deflated part
  is inflated once, in 1 MiB steps, and refused as soon as it yields more than it declares
  (encrypted and unreadable parts are left to the parsers, which fail on them: scored 0);
* a gzip stream (``.gz``, ``.tar.gz``): inflated the same way, at most :data:`MAX_UNPACKED`;
* an image: at most :data:`MAX_PIXELS` pixels as its header declares (PIL reads the header
  only).

A refused file raises :class:`~osworld_gym.errors.UnusableResultFile`: the episode scores 0
with the reason. Work is bounded by bytes: at most :data:`MAX_UNPACKED` inflated per file.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

from osworld_gym.errors import UnusableResultFile

#: Most bytes a file may unpack to (all parts of a zip together; a gzip stream).
MAX_UNPACKED = 512 << 20
#: Most parts a zip may have.
MAX_MEMBERS = 20_000
#: Most pixels an image may declare (a 12,000 x 10,000 scan; screenshots are 2 million).
MAX_PIXELS = 120_000_000
_STEP = 1 << 20
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"II*\0", b"MM\0*", b"RIFF")


def admit(path: str | Path) -> None:
    """Raise :class:`UnusableResultFile` if the agent's file at ``path`` would unpack to more
    than the limits allow; return quietly otherwise (also for files no parser unpacks)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        _admit_zip(path)
    elif head.startswith(b"\x1f\x8b"):
        _admit_gzip(path)
    elif head.startswith(_IMAGE_MAGIC):
        _admit_image(path)


def _refuse(path: Path, why: str) -> UnusableResultFile:
    return UnusableResultFile(f"{path.name} {why}")


def _admit_zip(path: Path) -> None:
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # not a readable zip: the parsers fail on it, and that is scored 0
    with z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _refuse(path, f"has {len(infos)} parts, over the {MAX_MEMBERS} allowed")
        declared = sum(i.file_size for i in infos)
        if declared > MAX_UNPACKED:
            raise _refuse(
                path, f"declares {declared} bytes unpacked, over the {MAX_UNPACKED} allowed"
            )
        for info in infos:
            if info.compress_type != zipfile.ZIP_DEFLATED or info.flag_bits & 0x1:
                continue  # stored parts cannot grow; encrypted ones no parser reads
            inflated = _inflate_part(z, info)
            if inflated is not None and inflated > info.file_size:
                raise _refuse(
                    path,
                    f"has a part ({info.filename[:80]}) that unpacks to more than the "
                    f"{info.file_size} bytes it declares",
                )


def _inflate_part(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> int | None:
    """How many bytes ``info``'s deflated data yields, counted up to its declared size + 1
    (never more held than one step); None if its data cannot be read."""
    fp = z.fp
    if fp is None:
        return None
    try:
        fp.seek(info.header_offset)
        header = fp.read(30)
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            return None
        name_len = int.from_bytes(header[26:28], "little")
        extra_len = int.from_bytes(header[28:30], "little")
        fp.seek(info.header_offset + 30 + name_len + extra_len)
        left = info.compress_size
        d = zlib.decompressobj(-15)
        out = 0
        while left > 0 or d.unconsumed_tail:
            data = d.unconsumed_tail or fp.read(min(left, _STEP))
            if not d.unconsumed_tail:
                left -= len(data)
                if not data:
                    break
            out += len(d.decompress(data, _STEP))
            if out > info.file_size or d.eof:
                break
        return out
    except (OSError, zlib.error, ValueError):
        return None


def _admit_gzip(path: Path) -> None:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = 0
    try:
        with open(path, "rb") as f:
            while True:
                data = d.unconsumed_tail or f.read(_STEP)
                if not data:
                    return
                out += len(d.decompress(data, _STEP))
                if out > MAX_UNPACKED:
                    raise _refuse(path, f"unpacks to over the {MAX_UNPACKED} bytes allowed")
                if d.eof:
                    rest = d.unused_data
                    if not rest.startswith(b"\x1f\x8b"):
                        return
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a concatenated member
                    out += len(d.decompress(rest, _STEP))
    except (OSError, zlib.error):
        return


def _admit_image(path: Path) -> None:
    from PIL import Image

    try:
        with Image.open(path) as img:
            width, height = img.size
    except Image.DecompressionBombError as exc:
        raise _refuse(path, f"declares too many pixels ({exc})") from None
    except Exception:  # noqa: BLE001 - PIL raises many kinds on a header it cannot read
        return
    if width * height > MAX_PIXELS:
        raise _refuse(path, f"declares {width} x {height} pixels, over the {MAX_PIXELS} allowed")
