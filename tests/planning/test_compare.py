"""One tolerance table and one element test for the build's onnxruntime check and the smoke check."""

from __future__ import annotations

import numpy as np

from generator.building import ensembles as ensemble_build
from generator.building.export import onnx_checks
from generator.planning import compare
from generator.planning.compare import (
    CompareSettings,
    Padding,
    compare_arrays,
    compare_output,
    resolve_compare,
    tolerance_for,
)
from generator.serving import smoke


def test_every_check_uses_the_same_table_and_functions() -> None:
    assert smoke.DEFAULT_TOLERANCES is onnx_checks.DEFAULT_TOLERANCES is compare.DEFAULT_TOLERANCES
    assert smoke.tolerance_for is onnx_checks.tolerance_for is tolerance_for
    assert smoke.compare_output is onnx_checks.compare_output is ensemble_build.compare_output is compare_output


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
    assert compare_arrays(text, text.copy(), 0.0, 0.0) == compare.Comparison(True, None, None, compared=2)
    assert compare_arrays(np.zeros((0, 3)), np.zeros((0, 3)), 0.0, 0.0) == compare.Comparison(True, 0.0, 0.0)


def test_relative_error_never_divides_by_zero() -> None:
    """A reference of zeros once gave a relative error of 1.44e+307 (|diff| / tiny); now the quotient is taken only
    where |reference| exceeds atol, and the report names the worst element."""
    want = np.array([0.0, 0.0, 2.0, 1e-30], np.float32)
    have = np.array([0.3, 0.0, 2.0 + 2e-4, 1e-6], np.float32)
    result = compare_arrays(have, want, 1e-4, 1e-5)
    assert not result.ok and result.mismatched == 1 and result.compared == 4
    assert result.max_abs_error == np.float32(0.3)
    assert result.max_rel_error is not None and result.max_rel_error < 1e-3  # 2e-4 / 2.0, not 0.3 / tiny
    assert result.worst is not None and result.worst[0] == (0,) and result.worst[2] == 0.0
    text = result.describe(1e-4, 1e-5)
    assert "1 of 4 compared elements out of tolerance (worst at [0]: 0.3, reference 0)" in text
    assert "e+30" not in text


def test_a_padding_mask_leaves_padded_positions_out_of_outputs_it_leads() -> None:
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]], np.int64)  # left-padded first row
    want = np.zeros((2, 4, 3), np.float32)
    have = want.copy()
    have[0, :2] = 7.0  # garbage where the first row is padding
    settings = CompareSettings(padding=Padding("input_attention_mask", 0))
    inputs = {"input_attention_mask": mask}
    compared, _, _, problem = compare_output(settings, "logits", have, want, inputs)
    assert problem == "" and compared is not None and compared.ok and compared.left_out == 6 and compared.compared == 18
    have[0, 2, 1] = 1.0  # a real position still counts
    compared, _, _, problem = compare_output(settings, "logits", have, want, inputs)
    assert compared is not None and not compared.ok and compared.worst == ((0, 2, 1), 1.0, 0.0)
    assert "6 padded elements left out" in problem
    # An output the mask does not lead (a pooled [2, 3]) is compared whole; one listed by name must fit.
    pooled = np.ones((2, 3), np.float32)
    assert compare_output(settings, "pooled", pooled, pooled, inputs)[0].left_out == 0  # type: ignore[union-attr]
    listed = CompareSettings(padding=Padding("input_attention_mask", 0, ("pooled",)))
    assert "does not start with the shape [2, 4] of the padding mask" in compare_output(
        listed, "pooled", pooled, pooled, inputs)[3]
    # A PyTorch key_padding_mask marks padding with True.
    bools = CompareSettings(padding=Padding("mask", True))
    result = compare_output(bools, "out", have[:, :, 0], want[:, :, 0], {"mask": mask == 0})[0]
    assert result is not None and result.left_out == 2


def test_tolerances_per_model_and_per_output_with_smokes_options_first() -> None:
    settings = CompareSettings(rtol=1e-3, atol=None, outputs={"logits": (None, 0.5)})
    assert settings.tolerance("logits", np.dtype(np.float32)) == (1e-3, 0.5)
    assert settings.tolerance("other", np.dtype(np.float32)) == (1e-3, 1e-5)
    assert settings.tolerance("logits", np.dtype(np.float32), atol=0.0) == (1e-3, 0.0)
    assert CompareSettings.from_json(settings.to_json()) == settings
    assert CompareSettings().to_json() == {}


def test_manifest_keys_resolve_to_triton_names_or_are_located() -> None:
    inputs = [("input_attention_mask", ["attention_mask"]), ("input_input_ids", ["input_ids"])]
    outputs = [("output_logits", ["logits"])]
    raw = {"atol": 1e-3, "outputs": {"logits": {"rtol": 0.1}, "nope": {"atol": 1}},
           "padding": {"mask": "attention_mask", "outputs": ["output_logits", "gone"]}}
    settings, problems = resolve_compare(raw, inputs, outputs, "m.yaml", "/models/3/compare")
    assert settings.atol == 1e-3 and dict(settings.outputs) == {"output_logits": (0.1, None)}
    assert settings.padding == Padding("input_attention_mask", 0, ("output_logits",))
    assert [(p.pointer, p.message) for p in problems] == [
        ("/models/3/compare/outputs/nope", "no output 'nope' in this graph (outputs: output_logits)"),
        ("/models/3/compare/padding/outputs/1", "no output 'gone' in this graph (outputs: output_logits)"),
    ]
