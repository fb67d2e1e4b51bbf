"""Small metrics: URL patterns and active tabs, line patterns in files, JSON settings files."""

from __future__ import annotations

import pytest
from osworld_gym.evaluators.metrics.chrome import (
    is_expected_active_tab,
    is_expected_url_pattern_match,
)
from osworld_gym.evaluators.metrics.text import check_json_settings, check_list

TAB = {"title": "FAQ", "url": "https://premier.ticketek.com.au/shows/Ticket-Delivery-FAQs?x=1"}


@pytest.mark.parametrize(
    ("result", "patterns", "score"),
    [
        (TAB, ["Ticket-Delivery-FAQs"], 1.0),
        (TAB["url"], [r"ticketek\.com\.au", "x=1"], 1.0),
        (TAB, ["Ticket-Delivery-FAQs", "y=2"], 0.0),
        ({"title": "no url"}, ["."], 0.0),
        (None, ["."], 0.0),
    ],
)
def test_is_expected_url_pattern_match(result, patterns, score):
    assert is_expected_url_pattern_match(result, {"expected": patterns}) == score


def test_is_expected_active_tab():
    rule = {"type": "url", "url": "https://www.drugs.com/npc/"}
    assert is_expected_active_tab("https://drugs.com/npc/", rule) == 1.0
    assert is_expected_active_tab({"url": "HTTPS://www.Drugs.com/npc/"}, rule) == 1.0
    assert is_expected_active_tab({"url": "https://www.drugs.com/npc/?q=1"}, rule) == 0.0
    assert is_expected_active_tab("http://www.drugs.com/npc/", rule) == 0.0  # scheme counts
    assert is_expected_active_tab(None, rule) == 0.0
    assert (
        is_expected_active_tab("https://ex.org/", {"type": "url", "url": "https://ex.org"}) == 1.0
    )
    assert is_expected_active_tab("x", {"type": "title", "title": "x"}) == 0.0  # as OSWorld


def test_check_list(tmp_path):
    f = tmp_path / "packages.txt"
    f.write_text("numpy 1.26\npandas 2.2\n")
    assert check_list(str(f), {"expect": [r"^numpy \d", "pandas"], "unexpect": ["torch"]}) == 1.0
    assert check_list(str(f), {"expect": ["scipy"]}) == 0.0
    assert check_list(str(f), {"unexpect": ["^pandas"]}) == 0.0
    assert check_list(str(tmp_path / "missing.txt"), {"expect": []}) == 0.0


def test_check_json_settings_reads_strict_json_like_osworld(tmp_path):
    f = tmp_path / "settings.json"
    f.write_text(
        '{"editor.fontSize": 14, "url": "http://x//y", "files.exclude": {"**/.git": true}}'
    )
    assert (
        check_json_settings(str(f), {"expected": {"editor.fontSize": 14, "url": "http://x//y"}})
        == 1.0
    )
    assert check_json_settings(str(f), {"expected": {"files.exclude": {"**/.git": True}}}) == 1.0
    assert check_json_settings(str(f), {"expected": {"editor.fontSize": 12}}) == 0.0
    assert check_json_settings(str(f), {"expected": {"absent": 1}}) == 0.0
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert check_json_settings(str(bad), {"expected": {}}) == 0.0
    assert check_json_settings(None, {"expected": {}}) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        '{\n  // VS Code writes comments\n  "editor.fontSize": 14\n}',
        '{"editor.fontSize": 14,}',
        '{"editor.fontSize": 14 /* block */}',
    ],
)
def test_check_json_settings_scores_jsonc_zero_as_osworld_json_load_does(tmp_path, text):
    f = tmp_path / "settings.json"
    f.write_text(text)
    assert check_json_settings(str(f), {"expected": {"editor.fontSize": 14}}) == 0.0


@pytest.mark.parametrize("ranges", ["A:B", "3:4", "A1:B2 C:C"])
def test_range_cells_refuses_whole_rows_and_columns_by_name(ranges):
    """sheet_fuzzy walks every cell of a rule's range: an unbounded one is a task error, said as
    such (it was a TypeError from range(None, ...))."""
    from osworld_gym.evaluators.metrics.match import range_cells

    with pytest.raises(ValueError, match="whole row or column"):
        range_cells(ranges)
    assert range_cells("A1:B1 C3") == {(1, 1), (1, 2), (3, 3)}
