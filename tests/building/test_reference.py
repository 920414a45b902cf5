"""generator.building.reference: deterministic reference inputs and torch's outputs, case by case."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from examples.models import make_text
from generator.building.reference import make_reference_cases, reference_inputs
from generator.contracts.reference_data import ReferenceCase, ReferenceDataError, write_reference
from generator.planning.values import DEFAULT_INT_RANGE, ValueDomain
from tests.build_helpers import GraphTensorPlan, example_io


def test_cases_shapes_batch_sizes_and_torch_outputs() -> None:
    inputs, outputs = example_io("text")
    model = make_text()
    cases, _ = make_reference_cases(model, inputs, outputs, model_name="text", max_batch_size=16)
    assert [c.name for c in cases] == ["min", "opt", "max"]
    assert [c.batch_size for c in cases] == [1, 4, 16]
    assert [c.inputs["input_input_ids"].shape for c in cases] == [(1, 4), (4, 16), (16, 64)]
    for case in cases:
        ids, mask = case.inputs["input_input_ids"], case.inputs["input_attention_mask"]
        assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() <= DEFAULT_INT_RANGE[1]
        assert mask.dtype == np.int64 and (mask == 1).all()  # masks are valid everywhere
        with torch.no_grad():
            logits, pooled = model(torch.from_numpy(ids), torch.from_numpy(mask))
        np.testing.assert_array_equal(case.outputs["output_0"], logits.numpy())
        np.testing.assert_array_equal(case.outputs["output_1"], pooled.numpy())
        assert list(case.outputs) == ["output_0", "output_1"]


def test_inputs_are_deterministic_and_seeded_by_model_and_case() -> None:
    inputs, _ = example_io("mlp")
    a = reference_inputs(inputs, model_name="mlp", case="opt")
    b = reference_inputs(inputs, model_name="mlp", case="opt")
    np.testing.assert_array_equal(a["input_x"], b["input_x"])
    other_model = reference_inputs(inputs, model_name="mlp2", case="opt")
    assert not np.array_equal(a["input_x"], other_model["input_x"])
    other_case = reference_inputs(inputs, model_name="mlp", case="max")
    assert not np.array_equal(a["input_x"], other_case["input_x"])
    assert a["input_x"].dtype == np.float32 and a["input_x"].shape == (32, 16)
    with pytest.raises(ReferenceDataError, match="unknown reference case"):
        reference_inputs(inputs, model_name="mlp", case="huge")


def test_value_ranges_and_dtypes() -> None:
    plans = [
        GraphTensorPlan("input_ids", "ids", "torch.int64", (1, 4), (2, 8), (4, 8), 0),
        GraphTensorPlan("input_flags", "flags", "torch.bool", (1, 4), (2, 8), (4, 8), 0),
        GraphTensorPlan("input_half", "half", "torch.float16", (1, 4), (2, 8), (4, 8), 0),
        GraphTensorPlan("input_token_mask", "m", "torch.int32", (1, 4), (2, 8), (4, 8), 0),
    ]
    arrays = reference_inputs(plans, model_name="m", case="max", domains={"input_ids": ValueDomain(100, 104)})
    assert arrays["input_ids"].min() >= 100 and arrays["input_ids"].max() <= 104
    assert arrays["input_flags"].dtype == np.bool_ and arrays["input_flags"].any() and not arrays["input_flags"].all()
    assert arrays["input_half"].dtype == np.float16
    assert arrays["input_token_mask"].dtype == np.int32 and (arrays["input_token_mask"] == 1).all()
    with pytest.raises(ReferenceDataError, match="bfloat16"):
        reference_inputs([GraphTensorPlan("b", "b", "torch.bfloat16", (1,), (1,), (1,))], model_name="m", case="min")


def test_static_model_has_no_batch_size_and_names_must_be_unique(tmp_path: Path) -> None:
    plans = [GraphTensorPlan("input_x", "input", "float32", (4, 16), (4, 16), (4, 16), None)]
    outs = [GraphTensorPlan("output", (), "float32", (4, 4), (4, 4), (4, 4), None)]
    torch.manual_seed(0)
    cases, _ = make_reference_cases(torch.nn.Linear(16, 4), plans, outs, model_name="static", max_batch_size=0)
    assert [c.batch_size for c in cases] == [None, None, None]
    assert json.loads(write_reference(tmp_path, cases)[1].read_text())["cases"][0]["batch_size"] is None
    with pytest.raises(ReferenceDataError, match="unique"):
        write_reference(tmp_path, [cases[0], ReferenceCase("min", None, {}, {})])
