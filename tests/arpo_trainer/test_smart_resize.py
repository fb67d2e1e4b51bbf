"""Our ``smart_resize`` (osworld_gym.actions.uitars: where UI-TARS coordinates are mapped from)
equals transformers' (qwen2_vl's image processor: what the model sees) over the whole valid
domain: positive sides with an aspect ratio up to 200, any pixel budget. Before they agreed,
a 200,000-size sweep found 289 disagreements, all with a side of at most 14 px (ours rounded a
side up to one factor first: 4x640 gave (28, 644) against transformers' (28, 728))."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from osworld_gym.actions.uitars import ARPO_MAX_PIXELS, MAX_PIXELS, MIN_PIXELS, smart_resize

hf = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")

#: The budgets callers pass: transformers' function default, ARPO's/OSWorld's, Qwen2.5-VL's.
BUDGETS = [14 * 14 * 4 * 1280, ARPO_MAX_PIXELS, MAX_PIXELS]


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    short = draw(st.integers(1, 5000))
    long = draw(st.integers(short, min(5000, short * 200)))
    return (short, long) if draw(st.booleans()) else (long, short)


@settings(max_examples=3000, deadline=None)
@given(
    sizes(),
    st.sampled_from([14, 28, 32]),
    st.sampled_from([MIN_PIXELS, 28 * 28, 256 * 28 * 28]),
    st.one_of(st.sampled_from(BUDGETS), st.integers(28 * 28, 20_000_000)),
)
def test_ours_equals_transformers_over_the_valid_domain(size, factor, min_pixels, max_pixels):
    h, w = size
    assert smart_resize(h, w, factor, min_pixels, max_pixels) == hf.smart_resize(
        h, w, factor, min_pixels, max_pixels
    )


@pytest.mark.parametrize("max_pixels", BUDGETS)
def test_every_thin_image_agrees(max_pixels):
    """The short side at most 30 px (where the rules differed) against every long side the
    aspect limit allows, exhaustively, at the factor the models use."""
    n = 0
    for short in range(1, 31):
        for long in range(short, short * 200 + 1, 7):
            for h, w in ((short, long), (long, short)):
                assert smart_resize(h, w, max_pixels=max_pixels) == hf.smart_resize(
                    h, w, max_pixels=max_pixels
                ), (h, w)
                n += 1
    assert n > 10_000


def test_outside_the_domain_both_refuse():
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(1, 201)
    with pytest.raises(ValueError, match="aspect ratio"):
        hf.smart_resize(1, 201)
    with pytest.raises(ValueError, match="positive"):
        smart_resize(0, 10)
