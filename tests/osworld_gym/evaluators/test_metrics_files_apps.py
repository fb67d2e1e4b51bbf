"""Semantics of the file, config and value metrics added for OSWorld's official tasks: the
right answer scores 1, a near miss what OSWorld's implementation gives."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from osworld_gym.evaluators.metrics.apps import (
    check_config_status,
    check_thunderbird_filter,
    check_thunderbird_prefs,
)
from osworld_gym.evaluators.metrics.chrome import (
    is_expected_active_tab_approximate,
    is_expected_tabs,
)
from osworld_gym.evaluators.metrics.files import (
    check_csv,
    check_json,
    compare_csv,
    compare_zip_files,
    diff_text_file,
    file_contains,
)
from osworld_gym.evaluators.metrics.general import is_in_list, is_utc_0


def write(path: Path, text: str | bytes) -> str:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def test_diff_text_file_is_the_line_sequence_ratio(tmp_path):
    gold = write(tmp_path / "g.txt", "a\nb\nc\nd\n")
    assert diff_text_file(write(tmp_path / "same.txt", "a\nb\nc\nd"), gold) == 1.0
    # one line of four changed: 2 * 3 / 8
    assert diff_text_file(write(tmp_path / "r.txt", "a\nB\nc\nd\n"), gold) == pytest.approx(0.75)
    assert diff_text_file(None, gold) == 0.0
    assert diff_text_file(str(tmp_path / "missing.txt"), gold) == 0.0


def test_compare_csv_compares_lines_as_text(tmp_path):
    gold = write(tmp_path / "g.csv", "Name,Score\nAnn,1\n")
    assert (
        compare_csv(write(tmp_path / "s.csv", "\ufeffName,Score\r\nAnn,1"), gold) == 1.0
    )  # BOM, CRLF
    near = write(tmp_path / "n.csv", "Name,Score\nAnn,1.0\n")  # same number, other text
    assert compare_csv(near, gold) == 0.0
    padded = write(tmp_path / "p.csv", "Name,Score \nann,1\n")
    assert compare_csv(padded, gold) == 0.0
    assert compare_csv(padded, gold, strict=False, ignore_case=True) == 1.0
    assert compare_csv(padded, [gold, str(padded)]) == 1.0  # any gold of a list
    latin = write(tmp_path / "l.csv", "Name,Score\nJos\xe9,1\n".encode("latin-1"))
    assert compare_csv(latin, write(tmp_path / "lg.csv", "Name,Score\nJosé,1\n")) == 1.0


def test_check_csv_records(tmp_path):
    f = write(tmp_path / "r.csv", "id,status\n1,done\n2,open\n")
    assert check_csv(f, {"expect": [{"id": "1", "status": "done"}]}) == 1.0
    assert check_csv(f, {"expect": [{"id": "1", "status": "open"}]}) == 0.0
    assert check_csv(f, {"expect": [{"id": "1"}], "unexpect": [{"status": "open"}]}) == 0.0


def test_check_json_walks_keys_and_rules(tmp_path):
    f = write(tmp_path / "r.json", '{"a": {"b": [1, 2]}, "name": "Ann"}')
    assert check_json(f, {"expect": [{"key": ["a", "b", 1], "method": "eq", "ref": 2}]}) == 1.0
    assert check_json(f, {"expect": [{"key": ["a", "x"], "method": "eq", "ref": 2}]}) == 0.0
    assert check_json(f, {"unexpect": [{"key": ["a", "x"], "method": "eq", "ref": None}]}) == 0.0
    assert check_json(f, {"unexpect": [{"key": ["name"], "method": "re", "ref": "^B"}]}) == 1.0
    assert check_json(write(tmp_path / "bad.json", "{oops"), {"expect": []}) == 0.0
    y = write(tmp_path / "r.yaml", "a:\n  b: 3\n")
    assert (
        check_json(y, {"expect": [{"key": ["a", "b"], "method": "eq", "ref": 3}]}, is_yaml=True)
        == 1.0
    )


def test_file_contains(tmp_path):
    f = write(tmp_path / "r.txt", "alpha beta")
    assert file_contains(f, {"expected": ["alpha", "beta"]}) == 1.0
    assert file_contains(f, {"expected": ["alpha", "gamma"]}) == 0.0
    assert file_contains(None, {"expected": []}) == 0.0


def test_compare_zip_files(tmp_path):
    def z(name, members):
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as zf:
            for k, v in members.items():
                zf.writestr(k, v)
        return str(path)

    gold = z("g.zip", {"a.txt": "1", "b/c.txt": "2"})
    assert compare_zip_files(z("s.zip", {"b/c.txt": "2", "a.txt": "1"}), gold) == 1.0
    assert compare_zip_files(z("d.zip", {"a.txt": "1", "b/c.txt": "3"}), gold) == 0.0
    assert compare_zip_files(z("m.zip", {"a.txt": "1"}), gold) == 0.0
    assert compare_zip_files(write(tmp_path / "x.zip", "not a zip"), gold) == 0.0
    with pytest.raises(NotImplementedError, match="pdf"):
        compare_zip_files(z("p.zip", {"r.pdf": "x"}), z("pg.zip", {"r.pdf": "y"}))


def test_is_in_list_is_membership_of_the_expected_value():
    assert is_in_list(["x", "y"], {"expected": "y"}) == 1.0
    assert is_in_list(["x", "yz"], {"expected": "y"}) == 0.0
    assert is_in_list("xyz", {"expected": "y"}) == 1.0  # substring, as `in` does
    assert is_in_list(None, {"expected": "y"}) == 0.0


def test_is_utc_0_reads_the_time_zone_line():
    utc = "Local time: x\nUniversal time: x\nRTC time: x\nTime zone: Etc/UTC (UTC, +0000)\nNTP: no"
    wet = utc.replace("Etc/UTC (UTC, +0000)", "Europe/Lisbon (WEST, +0100)")
    assert is_utc_0(utc) == 1.0
    assert is_utc_0(wet) == 0.0
    with pytest.raises(ValueError):
        is_utc_0("timedatectl: command not found")


def test_is_expected_tabs_is_an_unordered_url_match():
    tabs = [
        {"title": "a", "url": "https://www.example.com/"},
        {"title": "b", "url": "https://docs.python.org/3/"},
    ]
    rule = {"type": "url", "urls": ["https://docs.python.org/3/", "https://example.com"]}
    assert is_expected_tabs(tabs, rule) == 1.0
    assert is_expected_tabs(tabs[:1], rule) == 0.0
    assert is_expected_tabs(tabs + tabs[:1], rule) == 0.0  # an extra tab
    assert is_expected_tabs([], rule) == 0.0


def test_is_expected_active_tab_approximate_ignores_only_the_query():
    rule = {"type": "url", "url": "https://ex.org/p?a=1"}
    assert is_expected_active_tab_approximate({"url": "https://ex.org/p?b=2"}, rule) == 1.0
    assert is_expected_active_tab_approximate("https://www.ex.org/p", rule) == 0.0  # no www folding


PREFS = """// Mozilla User Preferences
user_pref("mail.spam.manualMark", true);
user_pref("mail.spam.manualMarkMode", 0);
user_pref("mailnews.default_sort_order", 2);
user_pref("mail.identity.id1.fullName", "Ann \\"A\\" Lee");
"""


def test_check_thunderbird_prefs(tmp_path):
    f = write(tmp_path / "prefs.js", PREFS)
    assert (
        check_thunderbird_prefs(
            f,
            {
                "expect": {
                    "mail.spam.manualMark": {"method": "eq", "ref": True},
                    "mail.spam.manualMarkMode": {"method": "eq", "ref": 0},
                }
            },
        )
        == 1.0
    )
    assert (
        check_thunderbird_prefs(
            f, {"expect": {"mail.spam.manualMarkMode": {"method": "eq", "ref": 1}}}
        )
        == 0.0
    )
    assert check_thunderbird_prefs(f, {"expect": {"never.set": {"method": "eq", "ref": 1}}}) == 0.0
    assert (
        check_thunderbird_prefs(
            f, {"unexpect": {"mailnews.default_sort_order": {"method": "eq", "ref": 2}}}
        )
        == 0.0
    )
    assert (
        check_thunderbird_prefs(
            f, {"expect": {"mail.identity.id1.fullName": {"method": "eq", "ref": 'Ann "A" Lee'}}}
        )
        == 1.0
    )


FILTERS = """version="9"
logging="no"
name="Move spam"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Junk"
condition="AND (subject,contains,spam)"
name="Star boss"
enabled="no"
type="17"
action="Mark flagged"
condition="OR (from,contains,boss@example.com) OR (subject,contains,urgent)"
"""


def test_check_thunderbird_filter(tmp_path):
    f = write(tmp_path / "msgFilterRules.dat", FILTERS)
    assert (
        check_thunderbird_filter(
            f,
            {
                "expect": [
                    {
                        "name": "Move spam",
                        "enabled": "yes",
                        "condition": ["AND (subject,contains,spam)"],
                    }
                ]
            },
        )
        == 1.0
    )
    assert check_thunderbird_filter(f, {"expect": [{"name": "Move spam", "enabled": "no"}]}) == 0.0
    assert (
        check_thunderbird_filter(
            f,
            {
                "expect": [
                    {
                        "name": "Star boss",
                        "condition": [
                            "OR (from,contains,boss@example.com)",
                            "OR (subject,contains,urgent)",
                        ],
                    }
                ]
            },
        )
        == 1.0
    )
    assert check_thunderbird_filter(f, {"unexpect": [{"action": "Mark flagged"}]}) == 0.0


def test_check_config_status(tmp_path):
    f = write(
        tmp_path / "gimprc",
        '# GIMP gimprc\n\n(theme "Dark")\n(show-tooltips no)\n(default-image (width 1920))\n',
    )
    assert check_config_status(f, {"key": "theme", "value": '"Dark"'}) == 1.0
    assert check_config_status(f, {"key": "theme", "value": "Dark"}) == 0.0  # quotes count
    assert check_config_status(f, {"key": "show-tooltips", "value": "yes"}) == 0.0
    assert check_config_status(f, {"key": ["default-image", "(width"], "value": "1920"}) == 1.0
    assert check_config_status(None, {"key": "theme", "value": "x"}) == 0.0
