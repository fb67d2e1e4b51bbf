"""OSWorld's remaining small metrics: bookmarks, extensions, the accessibility tree, folder
listings, SQLite queries, log lines, PDF page counts, clipboard text, archives, train records.

Each follows OSWorld's definition (quirks noted). A missing result scores 0; a gold file or
rule that cannot be used raises.

>>> check_moved_jpgs({"children": [{"name": "a.jpg"}, {"name": "b.jpg"}]},
...                  {"expected": ["b.jpg", "a.jpg"]})
1.0
"""

from __future__ import annotations

import itertools
import logging
import operator
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from osworld_gym.evaluators.metrics.match import fuzzy_ratio
from osworld_gym.tasks import evaluator_registry as registry

logger = logging.getLogger(__name__)

#: Namespaces of OSWorld's (and our guest's) accessibility-tree XML on Linux.
A11Y_NS = {
    k: f"https://accessibility.ubuntu.example.org/ns/{v}"
    for k, v in {
        "st": "state",
        "attr": "attributes",
        "cp": "component",
        "doc": "document",
        "docattr": "document/attributes",
        "txt": "text",
        "val": "value",
        "act": "action",
    }.items()
}


def is_expected_bookmarks(result: dict[str, Any] | None, rule: dict[str, Any]) -> float:
    """Chrome bookmarks (the ``bookmarks`` getter's ``roots``) against ``rule``:

    * ``bookmark_bar_folders_names``: the set of folder names on the bookmark bar is ``names``;
    * ``bookmark_bar_websites_urls``: the set of URLs on the bar is ``urls``;
    * ``liked_authors_websites_urls``: the URLs in the bar's "Liked Authors" folder are, as a
      set, one choice per entry of ``urls`` (an entry may list alternatives).

    Raises:
        ValueError: another rule type.
    """
    if not result:
        return 0.0
    bar = result["bookmark_bar"]["children"]
    kind = rule["type"]
    if kind == "bookmark_bar_folders_names":
        return float({b["name"] for b in bar if b["type"] == "folder"} == set(rule["names"]))
    if kind == "bookmark_bar_websites_urls":
        return float({b["url"] for b in bar if b["type"] == "url"} == set(rule["urls"]))
    if kind == "liked_authors_websites_urls":
        folder = next(
            (b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None
        )
        if folder is None:
            return 0.0
        urls = {b["url"] for b in folder["children"] if b["type"] == "url"}
        choices = [[u] if isinstance(u, str) else list(u) for u in rule["urls"]]
        return float(any(set(c) == urls for c in itertools.product(*choices)))
    raise ValueError(f"is_expected_bookmarks: rule type {kind!r} is not supported")


_EXTENSION_ALIASES = [{"Zoom Chrome Extension", "Zoom for Google Chrome"}]


def is_expected_installed_extensions(result: list[str] | None, expected: dict[str, Any]) -> float:
    """1 if every expected extension name is installed (aliases of one extension are one)."""
    if not result:
        return 0.0

    def canonical(name: str) -> str:
        return next((min(g) for g in _EXTENSION_ALIASES if name in g), name)

    return float({canonical(n) for n in expected["expected"]} <= {canonical(n) for n in result})


def check_accessibility_tree(
    result: str | None, rules: list[dict[str, Any]], osname: str = "ubuntu"
) -> float:
    """The product over ``rules`` of how well the tree matches each: an ``xpath`` (or CSS
    ``selectors`` joined by ``", "``) must select at least one node (else 0); with ``text``,
    the best of the nodes' text against it, exactly (``exact``, required by OSWorld's code
    whenever ``text`` is given) or by fuzzy ratio. A tree that is not XML scores 0."""
    from lxml import etree
    from lxml.cssselect import CSSSelector

    if osname != "ubuntu":
        raise ValueError(
            f"check_accessibility_tree: only the ubuntu tree is supported, not {osname!r}"
        )
    if not result:
        return 0.0
    try:
        tree = etree.fromstring(result.encode() if isinstance(result, str) else result)
    except etree.XMLSyntaxError as exc:
        logger.info("check_accessibility_tree: tree is not XML: %s", exc)
        return 0.0
    total = 1.0
    for r in rules:
        if "xpath" in r:
            nodes = tree.xpath(r["xpath"], namespaces=A11Y_NS)
        elif "selectors" in r:
            nodes = CSSSelector(", ".join(r["selectors"]), namespaces=A11Y_NS)(tree)
        else:
            raise ValueError("check_accessibility_tree: a rule needs xpath or selectors")
        if not nodes:
            return 0.0
        if "text" in r:
            # xpath may give a number, a string or attribute values (count(...), //@name), none
            # of which has a .text to compare
            listed = nodes if isinstance(nodes, list) else [nodes]
            elements = [n for n in listed if isinstance(n, etree._Element)]
            if len(elements) != len(listed):
                raise ValueError(
                    "check_accessibility_tree: a rule with text needs an xpath that selects "
                    f"elements; {r.get('xpath')!r} does not"
                )
            exact = r["exact"]
            scores = [
                float(n.text == r["text"]) if exact else fuzzy_ratio(r["text"], n.text or "")
                for n in elements
                if n.text is not None or exact
            ]
            total *= max(scores, default=0.0)
    return float(total)


def check_moved_jpgs(result: dict[str, Any] | None, rule: dict[str, Any]) -> float:
    """1 if the folder listing's direct children are exactly ``rule["expected"]`` (names)."""
    if not result:
        return 0.0
    names = [c["name"] for c in result.get("children", [])]
    return float(len(names) == len(rule["expected"]) and set(names) == set(rule["expected"]))


def run_sqlite3(result: str | None, rules: dict[str, Any]) -> float:
    """The first column of the first row of ``rules["sql"]`` run on the database, as a
    number (``NULL``/no row is 0). A result file that is not a database scores 0."""
    if not result or not Path(result).is_file():
        return 0.0
    try:
        with sqlite3.connect(f"file:{result}?mode=ro", uri=True) as conn:
            row = conn.execute(rules["sql"]).fetchone()
    except sqlite3.DatabaseError as exc:
        logger.info("run_sqlite3: %s", exc)
        return 0.0
    return float((row[0] if row else 0) or 0)


_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")


def check_line_number(result: str | None, rule: dict[str, Any]) -> float:
    """1 if exactly ``rule["expected"]`` lines of the file hold a ``HH:MM:SS`` time."""
    if not result or not Path(result).is_file():
        return 0.0
    text = Path(result).read_text(encoding="utf-8", errors="replace")
    return float(
        sum(1 for line in text.splitlines() if _TIME.search(line)) == int(rule["expected"])
    )


def check_pdf_pages(result: str | None, rules: dict[str, Any]) -> float:
    """1 if ``pages <relation> ref_value`` holds (``relation`` an ``operator`` name: ``eq``,
    ``lt``, ...). An unreadable PDF scores 0."""
    from pypdf import PdfReader

    if not result:
        return 0.0
    try:
        pages = len(PdfReader(result).pages)
    except Exception as exc:  # noqa: BLE001 - an unreadable result scores 0
        logger.info("check_pdf_pages: cannot read %s: %s", result, exc)
        return 0.0
    return float(getattr(operator, rules["relation"])(pages, rules["ref_value"]))


def is_in_vm_clickboard(config: dict[str, Any], result: str | None) -> float:
    """1 if the clipboard text (e.g. ``xsel`` output) contains the expected string, or all of
    a list. Argument order is OSWorld's: the rule comes first."""
    if result is None:
        return 0.0
    want = config["expected"]
    return float(all(w in result for w in (want if isinstance(want, list) else [want])))


def compare_unique_train_records(result: str | None, expected: list[str], **options: Any) -> float:
    """A ``.docx`` of ``a, id, b, c`` lines with duplicates removed: every result line must come
    from the initial file (``expected[1]``), the train ids (second field of 4-field lines) must
    be unique and the gold's (``expected[0]``) set, with as many lines as the gold."""
    from osworld_gym.evaluators.metrics.docs_format import _open

    if not result or not isinstance(expected, list) or len(expected) < 2:
        return 0.0

    def lines_ids(doc: Any) -> tuple[list[str], list[str]]:
        lines = [p.text.strip() for p in doc.paragraphs if p.text.strip()]
        return lines, [ln.split(",")[1].strip() for ln in lines if len(ln.split(",")) == 4]

    mine = _open(result)
    if mine is None:
        return 0.0
    lines, ids = lines_ids(mine)
    gold_lines, gold_ids = lines_ids(_open(expected[0], gold=True))
    initial, _ = lines_ids(_open(expected[1], gold=True))
    return float(
        set(lines) <= set(initial)
        and len(ids) == len(set(ids))
        and set(ids) == set(gold_ids)
        and len(lines) == len(gold_lines)
    )


def compare_archive(result: str | None, expected: str, **options: Any) -> float:
    """Unpack both archives; the sorted file names under ``file_path`` must match, and the score
    is the mean of a file metric over the pairs, chosen by ``file_type`` (``text`` default,
    ``pdf``, ``docx``, ``ppt``, ``image``, ``csv``, ``table``); remaining options go to it.

    Raises:
        NotImplementedError: ``audio``/``video`` (not implemented here).
        ValueError: an unknown ``file_type``.
    """
    if not result:
        return 0.0
    options = dict(options)
    sub = options.pop("file_path", "")
    kind = options.pop("file_type", "text")
    names = {
        "text": "compare_text_file",
        "pdf": "compare_pdfs",
        "docx": "compare_docx_files",
        "ppt": "compare_pptx_files",
        "image": "compare_images",
        "csv": "compare_csv",
        "table": "compare_table",
    }
    if kind in ("audio", "video"):
        raise NotImplementedError(f"compare_archive: file_type {kind!r} is not implemented")
    if kind not in names:
        raise ValueError(f"compare_archive: unknown file_type {kind!r}")
    compare = registry.metric(names[kind])
    with tempfile.TemporaryDirectory() as tmp:
        pred, gold = Path(tmp) / "pred", Path(tmp) / "gold"
        try:
            shutil.unpack_archive(result, pred)
        except (shutil.ReadError, ValueError, OSError) as exc:
            logger.info("compare_archive: cannot unpack %s: %s", result, exc)
            return 0.0
        shutil.unpack_archive(expected, gold)
        if not (pred / sub).is_dir():
            return 0.0
        files1, files2 = (
            sorted(p.name for p in (pred / sub).iterdir()),
            sorted(p.name for p in (gold / sub).iterdir()),
        )
        if files1 != files2:
            return 0.0
        if not files1:
            return 0.0  # OSWorld divides by zero here
        total = sum(
            compare(str(pred / sub / a), str(gold / sub / b), **options)
            for a, b in zip(files1, files2, strict=True)
        )
        return total / len(files1)


def _city(value: Any) -> str:
    """Lower case, accents removed, runs of anything but letters and digits as one space."""
    import unicodedata

    if value is None:
        return ""
    text = unicodedata.normalize("NFKD", str(value))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def compare_conference_city_in_order(result: str | None, expected: dict[str, Any]) -> float:
    """Cells C2:C22 of the workbook's active sheet, in order: each must contain (normalised,
    see :func:`_city`) the expected city of its position, or one of a list of alternatives.
    An expected list shorter than the range, or an unreadable workbook, scores 0."""
    import openpyxl

    if not result:
        return 0.0
    try:
        ws = openpyxl.load_workbook(result).active
        if ws is None:
            raise ValueError("the workbook has no sheet")
    except Exception as exc:  # noqa: BLE001 - an unreadable result scores 0
        logger.info("compare_conference_city_in_order: cannot read %s: %s", result, exc)
        return 0.0
    cities = [c.value for row in ws["C2:C22"] for c in row]
    want = expected["expected"]
    if len(want) < len(cities):
        return 0.0
    for got, entry in zip(cities, want, strict=False):
        options = [entry] if isinstance(entry, str) else list(entry)
        if not any(_city(o) and _city(o) in _city(got) for o in options):
            return 0.0
    return 1.0
