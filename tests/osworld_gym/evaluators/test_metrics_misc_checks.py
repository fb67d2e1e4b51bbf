"""Semantics of OSWorld's remaining small metrics on generated inputs: the right answer scores
1, a near miss what OSWorld's implementation gives."""

from __future__ import annotations

import shutil
import sqlite3
import zipfile
from pathlib import Path

import docx
import pytest
from osworld_gym.evaluators.metrics import misc_checks as m
from pypdf import PdfWriter

BAR = {
    "bookmark_bar": {
        "children": [
            {"type": "folder", "name": "Work", "children": []},
            {
                "type": "folder",
                "name": "Liked Authors",
                "children": [
                    {"type": "url", "url": "https://a.example/x"},
                    {"type": "url", "url": "https://b.example/y"},
                ],
            },
            {"type": "url", "name": "News", "url": "https://news.example/"},
        ]
    }
}


def test_is_expected_bookmarks():
    assert (
        m.is_expected_bookmarks(
            BAR, {"type": "bookmark_bar_folders_names", "names": ["Liked Authors", "Work"]}
        )
        == 1.0
    )
    assert (
        m.is_expected_bookmarks(BAR, {"type": "bookmark_bar_folders_names", "names": ["Work"]})
        == 0.0
    )
    assert (
        m.is_expected_bookmarks(
            BAR, {"type": "bookmark_bar_websites_urls", "urls": ["https://news.example/"]}
        )
        == 1.0
    )
    liked = {
        "type": "liked_authors_websites_urls",
        "urls": [["https://a.example/x", "https://a.example/x/"], "https://b.example/y"],
    }
    assert m.is_expected_bookmarks(BAR, liked) == 1.0
    assert m.is_expected_bookmarks(BAR, {**liked, "urls": ["https://a.example/x"]}) == 0.0
    assert m.is_expected_bookmarks(None, liked) == 0.0
    with pytest.raises(ValueError):
        m.is_expected_bookmarks(BAR, {"type": "other"})


def test_is_expected_installed_extensions():
    assert (
        m.is_expected_installed_extensions(
            ["Zoom for Google Chrome", "X"], {"expected": ["Zoom Chrome Extension"]}
        )
        == 1.0
    )
    assert m.is_expected_installed_extensions(["X"], {"expected": ["Y"]}) == 0.0


TREE = (
    '<desktop-frame xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes">'
    '<application name="Thunderbird"><tool-bar attr:id="MsgHeadersToolbar">'
    '<label name="To"/><section attr:class="address-pill"><label attr:class="pill-label" '
    'name="fox@uni.edu">fox@uni.edu</label></section></tool-bar></application></desktop-frame>'
)


def test_check_accessibility_tree_css_and_xpath():
    css = (
        "tool-bar[attr|id=MsgHeadersToolbar] "
        'label[name=To]~[attr|class="address-pill"]>label[name*="fox@"]'
    )
    assert m.check_accessibility_tree(TREE, [{"selectors": [css]}]) == 1.0
    assert m.check_accessibility_tree(TREE, [{"selectors": [css.replace("fox@", "iron@")]}]) == 0.0
    xp = "//application[@name='Thunderbird']//*[contains(@name, 'fox@uni.edu')]"
    assert m.check_accessibility_tree(TREE, [{"xpath": xp}]) == 1.0
    assert (
        m.check_accessibility_tree(TREE, [{"xpath": xp, "text": "fox@uni.edu", "exact": True}])
        == 1.0
    )
    fuzzy = m.check_accessibility_tree(TREE, [{"xpath": xp, "text": "fox@uni.com", "exact": False}])
    assert 0.5 < fuzzy < 1.0  # fuzzy ratio, not 0/1
    assert m.check_accessibility_tree("<broken", [{"xpath": xp}]) == 0.0


@pytest.mark.parametrize("xp", ["count(//label)", "//label/@name", "string(//section)"])
def test_check_accessibility_tree_text_rule_needs_elements(xp):
    """A text rule compares each node's .text: an xpath giving a number, a string or attribute
    values is a task error, named as such, not an AttributeError from inside the loop."""
    with pytest.raises(ValueError, match="selects elements"):
        m.check_accessibility_tree(TREE, [{"xpath": xp, "text": "To", "exact": True}])
    assert m.check_accessibility_tree(TREE, [{"xpath": xp}]) == 1.0  # truthy: as before


def test_check_moved_jpgs():
    listing = {"children": [{"name": "a.jpg"}, {"name": "b.jpg"}]}
    assert m.check_moved_jpgs(listing, {"expected": ["a.jpg", "b.jpg"]}) == 1.0
    assert m.check_moved_jpgs(listing, {"expected": ["a.jpg"]}) == 0.0


def test_run_sqlite3(tmp_path):
    db = tmp_path / "d.db"
    with sqlite3.connect(db) as c:
        c.execute("create table t (x)")
        c.executemany("insert into t values (?)", [(1,), (2,)])
    assert m.run_sqlite3(str(db), {"sql": "select count(*) = 2 from t"}) == 1.0
    assert m.run_sqlite3(str(db), {"sql": "select count(*) = 3 from t"}) == 0.0
    assert m.run_sqlite3(str(db), {"sql": "select null"}) == 0.0
    (tmp_path / "x.db").write_text("not a database")
    assert m.run_sqlite3(str(tmp_path / "x.db"), {"sql": "select count(*) from t"}) == 0.0


def test_check_line_number(tmp_path):
    f = tmp_path / "log.txt"
    f.write_text("12:00:01 start\nno time\n23:59:60 leap\n24:00:00 not a time\n")
    assert m.check_line_number(str(f), {"expected": 2}) == 1.0
    assert m.check_line_number(str(f), {"expected": "3"}) == 0.0


def test_check_pdf_pages(tmp_path):
    w = PdfWriter()
    for _ in range(3):
        w.add_blank_page(100, 100)
    f = tmp_path / "p.pdf"
    with open(f, "wb") as out:
        w.write(out)
    assert m.check_pdf_pages(str(f), {"relation": "eq", "ref_value": 3}) == 1.0
    assert m.check_pdf_pages(str(f), {"relation": "lt", "ref_value": 3}) == 0.0


def test_is_in_vm_clickboard():
    assert m.is_in_vm_clickboard({"expected": "/home/user/a.docx"}, "/home/user/a.docx\n") == 1.0
    assert m.is_in_vm_clickboard({"expected": ["a", "b"]}, "a only") == 0.0


def records(path: Path, lines: list[str]) -> str:
    doc = docx.Document()
    for line in lines:
        doc.add_paragraph(line)
    doc.save(path)
    return str(path)


def test_compare_unique_train_records(tmp_path):
    initial = records(tmp_path / "i.docx", ["x, T1, a, b", "x, T1, a, b", "y, T2, c, d"])
    gold = records(tmp_path / "g.docx", ["x, T1, a, b", "y, T2, c, d"])
    good = records(tmp_path / "r.docx", ["y, T2, c, d", "x, T1, a, b"])
    dup = records(tmp_path / "d.docx", ["x, T1, a, b", "x, T1, a, b", "y, T2, c, d"])
    assert m.compare_unique_train_records(good, [gold, initial]) == 1.0
    assert m.compare_unique_train_records(dup, [gold, initial]) == 0.0


def test_compare_archive_scores_the_mean_over_files(tmp_path):
    def archive(name, files):
        folder = tmp_path / name / "docs"
        folder.mkdir(parents=True)
        for k, v in files.items():
            (folder / k).write_text(v)
        return shutil.make_archive(str(tmp_path / name), "zip", tmp_path / name)

    gold = archive("gold", {"a.txt": "one", "b.txt": "two"})
    same = archive("same", {"a.txt": "one", "b.txt": "two"})
    half = archive("half", {"a.txt": "one", "b.txt": "TWO"})
    other = archive("other", {"a.txt": "one", "c.txt": "two"})
    assert m.compare_archive(same, gold, file_path="docs") == 1.0
    assert m.compare_archive(half, gold, file_path="docs") == 0.5
    assert m.compare_archive(other, gold, file_path="docs") == 0.0
    (tmp_path / "bad.zip").write_text("no")
    assert m.compare_archive(str(tmp_path / "bad.zip"), gold, file_path="docs") == 0.0
    with pytest.raises(NotImplementedError):
        m.compare_archive(same, gold, file_path="docs", file_type="audio")
    assert zipfile.is_zipfile(gold)
