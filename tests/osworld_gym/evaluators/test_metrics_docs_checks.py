"""Semantics of OSWorld's further word-processor checks on generated .docx/.odt/.xcu files:
the right answer scores 1, a near miss what OSWorld's implementation gives."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest
from docx.enum.text import WD_TAB_ALIGNMENT
from docx.shared import Inches, Pt
from osworld_gym.evaluators.metrics import docs_checks as dc
from PIL import Image


def document(path: Path, paragraphs=("Intro", "Body"), edit=None) -> str:
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    if edit:
        edit(doc)
    doc.save(path)
    return str(path)


def tabs(position_in, alignment=WD_TAB_ALIGNMENT.RIGHT):
    def edit(doc):
        for p in doc.paragraphs:
            p.paragraph_format.tab_stops.add_tab_stop(Inches(position_in), alignment)

    return edit


def test_check_tabstops(tmp_path):
    rows = ("Name\tScore", "Ann Lee\t3")
    gold = document(tmp_path / "g.docx", rows, tabs(6))
    assert dc.check_tabstops(document(tmp_path / "s.docx", rows, tabs(6)), gold) == 1.0
    near = dc.check_tabstops(document(tmp_path / "n.docx", rows, tabs(5.5)), gold)
    assert near == pytest.approx(1 - 0.5 / 6.0)  # half an inch of a 6-inch text width
    assert (
        dc.check_tabstops(
            document(tmp_path / "a.docx", rows, tabs(6, WD_TAB_ALIGNMENT.CENTER)), gold
        )
        == 0.0
    )
    assert dc.check_tabstops(document(tmp_path / "x.docx", rows), gold) == 0.0
    opts = {"word_number_split_by_tabstop": 1, "index": 0}
    assert (
        dc.check_tabstops(document(tmp_path / "w.docx", rows, tabs(6)), gold, **opts) == 0.0
    )  # "Ann Lee"
    assert (
        dc.check_tabstops(
            document(tmp_path / "w.docx", rows, tabs(6)),
            gold,
            word_number_split_by_tabstop=1,
            index=1,
        )
        == 1.0
    )


def test_find_default_font(tmp_path):
    f = tmp_path / "r.xcu"
    f.write_text(
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry">'
        '<item oor:path="/org.openoffice.Office.Writer/DefaultFont">'
        '<prop oor:name="Standard" oor:op="fuse"><value>Times New Roman</value></prop></item>'
        "</oor:items>"
    )
    assert dc.find_default_font(str(f), {"font_name": "Times New Roman"}) == 1.0
    assert dc.find_default_font(str(f), {"font_name": "Liberation Serif"}) == 0.0
    assert dc.find_default_font(None, {"font_name": "x"}) == 0.0


def odt(path: Path, highlighted: bool) -> str:
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    doc = OpenDocumentText()
    style = Style(name="T1", family="text")
    style.addElement(TextProperties(backgroundcolor="#ffff00" if highlighted else "#ffffff"))
    doc.automaticstyles.addElement(style)
    p = P(text="Keep ")
    p.addElement(Span(stylename=style, text="this"))
    doc.text.addElement(p)
    doc.save(str(path))
    return str(path)


def test_check_highlighted_words_wants_highlights_removed(tmp_path):
    gold = odt(tmp_path / "g.odt", False)
    assert dc.check_highlighted_words(odt(tmp_path / "clean.odt", False), gold) == 1.0
    assert dc.check_highlighted_words(odt(tmp_path / "hl.odt", True), gold) == 0.0


def test_strike_through_and_italic_size(tmp_path):
    def strike(doc):
        for r in doc.paragraphs[-1].runs:
            r.font.strike = True

    gold = document(tmp_path / "g.docx")
    assert (
        dc.evaluate_strike_through_last_paragraph(document(tmp_path / "s.docx", edit=strike), gold)
        == 1.0
    )
    assert dc.evaluate_strike_through_last_paragraph(document(tmp_path / "n.docx"), gold) == 0.0

    def italic(size):
        def edit(doc):
            r = doc.paragraphs[0].runs[0]
            r.italic, r.font.size = True, Pt(size)

        return edit

    assert dc.check_italic_font_size_14(document(tmp_path / "i.docx", edit=italic(14)), gold) == 1.0
    assert dc.check_italic_font_size_14(document(tmp_path / "j.docx", edit=italic(12)), gold) == 0.0


def test_compare_docx_files_and_ignore_new_lines(tmp_path):
    gold = document(tmp_path / "g.docx", ("a", "b"))
    spaced = document(tmp_path / "s.docx", ("a", "", "b", ""))
    assert dc.compare_docx_files_and_ignore_new_lines(spaced, gold) == 1.0
    assert dc.compare_docx_files_and_ignore_new_lines(spaced, gold, ignore_blanks=False) == 1.0
    assert (
        dc.compare_docx_files_and_ignore_new_lines(document(tmp_path / "d.docx", ("a", "c")), gold)
        == 0.0
    )


def with_picture(color: str):
    def edit(doc):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), color).save(buf, "PNG")
        buf.seek(0)
        doc.add_picture(buf)

    return edit


def test_compare_docx_images(tmp_path):
    gold = document(tmp_path / "g.docx", edit=with_picture("red"))
    assert (
        dc.compare_docx_images(document(tmp_path / "s.docx", edit=with_picture("red")), gold) == 1.0
    )
    assert (
        dc.compare_docx_images(document(tmp_path / "b.docx", edit=with_picture("blue")), gold)
        == 0.0
    )
    assert dc.compare_docx_images(document(tmp_path / "n.docx"), gold) == 0.0


def test_compare_references(tmp_path):
    refs = ("Body", "References", "[1] A. Lee. Paper one. 2020.", "[2] B. Kim. Paper two. 2021.")
    gold = document(tmp_path / "g.docx", refs)
    assert dc.compare_references(document(tmp_path / "s.docx", refs), gold) == 1.0
    near = document(tmp_path / "n.docx", refs[:3] + ("[2] B. Kim. Paper 2. 2021.",))
    assert 0.0 < dc.compare_references(near, gold) < 1.0
    assert dc.compare_references(document(tmp_path / "m.docx", refs[:3]), gold) == 0.0
    assert dc.compare_references(document(tmp_path / "x.docx", ("Body",)), gold) == 0.0


def coloured_table(words_colours):
    from docx.shared import RGBColor

    def edit(doc):
        t = doc.add_table(rows=1, cols=len(words_colours))
        for i, (word, rgb) in enumerate(words_colours):
            run = t.cell(0, i).paragraphs[0].add_run(word)
            if rgb is not None:
                run.font.color.rgb = RGBColor(*rgb)

    return edit


def test_evaluate_colored_words_in_tables(tmp_path):
    gold = document(tmp_path / "g.docx", edit=coloured_table([("apple", None), ("pear", None)]))

    def score(words):
        return dc.evaluate_colored_words_in_tables(
            document(tmp_path / "r.docx", edit=coloured_table(words)), gold
        )

    assert score([("apple", (255, 0, 0)), ("pear", (0, 0, 255))]) == 1.0
    assert score([("apple", (250, 2, 0)), ("pear", (0, 0, 250))]) == 1.0  # within 3.5
    assert score([("apple", (200, 0, 0)), ("pear", (0, 0, 255))]) == 0.0  # dark red is too far
    assert score([("apple", (0, 0, 255)), ("pear", (255, 0, 0))]) == 0.0
    assert score([("apple", None), ("pear", (0, 0, 255))]) == 0.0  # no colour at all
