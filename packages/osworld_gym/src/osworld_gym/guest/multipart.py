"""A small, careful ``multipart/form-data`` and ``x-www-form-urlencoded`` parser.

The body is already in memory; parts are found with ``bytes.find`` on the delimiter, so binary
payloads of any size are returned byte-exact (no line splitting, no re-encoding).

>>> body = (b'--XyZ\\r\\nContent-Disposition: form-data; name="file_path"\\r\\n\\r\\n/tmp/a.bin'
...         b'\\r\\n--XyZ\\r\\nContent-Disposition: form-data; name="file_data"; filename="a"\\r\\n'
...         b'Content-Type: application/octet-stream\\r\\n\\r\\n'
...         b'\\x00\\r\\n\\xff\\r\\n--XyZ--\\r\\n')
>>> form = parse_form("multipart/form-data; boundary=XyZ", body)
>>> form["file_path"].text, form["file_data"].data, form["file_data"].filename
('/tmp/a.bin', b'\\x00\\r\\n\\xff', 'a')
>>> parse_form("application/x-www-form-urlencoded", b"file_path=%7E%2Fa+b.txt")["file_path"].text
'~/a b.txt'
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message
from email.parser import BytesHeaderParser
from email.policy import HTTP
from urllib.parse import parse_qsl


class FormError(ValueError):
    """The request body is not a well-formed form."""


@dataclass(frozen=True)
class Field:
    """One form field; ``filename`` is set for file parts."""

    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _params(content_type: str) -> Message:
    msg = Message()
    msg["Content-Type"] = content_type
    return msg


def parse_form(content_type: str | None, body: bytes) -> dict[str, Field]:
    """Fields of a urlencoded or multipart body, by name (the last one wins)."""
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if ctype == "application/x-www-form-urlencoded" or (not ctype and b"=" in body):
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise FormError("urlencoded form is not UTF-8") from None
        return {k: Field(k, v.encode()) for k, v in pairs}
    if ctype != "multipart/form-data":
        raise FormError(f"expected a form (multipart/form-data or urlencoded), got {ctype!r}")
    boundary = _params(content_type or "").get_param("boundary")
    if not isinstance(boundary, str) or not boundary or len(boundary) > 200:
        raise FormError("multipart/form-data without a valid boundary parameter")
    return _parse_multipart(boundary.encode("latin-1"), body)


def _parse_multipart(boundary: bytes, body: bytes) -> dict[str, Field]:
    delim = b"--" + boundary
    if body.startswith(delim):
        pos = len(delim)
    else:
        i = body.find(b"\r\n" + delim)
        if i < 0:
            raise FormError("multipart body does not contain its boundary")
        pos = i + 2 + len(delim)
    fields: dict[str, Field] = {}
    while True:
        if body.startswith(b"--", pos):
            return fields  # close delimiter
        eol = body.find(b"\r\n", pos)
        if eol < 0 or body[pos:eol].strip(b" \t"):
            raise FormError("malformed multipart delimiter line")
        head_end = body.find(b"\r\n\r\n", eol)
        if head_end < 0:
            raise FormError("multipart part without a header/body separator")
        headers = BytesHeaderParser(policy=HTTP).parsebytes(body[eol + 2 : head_end + 2])
        start = head_end + 4
        end = body.find(b"\r\n" + delim, start)
        if end < 0:
            raise FormError("multipart part is not terminated by the boundary (truncated body?)")
        disp = headers.get("Content-Disposition")
        if disp is None:
            raise FormError("multipart part without Content-Disposition")
        name = disp.params.get("name")
        if not name:
            raise FormError("multipart part without a name")
        fields[name] = Field(
            name,
            body[start:end],
            disp.params.get("filename"),
            headers.get_content_type() if "Content-Type" in headers else None,
        )
        pos = end + 2 + len(delim)
