"""Value domains and synthetic data (generator/values.py)."""

from __future__ import annotations

import numpy as np
import pytest

from generator.values import DEFAULT_INT_RANGE, ValueDomain, draw


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
