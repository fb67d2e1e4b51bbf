"""``compare_pptx_files``: OSWorld's presentation metric, through python-pptx.

The checks follow OSWorld's ``compare_pptx_files`` step by step (the first difference scores
0). Options, OSWorld's flags, default ``true``; ``false`` turns that check off:

===============================  ===================================================
``examine_number_of_slides``     same number of slides
``examine_background_color``     same solid background colour (own or the master's)
``examine_note``                 same speaker-notes text (stripped)
``examine_shape``                same left/top/width/height of every shape *with text*,
                                 within ``approximately_tolerance`` (relative, default
                                 0.005): pictures and empty shapes may move freely
``examine_text``                 same text per shape and per paragraph
``examine_alignment``            same paragraph alignment (none set = left)
``examine_indent``               same paragraph level, where levels 0 and 1 are one
``examine_run_count``            same number of runs per paragraph (text split into
                                 runs differently is a difference; empty runs are dropped
                                 only when both paragraphs are blank)
``examine_bullets``              same bullets over the whole slide: the text, bullet
                                 character and level of every non-empty paragraph
                                 (tables included; colour and auto-numbering ignored)
``examine_font_name`` / ``_size`` / ``_bold`` / ``_italic`` / ``_underline``   per run
``examine_color_rgb``            same run colour where both are explicit RGB
``examine_strike_through``       same strike setting per run
===============================  ===================================================

Always checked: the number of top-level shapes per slide, the number of paragraphs of each
text shape, the number of text shapes (groups searched). Quirks kept for parity: bold and
italic ``None``/``False`` are equal; underline ``None`` equals ``False`` only; table cells'
*text* is not compared except through ``examine_bullets``, while their runs' count and
formatting are (bold, italic and underline there regardless of the flags); a top-level group
is not looked into except for the text-shape pass.

OSWorld's task-specific position options (default ``false``) are honoured as OSWorld codes
them, including their hard-coded slide numbers, texts and EMU limits (see
:func:`_task_specific`): ``examine_title_bottom_position``,
``examine_table_bottom_position``, ``examine_right_position``, ``examine_top_position``,
``examine_shape_for_shift_size``, ``examine_image_size``, ``examine_modify_height``.
``enable_debug``, ``_note`` and ``examine_shape_lenient_height`` are accepted and ignored:
OSWorld's code does not read them either.

A missing or unreadable result scores 0 (OSWorld raises on a corrupt file; it is the agent's
output); an unreadable gold file raises.
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
    "examine_run_count",
    "examine_bullets",
    "examine_background_color",
    "examine_note",
)

#: OSWorld's task-specific options, all off by default.
TASK_SPECIFIC = (
    "examine_title_bottom_position",
    "examine_table_bottom_position",
    "examine_right_position",
    "examine_top_position",
    "examine_shape_for_shift_size",
    "examine_image_size",
    "examine_modify_height",
)

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_PICTURE, _TABLE, _FREEFORM = 13, 19, 5  # MSO_SHAPE_TYPE values OSWorld compares with


class _DifferenceFound(Exception):
    """Raised internally at the first difference; the message says where."""


def _check(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise _DifferenceFound(f"{where}: {what} differs")


def _near(a: int | None, b: int | None, tolerance: float) -> bool:
    """OSWorld's ``is_approximately_equal``: equal, or within ``tolerance`` of the larger."""
    if a == b:
        return True
    if not a or not b:
        return False
    return abs(a - b) / max(abs(a), abs(b)) <= tolerance


def _rgb(color: Any) -> Any:
    """The colour's RGB, or ``None`` where python-pptx has none (scheme or no colour)."""
    try:
        return color.rgb
    except AttributeError:
        return None


def _background(slide: Any) -> Any:
    from pptx.enum.dml import MSO_FILL

    fill = slide.background.fill
    if fill.type == MSO_FILL.BACKGROUND:
        fill = slide.slide_layout.slide_master.background.fill
    return _rgb(fill.fore_color) if fill.type == MSO_FILL.SOLID else None


def _notes(slide: Any) -> str:
    return slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide else ""


def _has_text(shape: Any) -> bool:
    return hasattr(shape, "text") and hasattr(shape, "text_frame")


def _text_shapes(shapes: Any) -> list[Any]:
    """Shapes with a text frame, groups searched recursively (OSWorld's
    ``get_all_text_shapes``)."""
    found = []
    for shape in shapes:
        if _has_text(shape):
            found.append(shape)
        if hasattr(shape, "shapes"):
            found += _text_shapes(shape.shapes)
    return found


def _slide_bullets(slide: Any) -> list[tuple[str | None, str]] | None:
    """``(level, bullet char)`` and text of every non-empty paragraph of the slide."""
    out = []
    for p in slide._element.iter(f"{_A}p"):
        text = "".join(t.text or "" for t in p.iter(f"{_A}t"))
        if not text.strip():
            continue
        ppr = p.find(f"{_A}pPr")
        char = ppr.find(f"{_A}buChar") if ppr is not None else None
        bullet = char.get("char") if char is not None else None
        level = (ppr.get("lvl") or "0") if ppr is not None else None
        out.append((text, bullet, level if bullet is not None else None))
    return out


def _runs(p1: Any, p2: Any) -> tuple[list[Any], list[Any]]:
    if not p1.text.strip() and not p2.text.strip():
        return [r for r in p1.runs if r.text.strip()], [r for r in p2.runs if r.text.strip()]
    return list(p1.runs), list(p2.runs)


def _falsy_equal(a: Any, b: Any) -> bool:
    return a == b or (not a and not b and a in (None, False) and b in (None, False))


def _underline_equal(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if a is not None and b is not None:
        return False
    return not (a is True or b is True)


def _compare_runs(r1: Any, r2: Any, on: dict[str, bool], where: str, table: bool) -> None:
    f1, f2 = r1.font, r2.font
    c1, c2 = _rgb(f1.color), _rgb(f2.color)
    if table:  # OSWorld's table branch: colour by flag, the rest always
        _check(not on["examine_color_rgb"] or c1 is None or c2 is None or c1 == c2, where, "colour")
        _check(_falsy_equal(f1.bold, f2.bold), where, "bold")
        _check(_falsy_equal(f1.italic, f2.italic), where, "italic")
        _check(_underline_equal(f1.underline, f2.underline), where, "underline")
        return
    _check(not on["examine_font_name"] or f1.name == f2.name, where, "font name")
    _check(not on["examine_font_size"] or f1.size == f2.size, where, "font size")
    _check(not on["examine_font_bold"] or _falsy_equal(f1.bold, f2.bold), where, "bold")
    _check(not on["examine_font_italic"] or _falsy_equal(f1.italic, f2.italic), where, "italic")
    _check(not on["examine_color_rgb"] or c1 is None or c2 is None or c1 == c2, where, "colour")
    _check(
        not on["examine_font_underline"] or _underline_equal(f1.underline, f2.underline),
        where,
        "underline",
    )
    s1, s2 = (
        f._rPr.get("strike", "noStrike") if f._rPr is not None else "noStrike" for f in (f1, f2)
    )
    _check(not on["examine_strike_through"] or s1 == s2, where, "strike-through")


def _compare_table(a: Any, b: Any, on: dict[str, bool], where: str) -> None:
    t1, t2 = a.table, b.table
    _check(len(t1.rows) == len(t2.rows) and len(t1.columns) == len(t2.columns), where, "table size")
    for r in range(len(t1.rows)):
        for c in range(len(t1.columns)):
            at = f"{where} cell ({r}, {c})"
            ps1, ps2 = t1.cell(r, c).text_frame.paragraphs, t2.cell(r, c).text_frame.paragraphs
            _check(len(ps1) == len(ps2), at, "paragraph count")
            for p1, p2 in zip(ps1, ps2, strict=True):
                runs1, runs2 = _runs(p1, p2)
                _check(not on["examine_run_count"] or len(runs1) == len(runs2), at, "run count")
                for r1, r2 in zip(runs1, runs2, strict=False):
                    _compare_runs(r1, r2, on, at, table=True)


def _alignment(p: Any) -> Any:
    from pptx.enum.text import PP_ALIGN

    return PP_ALIGN.LEFT if p.alignment is None else p.alignment


def _compare_text(a: Any, b: Any, on: dict[str, bool], where: str, bullets: Any) -> None:
    _check(not on["examine_text"] or a.text.strip() == b.text.strip(), where, "text")
    ps1, ps2 = a.text_frame.paragraphs, b.text_frame.paragraphs
    _check(len(ps1) == len(ps2), where, "paragraph count")
    for k, (p1, p2) in enumerate(zip(ps1, ps2, strict=True)):
        at = f"{where} paragraph {k}"
        _check(not on["examine_alignment"] or _alignment(p1) == _alignment(p2), at, "alignment")
        _check(not on["examine_text"] or p1.text == p2.text, at, "text")
        levels_ok = p1.level == p2.level or (p1.level in (0, 1) and p2.level in (0, 1))
        _check(not on["examine_indent"] or levels_ok, at, "level")
        runs1, runs2 = _runs(p1, p2)
        _check(not on["examine_run_count"] or len(runs1) == len(runs2), at, "run count")
        for j, (r1, r2) in enumerate(zip(runs1, runs2, strict=False)):
            _compare_runs(r1, r2, on, f"{at} run {j}", table=False)
            if on["examine_bullets"]:
                _check(bullets(), at, "bullets")


def _task_specific(
    a: Any, b: Any, on: dict[str, bool], tol: float, n: int, where: str, *, after: bool
) -> None:
    """OSWorld's task-specific position checks for shape pair ``a``/``b`` on slide ``n``
    (1-based): those OSWorld runs before its general position check (``after=False``) or
    after it. Hard-coded values are OSWorld's."""

    def near_box() -> bool:
        return all(
            _near(getattr(a, k), getattr(b, k), tol) for k in ("left", "top", "width", "height")
        )

    texts = hasattr(a, "text") and hasattr(b, "text")
    if not after:
        if on["examine_title_bottom_position"]:
            if texts and a.text == b.text:
                _check(
                    not (a.text == "Product Comparison" and (a.top <= b.top or a.top < 3600000)),
                    where,
                    "title position",
                )
            else:
                _check(near_box(), where, "position (title check)")
        if on["examine_table_bottom_position"]:
            if n == 3 and a.shape_type == _TABLE and b.shape_type == _TABLE:
                _check(not (a.top <= b.top or a.top < 3600000), where, "table position")
            else:
                _check(near_box(), where, "position (table check)")
        if (
            on["examine_right_position"]
            and n == 2
            and not hasattr(a, "text")
            and not hasattr(b, "text")
        ):
            _check(not (a.left <= b.left or a.left < 4320000), where, "right position")
        if on["examine_top_position"] and n == 2 and a.shape_type == _PICTURE == b.shape_type:
            _check(not (a.top >= b.top or a.top > 1980000), where, "top position")
        if on["examine_shape_for_shift_size"] and not near_box():
            _check(
                texts and a.text == b.text == "Elaborate on what you want to discuss.",
                where,
                "position (shift check)",
            )
        return
    if on["examine_image_size"]:
        if a.shape_type == _PICTURE and b.shape_type == _PICTURE:
            _check(
                _near(a.width, b.width, tol) and _near(a.height, b.height, tol), where, "image size"
            )
        else:
            _check(near_box(), where, "position (image check)")
    if on["examine_modify_height"]:
        if (not hasattr(a, "text") and not hasattr(b, "text")) or (
            a.shape_type == _FREEFORM and b.shape_type == _FREEFORM
        ):
            _check(_near(a.height, b.height, tol), where, "height")
        else:
            _check(near_box(), where, "position (height check)")


def _compare_slide(s1: Any, s2: Any, on: dict[str, bool], tol: float, n: int) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    where = f"slide {n}"
    _check(
        not on["examine_background_color"] or _background(s1) == _background(s2),
        where,
        "background",
    )
    _check(not on["examine_note"] or _notes(s1) == _notes(s2), where, "notes")
    shapes1, shapes2 = list(s1.shapes), list(s2.shapes)
    _check(len(shapes1) == len(shapes2), where, "shape count")
    verdict: list[bool] = []

    def bullets() -> bool:  # slide-wide, computed once, as OSWorld compares it per run
        if not verdict:
            verdict.append(_slide_bullets(s1) == _slide_bullets(s2))
        return verdict[0]

    for i, (a, b) in enumerate(zip(shapes1, shapes2, strict=True)):
        at = f"{where} shape {i}"
        empty = (
            not (getattr(a, "text", "") or "").strip()
            and not (getattr(b, "text", "") or "").strip()
        )
        same_box = all(
            _near(getattr(a, k), getattr(b, k), tol) for k in ("left", "top", "width", "height")
        )
        _task_specific(a, b, on, tol, n, at, after=False)
        _check(not on["examine_shape"] or empty or same_box, at, "position or size")
        _task_specific(a, b, on, tol, n, at, after=True)
        if a.shape_type == MSO_SHAPE_TYPE.TABLE:
            if not getattr(b, "has_table", False):
                raise _DifferenceFound(f"{at}: a table against a {b.shape_type}")
            _compare_table(a, b, on, at)
        if _has_text(a) and _has_text(b):
            _compare_text(a, b, on, at, bullets)
    texts1, texts2 = _text_shapes(s1.shapes), _text_shapes(s2.shapes)
    _check(len(texts1) == len(texts2), where, "text shape count")
    if on["examine_alignment"]:
        for i, (a, b) in enumerate(zip(texts1, texts2, strict=True)):
            at = f"{where} text shape {i}"
            _check(not on["examine_text"] or a.text.strip() == b.text.strip(), at, "text")
            ps1, ps2 = a.text_frame.paragraphs, b.text_frame.paragraphs
            _check(len(ps1) == len(ps2), at, "paragraph count")
            for p1, p2 in zip(ps1, ps2, strict=True):
                _check(_alignment(p1) == _alignment(p2), at, "alignment")


@honours(
    *EXAMINE,
    *TASK_SPECIFIC,
    "approximately_tolerance",
    "enable_debug",
    "_note",
    "examine_shape_lenient_height",
)
def compare_pptx_files(result: str | None, expected: str | None, **options: Any) -> float:
    """1 if the two presentations agree on every enabled check (see the module docstring)."""
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
    on.update({flag: bool(options.get(flag, False)) for flag in TASK_SPECIFIC})
    tol = float(options.get("approximately_tolerance", 0.005))
    try:
        _check(
            not on["examine_number_of_slides"] or len(mine.slides) == len(gold.slides),
            "presentation",
            "slide count",
        )
        for n, (s1, s2) in enumerate(zip(mine.slides, gold.slides, strict=False), start=1):
            _compare_slide(s1, s2, on, tol, n)
    except _DifferenceFound as diff:
        logger.info("compare_pptx_files: %s", diff)
        return 0.0
    return 1.0
