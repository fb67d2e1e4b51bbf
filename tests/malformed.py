"""Malformed versions of the files and outputs an agent can leave for the judge.

Under RL the agent learns whatever turns a failure into something better than a 0; a result
file that makes the evaluator crash would turn it into an excluded episode. This corpus is what
such an agent could write: for a result file of a given type (``.xlsx``, ``.png``, ``.json``,
...) it derives, from a valid file of that type, the broken variants a parser meets in the wild
and in attacks:

* any file: empty, 8 bytes, random bytes, text, NUL bytes, another format under the name,
  truncations (1 byte, half, all but the last byte), a flipped byte, invalid UTF-8, UTF-16;
* structured text: JSON and XML nested 100,000 deep, billion laughs, a 4 MiB line,
  JSON of unexpected shapes;
* zip-based formats (OOXML, OpenDocument, zip): a cut at **every part boundary** (each local
  header, the central directory, the end record), a decompression bomb in the main part (1 GiB
  of zeros, honestly declared, and one whose header lies), an encrypted main part, the main
  part deeply nested, a billion laughs, numbers replaced by ``abc`` (``sz="abc"``), a wrong
  declared encoding, the main part or ``[Content_Types].xml`` missing, a duplicated part, an
  unterminated string in a shared formula (xlsx), an OLE2 "encrypted office" container;
* images: a PNG declaring 100,000 x 100,000 pixels, a cut PNG/JPEG stream, a bad CRC;
* PDF: a cross-reference loop, an array nested 100,000 deep, an encryption dictionary, a cut.

Each variant is a :class:`Case` (kind name, bytes). :func:`cases` lists every kind applicable to
a suffix; the zip truncations are one case per boundary. Bytes are a pure function of the valid
file and the kind (random bytes are seeded), so a failing case replays.
"""

from __future__ import annotations

import functools
import io
import json
import random
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

#: Suffixes whose files are zip containers, and the part their parsers read first.
ZIP_MAIN = {
    ".xlsx": "xl/worksheets/sheet1.xml",
    ".xlsm": "xl/worksheets/sheet1.xml",
    ".docx": "word/document.xml",
    ".pptx": "ppt/slides/slide1.xml",
    ".odt": "content.xml",
    ".ods": "content.xml",
    ".odp": "content.xml",
    ".epub": None,  # first member
    ".zip": None,
    ".whl": None,
}
IMAGES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff"}
TEXT_LIKE = {
    "",
    ".txt",
    ".json",
    ".csv",
    ".py",
    ".md",
    ".html",
    ".xml",
    ".sh",
    ".js",
    ".css",
    ".tex",
    ".bib",
    ".srt",
    ".log",
    ".out",
    ".jsonl",
    ".yaml",
    ".yml",
    ".ini",
    ".conf",
    ".code-workspace",
}
DEPTH = 100_000
#: Size of the decompression bomb's main part (zeros; compresses to about 1 MiB).
BOMB_BYTES = 1 << 30


@dataclass(frozen=True)
class Case:
    kind: str
    data: bytes


def _rng(kind: str) -> random.Random:
    return random.Random(kind)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb() -> bytes:
    """A small, well-formed PNG that declares 100,000 x 100,000 RGB pixels."""
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 4096)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def deep_json(depth: int = DEPTH) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def deep_xml(depth: int = DEPTH) -> bytes:
    return b'<?xml version="1.0"?>' + b"<a>" * depth + b"x" + b"</a>" * depth


def billion_laughs() -> bytes:
    ents = ['<!ENTITY l0 "ha">'] + [
        f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    ]
    return ('<?xml version="1.0"?><!DOCTYPE a [' + "".join(ents) + "]><a>&l9;</a>").encode()


@functools.lru_cache(maxsize=1)
def _bomb_member() -> bytes:
    """1 GiB of zeros, raw-deflated (about 1 MiB); computed once per process."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"\0" * (1 << 24)
    out = [comp.compress(chunk) for _ in range(BOMB_BYTES // len(chunk))]
    out.append(comp.flush())
    return b"".join(out)


def _zip_parts(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _rezip(parts: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in parts:
            z.writestr(name, body)
    return buf.getvalue()


def _replace_part(data: bytes, main: str, body: bytes) -> bytes:
    return _rezip([(n, body if n == main else b) for n, b in _zip_parts(data)])


def _main_name(data: bytes, suffix: str) -> str:
    names = [n for n, _ in _zip_parts(data)]
    main = ZIP_MAIN.get(suffix)
    if main in names:
        return main
    if suffix in (".odt", ".ods", ".odp") and "content.xml" in names:
        return "content.xml"
    return next((n for n in names if n.endswith(".xml")), names[0])


def _bomb_zip(data: bytes, main: str, lie: bool) -> bytes:
    """``data`` with ``main`` replaced by :func:`_bomb_member`, written by hand so the sizes
    can be declared honestly (1 GiB) or as a lie (100 bytes)."""
    parts = _zip_parts(data)
    out = io.BytesIO()
    central = []
    for name, body in parts:
        if name == main:
            comp = _bomb_member()
            crc = zlib.crc32(b"")  # what 1 GiB of zeros hashes to is not worth computing here
            usize = 100 if lie else BOMB_BYTES
            method = 8
        else:
            comp, crc, usize, method = body, zlib.crc32(body), len(body), 0
        fname = name.encode()
        offset = out.tell()
        header = struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(comp), usize, len(fname), 0
        )
        out.write(header + fname + comp)
        central.append(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                method,
                0,
                0,
                crc,
                len(comp),
                usize,
                len(fname),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + fname
        )
    cd_start = out.tell()
    for c in central:
        out.write(c)
    cd_size = out.tell() - cd_start
    out.write(
        struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), cd_size, cd_start, 0)
    )
    return out.getvalue()


def _encrypted_zip(data: bytes, main: str) -> bytes:
    """``data`` with the general-purpose flag's "encrypted" bit set on ``main``'s headers."""
    buf = bytearray(data)
    name = main.encode()
    for sig, flag_at, name_len_at, head in ((b"PK\x03\x04", 6, 26, 30), (b"PK\x01\x02", 8, 28, 46)):
        pos = 0
        while (pos := buf.find(sig, pos)) >= 0:
            (n,) = struct.unpack_from("<H", buf, pos + name_len_at)
            if bytes(buf[pos + head : pos + head + n]) == name:
                (flag,) = struct.unpack_from("<H", buf, pos + flag_at)
                struct.pack_into("<H", buf, pos + flag_at, flag | 1)
            pos += 4
    return bytes(buf)


def zip_boundaries(data: bytes) -> list[int]:
    """Offsets of every part boundary: each local header, the central directory's entries and
    the end-of-central-directory record."""
    out = set()
    for sig in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"):
        pos = 0
        while (pos := data.find(sig, pos)) >= 0:
            out.add(pos)
            pos += 4
    return sorted(o for o in out if 0 < o < len(data))


def _bad_numbers(xml: bytes) -> bytes:
    """Every numeric attribute value replaced by ``abc`` (``sz="1800"`` -> ``sz="abc"``)."""
    return re.sub(rb'="-?\d+(\.\d+)?"', b'="abc"', xml)


def _shared_formula(xml: bytes) -> bytes:
    """An xlsx sheet whose first cell holds a shared formula with an unterminated string."""
    cell = b'<c r="A1"><f t="shared" ref="A1:A3" si="0">"unterminated</f><v>1</v></c>'
    if b"<sheetData/>" in xml:
        return xml.replace(
            b"<sheetData/>", b'<sheetData><row r="1">' + cell + b"</row></sheetData>"
        )
    return re.sub(rb"<c r=\"A1\"[^>]*?(/>|>.*?</c>)", cell, xml, count=1, flags=re.S)


def _ole2_encrypted() -> bytes:
    """The first 512 bytes of an OLE2 compound file (what an encrypted OOXML file is), followed
    by an ``EncryptionInfo`` name: no zip at all."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 16 + struct.pack("<HH", 0x3E, 3)
    header += b"\xfe\xff" + struct.pack("<HH", 9, 6) + b"\0" * (512 - len(header) - 6)
    return header + "EncryptionInfo".encode("utf-16-le") + b"\0" * 512


def _pdf_cases(valid: bytes) -> Iterator[Case]:
    yield Case(
        "pdf_xref_loop",
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 1 0 R >>\nendobj\n"
        b"xref\n0 2\n0000000000 65535 f \n0000000009 00000 n \n"
        b"trailer\n<< /Size 2 /Root 1 0 R /Prev 70 >>\nstartxref\n70\n%%EOF\n",
    )
    deep = b"[" * DEPTH + b"]" * DEPTH
    yield Case(
        "pdf_deep_array",
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R /X " + deep + b" >>\nendobj\n"
        b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
        b"trailer\n<< /Root 1 0 R >>\n%%EOF\n",
    )
    enc = valid.replace(
        b"/Root 1 0 R",
        b"/Root 1 0 R /Encrypt << /Filter /Standard /V 2 /R 3 "
        b"/O <00> /U <00> /P -4 /Length 128 >> /ID [<00><00>]",
    )
    yield Case("pdf_encrypted", enc)
    yield Case("pdf_no_xref", valid[: valid.rfind(b"xref")])
    bomb = zlib.compress(b"\0" * (256 << 20), 9)  # 256 MiB of zeros, about 256 KiB
    head = (
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
        b"2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n"
        b"3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>\n"
        b"endobj\n4 0 obj\n"
    )
    length = b"<< /Length " + str(len(bomb)).encode() + b" /Filter /FlateDecode >>\nstream\n"
    tail = b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    yield Case("pdf_flate_bomb", head + length + bomb + tail)


def _image_cases(valid: bytes, suffix: str) -> Iterator[Case]:
    yield Case("png_bomb", png_bomb())
    if suffix == ".png":
        idat = valid.find(b"IDAT")
        yield Case("png_cut_in_idat", valid[: idat + 12])
        bad = bytearray(valid)
        bad[idat + 8] ^= 0xFF  # a data byte: the chunk's CRC no longer matches
        yield Case("png_bad_crc", bytes(bad))
    elif suffix in (".jpg", ".jpeg"):
        yield Case("jpeg_cut", valid[: len(valid) // 3])


def _zip_cases(valid: bytes, suffix: str) -> Iterator[Case]:
    main = _main_name(valid, suffix)
    for off in zip_boundaries(valid):
        yield Case(f"zip_cut_at_{off}", valid[:off])
    yield Case("zip_bomb", _bomb_zip(valid, main, lie=False))
    yield Case("zip_bomb_lying_size", _bomb_zip(valid, main, lie=True))
    yield Case("zip_encrypted_part", _encrypted_zip(valid, main))
    yield Case("zip_main_deep_xml", _replace_part(valid, main, deep_xml()))
    yield Case("zip_main_billion_laughs", _replace_part(valid, main, billion_laughs()))
    parts = dict(_zip_parts(valid))
    body = parts[main]
    yield Case("zip_main_numbers_abc", _replace_part(valid, main, _bad_numbers(body)))
    yield Case(
        "zip_main_wrong_encoding",
        _replace_part(
            valid,
            main,
            re.sub(rb"encoding=\"[^\"]*\"", b'encoding="UTF-16"', body, count=1)
            if b"encoding=" in body[:200]
            else b'<?xml version="1.0" encoding="UTF-16"?>' + body,
        ),
    )
    yield Case("zip_main_latin1", _replace_part(valid, main, body + "é".encode("latin-1")))
    yield Case("zip_main_missing", _rezip([(n, b) for n, b in parts.items() if n != main]))
    if "[Content_Types].xml" in parts:
        yield Case(
            "zip_no_content_types",
            _rezip([(n, b) for n, b in parts.items() if n != "[Content_Types].xml"]),
        )
    yield Case("zip_duplicate_part", _rezip([*parts.items(), (main, b"<x/>")]))
    if suffix in (".xlsx", ".xlsm"):
        yield Case(
            "xlsx_shared_formula_unterminated", _replace_part(valid, main, _shared_formula(body))
        )
    yield Case("ole2_encrypted", _ole2_encrypted())


@functools.lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """1 GiB of zeros, gzipped (about 1 MiB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + 15)
    chunk = b"\0" * (1 << 24)
    return b"".join(
        [*(comp.compress(chunk) for _ in range(BOMB_BYTES // len(chunk))), comp.flush()]
    )


def generic_cases(valid: bytes) -> Iterator[Case]:
    rng = _rng("random")
    yield Case("empty", b"")
    yield Case("eight_bytes", bytes(rng.randrange(256) for _ in range(8)))
    yield Case("random_64k", rng.randbytes(1 << 16))
    yield Case("text", b"not what you expected\n")
    yield Case("nul_bytes", b"\0" * 4096)
    yield Case("png_instead", png_bomb()[:33] + _png_chunk(b"IEND", b""))
    yield Case("pdf_instead", b"%PDF-1.4\n%%EOF\n")
    yield Case("zip_instead", _rezip([("a.txt", b"a")]))
    if len(valid) > 1:
        yield Case("truncated_1", valid[:1])
        yield Case("truncated_half", valid[: len(valid) // 2])
        yield Case("truncated_minus_1", valid[:-1])
        flipped = bytearray(valid)
        flipped[len(valid) // 2] ^= 0xFF
        yield Case("byte_flipped", bytes(flipped))


def text_cases(valid: bytes) -> Iterator[Case]:
    yield Case("invalid_utf8", b"\xff\xfe\xc3\x28" + valid + b"\xed\xa0\x80")
    yield Case("utf16_bom", valid.decode("utf-8", "replace").encode("utf-16"))
    yield Case("deep_json", deep_json())
    yield Case("deep_xml", deep_xml())
    yield Case("billion_laughs", billion_laughs())
    yield Case("long_line", b"x" * (4 << 20))
    # 16 MiB of distinct short lines: quadratic line diffs would never end
    yield Case("many_lines", b"".join(b"line %d\n" % i for i in range(1_600_000)))
    for i, shape in enumerate(([], 1, "x", None, {"a": None}, [[{}]], {"": {"": []}})):
        yield Case(f"json_shape_{i}", json.dumps(shape).encode())


def cases(valid: bytes, suffix: str) -> Iterator[Case]:
    """Every malformed variant of ``valid`` (a well-formed file of type ``suffix``)."""
    suffix = suffix.lower()
    yield from generic_cases(valid)
    if suffix in TEXT_LIKE or suffix not in ZIP_MAIN and suffix not in IMAGES | {".pdf"}:
        yield from text_cases(valid)
    if suffix in ZIP_MAIN:
        try:
            yield from _zip_cases(valid, suffix)
        except zipfile.BadZipFile:
            pass  # a "zip" stand-in that is not one: the generic cases cover it
    if suffix in IMAGES:
        yield from _image_cases(valid, suffix)
    if suffix == ".pdf":
        yield from _pdf_cases(valid)
    if suffix in (".gz", ".tar.gz", ".tgz"):
        yield Case("gzip_bomb", gzip_bomb())
