"""Stand-in task files for OSWorld's official tasks, generated offline.

OSWorld's tasks download their inputs and gold files from a hub these machines cannot reach.
:func:`fill_cache` writes, for one task, a generated file of the right type at every place the
task will look in OSWorld's cache layout (setup ``download`` steps, evaluator ``cloud_file``
getters, ``update_browse_history``'s base database). Each file's content is derived from its
URL, so an input and its gold file differ: a task left undone scores 0 against its stand-in gold.

Two files are built to match what OSWorld's own hold: a Thunderbird profile archive
(``thunderbird-profile.tar.gz``: a profile Thunderbird really runs, with OSWorld's IMAP account
and a Gloda index) and the ``firefox_decrypt.py`` its account task runs (a stand-in that lists
the accounts the profile configures), so Thunderbird tasks start from the state they expect.

These are not the real files: a stand-in run proves that setup and evaluation run end to end
without infrastructure errors and that doing nothing scores 0, not that the gold answer scores 1.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import math
import os
import re
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from osworld_gym.tasks.cache import cloud_file_cache_path, download_cache_path
from osworld_gym.tasks.setup_browser import HISTORY_CACHE_NAME

#: Suffixes with no stand-in (VS Code extensions: no supported task reads one): such tasks are
#: skipped. GIMP's ``.xcf`` is written by GIMP itself, a camera ``.raw`` is seeded bytes (its
#: one task is infeasible: GIMP cannot open it), a ``.whl`` a minimal valid wheel.
NO_STANDIN = frozenset({".vsix"})
_TEXT = frozenset(
    {
        ".py",
        ".sh",
        ".md",
        ".txt",
        ".json",
        ".html",
        ".srt",
        ".js",
        ".css",
        ".tex",
        ".bib",
        ".eml",
        ".csv",
        ".code-workspace",
        "",
    }
)

_HISTORY_SCHEMA = """
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, title LONGVARCHAR,
  visit_count INTEGER DEFAULT 0 NOT NULL, typed_count INTEGER DEFAULT 0 NOT NULL,
  last_visit_time INTEGER NOT NULL, hidden INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE visits(id INTEGER PRIMARY KEY, url INTEGER NOT NULL, visit_time INTEGER NOT NULL,
  from_visit INTEGER, transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
  visit_duration INTEGER DEFAULT 0 NOT NULL);
"""


def _numbers(seed: str, n: int = 6) -> list[int]:
    digest = hashlib.sha256(seed.encode()).digest()
    return [b for b in digest[:n]]


def _suffix(name: str) -> str:
    lower = name.lower()
    for double in (".tar.gz", ".tar.xz"):
        if lower.endswith(double):
            return double
    return Path(lower).suffix


def _xlsx(seed: str) -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Sheet1"  # LibreOffice's and Excel's first sheet: rules name it (RNSheet1)
    ws.append(["Name", "Value"])
    for i, v in enumerate(_numbers(seed)):
        ws.append([f"item {i}", v])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _docx(seed: str) -> bytes:
    from docx import Document

    doc = Document()
    doc.add_paragraph(f"Stand-in document {' '.join(map(str, _numbers(seed)))}")
    if seed.startswith("gold "):  # gold files differ in structure too: structure-only metrics
        table = doc.add_table(rows=2, cols=2)  # (compare_docx_tables) score an input 0
        for i, cell in enumerate(table._cells):
            cell.text = str(_numbers(seed)[i])
        doc.add_picture(io.BytesIO(_image(seed, "PNG")))  # and compare_docx_images
        doc.add_paragraph("References")  # compare_references scores 1 when neither side
        doc.add_paragraph(f"Author, A. ({2000 + _numbers(seed)[0]}). Stand-in.")  # has one
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _odt(seed: str) -> bytes:
    """A real OpenDocument text (LibreOffice refuses a ``.odt`` holding OOXML); the input's
    first word is highlighted yellow, so check_highlighted_words scores an untouched input 0."""
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    doc = OpenDocumentText()
    yellow = Style(name="Highlight", family="text")
    yellow.addElement(TextProperties(backgroundcolor="#ffff00"))
    doc.automaticstyles.addElement(yellow)
    para = P()
    if not seed.startswith("gold "):
        para.addElement(Span(stylename=yellow, text="Stand-in"))
        para.addText(" ")
    para.addText(f"document {' '.join(map(str, _numbers(seed)))}")
    doc.text.addElement(para)
    buf = io.BytesIO()
    doc.write(buf)
    return buf.getvalue()


def _ods(seed: str) -> bytes:
    """A real OpenDocument spreadsheet, sheet ``Sheet1``, the same rows as :func:`_xlsx`."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    table = Table(name="Sheet1")
    rows = [("Name", "Value"), *((f"item {i}", v) for i, v in enumerate(_numbers(seed)))]
    for name, value in rows:
        row = TableRow()
        row.addElement(cell := TableCell(valuetype="string"))
        cell.addElement(P(text=name))
        if isinstance(value, int):
            row.addElement(cell := TableCell(valuetype="float", value=value))
        else:
            row.addElement(cell := TableCell(valuetype="string"))
        cell.addElement(P(text=str(value)))
        table.addElement(row)
    doc.spreadsheet.addElement(table)
    buf = io.BytesIO()
    doc.write(buf)
    return buf.getvalue()


def _pptx(seed: str) -> bytes:
    from pptx import Presentation

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = f"Stand-in {_numbers(seed)[0]}"
    slide.placeholders[1].text = " ".join(map(str, _numbers(seed)))
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def _pdf(seed: str, title: str | None = None) -> bytes:
    text = f"Stand-in PDF {' '.join(map(str, _numbers(seed)))}"
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    if title is not None:  # viewers title their window "<file> — <Title>"
        utf16 = "\ufeff".encode("utf-16-be") + title.encode("utf-16-be")
        objects.append(b"<< /Title <" + utf16.hex().encode() + b"> >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        info,
        xref,
    )
    return bytes(out)


def _image(seed: str, fmt: str) -> bytes:
    from PIL import Image, ImageDraw

    r, g, b, x, y, _ = _numbers(seed)
    img = Image.new("RGB", (160, 120), (r, g, b))
    ImageDraw.Draw(img).rectangle([x % 80, y % 60, x % 80 + 40, y % 60 + 30], fill=(g, b, r))
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def _xcf(seed: str, dest: Path) -> None:
    """GIMP's native format, saved by GIMP in batch mode from a generated PNG (~5 s)."""
    gimp = shutil.which("gimp")
    if gimp is None:
        raise RuntimeError("an .xcf stand-in needs GIMP (scripts/install.sh installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "in.png"
        png.write_bytes(_image(seed, "PNG"))
        out = Path(tmp) / "out.xcf"
        script = (
            f'(let* ((img (car (file-png-load RUN-NONINTERACTIVE "{png}" "{png}"))) '
            f"(drw (car (gimp-image-get-active-layer img)))) "
            f'(gimp-xcf-save RUN-NONINTERACTIVE img drw "{out}" "{out}") (gimp-quit 0))'
        )
        # its own HOME: GIMP writes its profile there on first start
        env = {**os.environ, "HOME": tmp}
        subprocess.run(
            [gimp, "-i", "-n", "-d", "-f", "-b", script],
            env=env,
            timeout=300,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        if not out.exists() or not out.read_bytes().startswith(b"gimp xcf "):
            raise RuntimeError(f"GIMP did not write the .xcf stand-in for {dest.name}")
        shutil.copyfile(out, dest)


def _wheel(seed: str, name: str) -> bytes:
    """A minimal valid wheel named like ``name`` (``dist-version-py3-none-any.whl``)."""
    dist, version = (name.split("-") + ["standin", "0.0"])[:2]
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": f"STANDIN = {_numbers(seed)!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: standins\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{k},,\n" for k in files) + f"{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, v in files.items():
            zf.writestr(k, v)
    return buf.getvalue()


def _media(
    seed: str, suffix: str, dest: Path, title: str | None = None, seconds: float = 2
) -> None:
    freq = 200 + _numbers(seed)[0] * 4
    inputs = ["-f", "lavfi", "-i", f"sine=frequency={freq}:duration={seconds}"]
    if suffix in (".mp4", ".mkv", ".avi", ".webm"):
        inputs += ["-f", "lavfi", "-i", f"testsrc=duration={seconds}:size=160x120:rate=10"]
    meta = ["-metadata", f"title={title}"] if title is not None else []
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-y", *inputs, *meta, "-shortest", str(dest)],
        check=True,
        timeout=300,
        capture_output=True,
    )


def _member(seed: str, name: str) -> bytes:
    """A stand-in of ``name``'s type, as bytes (written through a scratch file)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(name).name
        write_standin(path, f"{seed} {name}")
        return path.read_bytes()


def _archive(seed: str, suffix: str, members: tuple[str, ...] = ()) -> bytes:
    payload = f"stand-in {_numbers(seed)}\n".encode()
    buf = io.BytesIO()
    if suffix == ".zip":
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("standin/readme.txt", payload)
            for name in members:  # files later setup steps open from the unpacked archive
                z.writestr(name, _member(seed, name))
        return buf.getvalue()
    mode = {".tar.gz": "w:gz", ".tar.xz": "w:xz"}.get(suffix)
    if mode:
        with tarfile.open(fileobj=buf, mode=mode) as t:
            info = tarfile.TarInfo("standin/readme.txt")
            info.size = len(payload)
            t.addfile(info, io.BytesIO(payload))
        return buf.getvalue()
    return gzip.compress(payload) if suffix == ".gz" else lzma.compress(payload)


#: The account OSWorld's Thunderbird profiles hold (its tasks name it: dfac9ee8 removes it,
#: others read ``ImapMail/outlook.office365.com``) and the profile directory they use.
TB_ACCOUNT = ("imap", "outlook.office365.com", "anonym-x2024@outlook.com")
TB_PROFILE = "t5q2a5hp.default-release"
#: Thunderbird gives each installation its own profile, keyed by a hash of its install folder;
#: this is the one of Debian's ``/usr/lib/thunderbird`` (scripts/install.sh). Without it
#: Thunderbird would make a fresh profile and leave this one unused.
_TB_INSTALL = "FDC34C9F024745EB"
_TB_PROFILES_INI = f"""[Profile1]
Name=default
IsRelative=1
Path=standin0.default

[Profile0]
Name=default-release
IsRelative=1
Path={TB_PROFILE}
Default=1

[General]
StartWithLastProfile=1
Version=2

[Install{_TB_INSTALL}]
Default={TB_PROFILE}
Locked=1
"""


def _tb_prefs() -> str:
    """prefs.js of a profile with one IMAP account (the way Thunderbird stores it: an account
    naming a server and an identity) and Local Folders; it does not log in at start (no
    network here: a failed login would raise a dialog)."""
    kind, host, user = TB_ACCOUNT
    prefs = {
        "mail.accountmanager.accounts": "account1,account2",
        "mail.accountmanager.defaultaccount": "account1",
        "mail.accountmanager.localfoldersserver": "server2",
        "mail.account.account1.identities": "id1",
        "mail.account.account1.server": "server1",
        "mail.account.account2.server": "server2",
        "mail.identity.id1.useremail": user,
        "mail.identity.id1.fullName": "Stand-in",
        "mail.identity.id1.valid": True,
        "mail.server.server1.type": kind,
        "mail.server.server1.hostname": host,
        "mail.server.server1.realhostname": host,
        "mail.server.server1.userName": user,
        "mail.server.server1.realuserName": user,
        "mail.server.server1.name": user,
        "mail.server.server1.port": 993,
        "mail.server.server1.socketType": 3,
        "mail.server.server1.directory-rel": f"[ProfD]ImapMail/{host}",
        "mail.server.server1.login_at_startup": False,
        "mail.server.server1.check_new_mail": False,
        "mail.server.server2.type": "none",
        "mail.server.server2.hostname": "Local Folders",
        "mail.server.server2.userName": "nobody",
        "mail.server.server2.name": "Local Folders",
        "mail.server.server2.directory-rel": "[ProfD]Mail/Local Folders",
        "mail.shell.checkDefaultClient": False,
        "mail.provider.suppress_dialog_on_startup": True,
        "mail.startup.enabledMailCheckOnce": True,
        "mail.rights.version": 1,
    }
    return "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs.items())


#: Gloda's message index (global-messages-db.sqlite), the tables dd84e895's SQL reads, at the
#: schema version Thunderbird 153's Gloda keeps (30: an older one it would rebuild empty).
_GLODA_SCHEMA = """
CREATE TABLE folderLocations (id INTEGER PRIMARY KEY, folderURI TEXT NOT NULL,
  dirtyStatus INTEGER NOT NULL, name TEXT NOT NULL, indexingPriority INTEGER NOT NULL);
CREATE TABLE conversations (id INTEGER PRIMARY KEY, subject TEXT NOT NULL,
  oldestMessageDate INTEGER, newestMessageDate INTEGER);
CREATE TABLE messages (id INTEGER PRIMARY KEY, folderID INTEGER, messageKey INTEGER,
  conversationID INTEGER NOT NULL, date INTEGER, headerMessageID TEXT,
  deleted INTEGER NOT NULL default 0, jsonAttributes TEXT, notability INTEGER NOT NULL default 0);
CREATE TABLE messageAttributes (conversationID INTEGER NOT NULL, messageID INTEGER NOT NULL,
  attributeID INTEGER NOT NULL, value NUMERIC);
PRAGMA user_version = 30;
"""
#: Gloda's attribute id of a starred message in OSWorld's profile (dd84e895 reads it)
_GLODA_STAR = 58


def _gloda_db(seed: str) -> bytes:
    """An index where the inbox (folder 13, as in OSWorld's profile) holds some messages and
    only the first is starred, so dd84e895 ("star every message in the inbox") is not won
    by doing nothing; without one, Thunderbird writes an empty index that the check passes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gloda.sqlite"
        con = sqlite3.connect(path)
        con.executescript(_GLODA_SCHEMA)
        con.execute(
            "INSERT INTO folderLocations VALUES (13, ?, 0, 'Inbox', 0)",
            (f"imap://{TB_ACCOUNT[2].replace('@', '%40')}@{TB_ACCOUNT[1]}/INBOX",),
        )
        con.execute("INSERT INTO conversations VALUES (1, 'Stand-in', 0, 0)")
        for key, n in enumerate(_numbers(seed, 3), 1):
            con.execute(
                "INSERT INTO messages (id, folderID, messageKey, conversationID, date,"
                " headerMessageID) VALUES (?, 13, ?, 1, ?, ?)",
                (key, key, n, f"standin-{key}@example.com"),
            )
        con.execute("INSERT INTO messageAttributes VALUES (1, 1, ?, 1)", (_GLODA_STAR,))
        con.commit()
        con.close()
        return path.read_bytes()


def _tb_profile(seed: str) -> bytes:
    """``.thunderbird/`` as a ``.tar.gz`` that unpacks in the home folder: profiles.ini with
    two profiles (OSWorld's evaluator picks the second, ``-c 2``), the second the default,
    holding :data:`TB_ACCOUNT` in its prefs.js."""
    files = {
        ".thunderbird/profiles.ini": _TB_PROFILES_INI,
        ".thunderbird/installs.ini": f"[{_TB_INSTALL}]\nDefault={TB_PROFILE}\nLocked=1\n",
        ".thunderbird/standin0.default/times.json": "{}\n",
        f".thunderbird/{TB_PROFILE}/prefs.js": _tb_prefs(),
        f".thunderbird/{TB_PROFILE}/ImapMail/{TB_ACCOUNT[1]}/msgFilterRules.dat": (
            'version="9"\nlogging="no"\n'
        ),
        f".thunderbird/{TB_PROFILE}/standin.txt": f"stand-in {_numbers(seed)}\n",
        f".thunderbird/{TB_PROFILE}/global-messages-db.sqlite": _gloda_db(seed),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text if isinstance(text, bytes) else text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


#: Stand-in of the firefox_decrypt.py OSWorld's evaluator runs on ``~/.thunderbird``. The
#: real one decrypts the profile's logins.json with NSS (key4.db); a stand-in profile has no
#: key store, so this one reports, for the chosen profile (``-c N``: the Nth in profiles.ini),
#: the login of every account its prefs.js still configures (removing the account in
#: Thunderbird removes it from prefs.js), as CSV ``url,user,password`` like the real one.
FIREFOX_DECRYPT = r"""import argparse, configparser, csv, json, os, re, sys

parser = argparse.ArgumentParser()
parser.add_argument("profile")
parser.add_argument("-n", "--no-interactive", action="store_true")
parser.add_argument("-c", "--choice", type=int, default=1)
parser.add_argument("-f", "--format", default="human")
parser.add_argument("-d", "--delimiter", default=";")
args = parser.parse_args()
ini = configparser.ConfigParser()
if not ini.read(os.path.join(args.profile, "profiles.ini")):
    sys.exit(f"no profiles.ini in {args.profile}")
sections = [s for s in ini.sections() if s.startswith("Profile")]
if not 1 <= args.choice <= len(sections):
    sys.exit(f"no profile number {args.choice}")
path = ini[sections[args.choice - 1]]["Path"]
prefs = {}
with open(os.path.join(args.profile, path, "prefs.js"), encoding="utf-8") as f:
    for m in re.finditer(r'user_pref\("([^"]+)",\s*(.+?)\);\s*$', f.read(), re.M):
        prefs[m.group(1)] = json.loads(m.group(2))
out = csv.writer(sys.stdout, delimiter=args.delimiter, lineterminator="\n")
out.writerow(["url", "user", "password"])
for account in filter(None, prefs.get("mail.accountmanager.accounts", "").split(",")):
    server = prefs.get(f"mail.account.{account.strip()}.server")
    kind = prefs.get(f"mail.server.{server}.type")
    if server and kind in ("imap", "pop3", "nntp"):
        host = prefs.get(f"mail.server.{server}.hostname")
        out.writerow([f"{kind}://{host}", prefs.get(f"mail.server.{server}.userName"), ""])
"""


def write_standin(
    dest: Path,
    seed: str,
    title: str | None = None,
    seconds: float = 2,
    members: tuple[str, ...] = (),
) -> None:
    """Write a generated file of ``dest``'s type at ``dest``; ``title`` goes into a PDF's or a
    media file's metadata, ``seconds`` is a media file's length, ``members`` are extra paths a
    zip archive holds (stand-ins of their types)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    suffix = _suffix(dest.name)
    if suffix in (".mp3", ".mp4", ".wav", ".mkv", ".avi", ".webm", ".ogg", ".flac"):
        _media(seed, suffix, dest, title, seconds)
        return
    if suffix == ".pdf":
        dest.write_bytes(_pdf(seed, title))
        return
    if suffix == ".xcf":
        _xcf(seed, dest)
        return
    if suffix == ".whl":  # cache names are '<id>_<file name>'
        dest.write_bytes(_wheel(seed, dest.name.rsplit("_", 1)[-1]))
        return
    if dest.name.endswith(("thunderbird-profile.tar.gz", "thunderbird.profile.tar.gz")):
        dest.write_bytes(_tb_profile(seed))
        return
    if dest.name.endswith("firefox_decrypt.py"):
        dest.write_text(FIREFOX_DECRYPT)
        return
    if suffix == ".raw":
        dest.write_bytes(hashlib.sha256(seed.encode()).digest() * 4096)
        return
    makers = {
        ".xlsx": _xlsx,
        ".xls": _xlsx,
        ".ods": _ods,
        ".docx": _docx,
        ".odt": _odt,
        ".doc": _docx,
        ".pptx": _pptx,
        ".ppt": _pptx,
        ".odp": _pptx,
        ".pdf": _pdf,
        ".epub": lambda s: _archive(s, ".zip"),
    }
    if suffix in makers:
        data = makers[suffix](seed)
    elif suffix in (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff"):
        data = _image(
            seed,
            {".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF"}.get(
                suffix, suffix[1:].upper()
            ),
        )
    elif suffix in (".zip", ".gz", ".tar.gz", ".xz", ".tar.xz"):
        data = _archive(seed, suffix, members)
    elif suffix == ".json":
        data = json.dumps({"standin": _numbers(seed)}).encode()
    elif suffix == ".csv":
        data = (
            "name,value\n" + "".join(f"item {i},{v}\n" for i, v in enumerate(_numbers(seed)))
        ).encode()
    else:
        data = f"stand-in {' '.join(map(str, _numbers(seed)))}\n".encode()
    dest.write_bytes(data)


def _getters(evaluator: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in ("result", "expected"):
        value = evaluator.get(key)
        out += [g for g in (value if isinstance(value, list) else [value]) if isinstance(g, dict)]
    return out


def needed_files(raw: dict[str, Any], cache_root: Path) -> list[tuple[Path, str]]:
    """``[(cache path, seed)]`` of every file ``raw`` reads from OSWorld's cache."""
    task_id = raw["id"]
    evaluator = raw.get("evaluator") or {}
    out: list[tuple[Path, str]] = []
    for step in [*(raw.get("config") or []), *(evaluator.get("postconfig") or [])]:
        params = step.get("parameters") or {}
        if step.get("type") == "download":
            for f in params.get("files", []):
                out.append(
                    (download_cache_path(cache_root, task_id, f["url"], f["path"]), f["url"])
                )
        elif step.get("type") == "update_browse_history":
            out.append((cache_root / task_id / HISTORY_CACHE_NAME, "history"))
    for g in _getters(evaluator):
        if g.get("type") == "cloud_file":
            paths = g["path"] if isinstance(g["path"], list) else [g["path"]]
            dests = g["dest"] if isinstance(g["dest"], list) else [g["dest"]]
            for url, dest in zip(paths, dests, strict=False):
                out.append((cloud_file_cache_path(cache_root, task_id, dest), f"gold {url}"))
    return out


_VLC_SUFFIX = " - VLC media player"


def metadata_hints(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{guest file name: {"title": ..., "seconds": ...}}`` for downloaded files whose metadata
    setup depends on: a later ``activate_window`` waits for the window title an app derives from
    it (a PDF viewer's "<file> — <Title>", VLC's "<title> - VLC media player"), and VLC launched
    with ``--start-time=S`` needs a file longer than S seconds to show it at all."""
    steps = raw.get("config") or []
    names = [
        Path(f["path"]).name
        for s in steps
        if s.get("type") == "download"
        for f in (s.get("parameters") or {}).get("files", [])
    ]
    hints: dict[str, dict[str, Any]] = {}
    for step in steps:
        params = step.get("parameters") or {}
        window = params.get("window_name") if step.get("type") == "activate_window" else None
        command = json.dumps(params.get("command")) if step.get("type") == "launch" else ""
        for name in names:
            if isinstance(window, str) and window.startswith(f"{name} — "):
                hints.setdefault(name, {})["title"] = window[len(name) + 3 :]
            elif (
                isinstance(window, str)
                and window.endswith(_VLC_SUFFIX)
                and Path(name).stem in window
            ):
                hints.setdefault(name, {})["title"] = window[: -len(_VLC_SUFFIX)]
            if name in command and (m := re.search(r"--start-time=([\d.]+)", command)):
                hints.setdefault(name, {})["seconds"] = math.ceil(float(m.group(1))) + 3
    # a zip unpacked next to itself whose files a later `open` step opens
    zips = [
        Path(f["path"])
        for s in steps
        if s.get("type") == "download"
        for f in (s.get("parameters") or {}).get("files", [])
        if f["path"].endswith(".zip")
    ]
    opened = [
        Path(p)
        for s in steps
        if s.get("type") == "open" and isinstance(p := (s.get("parameters") or {}).get("path"), str)
    ]
    for archive in zips:
        members = tuple(
            str(o.relative_to(archive.parent))
            for o in opened
            if o.is_relative_to(archive.parent) and o.name not in names
        )
        if members:
            hints.setdefault(archive.name, {})["members"] = members
    return hints


def missing_standins(raw: dict[str, Any], cache_root: Path) -> list[str]:
    """File names of ``raw`` for which no stand-in can be generated."""
    return [p.name for p, _ in needed_files(raw, cache_root) if _suffix(p.name) in NO_STANDIN]


def fill_cache(raw: dict[str, Any], cache_root: Path) -> list[Path]:
    """Write stand-ins for every file ``raw`` reads from the cache under ``cache_root``."""
    written = []
    hints = metadata_hints(raw)
    guest_names = {
        download_cache_path(cache_root, raw["id"], f["url"], f["path"]): Path(f["path"]).name
        for s in raw.get("config") or []
        if s.get("type") == "download"
        for f in (s.get("parameters") or {}).get("files", [])
    }
    for path, seed in needed_files(raw, cache_root):
        if path.exists():
            continue
        if path.name == HISTORY_CACHE_NAME:
            path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(path)
            con.executescript(_HISTORY_SCHEMA)
            con.close()
        else:
            write_standin(path, seed, **hints.get(guest_names.get(path, ""), {}))
        written.append(path)
    return written


def ffmpeg_available() -> bool:
    return shutil.which("ffmpeg") is not None
