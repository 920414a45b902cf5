"""The manifest's fixes to a recording: dynamic_shapes and batch_axis_multipliers (generator/manifest/overrides.py)."""

from __future__ import annotations

import pytest

from generator.errors import GenRepoError
from tests.manifest_helpers import AITUNE, REPO, plan_for, problems_of

GUIDED = str(REPO / "tests" / "zoo" / "specs" / "unet_guided.graphspec.json")
PARTIAL = str(REPO / "tests" / "zoo" / "specs" / "bert_partial_ranges.graphspec.json")


def _model(tmp_path, spec, **entry):
    return plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, **entry}]}).models[0]


def test_every_tensor_stacked_is_an_assumption_until_the_manifest_says(tmp_path):
    # aitune knew multiplier 2 (normalized max batch 4); its JSON does not carry it.
    plain = _model(tmp_path / "a", GUIDED)
    assert plain.graph.get_max_batch_size(normalized=True) == 8
    assert any(d.startswith("assumed: batch multipliers of 'input_sample', 'input_encoder_hidden_states', "
                            "'output_sample'") for d in plain.decisions)
    fixed = _model(tmp_path / "b", GUIDED, batch_axis_multipliers={"sample": 2, "encoder_hidden_states": 2,
                                                                   "output_sample": {"0": 2}})
    assert fixed.graph.get_max_batch_size(normalized=True) == 4  # aitune's own answer
    assert not any(d.startswith("assumed:") for d in fixed.decisions)
    assert any("the manifest declares the batch multipliers of input 'sample' (axis 0: 2)" in d
               for d in fixed.decisions)


def test_manifest_dynamic_shapes_complete_a_recording(tmp_path):
    # Declare token_type_ids like the other two inputs: nothing left to intersect, the declared ranges stand.
    shape = [{"type": "BatchDim", "name": "batch", "min": 1, "max": 8, "opt": 2},
             {"type": "DynamicDim", "name": "seq", "min": 4, "max": 32, "opt": 16}]
    model = _model(tmp_path, PARTIAL, dynamic_shapes=[{"path": "token_type_ids", "shape": shape}])
    assert {(t.min_shape, t.opt_shape, t.max_shape) for t in model.inputs} == {((1, 4), (2, 16), (8, 32))}
    assert model.max_batch_size == 8
    assert not any(d.startswith("shapes:") for d in model.decisions)
    assert "the manifest's dynamic_shapes adds the definition of input token_type_ids" in model.decisions


def test_manifest_dynamic_shapes_replace_definitions(tmp_path):
    # explicit_dynamic declares batch 1..32 and seq 8..256 on two of its three inputs; declare what was recorded.
    spec = {"file": str(AITUNE / "explicit_dynamic.graphspec.json")}
    shape = [{"type": "BatchDim", "name": "batch", "min": 1, "max": 8, "opt": 4},
             {"type": "DynamicDim", "name": "seq", "min": 8, "max": 128, "opt": 64}]
    fixes = [{"path": "input_ids", "shape": shape}, {"path": "attention_mask", "shape": shape}]
    model = _model(tmp_path, spec, dynamic_shapes=fixes)
    assert "the manifest's dynamic_shapes replaces the definition of input input_ids" in model.decisions
    assert [(t.opt_shape, t.max_shape) for t in model.inputs[:2]] == [((4, 64), (8, 128))] * 2
    assert model.inputs[2].max_shape == (8, 128) and model.max_batch_size == 8
    # A definition that contradicts the spec's remaining ones is refused by AITune's rule, located in the manifest.
    with pytest.raises(GenRepoError) as info:
        _model(tmp_path / "bad", spec, dynamic_shapes=fixes[:1])
    # attention_mask's definition (the spec's second) is where the conflict shows; it cites the manifest's entry.
    (problem,) = [p for p in info.value.problems if p.message.startswith("BatchDim")]
    assert (problem.file, problem.pointer) == (str(AITUNE / "explicit_dynamic.graphspec.json"),
                                               "/graph/dynamic_shapes/1/shape/0")
    assert (f"BatchDim(min=1, max=32, opt=8) here but BatchDim(min=1, max=8, opt=4) at {tmp_path / 'bad'}"
            "/gen-repo.yaml /models/0/dynamic_shapes/0/shape/0") in problem.message


def test_override_problems_are_located_in_the_manifest(tmp_path):
    bad_shapes = [
        {"path": "token_type_ids", "shape": [{"type": "BatchDim", "name": "batch", "min": 2, "max": 3, "opt": None},
                                             {"type": "DynamicDim", "name": "seq", "min": 4, "max": 64,
                                              "opt": None}]},
        {"path": "nope", "shape": [1]},
    ]
    with pytest.raises(GenRepoError) as info:
        _model(tmp_path, PARTIAL, dynamic_shapes=bad_shapes, batch_axis_multipliers={"ghost": 2, "input_ids": 3})
    messages = problems_of(info.value)
    files = {p.file for p in info.value.problems}
    assert files == {str(tmp_path / "gen-repo.yaml")}
    expected = [
        # a name used twice must have identical bounds (AITune's rule), and the recorded calls must fit.
        "/models/0/dynamic_shapes/0/shape/0: BatchDim 'batch' is BatchDim(min=2, max=3, opt=None) here",
        "/models/0/dynamic_shapes/0/shape/1: DynamicDim 'seq' is DynamicDim(min=4, max=64, opt=None) here",
        "/models/0/dynamic_shapes/1/path: 'nope' names no input tensor",
        "/models/0/dynamic_shapes/0/shape/0: BatchDim 'batch' 2..3 does not cover the sizes 1..4 recorded",
        "/models/0/batch_axis_multipliers/ghost: no tensor 'ghost' in this graph",
        "/models/0/batch_axis_multipliers/input_ids: batch axis 0 range 1..4 is not a multiple of its multiplier 3",
    ]
    for start in expected:
        assert any(m.startswith(start) for m in messages), (start, messages)


def test_overrides_are_model_only(tmp_path):
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"defaults": {"dynamic_shapes": []}, "models": [{"name": "m", "spec": PARTIAL}]})
    assert any("/defaults" in m and "dynamic_shapes" in m for m in problems_of(info.value))
