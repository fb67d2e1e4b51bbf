"""Getters that pull media out of a presentation on the desktop (OSWorld's ``impress``
getters): the audio of a slide, a slide's background image.

The ``.pptx`` at ``ppt_file_path`` is copied from the desktop; the media is found through the
slide's relationships (``ppt/slides/_rels/slide<N+1>.xml.rels``). Embedded media
(``../media/...``) is extracted next to the copied file; linked media (``file://...``) is
copied from the desktop as ``dest``. A presentation or slide that does not exist, or a slide
without such media, gives ``None`` (the metric scores 0).
"""

from __future__ import annotations

import logging
import posixpath
import zipfile
from typing import Any

from lxml import etree

from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.getters.file import get_vm_file

logger = logging.getLogger(__name__)

_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_R_EMBED = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"


def _deck(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    path = config["ppt_file_path"]
    local = get_vm_file(ctx, {"path": path, "dest": posixpath.basename(path)})
    return local if isinstance(local, str) else None


def _media(ctx: EvalContext, config: dict[str, Any], deck: str, target: str) -> str | None:
    if target.startswith("file://"):
        local = get_vm_file(ctx, {"path": target[len("file://") :], "dest": config["dest"]})
        return local if isinstance(local, str) else None  # one path in, so one path (or None) out
    member = posixpath.normpath(posixpath.join("ppt/slides", target))
    out = ctx.episode_dir / config["dest"]
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(deck) as z:
        out.write_bytes(z.read(member))
    return str(out)


def _rels(z: zipfile.ZipFile, slide: int) -> list[Any]:
    name = f"ppt/slides/_rels/slide{slide + 1}.xml.rels"
    if name not in z.namelist():
        return []
    return list(etree.fromstring(z.read(name)).iter(_REL))


def get_audio_in_slide(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The first audio relationship of slide ``slide_index`` (0-based), as a local file."""
    deck = _deck(ctx, config)
    if deck is None:
        return None
    with zipfile.ZipFile(deck) as z:
        rels = _rels(z, int(config["slide_index"]))
    for rel in rels:
        if "audio" in rel.get("Type", ""):
            return _media(ctx, config, deck, rel.get("Target", ""))
    return None


def get_background_image_in_slide(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """The image of slide ``slide_index``'s background fill (``p:bgPr``), as a local file."""
    deck = _deck(ctx, config)
    if deck is None:
        return None
    slide = int(config["slide_index"])
    with zipfile.ZipFile(deck) as z:
        name = f"ppt/slides/slide{slide + 1}.xml"
        if name not in z.namelist():
            return None
        root = etree.fromstring(z.read(name))
        rels = _rels(z, slide)
    image_id = next(
        (b.get(_R_EMBED) for bg in root.iter(f"{_P}bgPr") for b in bg.iter(f"{_A}blip")), None
    )
    if image_id is None:
        return None
    for rel in rels:
        if "image" in rel.get("Type", "") and rel.get("Id") == image_id:
            return _media(ctx, config, deck, rel.get("Target", ""))
    return None
