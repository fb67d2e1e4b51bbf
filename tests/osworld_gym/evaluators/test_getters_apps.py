"""Getters added for OSWorld's official tasks that read files from the desktop: Chrome's
Preferences, GIMP's config, media inside a presentation, xdg-mime's default player. The
desktop is a small in-memory file table here (these getters only read files / run a
command); the metric tests use the same real file formats."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from osworld_gym.evaluators import EvalContext, getter
from pptx import Presentation

HOME = "/home/user"


class Desk:
    """Files by absolute guest path, and canned command output by argv."""

    def __init__(self, files: dict[str, bytes], outputs: dict[tuple[str, ...], str] | None = None):
        self.files, self.outputs = files, outputs or {}

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        return self.files.get(path)

    def execute(self, command: Any, shell: bool = False, timeout: float = 120.0) -> dict:
        return {"status": "success", "output": self.outputs.get(tuple(command), ""), "error": ""}

    def screen_size(self) -> tuple[int, int]:
        return (1280, 720)

    def terminal(self) -> str | None:
        return self.files.get("<terminal>", b"").decode() or None


def ctx(tmp_path: Path, desk: Desk) -> EvalContext:
    return EvalContext(client=desk, cache_dir=tmp_path, task_id="t")


PREFS = f"{HOME}/.config/google-chrome/Default/Preferences"


def prefs(data: dict) -> Desk:
    return Desk({PREFS: json.dumps(data).encode()})


def test_chrome_preference_getters(tmp_path):
    data = {
        "webkit": {"webprefs": {"default_font_size": 20}},
        "safebrowsing": {"enhanced": True},
        "session": {"restore_on_startup": 5},
        "extensions": {
            "settings": {
                "abc": {"path": "/home/user/ext", "manifest": {"name": "Helper"}},
                "def": {"path": "def/1.0", "manifest": {"name": "Docs"}},
            }
        },
        "profile": {"default_content_setting_values": {"cookies": 4}},
    }
    c = ctx(tmp_path, prefs(data))
    assert getter("chrome_font_size")(c, {}) == {"default_font_size": 20}
    assert getter("enable_safe_browsing")(c, {}) == "true"
    assert getter("new_startup_page")(c, {}) == "true"
    assert getter("find_unpacked_extension_path")(c, {}) == ["/home/user/ext", "def/1.0"]
    assert getter("find_installed_extension_name")(c, {}) == ["Helper", "Docs"]
    assert getter("data_delete_automacally")(c, {}) == "true"
    fresh = ctx(tmp_path, prefs({"session": {"restore_on_startup": 1}}))
    assert getter("chrome_font_size")(fresh, {})["default_font_size"] == 16  # Chrome's default
    assert getter("enable_safe_browsing")(fresh, {}) == "false"
    assert getter("new_startup_page")(fresh, {}) == "false"
    assert getter("data_delete_automacally")(fresh, {}) == "false"
    assert getter("new_startup_page")(ctx(tmp_path, prefs({})), {}) == "true"  # no session at all
    assert getter("enable_safe_browsing")(ctx(tmp_path, Desk({})), {}) is None  # never ran


def test_gimp_config_file_copies_the_settings_file(tmp_path):
    desk = Desk({f"{HOME}/.config/GIMP/2.10/sessionrc": b"(session-info)\n"})
    local = getter("gimp_config_file")(ctx(tmp_path, desk), {"file_name": "sessionrc", "dest": "s"})
    assert Path(local).read_bytes() == b"(session-info)\n"
    assert (
        getter("gimp_config_file")(ctx(tmp_path, desk), {"file_name": "gimprc", "dest": "g"})
        is None
    )


def test_default_video_player_is_the_most_common_answer(tmp_path):
    outputs = {
        ("xdg-mime", "query", "default", f"video/{t}"): "vlc.desktop\n"
        for t in ("mp4", "webm", "x-matroska")
    }
    outputs[("xdg-mime", "query", "default", "video/ogg")] = "totem.desktop\n"
    assert getter("default_video_player")(ctx(tmp_path, Desk({}, outputs)), {}) == "vlc.desktop\n"
    assert getter("default_video_player")(ctx(tmp_path, Desk({})), {}) == "unknown"


def test_vm_screen_size(tmp_path):
    assert getter("vm_screen_size")(ctx(tmp_path, Desk({})), {}) == {"width": 1280, "height": 720}


AUDIO_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio"
IMAGE_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"


def deck_with_media() -> bytes:
    """A one-slide deck whose slide relates an embedded audio file and has an image as its
    background fill, the parts OSWorld's getters look for (written into the package)."""
    import re
    import zipfile

    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    buf = io.BytesIO()
    prs.save(buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "ppt/slides/_rels/slide1.xml.rels":
                data = data.replace(
                    b"</Relationships>",
                    (
                        f'<Relationship Id="rIdA" Type="{AUDIO_REL}" Target="../media/clip.mp3"/>'
                        f'<Relationship Id="rIdB" Type="{IMAGE_REL}" Target="../media/bg.png"/>'
                        "</Relationships>"
                    ).encode(),
                )
            if item.filename == "ppt/slides/slide1.xml":
                bg = (
                    b'<p:bg><p:bgPr><a:blipFill><a:blip r:embed="rIdB"/></a:blipFill>'
                    b"<a:effectLst/></p:bgPr></p:bg>"
                )
                data = re.sub(rb"(<p:cSld[^>]*>)", lambda m, bg=bg: m.group(1) + bg, data, count=1)
            z.writestr(item, data)
        z.writestr("ppt/media/clip.mp3", b"ID3fake-mp3")
        z.writestr("ppt/media/bg.png", b"\x89PNGfake")
    return out.getvalue()


def test_audio_and_background_in_slide_extract_the_embedded_media(tmp_path):
    path = f"{HOME}/Desktop/talk.pptx"
    desk = Desk({path: deck_with_media()})
    cfg = {"ppt_file_path": path, "slide_index": 0, "dest": "out.bin"}
    audio = getter("audio_in_slide")(ctx(tmp_path, desk), cfg)
    assert Path(audio).read_bytes() == b"ID3fake-mp3"
    image = getter("background_image_in_slide")(ctx(tmp_path, desk), {**cfg, "dest": "bg.png"})
    assert Path(image).read_bytes() == b"\x89PNGfake"
    assert getter("audio_in_slide")(ctx(tmp_path, desk), {**cfg, "slide_index": 3}) is None
    assert getter("audio_in_slide")(ctx(tmp_path, Desk({})), cfg) is None
    plain = io.BytesIO()
    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    prs.save(plain)
    bare = Desk({path: plain.getvalue()})
    assert getter("audio_in_slide")(ctx(tmp_path, bare), cfg) is None
    assert getter("background_image_in_slide")(ctx(tmp_path, bare), cfg) is None


def test_vm_terminal_output_is_the_terminal_text_or_none(tmp_path):
    desk = Desk({"<terminal>": b"user@host:~$ wc -l a b\n 43 132 total\n"})
    assert "43 132" in getter("vm_terminal_output")(ctx(tmp_path, desk), {})
    assert getter("vm_terminal_output")(ctx(tmp_path, Desk({})), {}) is None
