"""``compare_pptx_files``: OSWorld's presentation metric, through python-pptx.

Slides are compared pairwise, shapes pairwise in z-order (group shapes recursively); the first
difference scores 0. Options, all OSWorld's ``examine_*`` flags, default ``true``; ``false``
turns that check off:

===============================  ===================================================
``examine_number_of_slides``     same number of slides
``examine_background_color``     same solid background colour (own or the master's)
``examine_note``                 same speaker-notes text (stripped)
``examine_shape``                same left/top/width/height of every shape
``examine_text``                 same text per shape and per paragraph (and per table cell)
``examine_alignment``            same paragraph alignment
``examine_indent``               same paragraph level
``examine_bullets``              same bullet (level, char or autonumber, colour) per paragraph
``examine_font_name`` / ``_size`` / ``_bold`` / ``_italic`` / ``_underline``   per run
``examine_color_rgb``            same run colour where both are explicit RGB (tables too)
``examine_strike_through``       same strike setting per run
===============================  ===================================================

Always checked: the number of shapes on each slide pair. OSWorld's task-specific position
options (``examine_title_bottom_position``, ``examine_table_bottom_position``,
``examine_right_position``, ``examine_top_position``, ``examine_shape_for_shift_size``,
``examine_image_size``, ``examine_modify_height``) are not implemented: turned on, they raise
(such tasks are classified unsupported).
"""

from __future__ import annotations

import logging
from typing import Any

from osworld_gym.evaluators.metrics.options import check_options, honours

logger = logging.getLogger(__name__)

EXAMINE = (
    "examine_number_of_slides",
    "examine_shape",
    "examine_text",
    "examine_indent",
    "examine_font_name",
    "examine_font_size",
    "examine_font_bold",
    "examine_font_italic",
    "examine_color_rgb",
    "examine_font_underline",
    "examine_strike_through",
    "examine_alignment",
    "examine_bullets",
    "examine_background_color",
    "examine_note",
)

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


class _DifferenceFound(Exception):  # noqa: N818 - control flow, not an error
    """Raised internally at the first difference; the message says where."""


def _rgb(color: Any) -> str | None:
    try:
        return str(color.rgb) if color is not None and color.type is not None else None
    except AttributeError:  # theme/system colours have no .rgb
        return None


def _background(slide: Any) -> str | None:
    from pptx.enum.dml import MSO_FILL

    fill = slide.background.fill
    if fill.type == MSO_FILL.BACKGROUND:
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type == MSO_FILL.SOLID:
        return _rgb(fill.fore_color)
    return None


def _notes(slide: Any) -> str:
    return slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide else ""


def _bullet(paragraph: Any) -> tuple[Any, ...]:
    ppr = paragraph._p.find(f"{_A}pPr")
    if ppr is None:
        return (None, None, None)
    char = ppr.find(f"{_A}buChar")
    auto = ppr.find(f"{_A}buAutoNum")
    none = ppr.find(f"{_A}buNone")
    kind = (
        char.get("char") if char is not None
        else f"auto:{auto.get('type')}" if auto is not None
        else "none" if none is not None
        else None
    )
    clr = ppr.find(f"{_A}buClr/{_A}srgbClr")
    return (ppr.get("lvl"), kind, clr.get("val") if clr is not None else None)


def _check(flag: str, ok: bool, on: dict[str, bool], where: str) -> None:
    if on[flag] and not ok:
        raise _DifferenceFound(f"{where}: {flag.removeprefix('examine_')} differs")


def _compare_runs(r1: Any, r2: Any, on: dict[str, bool], where: str) -> None:
    f1, f2 = r1.font, r2.font
    _check("examine_font_name", f1.name == f2.name, on, where)
    _check("examine_font_size", f1.size == f2.size, on, where)
    _check("examine_font_bold", f1.bold == f2.bold, on, where)
    _check("examine_font_italic", f1.italic == f2.italic, on, where)
    c1, c2 = _rgb(f1.color), _rgb(f2.color)
    _check("examine_color_rgb", c1 is None or c2 is None or c1 == c2, on, where)
    _check("examine_font_underline", f1.underline == f2.underline, on, where)
    s1 = f1._rPr.get("strike", "noStrike") if f1._rPr is not None else "noStrike"
    s2 = f2._rPr.get("strike", "noStrike") if f2._rPr is not None else "noStrike"
    _check("examine_strike_through", s1 == s2, on, where)


def _compare_text_frames(t1: Any, t2: Any, on: dict[str, bool], where: str) -> None:
    for k, (p1, p2) in enumerate(zip(t1.paragraphs, t2.paragraphs, strict=False)):
        at = f"{where} paragraph {k}"
        _check("examine_alignment", p1.alignment == p2.alignment, on, at)
        _check("examine_text", p1.text == p2.text, on, at)
        _check("examine_indent", p1.level == p2.level, on, at)
        if p1.text.strip() or p2.text.strip():
            _check("examine_bullets", _bullet(p1) == _bullet(p2), on, at)
        for j, (r1, r2) in enumerate(zip(p1.runs, p2.runs, strict=False)):
            _compare_runs(r1, r2, on, f"{at} run {j}")


def _compare_shapes(s1: Any, s2: Any, on: dict[str, bool], where: str) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    shapes1, shapes2 = list(s1), list(s2)
    if len(shapes1) != len(shapes2):
        raise _DifferenceFound(f"{where}: {len(shapes1)} shapes vs {len(shapes2)}")
    for i, (a, b) in enumerate(zip(shapes1, shapes2, strict=True)):
        at = f"{where} shape {i}"
        box_a, box_b = (a.left, a.top, a.width, a.height), (b.left, b.top, b.width, b.height)
        _check("examine_shape", box_a == box_b, on, at)
        if a.shape_type == MSO_SHAPE_TYPE.GROUP and b.shape_type == MSO_SHAPE_TYPE.GROUP:
            _compare_shapes(a.shapes, b.shapes, on, at)
            continue
        if getattr(a, "has_table", False) and getattr(b, "has_table", False):
            rows1, rows2 = list(a.table.rows), list(b.table.rows)
            for r, (row1, row2) in enumerate(zip(rows1, rows2, strict=False)):
                for c, (c1, c2) in enumerate(zip(row1.cells, row2.cells, strict=False)):
                    cell_at = f"{at} cell ({r}, {c})"
                    _check("examine_text", c1.text.strip() == c2.text.strip(), on, cell_at)
                    _compare_text_frames(c1.text_frame, c2.text_frame, on, cell_at)
            continue
        if a.has_text_frame and b.has_text_frame:
            _check("examine_text", a.text_frame.text.strip() == b.text_frame.text.strip(), on, at)
            _compare_text_frames(a.text_frame, b.text_frame, on, at)


@honours(*EXAMINE)
def compare_pptx_files(result: str | None, expected: str | None, **options: Any) -> float:
    """1 if the two presentations agree on every enabled check (see the module docstring).

    A missing or unreadable result scores 0; an unreadable gold file raises.
    """
    check_options("compare_pptx_files", options, compare_pptx_files.honoured_options)
    if not result or not expected:
        return 0.0
    from pptx import Presentation

    try:
        mine = Presentation(result)
    except Exception as exc:  # noqa: BLE001 - any unreadable result scores 0
        logger.info("compare_pptx_files: cannot read result %s: %s", result, exc)
        return 0.0
    gold = Presentation(expected)
    on = {flag: bool(options.get(flag, True)) for flag in EXAMINE}
    try:
        _check(
            "examine_number_of_slides", len(mine.slides) == len(gold.slides), on, "presentation"
        )
        for n, (s1, s2) in enumerate(zip(mine.slides, gold.slides, strict=False), start=1):
            where = f"slide {n}"
            _check("examine_background_color", _background(s1) == _background(s2), on, where)
            _check("examine_note", _notes(s1) == _notes(s2), on, where)
            _compare_shapes(s1.shapes, s2.shapes, on, where)
    except _DifferenceFound as diff:
        logger.info("compare_pptx_files: %s", diff)
        return 0.0
    return 1.0
