"""compare_pptx_files on presentations generated with python-pptx (and one LibreOffice save)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.evaluators.metrics.slides import compare_pptx_files
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.text import PP_ALIGN
from pptx.util import Inches, Pt


def deck(path: Path, edit: Callable[[Any], None] | None = None, slides: int = 2) -> str:
    """A presentation: per slide a title, a text box with two runs, notes; ``edit`` tweaks it."""
    prs = Presentation()
    for n in range(slides):
        slide = prs.slides.add_slide(prs.slide_layouts[5])  # title only
        slide.shapes.title.text = f"Slide {n + 1}"
        box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
        para = box.text_frame.paragraphs[0]
        for text in ("Revenue ", "grew"):
            run = para.add_run()
            run.text = text
            run.font.size = Pt(20)
            run.font.name = "Arial"
        slide.notes_slide.notes_text_frame.text = f"notes {n + 1}"
    if edit:
        edit(prs)
    prs.save(path)
    return str(path)


def box(prs: Any, slide: int = 0) -> Any:
    return prs.slides[slide].shapes[1]


@pytest.fixture
def gold(tmp_path: Path) -> str:
    return deck(tmp_path / "gold.pptx")


def test_identical_presentations_match(tmp_path, gold):
    assert compare_pptx_files(deck(tmp_path / "same.pptx"), gold) == 1.0


def edit_text(prs: Any) -> None:
    box(prs).text_frame.paragraphs[0].runs[1].text = "fell"


def edit_move(prs: Any) -> None:
    box(prs).left = Inches(2)


def edit_bold(prs: Any) -> None:
    box(prs, 1).text_frame.paragraphs[0].runs[0].font.bold = True


def edit_color(prs: Any) -> None:
    box(prs).text_frame.paragraphs[0].runs[0].font.color.rgb = RGBColor(0xFF, 0, 0)


def edit_align(prs: Any) -> None:
    box(prs).text_frame.paragraphs[0].alignment = PP_ALIGN.CENTER


def edit_notes(prs: Any) -> None:
    prs.slides[1].notes_slide.notes_text_frame.text = "other notes"


def edit_background(prs: Any) -> None:
    fill = prs.slides[0].background.fill
    fill.solid()
    fill.fore_color.rgb = RGBColor(0, 0, 0x80)


def edit_size(prs: Any) -> None:
    box(prs).text_frame.paragraphs[0].runs[0].font.size = Pt(28)


def edit_extra_shape(prs: Any) -> None:
    prs.slides[0].shapes.add_textbox(Inches(1), Inches(4), Inches(2), Inches(1)).text = "extra"


@pytest.mark.parametrize(
    ("edit", "flag"),
    [
        # OSWorld's bullet check compares every paragraph's text on the slide too, so a text
        # edit passes only with both checks off
        (edit_text, ("examine_text", "examine_bullets")),
        (edit_move, "examine_shape"),
        (edit_bold, "examine_font_bold"),
        (edit_color, None),  # only one side has an explicit RGB: not compared, as in OSWorld
        (edit_align, "examine_alignment"),
        (edit_notes, "examine_note"),
        (edit_background, "examine_background_color"),
        (edit_size, "examine_font_size"),
    ],
)
def test_each_difference_fails_unless_its_check_is_off(tmp_path, gold, edit, flag):
    changed = deck(tmp_path / "changed.pptx", edit)
    if flag is None:
        assert compare_pptx_files(changed, gold) == 1.0
        return
    assert compare_pptx_files(changed, gold) == 0.0
    flags = flag if isinstance(flag, tuple) else (flag,)
    assert compare_pptx_files(changed, gold, **dict.fromkeys(flags, False)) == 1.0
    if len(flags) > 1:
        assert compare_pptx_files(changed, gold, **{flags[0]: False}) == 0.0


def test_rgb_colours_are_compared_when_both_are_explicit(tmp_path):
    red = deck(tmp_path / "red.pptx", edit_color)

    def blue(prs: Any) -> None:
        box(prs).text_frame.paragraphs[0].runs[0].font.color.rgb = RGBColor(0, 0, 0xFF)

    assert compare_pptx_files(deck(tmp_path / "blue.pptx", blue), red) == 0.0
    assert compare_pptx_files(deck(tmp_path / "red2.pptx", edit_color), red) == 1.0


def test_slide_and_shape_counts(tmp_path, gold):
    three = deck(tmp_path / "three.pptx", slides=3)
    assert compare_pptx_files(three, gold) == 0.0
    assert compare_pptx_files(three, gold, examine_number_of_slides=False) == 1.0
    assert compare_pptx_files(deck(tmp_path / "extra.pptx", edit_extra_shape), gold) == 0.0


def test_table_cells_are_compared(tmp_path):
    def table(text: str) -> Callable[[Any], None]:
        def edit(prs: Any) -> None:
            shape = prs.slides[0].shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1))
            shape.table.cell(1, 1).text = text

        return edit

    gold = deck(tmp_path / "gold_t.pptx", table("42"))
    assert compare_pptx_files(deck(tmp_path / "same_t.pptx", table("42")), gold) == 1.0
    assert compare_pptx_files(deck(tmp_path / "diff_t.pptx", table("43")), gold) == 0.0


def test_missing_broken_result_and_unhonoured_options(tmp_path, gold):
    broken = tmp_path / "broken.pptx"
    broken.write_text("nope")
    assert compare_pptx_files(None, gold) == 0.0
    assert compare_pptx_files(str(broken), gold) == 0.0
    assert compare_pptx_files(gold, gold, examine_image_size=False) == 1.0  # off: harmless
    # OSWorld's task-specific options are honoured now; an option nobody knows still raises
    assert compare_pptx_files(gold, gold, examine_title_bottom_position=True) == 1.0
    with pytest.raises(NotImplementedError, match="examine_sparkles"):
        compare_pptx_files(gold, gold, examine_sparkles=True)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("soffice") is None
    or not Path("/usr/lib/libreoffice/share/registry/impress.xcd").exists(),
    reason="LibreOffice Impress is not installed",
)
def test_presentations_saved_by_libreoffice(tmp_path):
    """LibreOffice-saved .pptx files (what tasks produce) are read and compared."""
    src = tmp_path / "src"
    src.mkdir()
    deck(src / "a.pptx")
    deck(src / "b.pptx", edit_text)
    out = tmp_path / "out"
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{tmp_path}/lo-profile",
            "--headless",
            "--convert-to",
            "pptx:Impress MS PowerPoint 2007 XML",
            "--outdir",
            str(out),
            str(src / "a.pptx"),
            str(src / "b.pptx"),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{tmp_path}/lo-profile",
            "--headless",
            "--convert-to",
            "pptx:Impress MS PowerPoint 2007 XML",
            "--outdir",
            str(tmp_path / "out2"),
            str(src / "a.pptx"),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    a, b, a2 = str(out / "a.pptx"), str(out / "b.pptx"), str(tmp_path / "out2" / "a.pptx")
    assert compare_pptx_files(a2, a) == 1.0
    assert compare_pptx_files(b, a) == 0.0
