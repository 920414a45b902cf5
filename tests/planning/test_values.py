"""Value domains and synthetic data (generator/planning/values.py)."""

from __future__ import annotations

import numpy as np
import pytest

from generator.planning.values import DEFAULT_INT_RANGE, ValueDomain, draw


def test_draw_respects_a_range_and_a_set():
    rng = np.random.default_rng(0)
    ids = draw(rng, "input_ids", "int64", (64, 8), ValueDomain(0, 1))
    assert ids.dtype == np.int64 and set(np.unique(ids)) == {0, 1}
    steps = draw(rng, "t", "float32", (256,), ValueDomain(0, 999))
    assert steps.dtype == np.float32 and steps.min() >= 0 and steps.max() <= 999
    picked = draw(rng, "mode", "int32", (128,), ValueDomain(values=(3, 7)))
    assert set(np.unique(picked)) == {3, 7}


def test_draw_without_a_domain():
    rng = np.random.default_rng(0)
    ints = draw(rng, "ids", "int64", (1000,))
    assert ints.min() >= DEFAULT_INT_RANGE[0] and ints.max() <= DEFAULT_INT_RANGE[1]
    assert (draw(rng, "attention_mask", "int64", (4, 6)) == 1).all()
    assert draw(rng, "input_mask", "bool", (4, 6)).all()
    assert draw(rng, "x", "float16", (3,)).dtype == np.float16


def test_json_round_trip_and_descriptions():
    for domain in (ValueDomain(0, 1, source="index into the 2-row table 't'"), ValueDomain(values=(1, 500))):
        assert ValueDomain.from_json(domain.to_json()) == domain
    assert ValueDomain(0, 98).describe() == "0..98" and ValueDomain(0.5, 2).describe() == "0.5..2"


@pytest.mark.parametrize(("domain", "dtype", "words"), [
    (ValueDomain(0.5, 3), "int64", "integer values"),
    (ValueDomain(3, 1), "int64", "low 3 is above high 1"),
    (ValueDomain(0, 300), "uint8", "does not fit uint8"),
    (ValueDomain(values=(0, 2)), "bool", "only 0/1"),
])
def test_domains_that_cannot_hold_the_dtype(domain, dtype, words):
    assert words in domain.dtype_problem(dtype)


def test_array_problems():
    assert ValueDomain(0, 1).array_problem(np.array([[0, 1], [1, 2]])) == "value 2 is above 0..1"
    assert ValueDomain(0, 1).array_problem(np.array([-1])) == "value -1 is below 0..1"
    assert ValueDomain(values=(1, 5)).array_problem(np.array([1, 3])) == "value 3 is not one of [1, 5]"
    assert ValueDomain(0, 1).array_problem(np.zeros((0, 4))) is None


def test_a_masks_domain_fills_it_with_the_value_that_keeps_positions_and_round_trips():
    rng = np.random.default_rng(0)
    padding = ValueDomain(0, 1, mask_keep=False, source="a mask: true drops a position")
    drawn = draw(rng, "padding_mask", "bool", (4, 6), padding)
    assert drawn.dtype == np.bool_ and not drawn.any()  # a PyTorch key-padding mask: false keeps a position
    assert (draw(rng, "keep", "int64", (2, 3), ValueDomain(0, 1, mask_keep=1)) == 1).all()
    assert padding.to_json() == {"value_range": [0, 1], "mask_keep": False, "source": "a mask: true drops a position"}
    assert ValueDomain.from_json(padding.to_json()) == padding
    # A contract comes from anywhere: a mask_keep that is no 0/1 or false/true says nothing.
    for hostile in ("yes", 2, 0.5, [0], None):
        assert ValueDomain.from_json({"value_range": [0, 1], "mask_keep": hostile}).mask_keep is None
