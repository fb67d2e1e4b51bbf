"""Semantics of check_font_size, fuzzy_place_math, compare_image_list and
compare_conference_city_in_order: right answer 1, near miss OSWorld's value."""

from __future__ import annotations

import docx
import openpyxl
import pytest
from osworld_gym.evaluators.metrics.chrome import check_font_size
from osworld_gym.evaluators.metrics.docs_checks import fuzzy_place_math
from osworld_gym.evaluators.metrics.gimp import compare_image_list
from osworld_gym.evaluators.metrics.misc_checks import compare_conference_city_in_order
from PIL import Image


def test_check_font_size():
    assert (
        check_font_size({"default_font_size": 20}, {"type": "range", "min": 16, "max": 99999})
        == 1.0
    )
    assert (
        check_font_size({"default_font_size": 16}, {"type": "range", "min": 16, "max": 99999})
        == 0.0
    )
    assert (
        check_font_size({"minimum_font_size": 6}, {"type": "value", "value": 16}) == 1.0
    )  # default
    with pytest.raises(ValueError):
        check_font_size({"default_font_size": 16}, {"type": "other"})


def test_fuzzy_place_math(tmp_path):
    def doc(words):
        d = docx.Document()
        d.add_paragraph(" ".join(words))
        d.save(tmp_path / "r.docx")
        return str(tmp_path / "r.docx")

    rules = {"expected": ["alpha", "beta", "gamma"]}
    assert fuzzy_place_math(doc(["alpha", "beta", "gamma"]), rules) == 1.0
    assert fuzzy_place_math(doc(["alpha", "beta"]), rules) == 0.0
    assert 0.8 < fuzzy_place_math(doc(["alpha", "beta", "gamme"]), rules) < 1.0


def test_compare_image_list(tmp_path):
    def img(name, color, size=(10, 10)):
        Image.new("RGB", size, color).save(tmp_path / name)
        return str(tmp_path / name)

    gold = [img("g1.png", "red"), img("g2.png", "blue")]
    assert compare_image_list([img("r1.png", "red", (20, 20)), img("r2.png", "blue")], gold) == 1.0
    assert compare_image_list([img("r3.png", "red"), img("r4.png", "green")], gold) == 0.0
    assert compare_image_list(img("r5.png", "red"), gold[0]) == 1.0
    assert compare_image_list([None, img("r6.png", "blue")], gold) == 0.0


def test_compare_conference_city_in_order(tmp_path):
    wb = openpyxl.Workbook()
    ws = wb.active
    cities = ["Zürich, Switzerland", "New Orleans, USA"] + ["Paris"] * 19
    for i, c in enumerate(cities, start=2):
        ws[f"C{i}"] = c
    wb.save(tmp_path / "c.xlsx")
    want = ["Zurich", ["New Orleans", "NOLA"]] + ["paris"] * 19
    assert compare_conference_city_in_order(str(tmp_path / "c.xlsx"), {"expected": want}) == 1.0
    assert (
        compare_conference_city_in_order(
            str(tmp_path / "c.xlsx"), {"expected": ["Geneva"] + want[1:]}
        )
        == 0.0
    )
