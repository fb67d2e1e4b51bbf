"""Getters for application settings outside the browser: GIMP's config files, the desktop's
default video player, the screen size.

>>> from pathlib import Path
>>> class Desk:
...     def get_file(self, path, max_bytes=None):
...         return b"(theme \\"Dark\\")\\n" if path.endswith("gimprc") else None
>>> ctx = EvalContext(client=Desk(), cache_dir=Path(__import__("tempfile").mkdtemp()), task_id="t")
>>> Path(get_gimp_config_file(ctx, {"file_name": "gimprc", "dest": "gimprc"})).read_text()
'(theme "Dark")\\n'
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.getters.general import get_vm_command_line
from osworld_gym.tasks.paths import guest_path

logger = logging.getLogger(__name__)

#: GIMP 2.10's per-user settings folder (Debian 12 and OSWorld's Ubuntu image both ship 2.10).
GIMP_CONFIG = "~/.config/GIMP/2.10"

#: ``video/<subtype>`` MIME types OSWorld asks ``xdg-mime`` about.
VIDEO_TYPES = (
    "3gp",
    "3gpp",
    "3gpp2",
    "avi",
    "divx",
    "dv",
    "fli",
    "flv",
    "mp2t",
    "mp4",
    "mp4v-es",
    "mpeg",
    "mpeg-system",
    "msvideo",
    "ogg",
    "quicktime",
    "vnd.divx",
    "vnd.mpegurl",
    "vnd.rn-realvideo",
    "webm",
    "x-anim",
    "x-avi",
    "x-flc",
    "x-fli",
    "x-flv",
    "x-m4v",
    "x-matroska",
    "x-mpeg",
    "x-mpeg-system",
    "x-mpeg2",
    "x-ms-asf",
    "x-ms-asf-plugin",
    "x-ms-asx",
    "x-ms-wm",
    "x-ms-wmv",
    "x-ms-wmx",
    "x-ms-wvx",
    "x-msvideo",
    "x-nsv",
    "x-ogm",
    "x-ogm+ogg",
    "x-theora",
    "x-theora+ogg",
)


def get_gimp_config_file(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """Copy ``~/.config/GIMP/2.10/<file_name>`` into the episode dir as ``dest``; its local
    path, or ``None`` if GIMP never wrote it (the metric scores 0)."""
    data = ctx.client.get_file(
        guest_path(f"{GIMP_CONFIG}/{config['file_name']}", ctx.home), max_bytes=32 << 20
    )  # a gimprc is a few KB; held in memory, so capped well below result files
    if not data:
        logger.info("task %s: GIMP config %s not found", ctx.task_id, config["file_name"])
        return None
    local = ctx.episode_dir / config["dest"]
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return str(local)


def get_default_video_player(ctx: EvalContext, config: dict[str, Any]) -> str:
    """The ``.desktop`` file most video MIME types open with (``xdg-mime query default``), with
    its trailing newline as the command prints it (OSWorld keeps it too); ``"unknown"`` if
    none is set. OSWorld asks about every type twice; counting each once picks the same app.
    """
    apps = []
    for sub in VIDEO_TYPES:
        out = get_vm_command_line(
            ctx, {"command": ["xdg-mime", "query", "default", f"video/{sub}"]}
        )
        if out:
            apps.append(out)
    return Counter(apps).most_common(1)[0][0] if apps else "unknown"


def get_vm_screen_size(ctx: EvalContext, config: dict[str, Any]) -> dict[str, int]:
    """``{"width": w, "height": h}`` of the desktop's screen, as OSWorld's ``/screen_size``."""
    width, height = ctx.client.screen_size()
    return {"width": int(width), "height": int(height)}
