"""VLC metrics: its ``vlcrc`` settings file and its HTTP status (``status.xml``).

vlcrc settings are read as OSWorld reads them: the *last* line that contains ``<key>=`` gives
the value (text after the last ``=``, stripped), or the setting's default when no line does.
Quirk kept: VLC writes every default as a comment (``#qt-bgcone=1``), and such a line counts
too, so a commented default after a real setting wins. A missing file scores 0.

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "vlcrc"
>>> _ = f.write_text("[qt]\\n#qt-max-volume=125\\nqt-max-volume=200\\n")
>>> check_qt_max_volume(str(f), {"expected_qt_max_volume": 200})
1.0
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

logger = logging.getLogger(__name__)


def vlcrc_value(text: str, key: str, default: str) -> str:
    """The value of ``key`` in vlcrc ``text`` as OSWorld reads it (see the module docstring)."""
    value = default
    for line in text.split("\n"):
        if f"{key}=" in line:
            value = line.split("=")[-1].strip()
    return value


def _setting(result: str | None, key: str, default: str, expected: Any) -> float:
    if not result or not Path(result).is_file():
        return 0.0
    text = Path(result).read_bytes().decode("utf-8", errors="replace")
    return float(vlcrc_value(text, key, default) == str(expected))


def check_qt_bgcone(result: str | None, rule: dict[str, Any]) -> float:
    """The interface's cone background (``qt-bgcone``, default ``1``)."""
    return _setting(result, "qt-bgcone", "1", rule["expected_qt_bgcone"])


def check_qt_max_volume(result: str | None, rule: dict[str, Any]) -> float:
    """The maximum volume (``qt-max-volume``, default ``125``)."""
    return _setting(result, "qt-max-volume", "125", rule["expected_qt_max_volume"])


def check_qt_minimal_view(result: str | None, rule: dict[str, Any]) -> float:
    """Minimal view (``qt-minimal-view``, default ``0``)."""
    return _setting(result, "qt-minimal-view", "0", rule["expected_qt_minimal_view"])


def check_one_instance_when_started_from_file(result: str | None, rule: dict[str, Any]) -> float:
    """One instance from the file manager (``one-instance-when-started-from-file``, default 1)."""
    return _setting(
        result,
        "one-instance-when-started-from-file",
        "1",
        rule["expected_one_instance_when_started_from_file"],
    )


def check_play_and_exit(result: str | None, rule: dict[str, Any]) -> float:
    """Quit at the end of the playlist (``play-and-exit``, default ``0``)."""
    return _setting(result, "play-and-exit", "0", rule["expected_play_and_exit"])


def check_global_key_play_pause(result: str | None, rule: dict[str, Any]) -> float:
    """A global play/pause hot key: ``"1"`` when the last ``global-key-play-pause=`` line has
    a value, ``"0"`` when it is empty or absent."""
    if not result or not Path(result).is_file():
        return 0.0
    text = Path(result).read_bytes().decode("utf-8", errors="replace")
    state = "0"
    for line in text.split("\n"):
        if "global-key-play-pause=" in line:
            state = "0" if line.split("=")[-1].strip() == "" else "1"
    return float(state == str(rule["expected_global_key_play_pause"]))


_SLIDER_DEFAULT = "153;210;153;20;210;20;255;199;15;245;39;29"


def check_qt_slider_colours(result: str | None, rule: dict[str, Any]) -> float:
    """The volume slider's colours (``qt-slider-colours``, a line *containing* the key): with
    ``type: match`` equal to ``expected_qt_slider_colours``; with ``type: blackish`` every
    RGB triple below 100 in each channel. Unparsable colours score 0."""
    if not result or not Path(result).is_file():
        return 0.0
    text = Path(result).read_bytes().decode("utf-8", errors="replace")
    value = _SLIDER_DEFAULT
    for line in text.split("\n"):
        if "qt-slider-colours" in line:
            value = line.split("=")[-1].strip()
    if rule["type"] == "match":
        return float(value == rule["expected_qt_slider_colours"])
    if rule["type"] == "blackish":
        try:
            numbers = [int(x) for x in value.split(";")]
        except ValueError:
            return 0.0
        triples = zip(numbers[0::3], numbers[1::3], numbers[2::3], strict=False)
        return float(all(all(v < 100 for v in rgb) for rgb in triples))
    return 0.0


def is_vlc_recordings_folder(result: str | None, rule: dict[str, Any]) -> float:
    """The first non-comment line containing ``input-record-path`` sets the folder; 1 if it is
    ``rule["recording_file_path"]``, 0 if it differs or no line sets it."""
    if not result or not Path(result).is_file():
        return 0.0
    text = Path(result).read_bytes().decode("utf-8", errors="replace")
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    return 0.0


_NAME_FIELDS = ("filename", "title", "uri", "location", "name")
_URL_FIELDS = ("url", "URI", "location", "title", "filename")


def _meta(tree: Any, names: tuple[str, ...]) -> str | None:
    for name in names:
        el = tree.find(f'information/category[@name="meta"]/info[@name="{name}"]')
        if el is not None and el.text:
            return el.text
    return None


def is_vlc_playing(result: str | None, rule: dict[str, Any]) -> float:
    """1 if VLC's status says ``playing`` and the media is the expected one.

    ``type: file_name``: the first non-empty of the meta fields filename, title, uri,
    location, name must end with ``rule["file_name"]``. ``type: url``: the first non-empty of
    url, URI, location, title, filename (then stream 0's codec, type, language, as OSWorld
    tries) must contain or end with ``rule["url"]``, equal its file name, or be a URL on the
    same host whose path contains the expected path. A status that is not XML scores 0.
    """
    from xml.etree import ElementTree

    if not result or not Path(result).is_file():
        return 0.0
    try:
        tree = ElementTree.fromstring(Path(result).read_bytes().decode("utf-8"))
    except (ElementTree.ParseError, UnicodeDecodeError) as exc:
        logger.info("is_vlc_playing: status is not XML: %s", exc)
        return 0.0
    if tree.findtext("state") != "playing":
        return 0.0
    if rule["type"] == "file_name":
        info = _meta(tree, _NAME_FIELDS)
        return float(bool(info) and info.endswith(rule["file_name"]))
    if rule["type"] == "url":
        info = _meta(tree, _URL_FIELDS)
        if info is None:
            for name in ("Codec", "Type", "Language"):
                el = tree.find(f'information/category[@name="Stream 0"]/info[@name="{name}"]')
                if el is not None and el.text:
                    info = el.text
                    break
        if not info:
            return 0.0
        want = rule["url"]
        if want in info:
            return 1.0
        expected = urlparse(want)
        if info == posixpath.basename(expected.path):
            return 1.0
        if "://" in info:
            actual = urlparse(info)
            return float(expected.netloc == actual.netloc and expected.path in actual.path)
        return 0.0
    return 0.0


def is_vlc_fullscreen(result: dict[str, Any] | None, expected: dict[str, Any] | None) -> float:
    """1 if the VLC window's size equals the screen's (``vm_window_size`` vs
    ``vm_screen_size``)."""
    if not result or not expected:
        return 0.0
    return float(result["width"] == expected["width"] and result["height"] == expected["height"])
