"""compare_pptx_files near misses scored as OSWorld's implementation scores them (issue 11's
parity list): alignment defaults, levels, runs, tiny moves, tables, corrupt files."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.evaluators.metrics.slides import compare_pptx_files
from PIL import Image
from pptx import Presentation
from pptx.enum.text import PP_ALIGN
from pptx.exc import PackageNotFoundError
from pptx.util import Emu, Inches


def deck(path: Path, edit=None) -> str:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(2))
    tf = box.text_frame
    tf.text = "Quarterly results"
    p = tf.add_paragraph()
    p.text = "Revenue grew"
    rows = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for r in range(2):
        for c in range(2):
            rows.cell(r, c).text = f"r{r}c{c}"
    img = io.BytesIO()
    Image.new("RGB", (20, 20), "red").save(img, "PNG")
    img.seek(0)
    slide.shapes.add_picture(img, Inches(8), Inches(1))
    if edit:
        edit(slide)
    prs.save(path)
    return str(path)


def box(slide: Any) -> Any:
    return slide.shapes[0]


@pytest.fixture
def gold(tmp_path: Path) -> str:
    return deck(tmp_path / "gold.pptx")


def score(tmp_path: Path, gold: str, edit, **options: Any) -> float:
    return compare_pptx_files(deck(tmp_path / "r.pptx", edit), gold, **options)


def test_explicit_left_alignment_equals_the_default(tmp_path, gold):
    def left(slide):
        box(slide).text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT

    def centre(slide):
        box(slide).text_frame.paragraphs[0].alignment = PP_ALIGN.CENTER

    assert score(tmp_path, gold, left) == 1.0
    assert score(tmp_path, gold, centre) == 0.0


@pytest.mark.parametrize(("level", "expected"), [(1, 1.0), (2, 0.0)])
def test_levels_zero_and_one_are_one_indent(tmp_path, gold, level, expected):
    def indent(slide):
        box(slide).text_frame.paragraphs[1].level = level

    assert score(tmp_path, gold, indent, examine_bullets=False) == expected


def test_text_split_into_more_runs_differs_unless_run_count_is_off(tmp_path, gold):
    def split(slide):
        p = box(slide).text_frame.paragraphs[1]
        p.text = "Revenue "
        p.add_run().text = "grew"

    assert score(tmp_path, gold, split) == 0.0
    assert score(tmp_path, gold, split, examine_run_count=False) == 1.0


@pytest.mark.parametrize(("shift", "expected"), [(Emu(2000), 1.0), (Emu(20000), 0.0)])
def test_tiny_moves_are_within_the_relative_tolerance(tmp_path, gold, shift, expected):
    # left is 914400 EMU: 2000 is 0.2 % (within 0.5 %), 20000 is 2.2 %
    def move(slide):
        box(slide).left = box(slide).left + shift

    assert score(tmp_path, gold, move) == expected


def test_pictures_and_empty_shapes_may_move(tmp_path, gold):
    def move_picture(slide):
        slide.shapes[2].left = Inches(9)

    assert score(tmp_path, gold, move_picture) == 1.0


def test_table_text_is_compared_only_through_bullets(tmp_path, gold):
    def cell(slide):
        slide.shapes[1].table.cell(1, 1).text = "changed"

    assert score(tmp_path, gold, cell) == 0.0
    assert score(tmp_path, gold, cell, examine_bullets=False) == 1.0


def test_corrupt_result_scores_zero_and_corrupt_gold_raises(tmp_path, gold):
    bad = tmp_path / "bad.pptx"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert compare_pptx_files(str(bad), gold) == 0.0
    with pytest.raises((zipfile.BadZipFile, PackageNotFoundError)):
        compare_pptx_files(gold, str(bad))


def test_image_size_option_checks_only_the_picture_size(tmp_path, gold):
    def resize(slide):
        slide.shapes[2].width = slide.shapes[2].width * 2

    def move(slide):
        slide.shapes[2].left = Inches(5)

    assert score(tmp_path, gold, move, examine_image_size=True) == 1.0  # moved, same size
    assert score(tmp_path, gold, resize, examine_image_size=True) == 0.0
    assert score(tmp_path, gold, resize) == 1.0  # pictures are not position-checked otherwise


def test_modify_height_option_checks_heights_of_shapes_without_text(tmp_path, gold):
    def taller(slide):
        slide.shapes[2].height = slide.shapes[2].height * 2

    assert score(tmp_path, gold, taller, examine_modify_height=True, examine_shape=False) == 0.0
    assert score(tmp_path, gold, taller, examine_shape=False) == 1.0


def test_notes_and_unread_options_are_accepted(tmp_path, gold):
    assert compare_pptx_files(gold, gold, _note="why", examine_shape_lenient_height=True) == 1.0
