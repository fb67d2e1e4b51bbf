"""Semantics of OSWorld's smaller presentation / LibreOffice-settings metrics on real files:
the right answer scores 1, a near miss what OSWorld's implementation gives."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest
from osworld_gym.evaluators.metrics import slides_checks as sc
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Inches

XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Impress/Misc/Start">
<prop oor:name="EnablePresenterScreen" oor:op="fuse"><value>{presenter}</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document">
<prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>{minutes}</value></prop></item>
</oor:items>
"""


def xcu(tmp_path: Path, presenter: str = "false", minutes: int = 3) -> str:
    f = tmp_path / f"reg{presenter}{minutes}.xcu"
    f.write_text(XCU.format(presenter=presenter, minutes=minutes))
    return str(f)


def test_libreoffice_registry_settings(tmp_path):
    assert sc.check_presenter_console_disable(xcu(tmp_path, "false")) == 1.0
    assert sc.check_presenter_console_disable(xcu(tmp_path, "true")) == 0.0
    assert sc.check_auto_saving_time(xcu(tmp_path, minutes=3), {"minutes": 3}) == 1.0
    assert sc.check_auto_saving_time(xcu(tmp_path, minutes=10), {"minutes": 3}) == 0.0
    empty = tmp_path / "empty.xcu"
    empty.write_text('<oor:items xmlns:oor="http://openoffice.org/2001/registry"/>')
    assert sc.check_presenter_console_disable(str(empty)) == 0.0  # never set: 0, as OSWorld
    assert sc.check_auto_saving_time(None, {"minutes": 3}) == 0.0


def deck(path: Path, edit=None) -> str:
    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    prs.slides.add_slide(prs.slide_layouts[6])
    if edit:
        edit(prs)
    prs.save(path)
    return str(path)


def test_orientation(tmp_path):
    def portrait(prs):
        prs.slide_width, prs.slide_height = prs.slide_height, prs.slide_width

    assert sc.check_slide_orientation_Portrait(deck(tmp_path / "p.pptx", portrait)) == 1.0
    assert sc.check_slide_orientation_Portrait(deck(tmp_path / "l.pptx")) == 0.0


def with_transition(path: str, slide: int, xml: bytes) -> str:
    src = zipfile.ZipFile(path)
    out = Path(path).with_name("t_" + Path(path).name)
    with zipfile.ZipFile(out, "w") as z:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == f"ppt/slides/slide{slide + 1}.xml":
                data = re.sub(rb"</p:cSld>", b"</p:cSld>" + xml, data, count=1)
            z.writestr(item, data)
    return str(out)


def test_check_transition(tmp_path):
    base = deck(tmp_path / "d.pptx")
    dissolve = with_transition(base, 1, b"<p:transition><p:dissolve/></p:transition>")
    assert sc.check_transition(dissolve, {"slide_idx": 1, "transition_type": "dissolve"}) == 1.0
    assert sc.check_transition(dissolve, {"slide_idx": 0, "transition_type": "dissolve"}) == 0.0
    assert sc.check_transition(dissolve, {"slide_idx": 1, "transition_type": "fade"}) == 0.0
    assert sc.check_transition(dissolve, {"slide_idx": 7, "transition_type": "dissolve"}) == 0.0


def test_check_left_panel():
    tree = '<desktop><application><document-frame name="Slides View"/></application></desktop>'
    assert sc.check_left_panel(tree) == 1.0
    assert sc.check_left_panel(tree.replace("Slides View", "Outline")) == 0.0
    assert sc.check_left_panel("not xml") == 0.0


def picture_deck(path: Path, box) -> str:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    img = io.BytesIO()
    Image.new("RGB", (40, 30), "teal").save(img, "PNG")
    img.seek(0)
    slide.shapes.add_picture(img, *box)
    prs.save(path)
    return str(path)


def test_image_stretch_and_center(tmp_path):
    gold = picture_deck(tmp_path / "g.pptx", (Inches(1), Inches(1), Inches(2), Inches(1.5)))
    full = picture_deck(tmp_path / "f.pptx", (0, 0, Inches(10), Inches(7.5)))
    near = picture_deck(tmp_path / "n.pptx", (Inches(0.2), Inches(0.2), Inches(9.6), Inches(7.1)))
    small = picture_deck(tmp_path / "s.pptx", (Inches(1), Inches(1), Inches(5), Inches(4)))
    assert sc.check_image_stretch_and_center(full, gold) == 1.0
    assert sc.check_image_stretch_and_center(near, gold) == 1.0  # within half an inch
    assert sc.check_image_stretch_and_center(small, gold) == 0.0


def test_fill_to_rgb_distance(tmp_path):
    def fill(rgb):
        def edit(prs):
            for slide in prs.slides:
                slide.background.fill.solid()
                slide.background.fill.fore_color.rgb = RGBColor(*rgb)

        return edit

    rules = {"rgb": [255, 0, 0], "original_rgb": [255, 255, 255]}
    assert (
        sc.evaluate_presentation_fill_to_rgb_distance(
            deck(tmp_path / "r.pptx", fill((255, 0, 0))), rules
        )
        == 1.0
    )
    near = sc.evaluate_presentation_fill_to_rgb_distance(
        deck(tmp_path / "n.pptx", fill((235, 0, 0))), rules
    )
    assert near == pytest.approx(1 - 20 / (255 * 3**0.5))
    assert (
        sc.evaluate_presentation_fill_to_rgb_distance(
            deck(tmp_path / "o.pptx", fill((255, 255, 255))), rules
        )
        == 0.0
    )
    assert (
        sc.evaluate_presentation_fill_to_rgb_distance(deck(tmp_path / "u.pptx"), rules) == 0.0
    )  # no fill


def master_with_number_colour(path: Path, hex_colour: str | None) -> str:
    """A deck whose slide master holds a footer text run coloured ``hex_colour``."""
    base = deck(path.with_name("base_" + path.name))
    src = zipfile.ZipFile(base)
    run = (
        (
            '<p:sp><p:nvSpPr><p:cNvPr id="99" name="Slide Number"/><p:cNvSpPr/><p:nvPr>'
            '<p:ph type="sldNum"/></p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:p><a:r>'
            f'<a:rPr><a:solidFill><a:srgbClr val="{hex_colour}"/></a:solidFill></a:rPr>'
            "<a:t>1</a:t></a:r></a:p></p:txBody></p:sp>"
        )
        if hex_colour
        else ""
    )
    with zipfile.ZipFile(path, "w") as z:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "ppt/slideMasters/slideMaster1.xml":
                data = data.replace(b"</p:spTree>", run.encode() + b"</p:spTree>", 1)
            z.writestr(item, data)
    return str(path)


@pytest.mark.parametrize(
    ("colour", "want", "score"),
    [
        ("FF0000", "red", 1.0),
        ("0000FF", "red", 0.0),
        ("0000FF", "blue", 1.0),
        ("10A020", "green", 1.0),
        ("202020", "black", 1.0),
        ("808080", "black", 0.0),
    ],
)
def test_check_page_number_colors(tmp_path, colour, want, score):
    f = master_with_number_colour(tmp_path / "m.pptx", colour)
    assert sc.check_page_number_colors(f, {"color": want}) == score
