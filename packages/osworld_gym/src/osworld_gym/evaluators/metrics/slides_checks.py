"""Presentation and LibreOffice-settings checks of OSWorld's ``slides`` module.

Settings checks read LibreOffice's ``registrymodifications.xcu`` (an ``oor`` registry: items
by ``oor:path``, properties by ``oor:name``). A missing or unparsable result scores 0; an
unreadable gold presentation raises.

>>> import tempfile, pathlib
>>> from pptx import Presentation
>>> p = Presentation(); p.slide_width, p.slide_height = p.slide_height, p.slide_width
>>> f = pathlib.Path(tempfile.mkdtemp()) / "p.pptx"; p.save(f)
>>> check_slide_orientation_Portrait(str(f))
1.0
"""

from __future__ import annotations

import logging
import math
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

logger = logging.getLogger(__name__)

_OOR = "{http://openoffice.org/2001/registry}"
_PML = "{http://schemas.openxmlformats.org/presentationml/2006/main}"


def _registry(path: str | None) -> Any:
    if not path or not Path(path).is_file():
        return None
    try:
        return ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        logger.info("cannot parse LibreOffice registry %s: %s", path, exc)
        return None


def _registry_value(root: Any, item_path: str, name: str) -> str | None:
    """The first ``value`` text of property ``name`` under an item at ``item_path``."""
    for item in root.iter("item"):
        if item.get(f"{_OOR}path") != item_path:
            continue
        for prop in item.iter("prop"):
            if prop.get(f"{_OOR}name") == name:
                value = prop.find("value")
                return None if value is None else value.text
    return None


def check_presenter_console_disable(result: str | None) -> float:
    """1 if Impress's presenter screen is switched off (``EnablePresenterScreen`` false)."""
    root = _registry(result)
    if root is None:
        return 0.0
    value = _registry_value(
        root, "/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen"
    )
    return float(value is not None and value.lower() == "false")


def check_auto_saving_time(result: str | None, rules: dict[str, Any]) -> float:
    """1 if LibreOffice's AutoRecovery interval (``AutoSaveTimeIntervall``) is
    ``rules["minutes"]``."""
    root = _registry(result)
    if root is None:
        return 0.0
    value = _registry_value(
        root, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall"
    )
    try:
        return float(value is not None and int(value) == rules["minutes"])
    except ValueError:
        return 0.0


def _open_deck(path: str | None) -> Any:
    from pptx import Presentation

    if not path:
        return None
    try:
        return Presentation(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable result scores 0
        logger.info("cannot read result presentation %s: %s", path, exc)
        return None


def check_slide_orientation_Portrait(result: str | None) -> float:
    """1 if the slides are taller than wide."""
    prs = _open_deck(result)
    return 0.0 if prs is None else float(prs.slide_width < prs.slide_height)


def check_transition(result: str | None, rules: dict[str, Any]) -> float:
    """1 if slide ``rules["slide_idx"]`` (0-based) has a transition with a
    ``p:<transition_type>`` effect (e.g. ``dissolve``)."""
    if not result or not Path(result).is_file():
        return 0.0
    name = f"ppt/slides/slide{int(rules['slide_idx']) + 1}.xml"
    try:
        with zipfile.ZipFile(result) as z:
            root = ElementTree.fromstring(z.read(name))
    except (KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return 0.0
    transition = root.find(f".//{_PML}transition")
    if transition is None:
        return 0.0
    return float(transition.find(f".//{_PML}{rules['transition_type']}") is not None)


def check_left_panel(result: str | None) -> float:
    """1 if the accessibility tree has a ``document-frame`` named "Slides View" (Impress's
    slide pane is shown). A tree that is not XML scores 0."""
    if not result:
        return 0.0
    try:
        root = ElementTree.fromstring(result)
    except ElementTree.ParseError:
        return 0.0
    return float(any(f.get("name") == "Slides View" for f in root.iter("document-frame")))


def check_image_stretch_and_center(result: str | None, expected: str) -> float:
    """1 if the first picture of the original's first slide appears (same image bytes; the
    last such picture counts) on the result's first slide filling the slide and centred,
    each within half an inch."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE
    from pptx.util import Inches

    mine = _open_deck(result)
    if mine is None:
        return 0.0
    gold = _open_deck_gold(expected)
    pictures = [s for s in gold.slides[0].shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE]
    if not pictures or not len(mine.slides):
        return 0.0
    blob = pictures[0].image.blob
    match = None
    for s in mine.slides[0].shapes:
        if s.shape_type == MSO_SHAPE_TYPE.PICTURE and s.image.blob == blob:
            match = s
    if match is None:
        return 0.0
    w, h, tol = gold.slide_width, gold.slide_height, Inches(0.5)
    return float(
        abs(match.width - w) <= tol
        and abs(match.height - h) <= tol
        and abs(match.left - (w - match.width) / 2) <= tol
        and abs(match.top - (h - match.height) / 2) <= tol
    )


def _open_deck_gold(path: str) -> Any:
    from pptx import Presentation

    return Presentation(path)


def _background_rgb(slide: Any) -> tuple[int, int, int] | None:
    """The slide's solid background colour (its own, else its master's); ``None`` otherwise."""
    from pptx.enum.dml import MSO_FILL

    fill = slide.background.fill
    if fill.type == MSO_FILL.BACKGROUND:
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type != MSO_FILL.SOLID:
        return None
    try:
        return tuple(fill.fore_color.rgb)  # type: ignore[return-value]
    except AttributeError:  # a theme colour has no RGB
        return None


def evaluate_presentation_fill_to_rgb_distance(result: str | None, rules: dict[str, Any]) -> float:
    """1 minus the mean, over slides, of the distance between each slide's background colour
    and ``rules["rgb"]`` (Euclidean, divided by black-to-white). A slide without a solid RGB
    background, or still at ``rules["original_rgb"]``, counts as distance 1. A score, not
    0/1: OSWorld's tasks take it as is."""
    prs = _open_deck(result)
    if prs is None or not len(prs.slides):
        return 0.0
    want, original = rules["rgb"], rules.get("original_rgb")
    total = 0.0
    for slide in prs.slides:
        rgb = _background_rgb(slide)
        if rgb is None or (original is not None and list(rgb) == list(original)):
            total += 1.0
            continue
        total += math.dist(rgb, want) / math.dist((0, 0, 0), (255, 255, 255))
    return 1.0 - total / len(prs.slides)


def _hex_rgb(value: str | None) -> tuple[int, int, int] | None:
    if not value:
        return None
    value = value.lstrip("#")
    if len(value) != 6:
        return None
    try:
        return (int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16))
    except ValueError:
        return None


_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def _master_number_colour(root: Any) -> str | None:
    """The slide-number colour of a slide master, found as OSWorld looks for it: the
    ``sldNum`` placeholder's first solid RGB fill; else that of the first ``sldNum``/``ftr``/
    ``dt`` placeholder that has one; else the last non-black run colour; else the last
    non-black solid fill, or the last solid fill at all."""

    def fill_in(el: Any) -> str | None:
        for solid in el.iter(f"{_A}solidFill"):
            for clr in solid.iter(f"{_A}srgbClr"):
                return clr.get("val")
        return None

    placeholders = list(root.iter(f"{_PML}ph"))
    first_num = next((ph for ph in placeholders if ph.get("type") == "sldNum"), None)
    if first_num is not None and (val := fill_in(first_num)) is not None:
        return val
    for ph in placeholders:
        if ph.get("type") in ("sldNum", "ftr", "dt") and (val := fill_in(ph)) is not None:
            return val
    runs = [
        c
        for rpr in root.iter(f"{_A}rPr")
        for s in rpr.iter(f"{_A}solidFill")
        for c in s.iter(f"{_A}srgbClr")
    ]
    for clr in reversed(runs):
        if clr.get("val") and clr.get("val") != "000000":
            return clr.get("val")
    fills = [c for s in root.iter(f"{_A}solidFill") for c in s.iter(f"{_A}srgbClr")]
    for clr in reversed(fills):
        if clr.get("val") and clr.get("val") != "000000":
            return clr.get("val")
    return fills[-1].get("val") if fills else None


def check_page_number_colors(result: str | None, rules: dict[str, Any]) -> float:
    """1 if the slide master's page-number colour (see :func:`_master_number_colour`) is
    ``rules["color"]``: red/green/blue when that channel exceeds both others by more than 50,
    black when all three are below 50; any other colour name passes whatever is found (a
    quirk kept). No colour found, or a result without ``slideMaster1.xml``, scores 0.

    Quirk kept: OSWorld's ``ph`` lookups search *inside* the placeholder element, where a
    fill never is, so in practice the colour comes from the run or fill fallbacks.
    """
    if not result or not Path(result).is_file():
        return 0.0
    try:
        with zipfile.ZipFile(result) as z:
            root = ElementTree.fromstring(z.read("ppt/slideMasters/slideMaster1.xml"))
    except (KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return 0.0
    rgb = _hex_rgb(_master_number_colour(root))
    if rgb is None:
        return 0.0
    r, g, b = rgb
    checks = {
        "red": r > g + 50 and r > b + 50,
        "green": g > r + 50 and g > b + 50,
        "blue": b > g + 50 and b > r + 50,
        "black": r < 50 and g < 50 and b < 50,
    }
    return float(checks.get(rules["color"], True))
