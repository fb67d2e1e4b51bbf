"""Admission of the agent's files: what they may unpack to is bounded before any parser runs.

Real bombs, built here: a .docx whose document part inflates to 1 GiB (declared honestly, and
with a header that lies), a gzip stream of 1 GiB, a PNG declaring 10^10 pixels. Each is refused
(UnusableResultFile) in bounded memory; well-formed files pass untouched."""

from __future__ import annotations

import io
import resource
import sys
from pathlib import Path

import pytest
from osworld_gym.errors import UnusableResultFile
from osworld_gym.evaluators.admission import MAX_UNPACKED, admit

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import malformed  # noqa: E402
import standins  # noqa: E402


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture(scope="module")
def docx() -> bytes:
    path = Path(__import__("tempfile").mkdtemp()) / "a.docx"
    standins.write_standin(path, "admission")
    return path.read_bytes()


@pytest.mark.parametrize("lie", [False, True], ids=["declared", "lying-header"])
def test_a_zip_bomb_is_refused_without_inflating_it_whole(tmp_path, docx, lie):
    bomb = tmp_path / "bomb.docx"
    bomb.write_bytes(malformed._bomb_zip(docx, "word/document.xml", lie=lie))
    before = _rss_mib()
    with pytest.raises(UnusableResultFile, match="unpack") as e:
        admit(bomb)
    assert "bomb.docx" in str(e.value)
    assert _rss_mib() - before < 64  # one 1 MiB step at a time, never the gigabyte


def test_well_formed_office_files_and_other_files_are_admitted(tmp_path, docx):
    for name, data in [
        ("a.docx", docx),
        ("t.txt", b"hello"),
        ("e", b""),
        ("z.zip", b"PK\x03\x04 not really"),
    ]:
        (tmp_path / name).write_bytes(data)
        admit(tmp_path / name)  # no exception


def test_a_gzip_bomb_is_refused(tmp_path):
    (tmp_path / "b.tar.gz").write_bytes(malformed.gzip_bomb())
    before = _rss_mib()
    with pytest.raises(UnusableResultFile, match=f"over the {MAX_UNPACKED} bytes"):
        admit(tmp_path / "b.tar.gz")
    assert _rss_mib() - before < 64


def test_an_image_declaring_ten_billion_pixels_is_refused(tmp_path):
    (tmp_path / "b.png").write_bytes(malformed.png_bomb())
    with pytest.raises(UnusableResultFile, match="pixels"):
        admit(tmp_path / "b.png")
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1920, 1080)).save(buf, "PNG")
    (tmp_path / "ok.png").write_bytes(buf.getvalue())
    admit(tmp_path / "ok.png")


def test_a_zip_bomb_at_a_result_path_scores_zero_with_the_reason(tmp_path, docx):
    """Through evaluate: the bomb at the agent's result path is refused as it arrives."""
    from osworld_gym.evaluators import EvalContext, evaluate
    from osworld_gym.tasks import Task

    class Guest:
        def download_file(self, path, dest, max_bytes=None):
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(malformed._bomb_zip(docx, "word/document.xml", lie=False))
            return dest.stat().st_size

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "gold.docx").write_bytes(docx)
    task = Task.from_dict(
        {
            "id": "t",
            "instruction": "x",
            "evaluator": {
                "func": "compare_docx_files",
                "result": {"type": "vm_file", "path": "a.docx", "dest": "a.docx"},
                "expected": {"type": "cache_file", "path": "gold.docx"},
            },
        }
    )
    r = evaluate(task, EvalContext(client=Guest(), cache_dir=tmp_path / "t", task_id="t"))
    note = r.details["metrics"][0]["note"]
    assert r.score == 0.0 and note.startswith("result unusable: a.docx declares"), note
