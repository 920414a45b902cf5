"""Planning: batching decision, shapes, dtypes, names, targets (generator/planning/plan.py)."""

from __future__ import annotations

import pytest

from generator.errors import GenRepoError
from generator.planning.model_files import config_files
from generator.planning.plan import DTYPE_TO_TRITON, INT32_MAX, describe_plan
from tests.manifest_helpers import (
    AITUNE,
    batch_dim,
    batch_graph,
    fixture_models,
    graph,
    one_model,
    plan_for,
    problems_of,
    tensor,
)

#: The batching decision per AITune fixture (issue 3): max_batch_size and a word from the reason.
FIXTURE_DECISIONS = {
    "explicit_dynamic_0": (8, "shapes: intersect"),
    "image_fp16_0": (4, "batch ranges agree"),
    "mlp_0": (8, "batch ranges agree"),
    "nested_dict_0": (8, "batch ranges agree"),
    "stacked_cfg_0": (0, "multiplier 2"),
    "static_single_bs_0": (0, "has no batch axis"),
    "text_0": (8, "batch ranges agree"),
    "two_outputs_0": (16, "batch ranges agree"),
    "report_0": (8, "batch ranges agree"),
    "report_1": (8, "batch ranges agree"),
    "report_2": (8, "batch ranges agree"),
    "report_3": (8, "shapes: intersect"),
    "report_4": (16, "batch ranges agree"),
}


@pytest.fixture(scope="module")
def fixture_plan(tmp_path_factory):
    return plan_for(tmp_path_factory.mktemp("fixtures"), {"models": fixture_models()})


def test_fixture_batching_decisions(fixture_plan):
    by_name = {m.name: m for m in fixture_plan.models}
    assert set(by_name) == set(FIXTURE_DECISIONS)
    for name, (mbs, words) in FIXTURE_DECISIONS.items():
        model = by_name[name]
        assert model.max_batch_size == mbs, name
        assert model.batching == (mbs > 0)
        assert any(words in d for d in model.decisions), (name, model.decisions)


def test_batching_max_equals_graphspec_max(fixture_plan):
    import json

    for model in fixture_plan.models:
        if model.batching and not any("narrowed to" in d for d in model.decisions):
            assert model.max_batch_size == model.graph.get_max_batch_size()
    expected = json.loads((AITUNE / "mlp.graphspec.json").read_text())["expected"]
    mlp = next(m for m in fixture_plan.models if m.name == "mlp_0")
    assert mlp.max_batch_size == expected["max_batch_size"]
    (x,) = mlp.inputs
    assert x.name == expected["inputs"][0]["tensor_name"]
    assert list(x.min_shape) == expected["inputs"][0]["effective_min_shape"]
    assert list(x.opt_shape) == expected["inputs"][0]["effective_opt_shape"]
    assert list(x.max_shape) == expected["inputs"][0]["effective_max_shape"]
    assert x.dims == (16,) and x.batch_axis == 0
    (out,) = mlp.outputs
    assert (out.min_shape, out.opt_shape, out.max_shape, out.dims) == ((1, 4), (8, 4), (8, 4), (4,))


def test_stacked_cfg_full_dims_and_assumptions(fixture_plan):
    stacked = next(m for m in fixture_plan.models if m.name == "stacked_cfg_0")
    assert stacked.max_batch_size == 0
    assert [t.dims for t in stacked.inputs] == [(-1, 4, 8, 8), (-1,)]
    assert stacked.inputs[0].min_shape == (2, 4, 8, 8)  # no widening without batching
    assert stacked.inputs[0].batch_axis is None
    assert any(d.startswith("assumed:") and "multiplier 2" in d for d in stacked.decisions)


def test_explicit_dynamic_partial_coverage_is_intersected(fixture_plan):
    # input_ids and attention_mask declare batch 1..32 and seq 8..256; token_type_ids keeps its recorded 1..8 x
    # 8..128. GraphSpec keeps AITune's answers; the plan gives the linked axes their common range.
    model = next(m for m in fixture_plan.models if m.name == "explicit_dynamic_0")
    locator, spec = model.graph.input_spec.tensor_data[0]
    assert model.graph.get_effective_input_shapes(locator, spec) == ([1, 8], [8, 256], [32, 256])
    for planned in model.inputs:
        assert (planned.min_shape, planned.opt_shape, planned.max_shape, planned.dims) == ((1, 8), (8, 128), (8, 128),
                                                                                           (-1,))
    assert model.max_batch_size == 8 and model.batching
    notes = [d for d in model.decisions if d.startswith("shapes: intersect")]
    assert len(notes) == 2 and "shapes: widen would give" in notes[0]
    assert any("get_max_batch_size() = 32, narrowed to 8 by the shape policy" in d for d in model.decisions)


def test_explicit_dynamic_partial_coverage_widened_on_request(tmp_path):
    spec = {"file": str(AITUNE / "explicit_dynamic.graphspec.json")}
    model = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "shapes": "widen"}]}).models[0]
    assert {(t.min_shape, t.opt_shape, t.max_shape) for t in model.inputs} == {((1, 8), (8, 256), (32, 256))}
    # The output was recorded up to batch 8 only: the declared (widened) inputs still batch.
    assert model.max_batch_size == 32
    assert any(d.startswith("shapes: widen") and "declared range 1..32" in d for d in model.decisions)


def test_recorded_batch_min_is_widened(tmp_path):
    model = one_model(tmp_path, batch_graph(low=2, high=8))
    assert model.max_batch_size == 8
    assert model.inputs[0].min_shape == (1, 16)
    assert model.outputs[0].min_shape == (1, 4)
    assert any("recorded batch minimum 2 widened to 1" in d for d in model.decisions)


def _explicit(low: int) -> dict:
    spec = batch_graph()
    spec["dynamic_shapes"] = [{"path": "x", "shape": [batch_dim(low, 8, 4), 16]}]
    spec["output_spec"]["tensor_data"][0]["max_shape"] = [8, 4]
    return spec


def test_explicit_batch_min_above_one_is_refused(tmp_path):
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, _explicit(2))
    (problem,) = info.value.problems
    assert problem.pointer == "/models/0/spec/dynamic_shapes/0/shape/0/min"
    assert "from 1 up" in problem.message and "widen_batch_min" in problem.message


def test_explicit_batch_min_widened_on_request(tmp_path):
    model = one_model(tmp_path, _explicit(2), widen_batch_min=True)
    assert model.inputs[0].min_shape == (1, 16) and model.inputs[0].opt_shape == (4, 16)
    assert any("declared batch minimum 2 widened to 1" in d for d in model.decisions)


def test_explicit_batch_min_fine_without_batching(tmp_path):
    model = one_model(tmp_path, _explicit(2), batching="none")
    assert model.max_batch_size == 0 and model.inputs[0].min_shape == (2, 16)


def test_max_batch_size_override(tmp_path):
    model = one_model(tmp_path, batch_graph(high=8), max_batch_size=4)
    assert model.max_batch_size == 4
    assert model.inputs[0].max_shape == (4, 16) and model.inputs[0].opt_shape == (4, 16)
    assert model.outputs[0].max_shape == (4, 4)
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(high=8), max_batch_size=16)
    assert problems_of(info.value) == [
        "/models/0/max_batch_size: max_batch_size 16 exceeds the spec's batch range maximum 8 (the optimization "
        "profile cannot serve larger batches)"
    ]


def test_batching_none_override(tmp_path):
    model = one_model(tmp_path, batch_graph(high=8), batching="none")
    assert model.max_batch_size == 0 and model.inputs[0].dims == (-1, 16)
    assert any("batching: none" in d and "would allow batching" in d for d in model.decisions)


def test_batching_forced_unifies_ranges(tmp_path):
    spec = batch_graph(high=8)
    spec["output_spec"]["tensor_data"][0]["max_shape"] = [4, 4]
    model = one_model(tmp_path, spec, batching="batch")
    assert model.max_batch_size == 8 and model.outputs[0].max_shape == (8, 4)
    assert any("forced" in d for d in model.decisions)
    assert any("unified to 1..8" in d for d in model.decisions)


def test_batching_forced_refused_for_stacked_batch(tmp_path):
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"models": [{"name": "m", "spec": str(AITUNE / "stacked_cfg.graphspec.json"),
                                        "batching": "batch"}]})
    (message,) = problems_of(info.value)
    assert message.startswith("/models/0/batching: batching: batch cannot apply") and "multiplier 2" in message


def test_batch_axis_not_first_means_no_batching(tmp_path):
    spec = graph([tensor("x", [16, "batch1"], [16, 1], [16, 8])], [tensor([], [4, "batch1"], [4, 1], [4, 8])])
    model = one_model(tmp_path, spec)
    assert model.max_batch_size == 0 and any("batch axes at [1]" in d for d in model.decisions)


def test_output_range_disagreeing_means_no_batching(tmp_path):
    spec = batch_graph(high=8)
    spec["output_spec"]["tensor_data"][0]["max_shape"] = [4, 4]
    model = one_model(tmp_path, spec)
    assert model.max_batch_size == 0
    assert any("output 'output' batch range 1..4 differs" in d for d in model.decisions)


def test_output_narrower_than_declared_range_still_batches(tmp_path):
    spec = batch_graph(high=8)
    spec["dynamic_shapes"] = [{"path": "x", "shape": [batch_dim(1, 32, 16), 16]}]
    model = one_model(tmp_path, spec)
    assert model.max_batch_size == 32 and model.outputs[0].max_shape == (32, 4)


def test_per_item_scalar_gets_dims_1_and_empty_reshape(tmp_path):
    spec = graph(
        [tensor("x", ["batch0", 4], [1, 4], [8, 4]), tensor("t", ["batch0"], [1], [8])],
        [tensor([], ["batch0"], [1], [8])],
    )
    model = one_model(tmp_path, spec)
    t = model.inputs[1]
    assert model.max_batch_size == 8
    assert (t.dims, t.reshape, t.min_shape, t.max_shape) == ((1,), (), (1,), (8,))
    assert model.outputs[0].reshape == ()


def test_zero_d_tensor_travels_as_one(tmp_path):
    # Triton never hands a model a 0-d tensor and refuses an empty reshape without batching: [1], reshaped by the
    # exported graph.
    spec = graph([tensor("x", [4], [4], [4]), tensor("s", [], [], [])], [tensor([], [], [], [])])
    model = one_model(tmp_path, spec)
    s, out = model.inputs[1], model.outputs[0]
    assert model.max_batch_size == 0
    for t in (s, out):
        assert (t.dims, t.reshape, t.min_shape, t.max_shape, t.torch_scalar) == ((1,), None, (1,), (1,), True)
    assert not model.inputs[0].torch_scalar
    assert any("0-d tensors ['input_s', 'output'] travel as [1]" in d for d in model.decisions)


def test_zero_d_input_in_a_batched_graph_means_no_batching(tmp_path):
    spec = graph([tensor("x", ["batch0", 4], [1, 4], [8, 4]), tensor("t", [], [], [])],
                 [tensor([], ["batch0", 4], [1, 4], [8, 4])])
    model = one_model(tmp_path, spec)
    assert model.max_batch_size == 0 and model.inputs[1].dims == (1,)
    assert any("'input_t' is 0-d (one value for the whole call)" in d for d in model.decisions)


@pytest.mark.parametrize(("dtype", "triton"), sorted(DTYPE_TO_TRITON.items()))
def test_dtype_map(tmp_path, dtype, triton):
    model = one_model(tmp_path, batch_graph(dtype=dtype))
    assert model.inputs[0].data_type == triton and model.inputs[0].dtype == dtype


@pytest.mark.parametrize("dtype", ["torch.complex64", "torch.float8_e4m3fn", "torch.float128"])
def test_unsupported_dtype_is_a_clear_problem(tmp_path, dtype):
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(out_dtype=dtype))
    (problem,) = info.value.problems
    assert problem.pointer == "/models/0/spec/output_spec/tensor_data/0/dtype"
    assert dtype in problem.message and "torch.float16" in problem.message


@pytest.mark.parametrize("dtype", ["torch.float64", "torch.int16", "torch.uint16", "torch.uint32", "torch.uint64"])
def test_a_dtype_tensorrt_lacks_is_refused_for_tensorrt_only(tmp_path, dtype):
    for target in ("onnx", "python"):
        assert one_model(tmp_path, batch_graph(dtype=dtype), target=target).inputs[0].dtype == dtype
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(dtype=dtype), target="tensorrt")
    (problem,) = info.value.problems
    assert problem.pointer == "/models/0/spec/input_spec/tensor_data/0/dtype"
    assert problem.message.startswith(f"dtype {dtype!r} cannot be served by target tensorrt (it serves torch.bool")
    assert problem.message.endswith("; target onnx or python serves it")


def test_dims_must_fit_int32(tmp_path):
    big = INT32_MAX + 1
    spec = graph([tensor("x", ["batch0", 4], [1, 4], [8, 4])], [tensor([], ["batch0", "dim1"], [1, 1], [8, big])])
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, spec)
    # The spec schema already bounds sizes to int32; the plan re-checks shapes it derives (defence in depth).
    assert any(m.startswith("/models/0/spec/output_spec/tensor_data/0/max_shape/1") and str(INT32_MAX) in m
               for m in problems_of(info.value))


def test_plan_rechecks_int32_on_derived_shapes():
    from generator.planning.tensors import _Batch, _Decision, _tensor_plan
    from generator.specs.tensor_spec import TensorSpec

    problems: list = []
    spec = TensorSpec([4], [4], [INT32_MAX + 1], "torch.float32")
    batch = _Batch("input", "t", 1, [], {}, None, None, None, False, "/p")
    result = _tensor_plan("t", "t", "t", spec, ([4], [4], [INT32_MAX + 1]), batch, _Decision(False, 0, 1, []), "f",
                          "/p", problems)
    assert result is None and "does not fit int32" in problems[0].message


def test_tensor_name_overrides(tmp_path):
    spec = {"file": str(AITUNE / "nested_dict.graphspec.json")}
    names = {"input_x": "X", 'extras["mask"]': "MASK", "output[\"logits\"]": "LOGITS"}
    model = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "tensor_names": names}]}).models[0]
    assert [t.name for t in model.inputs][:2] == ["X", "MASK"]
    assert model.outputs[0].name == "LOGITS"
    assert model.config.input[0].name == "X"


def test_tensor_name_override_problems(tmp_path):
    spec = {"file": str(AITUNE / "two_outputs.graphspec.json")}
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"models": [{"name": "m", "spec": spec,
                                        "tensor_names": {"nope": "A", "output_0": "output_1"}}]})
    messages = problems_of(info.value)
    assert any(m.startswith("/models/0/tensor_names/nope: no tensor 'nope'") for m in messages)
    assert any("collides" in m for m in messages)


def test_input_output_name_collision_after_sanitising(tmp_path):
    spec = graph([tensor("x", ["batch0"], [1], [8])], [tensor([], ["batch0"], [1], [8])])
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, spec, tensor_names={"input_x": "output"})
    assert any("collides" in m for m in problems_of(info.value))


def test_target_resolution(tmp_path):
    document = {"models": [{"name": "m", "spec": batch_graph()}, {"name": "n", "spec": batch_graph(),
                                                                 "target": "onnx"}]}
    default = plan_for(tmp_path, document)
    assert [m.target for m in default.models] == ["python", "onnx"]
    seen = []

    def resolver(model):
        seen.append(model.name)
        return "tensorrt"

    resolved = plan_for(tmp_path, document, target_resolver=resolver)
    assert seen == ["m"] and [m.target for m in resolved.models] == ["tensorrt", "onnx"]
    assert resolved.models[0].config.platform == "tensorrt_plan"


def test_plan_is_pure(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": batch_graph()}]})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen-repo.yaml"]
    assert sorted(config_files(plan)) == ["m/1/gen_repo/contract.json", "m/config.pbtxt"]
    summary = describe_plan(plan)
    assert summary["models"][0]["spec"] == "gen-repo.yaml#/models/0/spec"
    assert summary["models"][0]["inputs"][0]["dims"] == [16]


def test_every_model_problem_at_once(tmp_path):
    document = {"models": [
        {"name": "a", "spec": batch_graph(out_dtype="torch.complex64")},
        {"name": "b", "spec": batch_graph(), "max_batch_size": 99},
    ]}
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, document)
    pointers = [p.pointer for p in info.value.problems]
    assert "/models/0/spec/output_spec/tensor_data/0/dtype" in pointers and "/models/1/max_batch_size" in pointers


def test_input_values_resolve_by_default_name_access_path_or_final_name(tmp_path):
    spec = {"file": str(AITUNE / "nested_dict.graphspec.json")}
    inputs = {'extras["mask"]': {"values": [True]}, "input_x": {"value_range": [-1, 1]}, "SCALE": {"value_range":
                                                                                                   [0.5, 2]}}
    model = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "inputs": inputs,
                                            "tensor_names": {'extras["scale"]': "SCALE"}}]}).models[0]
    values = {t.name: t.values for t in model.inputs if t.values is not None}
    assert {n: v.to_json() for n, v in values.items()} == {
        "input_x": {"value_range": [-1, 1], "source": "manifest"},
        "input_extras_mask": {"values": [True], "source": "manifest"},
        "SCALE": {"value_range": [0.5, 2], "source": "manifest"},
    }


def test_input_values_problems(tmp_path):
    spec = {"file": str(AITUNE / "text.graphspec.json")}
    inputs = {"nope": {"values": [1]}, "input_ids": {"value_range": [0.5, 9]},
              "attention_mask": {"value_range": [1, 0]}}
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "inputs": inputs}]})
    assert sorted(problems_of(info.value)) == [
        "/models/0/inputs/attention_mask: input 'input_attention_mask': value_range low 1 is above high 0",
        "/models/0/inputs/input_ids: input 'input_input_ids': an integer input (int64) takes integer values, not "
        "0.5..9",
        "/models/0/inputs/nope: no input 'nope' in this graph (inputs: input_input_ids, input_attention_mask)",
    ]


def test_a_model_plan_pickles_with_its_model_config(tmp_path):
    """Build workers and Ray tasks receive pickled plans; tritonclient's ModelConfig class itself does not pickle."""
    import pickle

    plan = one_model(tmp_path, batch_graph(), warmup=True)
    with pytest.raises(pickle.PicklingError, match=r"Can't pickle <class 'model_config_pb2\.ModelConfig'>"):
        pickle.dumps(plan.config)  # why ModelPlan needs its own reduction
    copy = pickle.loads(pickle.dumps(plan))
    assert copy == plan and copy.config.SerializeToString(deterministic=True) == \
        plan.config.SerializeToString(deterministic=True)
