"""Semantics of the docx-format and image-editing metrics added for OSWorld's official tasks:
the right answer scores 1, a near miss what OSWorld's implementation gives."""

from __future__ import annotations

from pathlib import Path

import docx
import numpy as np
import pytest
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT
from osworld_gym.evaluators.metrics import docs_format as d
from osworld_gym.evaluators.metrics import gimp as g
from PIL import Image


def document(path: Path, paragraphs=("Intro", "Body"), edit=None) -> str:
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    if edit:
        edit(doc)
    doc.save(path)
    return str(path)


def table(rows):
    def edit(doc):
        t = doc.add_table(rows=len(rows), cols=len(rows[0]))
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                t.cell(i, j).text = v

    return edit


def test_compare_docx_tables(tmp_path):
    gold = document(tmp_path / "g.docx", edit=table([["a", "b"], ["1", "2"]]))
    assert (
        d.compare_docx_tables(
            document(tmp_path / "s.docx", edit=table([["a ", "b"], ["1", "2"]])), gold
        )
        == 1.0
    )
    assert (
        d.compare_docx_tables(
            document(tmp_path / "n.docx", edit=table([["a", "b"], ["1", "3"]])), gold
        )
        == 0.0
    )
    assert d.compare_docx_tables(document(tmp_path / "x.docx"), gold) == 0.0
    assert d.compare_docx_tables(str(tmp_path / "missing.docx"), gold) == 0.0


def spacing(value):
    def edit(doc):
        for p in doc.paragraphs:
            p.paragraph_format.line_spacing = value

    return edit


def test_compare_line_spacing(tmp_path):
    gold = document(tmp_path / "g.docx", edit=spacing(2.0))
    assert d.compare_line_spacing(document(tmp_path / "s.docx", edit=spacing(2.0)), gold) == 1.0
    assert d.compare_line_spacing(document(tmp_path / "n.docx", edit=spacing(1.5)), gold) == 0.0
    # the text must match too (compare_docx_files with its defaults)
    assert (
        d.compare_line_spacing(
            document(tmp_path / "t.docx", ("Intro", "Other"), spacing(2.0)), gold
        )
        == 0.0
    )


def test_compare_font_names_needs_explicit_fonts_on_every_run(tmp_path):
    def font(name):
        def edit(doc):
            for p in doc.paragraphs:
                for r in p.runs:
                    r.font.name = name

        return edit

    assert (
        d.compare_font_names(
            document(tmp_path / "a.docx", edit=font("Arial")), {"font_name": "Arial"}
        )
        == 1.0
    )
    assert (
        d.compare_font_names(
            document(tmp_path / "t.docx", edit=font("Times")), {"font_name": "Arial"}
        )
        == 0.0
    )
    # inherited (None) font: fails, as in OSWorld
    assert d.compare_font_names(document(tmp_path / "i.docx"), {"font_name": "Arial"}) == 0.0


def test_contains_page_break(tmp_path):
    def breaks(n):
        def edit(doc):
            for _ in range(n):
                doc.paragraphs[0].add_run().add_break(WD_BREAK.PAGE)

        return edit

    assert d.contains_page_break(document(tmp_path / "one.docx", edit=breaks(1)), {}) == 1.0
    assert d.contains_page_break(document(tmp_path / "none.docx"), {}) == 0.0
    two = document(tmp_path / "two.docx", edit=breaks(2))
    assert d.contains_page_break(two, {"page_break_count": 2}) == 1.0
    assert d.contains_page_break(two, {"page_break_count": 1}) == 0.0


def test_has_page_numbers_in_footers(tmp_path):
    def footer(text):
        def edit(doc):
            doc.sections[0].footer.paragraphs[0].text = text

        return edit

    assert (
        d.has_page_numbers_in_footers(document(tmp_path / "p.docx", edit=footer("Page 1"))) == 1.0
    )
    assert d.has_page_numbers_in_footers(document(tmp_path / "n.docx", edit=footer("Page"))) == 0.0


def test_is_first_line_centered(tmp_path):
    def align(value):
        def edit(doc):
            doc.paragraphs[0].alignment = value

        return edit

    assert (
        d.is_first_line_centered(
            document(tmp_path / "c.docx", edit=align(WD_PARAGRAPH_ALIGNMENT.CENTER))
        )
        == 1.0
    )
    assert (
        d.is_first_line_centered(
            document(tmp_path / "r.docx", edit=align(WD_PARAGRAPH_ALIGNMENT.RIGHT))
        )
        == 0.0
    )
    assert d.is_first_line_centered(document(tmp_path / "e.docx", ())) == 0.0


def test_compare_subscript_contains(tmp_path):
    def sub(doc):
        doc.paragraphs[1].add_run("2").font.subscript = True

    gold = document(tmp_path / "g.docx", ("H", "H"), sub)
    assert d.compare_subscript_contains(document(tmp_path / "s.docx", ("H", "H"), sub), gold) == 1.0
    assert d.compare_subscript_contains(document(tmp_path / "n.docx", ("H", "H2")), gold) == 0.0


# -- GIMP -----------------------------------------------------------------------------------------


def picture(w=64, h=48, seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = np.linspace(30, 220, w)[None, :, None] * np.ones((h, 1, 3))
    base[..., 1] = np.linspace(40, 200, h)[:, None]
    blobs = rng.integers(-20, 20, (h // 8 + 1, w // 8 + 1, 3)).repeat(8, 0).repeat(8, 1)[:h, :w]
    return Image.fromarray(np.clip(base + blobs, 0, 255).astype(np.uint8), "RGB")


def save(im: Image.Image, path: Path) -> str:
    im.save(path)
    return str(path)


def test_check_structure_sim(tmp_path):
    orig = save(picture(), tmp_path / "o.png")
    assert g.check_structure_sim(save(picture(), tmp_path / "s.png"), orig) == 1.0
    assert g.check_structure_sim(save(picture(seed=5), tmp_path / "other.png"), orig) == 0.0
    assert g.check_structure_sim(save(picture(65, 48), tmp_path / "big.png"), orig) == 0.0  # size
    assert (
        g.check_structure_sim(
            save(picture(6, 6), tmp_path / "t.png"), save(picture(6, 6), tmp_path / "t2.png")
        )
        == 0.0
    )
    assert g.check_file_exists_and_structure_sim(str(tmp_path / "missing.png"), orig) == 0.0


def test_brightness_decrease(tmp_path):
    im = picture()
    orig = save(im, tmp_path / "o.png")
    darker = save(im.point(lambda v: int(v * 0.7)), tmp_path / "d.png")
    brighter = save(im.point(lambda v: min(255, int(v * 1.2))), tmp_path / "b.png")
    assert g.check_brightness_decrease_and_structure_sim(darker, orig) == 1.0
    assert g.check_brightness_decrease_and_structure_sim(brighter, orig) == 0.0
    assert (
        g.check_brightness_decrease_and_structure_sim(
            save(Image.new("RGB", (64, 48)), tmp_path / "k.png"), orig
        )
        == 0.0
    )


def test_contrast_and_saturation_increase(tmp_path):
    im = picture()
    arr = np.asarray(im).astype(float)
    orig = save(im, tmp_path / "o.png")
    contrast = save(
        Image.fromarray(np.clip((arr - 128) * 1.3 + 128, 0, 255).astype(np.uint8)),
        tmp_path / "c.png",
    )
    flat = save(
        Image.fromarray(np.clip((arr - 128) * 0.7 + 128, 0, 255).astype(np.uint8)),
        tmp_path / "f.png",
    )
    assert g.check_contrast_increase_and_structure_sim(contrast, orig) == 1.0
    assert g.check_contrast_increase_and_structure_sim(flat, orig) == 0.0
    from PIL import ImageEnhance

    assert (
        g.check_saturation_increase_and_structure_sim(
            save(ImageEnhance.Color(im).enhance(1.4), tmp_path / "s.png"), orig
        )
        == 1.0
    )
    assert (
        g.check_saturation_increase_and_structure_sim(
            save(ImageEnhance.Color(im).enhance(0.6), tmp_path / "u.png"), orig
        )
        == 0.0
    )


def test_image_mirror_and_file_size(tmp_path):
    im = picture()
    orig = save(im, tmp_path / "o.png")
    mirrored = save(im.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tmp_path / "m.png")
    assert g.check_image_mirror(mirrored, orig) == 1.0
    assert g.check_image_mirror(orig, orig) == 0.0
    size = Path(orig).stat().st_size
    assert g.check_image_file_size(orig, {"max_size": size + 1}) == 1.0
    assert g.check_image_file_size(orig, {"max_size": size}) == 0.0


def test_unreadable_result_scores_zero_and_unreadable_original_raises(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    orig = save(picture(), tmp_path / "o.png")
    assert g.check_structure_sim(str(bad), orig) == 0.0
    with pytest.raises(OSError):
        g.check_structure_sim(orig, str(bad))


def test_check_image_size_canvas_or_opaque_box(tmp_path):
    im = Image.new("RGBA", (100, 80), (0, 0, 0, 0))
    im.paste((255, 0, 0, 255), (10, 10, 60, 40))
    p = save(im, tmp_path / "t.png")
    assert g.check_image_size(p, {"width": 100, "height": 80}) == 1.0
    assert g.check_image_size(p, {"width": 50, "height": 30, "ignore_transparent": True}) == 1.0
    assert g.check_image_size(p, {"width": 100, "ignore_transparent": True}) == 0.0
    assert g.check_image_size(p, {"height": 81}) == 0.0


def test_structure_sim_resized_and_palette(tmp_path):
    orig = picture(64, 48)
    o = save(orig, tmp_path / "o.png")
    assert (
        g.check_structure_sim_resized(save(orig.resize((128, 96)), tmp_path / "big.png"), o) == 1.0
    )
    assert (
        g.check_structure_sim_resized(save(picture(64, 48, seed=9), tmp_path / "x.png"), o) == 0.0
    )
    pal = save(orig.convert("P", palette=Image.Palette.ADAPTIVE, colors=256), tmp_path / "p.png")
    assert g.check_palette_and_structure_sim(pal, o) == 1.0
    assert g.check_palette_and_structure_sim(o, o) == 0.0  # not indexed colour


def test_green_background(tmp_path):
    mask = Image.new("RGB", (40, 40), (0, 0, 0))
    mask.paste((255, 255, 255), (0, 0, 40, 10))
    m = save(mask, tmp_path / "m.png")
    good = Image.new("RGB", (40, 40), (200, 10, 10))
    good.paste((10, 200, 10), (0, 0, 40, 10))
    assert g.check_green_background(save(good, tmp_path / "g.png"), m) == 1.0
    bad = Image.new("RGB", (40, 40), (200, 10, 10))
    bad.paste((10, 200, 10), (0, 0, 40, 9))  # one row of the band is not green
    assert g.check_green_background(save(bad, tmp_path / "b.png"), m) == 0.0
    with pytest.raises(ValueError):
        g.check_green_background(
            save(good, tmp_path / "b2.png"),
            save(Image.new("RGB", (50, 40), "white"), tmp_path / "wide.png"),
        )


def test_triangle_position_and_textbox(tmp_path):
    im = Image.new("RGB", (100, 100), "white")
    im.paste((255, 0, 0), (45, 45, 55, 55))
    im.paste((0, 0, 255), (0, 0, 50, 1))  # the rarest colour (50 px): a thin band
    # second-rarest colour is the red square, centred
    assert g.check_triangle_position(save(im, tmp_path / "c.png")) == 1.0
    off = Image.new("RGB", (100, 100), "white")
    off.paste((255, 0, 0), (0, 0, 10, 10))
    off.paste((0, 0, 255), (50, 99, 100, 100))
    assert g.check_triangle_position(save(off, tmp_path / "o.png")) == 0.0
    text = Image.new("RGB", (200, 50), "white")
    text.paste((0, 0, 0), (3, 20, 60, 30))
    assert g.check_textbox_on_leftside(save(text, tmp_path / "l.png")) == 1.0
    text2 = Image.new("RGB", (200, 50), "white")
    text2.paste((0, 0, 0), (40, 20, 100, 30))
    assert g.check_textbox_on_leftside(save(text2, tmp_path / "r.png")) == 0.0
