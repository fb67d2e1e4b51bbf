"""Semantics of OSWorld's VLC metrics on vlcrc and status.xml files: the right answer scores
1, a near miss what OSWorld's implementation gives (commented defaults included)."""

from __future__ import annotations

from pathlib import Path

import pytest
from osworld_gym.evaluators.metrics import vlc


def rc(tmp_path: Path, text: str) -> str:
    f = tmp_path / f"vlcrc{len(list(tmp_path.iterdir()))}"
    f.write_text(text)
    return str(f)


@pytest.mark.parametrize(
    ("fn", "key", "default", "other"),
    [
        (vlc.check_qt_bgcone, "expected_qt_bgcone", "1", "0"),
        (vlc.check_qt_max_volume, "expected_qt_max_volume", "125", "200"),
        (vlc.check_qt_minimal_view, "expected_qt_minimal_view", "0", "1"),
        (vlc.check_play_and_exit, "expected_play_and_exit", "0", "1"),
        (
            vlc.check_one_instance_when_started_from_file,
            "expected_one_instance_when_started_from_file",
            "1",
            "0",
        ),
    ],
)
def test_vlcrc_settings(tmp_path, fn, key, default, other):
    name = key.removeprefix("expected_").replace("_", "-")
    assert fn(rc(tmp_path, "[core]\n"), {key: default}) == 1.0  # absent: the default
    assert fn(rc(tmp_path, f"{name}={other}\n"), {key: int(other)}) == 1.0  # int rules too
    assert fn(rc(tmp_path, f"{name}={other}\n"), {key: default}) == 0.0
    # OSWorld's quirk: a commented default *after* the setting wins
    assert fn(rc(tmp_path, f"{name}={other}\n#{name}={default}\n"), {key: default}) == 1.0
    assert fn(None, {key: default}) == 0.0


def test_global_key_and_slider_colours_and_recordings(tmp_path):
    assert (
        vlc.check_global_key_play_pause(
            rc(tmp_path, "global-key-play-pause=Ctrl+p\n"), {"expected_global_key_play_pause": 1}
        )
        == 1.0
    )
    assert (
        vlc.check_global_key_play_pause(
            rc(tmp_path, "#global-key-play-pause=\n"), {"expected_global_key_play_pause": 1}
        )
        == 0.0
    )
    dark = rc(tmp_path, "qt-slider-colours=10;20;30;0;0;0;99;99;99;1;2;3\n")
    assert vlc.check_qt_slider_colours(dark, {"type": "blackish"}) == 1.0
    assert vlc.check_qt_slider_colours(rc(tmp_path, "[qt]\n"), {"type": "blackish"}) == 0.0
    assert (
        vlc.check_qt_slider_colours(
            dark, {"type": "match", "expected_qt_slider_colours": "10;20;30;0;0;0;99;99;99;1;2;3"}
        )
        == 1.0
    )
    rec = rc(tmp_path, "#input-record-path=\ninput-record-path=/home/user/Videos\n")
    assert vlc.is_vlc_recordings_folder(rec, {"recording_file_path": "/home/user/Videos"}) == 1.0
    assert vlc.is_vlc_recordings_folder(rec, {"recording_file_path": "/home/user/Desktop"}) == 0.0


def status(tmp_path: Path, state: str, **meta: str) -> str:
    infos = "".join(f'<info name="{k}">{v}</info>' for k, v in meta.items())
    f = tmp_path / "status.xml"
    f.write_text(
        f'<root><state>{state}</state><information><category name="meta">{infos}'
        "</category></information></root>"
    )
    return str(f)


def test_is_vlc_playing(tmp_path):
    rule = {"type": "file_name", "file_name": "song.mp4"}
    assert vlc.is_vlc_playing(status(tmp_path, "playing", filename="song.mp4"), rule) == 1.0
    assert vlc.is_vlc_playing(status(tmp_path, "paused", filename="song.mp4"), rule) == 0.0
    assert vlc.is_vlc_playing(status(tmp_path, "playing", filename="other.mp4"), rule) == 0.0
    url = {"type": "url", "url": "https://cdn.example.org/v/master.m3u8"}
    assert vlc.is_vlc_playing(status(tmp_path, "playing", filename="master.m3u8"), url) == 1.0
    assert (
        vlc.is_vlc_playing(
            status(tmp_path, "playing", url="https://cdn.example.org/v/master.m3u8?t=1"), url
        )
        == 1.0
    )
    assert vlc.is_vlc_playing(status(tmp_path, "playing", filename="other.m3u8"), url) == 0.0
    bad = tmp_path / "bad.xml"
    bad.write_text("<root>")
    assert vlc.is_vlc_playing(str(bad), rule) == 0.0


def test_is_vlc_fullscreen():
    assert (
        vlc.is_vlc_fullscreen({"width": 1920, "height": 1080}, {"width": 1920, "height": 1080})
        == 1.0
    )
    assert (
        vlc.is_vlc_fullscreen({"width": 1280, "height": 1080}, {"width": 1920, "height": 1080})
        == 0.0
    )
    assert vlc.is_vlc_fullscreen(None, {"width": 1, "height": 1}) == 0.0
