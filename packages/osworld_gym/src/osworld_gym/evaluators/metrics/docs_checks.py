"""More of OSWorld's word-processor checks: tab stops, default font, highlights, strike-through,
italics, images, references, text ignoring empty paragraphs.

Several first require the texts to match (``compare_docx_files`` with its defaults) and then
check one property of the *result*, as OSWorld does. An unreadable result scores 0; an
unreadable gold file raises.

>>> import tempfile, pathlib, docx
>>> d = pathlib.Path(tempfile.mkdtemp()); doc = docx.Document()
>>> doc.add_paragraph("a").add_run("b").italic = True
>>> doc.paragraphs[0].runs[-1].font.size = docx.shared.Pt(14); doc.save(d / "a.docx")
>>> check_italic_font_size_14(str(d / "a.docx"), str(d / "a.docx"))
1.0
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from osworld_gym.evaluators.metrics.docs import compare_docx_files
from osworld_gym.evaluators.metrics.docs_format import _open
from osworld_gym.evaluators.metrics.match import fuzzy_ratio
from osworld_gym.evaluators.metrics.options import check_options, honours

logger = logging.getLogger(__name__)

_OOR = "{http://openoffice.org/2001/registry}"


@honours("word_number_split_by_tabstop", "index")
def check_tabstops(result: str | None, expected: str | None, **options: Any) -> float:
    """Tab stops of the non-empty paragraphs, paired by position.

    The counts of non-empty paragraphs and, per pair, of tab stops (ignoring cleared ones and
    left stops at 0) must match, with equal alignments; the score is then 1 minus the mean,
    over paragraphs, of the summed position differences divided by the gold's text width. With
    ``word_number_split_by_tabstop`` n, the ``index``-th tab-separated piece of every result
    paragraph must have n words.
    """
    from docx.enum.text import WD_TAB_ALIGNMENT

    check_options("check_tabstops", options, check_tabstops.honoured_options)
    mine, gold = _open(result), _open(expected, gold=True) if expected else None
    if mine is None or gold is None:
        return 0.0
    p1s = [p for p in mine.paragraphs if p.text.strip()]
    p2s = [p for p in gold.paragraphs if p.text.strip()]
    if len(p1s) != len(p2s) or not p1s:
        return 0.0
    number = options.get("word_number_split_by_tabstop")
    if number is not None:
        index = options.get("index", 0)
        for p in p1s:
            pieces = p.text.split("\t")
            if (
                index >= len(pieces)
                or len([w for w in re.split(r"\s", pieces[index]) if w.strip()]) != number
            ):
                return 0.0
    section = gold.sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def kept(p: Any) -> list[Any]:
        return [
            t
            for t in p.paragraph_format.tab_stops
            if not (
                t.alignment == WD_TAB_ALIGNMENT.CLEAR
                or (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0)
            )
        ]

    minus = 0.0
    for a, b in zip(p1s, p2s, strict=True):
        t1, t2 = kept(a), kept(b)
        if len(t1) != len(t2):
            return 0.0
        if any(x.alignment != y.alignment for x, y in zip(t1, t2, strict=True)):
            return 0.0
        minus += sum(abs(x.position - y.position) for x, y in zip(t1, t2, strict=True)) / width
    return max(0.0, 1 - minus / len(p1s))


def find_default_font(result: str | None, rules: dict[str, Any]) -> float:
    """1 if Writer's default font (``registrymodifications.xcu``, item
    ``/org.openoffice.Office.Writer/DefaultFont``, prop ``Standard``; the last value) is
    ``rules["font_name"]``. An unparsable file scores 0."""
    if not result or not Path(result).is_file():
        return 0.0
    try:
        root = ElementTree.parse(result).getroot()
    except ElementTree.ParseError:
        return 0.0
    font = None
    for item in root.iter("item"):
        if item.get(f"{_OOR}path") == "/org.openoffice.Office.Writer/DefaultFont":
            for prop in item.iter("prop"):
                if prop.get(f"{_OOR}name") == "Standard":
                    for value in prop.findall("value"):
                        font = value.text
    return float(font == rules["font_name"])


def check_highlighted_words(result: str | None, expected: str | None) -> float:
    """For an ``.odt``: 1 if the texts match and *no* span uses an automatic style with a
    yellow (``#ffff00``) background, i.e. the highlights were removed."""
    from odf.opendocument import load
    from odf.text import Span

    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    doc = load(result)
    yellow = {
        style.getAttribute("name")
        for style in doc.automaticstyles.childNodes
        if any(p.getAttribute("backgroundcolor") == "#ffff00" for p in style.childNodes)
    }
    return float(
        not any(s.getAttribute("stylename") in yellow for s in doc.getElementsByType(Span))
    )


def evaluate_strike_through_last_paragraph(result: str | None, expected: str | None) -> float:
    """1 if the texts match and every run of the last paragraph is struck through."""
    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    doc = _open(result)
    if doc is None or not doc.paragraphs:
        return 0.0
    return float(all(r.font.strike for r in doc.paragraphs[-1].runs))


def check_italic_font_size_14(result: str | None, expected: str | None) -> float:
    """1 if the texts match and every italic run of the body is 14 pt."""
    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    doc = _open(result)
    if doc is None:
        return 0.0
    return float(
        all(
            r.font.size is not None and r.font.size.pt == 14
            for p in doc.paragraphs
            for r in p.runs
            if r.italic
        )
    )


@honours("ignore_blanks")
def compare_docx_files_and_ignore_new_lines(
    result: str | None, expected: str | None, **options: Any
) -> float:
    """``.docx`` texts without their empty paragraphs: whitespace-collapsed equal (default), or
    paragraph by paragraph with ``ignore_blanks`` false. Other file types score 0."""
    check_options(
        "compare_docx_files_and_ignore_new_lines",
        options,
        compare_docx_files_and_ignore_new_lines.honoured_options,
    )
    if not result or not expected or not (result.endswith(".docx") and expected.endswith(".docx")):
        return 0.0
    mine, gold = _open(result), _open(expected, gold=True)
    if mine is None:
        return 0.0
    a = [p.text for p in mine.paragraphs if p.text != ""]
    b = [p.text for p in gold.paragraphs if p.text != ""]
    if options.get("ignore_blanks", True):

        def squash(ps: list[str]) -> str:
            return re.sub(r"\s+", " ", "\n".join(ps)).strip()

        return float(squash(a) == squash(b))
    return float(a == b)


def compare_docx_images(result: str | None, expected: str | None) -> float:
    """1 if both documents relate the same number of images with identical decoded pixels,
    in relationship order."""
    from PIL import Image

    mine, gold = _open(result), _open(expected, gold=True) if expected else None
    if mine is None or gold is None:
        return 0.0

    def images(doc: Any) -> list[bytes]:
        return [r.target_part.blob for r in doc.part.rels.values() if "image" in r.reltype]

    i1, i2 = images(mine), images(gold)
    if len(i1) != len(i2):
        return 0.0
    for a, b in zip(i1, i2, strict=True):
        try:
            if Image.open(io.BytesIO(a)).tobytes() != Image.open(io.BytesIO(b)).tobytes():
                return 0.0
        except OSError:
            return 0.0
    return 1.0


@honours("reference_indicator", "reference_base_result", "content_only")
def compare_references(result: str | None, expected: str | None, **options: Any) -> float:
    """Similarity of the reference lists after the paragraph ``reference_indicator``
    ("References"): both without it is 1, one without it is 0, different counts of non-empty
    references 0; else the mean fuzzy ratio ``r``, rescaled as ``(r - base) / (1 - base)``
    when ``r >= base + 0.01`` (``reference_base_result``, default 0.5), else 0.
    ``content_only`` is accepted and ignored (OSWorld's code does not read it)."""
    check_options("compare_references", options, compare_references.honoured_options)
    if not result or not expected or not (result.endswith(".docx") and expected.endswith(".docx")):
        return 0.0
    mine, gold = _open(result), _open(expected, gold=True)
    if mine is None:
        return 0.0
    marker = options.get("reference_indicator", "References")
    base = float(options.get("reference_base_result", 0.5))
    a, b = [p.text for p in mine.paragraphs], [p.text for p in gold.paragraphs]
    if marker not in a and marker not in b:
        return 1.0
    if marker not in a or marker not in b:
        return 0.0
    r1 = [p for p in a[a.index(marker) + 1 :] if p.strip()]
    r2 = [p for p in b[b.index(marker) + 1 :] if p.strip()]
    if len(r1) != len(r2):
        return 0.0
    if not r1:
        return 1.0
    score = sum(fuzzy_ratio(x, y) for x, y in zip(r1, r2, strict=True)) / len(r1)
    return (score - base) / (1 - base) if score >= base + 0.01 else 0.0


def fuzzy_place_math(result: str | None, rules: dict[str, Any]) -> float:
    """The document must hold exactly three whitespace-separated words; the score is the mean,
    over them, of the best fuzzy ratio against any of ``rules["expected"]``."""
    doc = _open(result)
    if doc is None:
        return 0.0
    words = [w for p in doc.paragraphs for w in p.text.split()]
    if len(words) != 3:
        return 0.0
    return sum(max((fuzzy_ratio(w, a) for a in rules["expected"]), default=0.0) for w in words) / 3


@honours("threshold")
def evaluate_colored_words_in_tables(
    result: str | None, expected: str | None, **options: Any
) -> float:
    """1 if the texts match and, in every table, each run whose word starts with a vowel is red
    and every other non-empty run is blue: within CIEDE2000 ``threshold`` (default 3.5) of
    pure red/blue, colours converted as scikit-image does (:mod:`.colour`). A run without an
    explicit RGB colour scores 0 (OSWorld raises on it)."""
    from osworld_gym.evaluators.metrics.colour import delta_e_2000, rgb_to_lab

    check_options(
        "evaluate_colored_words_in_tables",
        options,
        evaluate_colored_words_in_tables.honoured_options,
    )
    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    doc = _open(result)
    if doc is None:
        return 0.0
    threshold = float(options.get("threshold", 3.5))
    red, blue = rgb_to_lab((255, 0, 0)), rgb_to_lab((0, 0, 255))
    for table in doc.tables:
        for row in table.rows:
            for cell in row.cells:
                for p in cell.paragraphs:
                    for run in p.runs:
                        if not run.text:
                            continue
                        try:
                            rgb = run.font.color.rgb
                        except AttributeError:
                            rgb = None
                        if rgb is None:
                            return 0.0
                        want = red if run.text[0].lower() in "aeiou" else blue
                        if delta_e_2000(rgb_to_lab(tuple(rgb)), want) > threshold:
                            return 0.0
    return 1.0
