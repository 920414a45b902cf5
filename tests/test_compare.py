"""One tolerance table and one element test for the build's onnxruntime check and the smoke check."""

from __future__ import annotations

import numpy as np

from generator import compare, smoke
from generator.compare import compare_arrays, tolerance_for
from generator.export import onnx as export_onnx


def test_both_checks_use_the_same_table_and_functions() -> None:
    assert smoke.DEFAULT_TOLERANCES is export_onnx.DEFAULT_TOLERANCES is compare.DEFAULT_TOLERANCES
    assert smoke.tolerance_for is export_onnx.tolerance_for is tolerance_for
    assert smoke.compare_arrays is export_onnx.compare_arrays is compare_arrays


def test_tolerances_by_any_spelling_with_overrides() -> None:
    assert tolerance_for(np.dtype(np.float32)) == tolerance_for("torch.float32") == (1e-4, 1e-5)
    assert tolerance_for("TYPE_INT64") == tolerance_for(np.dtype(object)) == (0.0, 0.0)
    assert tolerance_for("float16", {"float16": (0.5, 0.25)}) == (0.5, 0.25)
    assert tolerance_for(np.dtype(np.int32), rtol=0.5) == (0.5, 0.0)


def test_floats_within_tolerance_nan_and_infinity_match_themselves() -> None:
    want = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    result = compare_arrays(want + np.float32(1e-6), want, 1e-4, 1e-5)
    assert result.ok and result.max_abs_error is not None and result.max_abs_error < 1e-5
    off = compare_arrays(np.array([1.0, 2.5], np.float32), np.array([1.0, 2.0], np.float32), 1e-4, 1e-5)
    assert not off.ok and off.max_abs_error == 0.5 and off.max_rel_error == 0.25
    assert not compare_arrays(np.array([np.nan]), np.array([1.0]), 1.0, 1.0).ok


def test_integers_are_exact_even_beyond_float64_precision() -> None:
    big = np.array([2**60], np.int64)
    assert not compare_arrays(big + 1, big, 0.0, 0.0).ok  # equal as float64
    assert compare_arrays(big, big.copy(), 0.0, 0.0).ok
    assert compare_arrays(np.array([3]), np.array([4]), 0.0, 1.0).ok  # an explicit atol (smoke's --atol) applies


def test_strings_compare_equal_without_errors_and_empty_passes() -> None:
    text = np.array([b"a", b"b"], dtype=object)
    assert compare_arrays(text, text.copy(), 0.0, 0.0) == compare.Comparison(True, None, None)
    assert compare_arrays(np.zeros((0, 3)), np.zeros((0, 3)), 0.0, 0.0) == compare.Comparison(True, 0.0, 0.0)
