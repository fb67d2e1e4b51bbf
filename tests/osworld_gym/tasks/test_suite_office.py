"""The office tasks (Calc, Writer, Impress) and the generators of their files.

Generators: the same parameters give the same bytes, other parameters other bytes, and the bytes
open with the library of their format. That every office task's oracle scores 1.0 and doing
nothing 0.0 on a real desktop is checked with the whole suite in test_builtin_oracles.py.
"""

from __future__ import annotations

import io
import zipfile

import pytest
from osworld_gym.support import builtin_tasks
from osworld_gym.tasks.assets import generate

OFFICE_DOMAINS = ("libreoffice_calc", "libreoffice_writer", "libreoffice_impress")
SEEDS = (0, 1)

# -- generators -------------------------------------------------------------------------------

#: (URL, same generator with other parameters, opener) per generator.
GENERATOR_CASES = {
    "office_xlsx": (
        "builtin-asset://office_xlsx?data=orders&seed=2&rows=12&cancel=4,9",
        "builtin-asset://office_xlsx?data=orders&seed=3&rows=12&cancel=4,9",
        "xlsx",
    ),
    "office_docx": (
        "builtin-asset://office_docx?doc=notes&seed=2",
        "builtin-asset://office_docx?doc=notes&seed=2&delete=Monday",
        "docx",
    ),
    "office_pptx": (
        "builtin-asset://office_pptx?deck=office&seed=2&slides=5",
        "builtin-asset://office_pptx?deck=office&seed=2&slides=5&bold=Parking",
        "pptx",
    ),
}


def open_office_file(data: bytes, kind: str):
    if kind == "xlsx":
        import openpyxl

        return openpyxl.load_workbook(io.BytesIO(data))
    if kind == "docx":
        import docx

        return docx.Document(io.BytesIO(data))
    import pptx

    return pptx.Presentation(io.BytesIO(data))


@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_a_generator_gives_the_same_bytes_for_the_same_parameters(name):
    url, _, _ = GENERATOR_CASES[name]
    assert generate(url) == generate(url)


@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_a_generator_gives_other_bytes_for_other_parameters(name):
    url, other, _ = GENERATOR_CASES[name]
    assert generate(url) != generate(other)


@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_generated_files_open_with_their_format_library(name):
    url, other, kind = GENERATOR_CASES[name]
    for data in (generate(url), generate(other)):
        assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None
        assert open_office_file(data, kind) is not None


def test_the_gold_spreadsheet_holds_the_requested_edits():
    import openpyxl

    base = "builtin-asset://office_xlsx?data=orders&seed=5&rows=12&cancel=3,8"
    book = openpyxl.load_workbook(io.BytesIO(generate(base + "&removed=1&total=C&summary=Summary")))
    data, summary = book["Sheet1"], book["Summary"]
    statuses = [data.cell(r, 4).value for r in range(2, data.max_row)]
    assert "Cancelled" not in statuses and len(statuses) == 10
    assert data.cell(data.max_row, 1).value == "Total"
    amounts = sum(data.cell(r, 3).value for r in range(2, data.max_row))
    assert data.cell(data.max_row, 3).value == amounts
    assert [summary.cell(r, 1).value for r in range(2, 6)] == ["East", "North", "South", "West"]


def test_the_gold_deck_holds_the_requested_edits():
    import pptx

    url = (
        "builtin-asset://office_pptx?deck=travel&seed=1&slides=5"
        "&delete=Budget&move=Route:end&title=Packing List:Gear&notes=1:Hello"
    )
    deck = pptx.Presentation(io.BytesIO(generate(url)))
    titles = [s.shapes.title.text for s in deck.slides]
    assert titles == ["Trip to the Coast", "Gear", "Places to Stay", "Route"]
    assert deck.slides[0].notes_slide.notes_text_frame.text == "Hello"


def test_the_gold_document_holds_the_requested_edits():
    import docx

    url = (
        "builtin-asset://office_docx?doc=letter&seed=1&name=Dr. Novak"
        "&replace=Kind regards,:Best wishes,&delete=P.S.&insert=5:See you soon."
    )
    texts = [p.text for p in docx.Document(io.BytesIO(generate(url))).paragraphs]
    assert texts[0] == "Dear Dr. Novak,"
    assert texts[4:] == ["See you soon.", "Best wishes,", "The Support Team"]


def test_the_suite_has_a_dozen_tasks_per_office_app_each_with_an_oracle():
    tasks = builtin_tasks(list(OFFICE_DOMAINS))
    for domain in OFFICE_DOMAINS:
        mine = [t for t in tasks if t.domain == domain]
        assert len(mine) >= 12, domain
        assert all(t.oracle for t in mine)
        assert len({t.raw.get("difficulty") for t in mine}) == 3, domain


# -- tasks on a real desktop ------------------------------------------------------------------

TASKS = list(builtin_tasks(list(OFFICE_DOMAINS)))
