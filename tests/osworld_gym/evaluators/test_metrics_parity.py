"""Parity with OSWorld's metric code for the quirks issue 11 lists (values, URLs, images,
infeasible): each case is the score OSWorld's implementation gives on the same input."""

from __future__ import annotations

import numpy as np
import pytest
from osworld_gym.evaluators.metrics.chrome import (
    is_expected_active_tab,
    is_expected_active_tab_approximate,
)
from osworld_gym.evaluators.metrics.general import infeasible
from osworld_gym.evaluators.metrics.images import compare_images, ssim
from osworld_gym.evaluators.metrics.text import check_list
from PIL import Image


@pytest.mark.parametrize(
    ("last_action", "score"),
    [
        ("FAIL", 1.0),
        ({"action_type": "FAIL"}, 1.0),
        ("fail", 0.0),  # OSWorld compares with == "FAIL"
        (" FAIL ", 0.0),
        ({"action_type": "fail"}, 0.0),
        ("DONE", 0.0),
    ],
)
def test_infeasible_accepts_only_the_exact_fail_action(last_action, score):
    assert infeasible(last_action) == score


@pytest.mark.parametrize(
    ("actual", "url", "score"),
    [
        ("https://www.airbnb.com.sg/", "https://airbnb.com", 1.0),  # another public suffix
        ("https://example.co.uk/a", "https://example.com/a", 1.0),
        ("https://example.com:443/a", "https://example.com/a", 1.0),  # explicit default port
        ("http://localhost:8080/x", "http://localhost/x", 1.0),  # any port is dropped
        ("https://www.a.example.org/", "https://a.example.org", 0.0),  # www kept if not alone
        ("https://maps.google.com/", "https://google.com/", 0.0),
        ("https://example.com/a?q=1", "https://example.com/a?q=2", 0.0),
        ("https://example.com/a", "http://example.com/a", 0.0),  # scheme counts
        ({"url": "example.com/"}, "http://www.example.com", 1.0),
    ],
)
def test_is_expected_active_tab_compares_sites_like_osworld_compare_urls(actual, url, score):
    assert is_expected_active_tab(actual, {"type": "url", "url": url}) == score


def _gradient(w: int, h: int) -> Image.Image:
    x = np.linspace(0, 255, w)[None, :] * np.linspace(0.2, 1.0, h)[:, None]
    return Image.fromarray(x.astype(np.uint8), "L")


def test_compare_images_resizes_both_to_the_tuple_minimum_size(tmp_path):
    # OSWorld: new_size = min(size1, size2) on tuples: (90, 200) < (100, 50), not (90, 50)
    a, b = _gradient(100, 50), _gradient(90, 200)
    a.save(tmp_path / "a.png")
    b.save(tmp_path / "b.png")
    got = compare_images(str(tmp_path / "a.png"), str(tmp_path / "b.png"))

    def at(size):
        ra = np.asarray(a.resize(size, Image.Resampling.LANCZOS))
        rb = np.asarray(b.resize(size, Image.Resampling.LANCZOS))
        return ssim(ra, rb)

    assert got == pytest.approx(max(0.0, at((90, 200))))
    assert got != pytest.approx(at((90, 50)))


def test_compare_images_identical_scores_one_and_inverted_scores_zero(tmp_path):
    g = _gradient(64, 48)
    g.save(tmp_path / "g.png")
    Image.fromarray(255 - np.asarray(g)).save(tmp_path / "inv.png")
    assert compare_images(str(tmp_path / "g.png"), str(tmp_path / "g.png")) == pytest.approx(1.0)
    # OSWorld returns the raw negative SSIM; a reward here is in [0, 1]
    assert compare_images(str(tmp_path / "inv.png"), str(tmp_path / "g.png")) == 0.0


def test_compare_images_tiny_result_scores_zero_and_tiny_gold_is_a_judge_error(tmp_path):
    _gradient(64, 48).save(tmp_path / "gold.png")
    _gradient(5, 5).save(tmp_path / "tiny.png")
    assert compare_images(str(tmp_path / "tiny.png"), str(tmp_path / "gold.png")) == 0.0
    with pytest.raises(ValueError, match="too small"):
        compare_images(str(tmp_path / "gold.png"), str(tmp_path / "tiny.png"))


def test_compare_images_reference_base_rescales_and_floors(tmp_path):
    g = _gradient(64, 48)
    g.save(tmp_path / "g.png")
    assert compare_images(
        str(tmp_path / "g.png"), str(tmp_path / "g.png"), reference_base_result=0.5
    ) == pytest.approx(1.0)
    noisy = np.clip(
        np.asarray(g).astype(int) + np.random.default_rng(0).integers(-60, 60, (48, 64)), 0, 255
    ).astype(np.uint8)
    Image.fromarray(noisy).save(tmp_path / "n.png")
    raw = compare_images(str(tmp_path / "n.png"), str(tmp_path / "g.png"))
    assert 0 < raw < 1
    # below base + 0.01: 0
    assert (
        compare_images(str(tmp_path / "n.png"), str(tmp_path / "g.png"), reference_base_result=raw)
        == 0.0
    )


@pytest.mark.parametrize("metric", [is_expected_active_tab, is_expected_active_tab_approximate])
def test_an_active_tab_rule_of_another_type_scores_zero_not_an_error(metric):
    """OSWorld knows only ``type: url`` and logs the rest, scoring 0; a title that matches
    the open tab exactly must not turn that into a 1 or into a judge failure."""
    tab = {"title": "Example Domain", "url": "https://example.com/"}
    assert metric(tab, {"type": "url", "url": "https://example.com/"}) == 1.0
    assert metric(tab, {"type": "title", "title": "Example Domain"}) == 0.0
    assert metric(None, {"type": "title", "title": "Example Domain"}) == 0.0
    with pytest.raises(ValueError, match="needs a 'type'"):
        metric(tab, {"url": "https://example.com/"})  # OSWorld: KeyError, a broken task


@pytest.mark.parametrize(
    ("text", "rules", "score"),
    [
        # a form feed is not a line break when a file is iterated: "^b$" cannot match
        ("a\fb\n", {"expect": ["^b$"]}, 0.0),
        ("a\fb\n", {"expect": ["^a\fb$"]}, 1.0),
        ("x\n\f\ny\n", {"expect": ["^\f$"]}, 1.0),  # a line holding only a form feed
        ("x\n\f\ny\n", {"unexpect": ["^$"]}, 1.0),  # ...which is not an empty line
        ("a\vb\n", {"unexpect": ["^b"]}, 1.0),
        ("a\u2028b\n", {"expect": ["^b"]}, 0.0),
        ("a\rb\n", {"expect": ["^b$"]}, 1.0),  # \r alone still ends a line
        ("a\nb", {"expect": ["a\n"]}, 1.0),  # the line keeps its newline, as in OSWorld
    ],
)
def test_check_list_reads_lines_as_a_text_file_iterates_them(tmp_path, text, rules, score):
    f = tmp_path / "list.txt"
    f.write_bytes(text.encode())
    assert check_list(str(f), rules) == score
