"""ModelConfig generation: goldens, determinism and every Triton rule of issue 3 (generator/planning/config.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from generator.errors import GenRepoError
from generator.manifest.loading import load_manifest
from generator.manifest.options import tuned_settings_digest
from generator.planning.config import (
    DEFAULT_CPU_INSTANCE_COUNT,
    DEFAULT_QUEUE_DELAY_US,
    config_problems,
    parse_config,
    plan_filenames,
    render_config,
)
from generator.planning.contract import contract_from_plan, render_contract
from generator.planning.fragments import BACKEND_READS, FRAGMENT_FIELDS, fragment_kind
from generator.planning.model_files import config_files
from generator.planning.plan import plan_repository
from tests.manifest_helpers import (
    AITUNE,
    EXAMPLES_MANIFEST,
    batch_dim,
    batch_graph,
    fixture_models,
    graph,
    one_model,
    plan_for,
    problems_of,
    tensor,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "configs"
UPDATE = os.environ.get("GEN_REPO_UPDATE_GOLDEN") == "1"


def _target_models() -> list[dict]:
    mlp, text = str(AITUNE / "mlp.graphspec.json"), str(AITUNE / "text.graphspec.json")
    explicit = str(AITUNE / "explicit_dynamic.graphspec.json")
    return [
        {"name": "mlp_trt", "spec": mlp, "target": "tensorrt", "cuda_graphs": True,
         "compute_capabilities": ["8.6", "9.0"], "dynamic_batching": {"preferred_batch_size": [4, 8]}},
        {"name": "text_trt", "spec": text, "target": "tensorrt", "instance_group": [{"kind": "KIND_GPU", "count": 2,
                                                                                     "gpus": [0, 1]}]},
        {"name": "explicit_trt", "spec": explicit, "target": "tensorrt", "cuda_graphs": True},
        {"name": "mlp_onnx", "spec": mlp, "target": "onnx", "version": 3},
        {"name": "text_onnx_trt", "spec": text, "target": "onnx", "onnx_tensorrt_accelerator": True},
        {"name": "stacked_onnx", "spec": str(AITUNE / "stacked_cfg.graphspec.json"), "target": "onnx",
         "onnx_tensorrt_accelerator": True, "warmup": True},
    ]


def _plan(case: str, tmp: Path):
    if case == "examples":
        return plan_repository(load_manifest(EXAMPLES_MANIFEST))
    if case == "aitune":
        return plan_for(tmp, {"models": fixture_models("python")})
    return plan_for(tmp, {"models": _target_models()})


CASES = ("examples", "aitune", "targets")


@pytest.mark.parametrize("case", CASES)
def test_golden_configs(case, tmp_path):
    plan = _plan(case, tmp_path)
    folder = GOLDEN / case
    produced = {f"{m.name}/config.pbtxt": render_config(m.config) for m in plan.models}
    if UPDATE:
        for relative, text in produced.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text, encoding="utf-8")
    on_disk = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in folder.glob("*/config.pbtxt")}
    assert on_disk == produced


@pytest.mark.parametrize("case", CASES)
def test_regenerating_is_byte_identical_and_parses_back(case, tmp_path):
    first = config_files(_plan(case, tmp_path / "a"))
    second = config_files(_plan(case, tmp_path / "b"))
    assert first == second
    for relative, text in first.items():
        if relative.endswith("config.pbtxt"):
            message = text_format.Parse(text, model_config_pb2.ModelConfig())
            assert render_config(message) == text
            assert config_problems(message, relative.split("/")[0]) == []


def test_parameters_render_sorted_whatever_the_manifest_order(tmp_path):
    a = one_model(tmp_path / "a", batch_graph(), parameters={"b": "2", "a": "1"})
    b = one_model(tmp_path / "b", batch_graph(), parameters={"a": "1", "b": "2"})
    assert render_config(a.config) == render_config(b.config)
    assert render_config(a.config).index('key: "a"') < render_config(a.config).index('key: "b"')


# ---- Triton's own rules ------------------------------------------------------------------------------------------
def test_name_equals_folder():
    config = parse_config('name: "a" backend: "python" version_policy { latest { num_versions: 1 } } '
                          'input { name: "x" data_type: TYPE_FP32 dims: 1 } output { name: "y" data_type: TYPE_FP32 '
                          "dims: 1 }")
    assert config_problems(config, "a") == []
    assert config_problems(config, "b") == ["config name 'a' differs from the model folder 'b'"]


def test_version_folders_numeric_without_leading_zeros(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": batch_graph(), "version": 12}]})
    assert sorted(config_files(plan)) == ["m/12/gen_repo/contract.json", "m/config.pbtxt"]
    for bad in (0, "01", -1):
        with pytest.raises(GenRepoError):
            plan_for(tmp_path, {"models": [{"name": "m", "spec": batch_graph(), "version": bad}]})


def test_dynamic_batching_defaults(tmp_path):
    spec = batch_graph(high=16)
    spec["dynamic_shapes"] = [{"path": "x", "shape": [batch_dim(1, 16, 4), 16]}]
    model = one_model(tmp_path, spec)
    dyn = model.config.dynamic_batching
    # No preferred sizes by default: the batcher sends what is queued as soon as an instance is free.
    assert list(dyn.preferred_batch_size) == []
    assert dyn.max_queue_delay_microseconds == DEFAULT_QUEUE_DELAY_US == 100
    assert any("max_queue_delay_microseconds 100 (gen-repo default)" in d for d in model.decisions)
    assert any("preferred_batch_size [] (none: Triton's batcher guide" in d for d in model.decisions)
    # CUDA graphs prefer the batch sizes they are captured at: opt and max batch, sorted unique.
    graphs = one_model(tmp_path, spec, target="tensorrt", cuda_graphs=True)
    assert list(graphs.config.dynamic_batching.preferred_batch_size) == [4, 16]
    assert [g.batch_size for g in graphs.config.optimization.cuda.graph_spec] == [4, 16]
    same = one_model(tmp_path, batch_graph(high=8), target="tensorrt", cuda_graphs=True)
    assert list(same.config.dynamic_batching.preferred_batch_size) == [8]
    # An explicit [] is an answer, not a fallback: CUDA graphs are then captured at the opt batch alone.
    none = one_model(tmp_path, spec, target="tensorrt", cuda_graphs=True, dynamic_batching={"preferred_batch_size": []})
    assert list(none.config.dynamic_batching.preferred_batch_size) == []
    assert [g.batch_size for g in none.config.optimization.cuda.graph_spec] == [4]
    assert any("preferred_batch_size [] (manifest)" in d for d in none.decisions)


def test_instance_count_defaults(tmp_path):
    """KIND_CPU groups that name no count get DEFAULT_CPU_INSTANCE_COUNT (2); other kinds and given counts stay."""
    python = one_model(tmp_path, batch_graph(), target="python")
    assert [(g.kind, g.count) for g in python.config.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_CPU,
                                                                          DEFAULT_CPU_INSTANCE_COUNT)]
    assert DEFAULT_CPU_INSTANCE_COUNT == 2
    assert any(d.startswith("KIND_CPU instances: 2 where the manifest gives no count") for d in python.decisions)
    onnx = one_model(tmp_path, batch_graph(), target="onnx", instance_group=[{"kind": "KIND_CPU"}, {"kind": "KIND_GPU"},
                                                                            {"kind": "KIND_CPU", "count": 1}])
    assert [g.count for g in onnx.config.instance_group] == [2, 1, 1]
    auto = one_model(tmp_path, batch_graph(), target="onnx")
    assert [(g.kind, g.count) for g in auto.config.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_AUTO,
                                                                        1)]
    assert not any(d.startswith("KIND_CPU instances") for d in auto.decisions)


def test_dynamic_batching_off(tmp_path):
    static = plan_for(tmp_path, {"models": [{"name": "s", "spec": str(AITUNE / "static_single_bs.graphspec.json")}]})
    assert not static.models[0].config.HasField("dynamic_batching")
    off = one_model(tmp_path, batch_graph(), dynamic_batching=False)
    assert not off.config.HasField("dynamic_batching") and off.config.max_batch_size == 8
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"models": [{"name": "s", "spec": str(AITUNE / "static_single_bs.graphspec.json"),
                                        "dynamic_batching": {"max_queue_delay_microseconds": 5}}]})
    assert problems_of(info.value)[0].startswith("/models/0/dynamic_batching: dynamic_batching is set but this model")
    # Defaults that do not fit a non-batching model are ignored with a note, not refused.
    plan = plan_for(tmp_path, {"defaults": {"dynamic_batching": {"max_queue_delay_microseconds": 5}},
                               "models": [{"name": "s", "spec": str(AITUNE / "static_single_bs.graphspec.json")}]})
    assert any("ignored" in d for d in plan.models[0].decisions)


def test_dynamic_batching_options(tmp_path):
    model = one_model(tmp_path, batch_graph(), dynamic_batching={
        "preferred_batch_size": [2, 8], "max_queue_delay_microseconds": 500, "priority_levels": 2,
        "default_priority_level": 1, "default_queue_policy": {"timeout_action": "DELAY",
                                                              "default_timeout_microseconds": 10, "max_queue_size": 4},
        "priority_queue_policy": {"2": {"allow_timeout_override": True}}})
    dyn = model.config.dynamic_batching
    assert list(dyn.preferred_batch_size) == [2, 8] and dyn.max_queue_delay_microseconds == 500
    assert dyn.priority_levels == 2 and dyn.default_priority_level == 1
    assert dyn.default_queue_policy.timeout_action == model_config_pb2.ModelQueuePolicy.DELAY
    assert dyn.priority_queue_policy[2].allow_timeout_override


@pytest.mark.parametrize("size", [0, 9])
def test_preferred_batch_size_in_range(tmp_path, size):
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(high=8), dynamic_batching={"preferred_batch_size": [1, size]})
    messages = problems_of(info.value)
    assert any(m.startswith("/models/0/dynamic_batching") for m in messages), messages


def test_preserve_ordering_with_priorities_refused_even_from_a_fragment(tmp_path):
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(), pbtxt="dynamic_batching { preserve_ordering: true priority_levels: 2 "
                                                 "default_priority_level: 1 }")
    assert any("preserve_ordering cannot be combined with priority_levels 2" in m for m in problems_of(info.value))


def test_tensorrt_target(tmp_path):
    model = one_model(tmp_path, batch_graph(), target="tensorrt", compute_capabilities=["8.0", "9.0"])
    config = model.config
    assert config.platform == "tensorrt_plan" and config.default_model_filename == "model.plan"
    assert dict(config.cc_model_filenames) == {"8.0": "model.sm_80.plan", "9.0": "model.sm_90.plan"}
    (group,) = config.instance_group
    assert group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU and list(group.profile) == ["0"]


def test_tensorrt_instance_groups_all_list_the_profile(tmp_path):
    model = one_model(tmp_path, batch_graph(), target="tensorrt",
                      instance_group=[{"kind": "KIND_GPU", "gpus": [0]}, {"kind": "KIND_GPU", "count": 2, "gpus": [1]}])
    assert [list(g.profile) for g in model.config.instance_group] == [["0"], ["0"]]
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(), target="tensorrt", instance_group=[{"kind": "KIND_CPU"}])
    assert problems_of(info.value)[0].startswith("/models/0/instance_group/0/kind")
    broken = parse_config(render_config(model.config))
    broken.instance_group[1].ClearField("profile")
    assert ("instance_group 1 lists optimization profiles [], not ['0']: Triton serves a profile only where a "
            "group lists it") in config_problems(broken)


def test_scalar_dims_and_empty_reshape(tmp_path):
    spec = graph([tensor("x", ["batch0", 4], [1, 4], [8, 4]), tensor("t", ["batch0"], [1], [8], "torch.int64")],
                 [tensor([], ["batch0", 4], [1, 4], [8, 4])])
    model = one_model(tmp_path, spec, target="tensorrt")
    t = model.config.input[1]
    assert list(t.dims) == [1] and t.HasField("reshape") and list(t.reshape.shape) == []
    assert 'reshape {\n  }' in render_config(model.config)
    assert list(model.config.model_warmup[0].inputs["input_t"].dims) == [1]
    contract = contract_from_plan(model)
    assert contract["inputs"][1]["min_shape"] == [1, 1] and contract["inputs"][1]["reshape"] == []
    non_batching = parse_config(render_config(model.config))
    non_batching.max_batch_size = 0
    assert any("empty reshape" in m for m in config_problems(non_batching))


def test_warmup(tmp_path):
    spec = {"file": str(AITUNE / "text.graphspec.json")}
    trt = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "target": "tensorrt"}]}).models[0]
    (warmup,) = trt.config.model_warmup
    assert warmup.batch_size == 8
    ids = warmup.inputs["input_input_ids"]
    assert list(ids.dims) == [128] and ids.zero_data and ids.data_type == model_config_pb2.TYPE_INT64
    python = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec}]}).models[0]
    assert not python.config.model_warmup
    asked = one_model(tmp_path, batch_graph(), warmup=True)
    assert asked.config.model_warmup[0].inputs["input_x"].random_data
    off = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "target": "tensorrt", "warmup": False}]})
    assert not off.models[0].config.model_warmup
    static = plan_for(tmp_path, {"models": [{"name": "m", "spec": str(AITUNE / "static_single_bs.graphspec.json"),
                                             "target": "tensorrt"}]}).models[0]
    assert static.config.model_warmup[0].batch_size == 1
    assert static.config.model_warmup[0].name == "opt_shape"
    assert list(static.config.model_warmup[0].inputs["input_x"].dims) == [4, 16]


def test_warmup_rules_checked():
    config = parse_config('name: "m" backend: "python" max_batch_size: 4 version_policy { latest { num_versions: 1 } }'
                          ' input { name: "x" data_type: TYPE_FP32 dims: -1 } output { name: "y" data_type: TYPE_FP32 '
                          'dims: 1 } model_warmup { name: "w" batch_size: 8 inputs { key: "x" value { '
                          "data_type: TYPE_FP32 dims: -1 zero_data: true } } }")
    problems = config_problems(config)
    assert "warmup 'w': batch_size 8 is outside 1..4" in problems
    assert any("not fully specified" in p for p in problems)


def test_cuda_graphs(tmp_path):
    model = one_model(tmp_path, batch_graph(high=8), target="tensorrt", cuda_graphs=True,
                      dynamic_batching={"preferred_batch_size": [2, 8]})
    cuda = model.config.optimization.cuda
    assert cuda.graphs
    assert [g.batch_size for g in cuda.graph_spec] == [2, 8]
    assert list(cuda.graph_spec[0].input["input_x"].dim) == [16]
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(), target="python", cuda_graphs=True)
    assert "tensorrt target only" in problems_of(info.value)[0]


def test_onnx_target_and_accelerator(tmp_path):
    spec = {"file": str(AITUNE / "text.graphspec.json")}
    plain = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "target": "onnx"}]}).models[0].config
    assert plain.platform == "onnxruntime_onnx" and plain.default_model_filename == "model.onnx"
    assert not plain.HasField("optimization")
    accel = plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "target": "onnx",
                                            "onnx_tensorrt_accelerator": True}]}).models[0].config
    (acc,) = accel.optimization.execution_accelerators.gpu_execution_accelerator
    assert acc.name == "tensorrt"
    assert acc.parameters["trt_profile_min_shapes"] == "input_input_ids:1x8,input_attention_mask:1x8"
    assert acc.parameters["trt_profile_opt_shapes"] == "input_input_ids:8x128,input_attention_mask:8x128"
    assert acc.parameters["trt_profile_max_shapes"] == "input_input_ids:8x128,input_attention_mask:8x128"
    assert accel.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    with pytest.raises(GenRepoError):
        plan_for(tmp_path, {"models": [{"name": "m", "spec": spec, "onnx_tensorrt_accelerator": True}]})


def test_python_target(tmp_path):
    config = one_model(tmp_path, batch_graph()).config
    assert config.backend == "python" and not config.platform
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert config.version_policy.latest.num_versions == 1  # complete without auto-complete


@pytest.mark.parametrize(("policy", "field"), [({"latest": 2}, "latest"), ({"all": True}, "all"),
                                               ({"specific": [1]}, "specific")])
def test_version_policy(tmp_path, policy, field):
    config = one_model(tmp_path, batch_graph(), version_policy=policy).config
    assert config.version_policy.WhichOneof("policy_choice") == field


def test_response_cache_and_parameters(tmp_path):
    config = one_model(tmp_path, batch_graph(), response_cache=True, parameters={"k": "v"}).config
    assert config.response_cache.enable and config.parameters["k"].string_value == "v"


def test_pbtxt_fragment_merged_last(tmp_path):
    key = "FORCE_CPU_ONLY_INPUT_TENSORS"
    fragment = (f'parameters {{ key: "{key}" value {{ string_value: "no" }} }}\n'
                "instance_group { kind: KIND_CPU count: 3 }\n"
                "dynamic_batching { max_queue_delay_microseconds: 7 }\n")
    model = one_model(tmp_path, batch_graph(), parameters={key: "yes"}, pbtxt=fragment,
                      instance_group=[{"count": 1}], dynamic_batching={"preferred_batch_size": [8]})
    config = model.config
    assert config.parameters[key].string_value == "no"  # map entries replace by key
    assert [g.count for g in config.instance_group] == [1, 3]  # repeated fields append
    assert config.dynamic_batching.max_queue_delay_microseconds == 7  # scalars replace
    assert list(config.dynamic_batching.preferred_batch_size) == [8]  # ... inside merged messages


@pytest.mark.parametrize(("fragment", "words"), [
    ("max_batch_size: 4", "may not set max_batch_size"),
    ('input { name: "z" data_type: TYPE_FP32 dims: 1 }', "may not set input"),
    ('name: "other"', "may not set name"),
    ("this is not pbtxt", "does not parse"),
    ("dynamic_batching { preferred_batch_size: 64 }", "outside 1..max_batch_size"),
])
def test_bad_pbtxt_fragments(tmp_path, fragment, words):
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(), pbtxt=fragment)
    assert any(words in m for m in problems_of(info.value)), problems_of(info.value)


_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_JSON = st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner,
                                                                                                  max_size=3))


@given(st.dictionaries(st.text(), _JSON | st.lists(st.dictionaries(st.text(), _JSON, max_size=4), max_size=3),
                       max_size=6))
def test_contract_text_round_trips_any_contract(contract):
    """Any JSON object renders to a document that reads back equal, one top-level key per line, deterministically."""
    text = render_contract(contract)
    assert json.loads(text) == contract
    assert text == render_contract(json.loads(text)) and text.endswith("}\n")
    assert len([line for line in text.splitlines() if line.startswith('  "')]) == len(contract)


def test_contract_matches_layout_doc(tmp_path):
    plan = plan_repository(load_manifest(EXAMPLES_MANIFEST))
    mlp = plan.models[0]
    contract = contract_from_plan(mlp)
    assert contract == {
        "format": "gen-repo-contract/1", "model": "mlp", "version": 1, "backend": "python", "max_batch_size": 32,
        "inputs": [{"name": "input_x", "data_type": "TYPE_FP32", "dims": [16], "min_shape": [1, 16],
                    "opt_shape": [32, 16], "max_shape": [32, 16]}],
        "outputs": [{"name": "output", "data_type": "TYPE_FP32", "dims": [4], "min_shape": [1, 4],
                     "max_shape": [32, 4]}],
    }
    text = render_contract(contract)
    assert text.endswith("}\n") and json.loads(text) == contract and text == render_contract(json.loads(text))
    trt = one_model(tmp_path, batch_graph(), target="tensorrt")
    assert contract_from_plan(trt)["platform"] == "tensorrt_plan" and "backend" not in contract_from_plan(trt)
    for model in plan.models:
        assert contract_from_plan(model)["max_batch_size"] == model.config.max_batch_size
        assert [i["dims"] for i in contract_from_plan(model)["inputs"]] == [list(i.dims) for i in model.config.input]


def test_plan_filenames_for_cc_model_filenames() -> None:
    names = plan_filenames(["9.0", "8.9", "10.0", "8.9", "12.1"])
    assert names == {
        "8.9": "model.sm_89.plan",
        "9.0": "model.sm_90.plan",
        "10.0": "model.sm_100.plan",
        "12.1": "model.sm_121.plan",
    }
    assert list(names) == ["8.9", "9.0", "10.0", "12.1"]
    assert plan_filenames([]) == {}
    with pytest.raises(ValueError, match="compute capability"):
        plan_filenames(["sm_89"])


def _fragment_setting(field: Any, key: str = "k") -> str:
    """A pbtxt fragment that sets the ModelConfig ``field`` (any field of the descriptor, a newer Triton's too; a map
    field at ``key``)."""
    from google.protobuf.descriptor import FieldDescriptor

    config = model_config_pb2.ModelConfig()
    value = getattr(config, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry_value = field.message_type.fields_by_name["value"]
        if entry_value.message_type is not None:
            value[key].SetInParent()
        else:
            value[key] = "v"
    elif field.is_repeated:
        if field.message_type is not None:
            value.add()
        else:
            value.append("v" if field.type == FieldDescriptor.TYPE_STRING else 1)
    elif field.message_type is not None:
        value.SetInParent()
    elif field.enum_type is not None:
        setattr(config, field.name, field.enum_type.values[-1].number)
    elif field.type == FieldDescriptor.TYPE_STRING:
        setattr(config, field.name, "v")
    elif field.type == FieldDescriptor.TYPE_BOOL:
        setattr(config, field.name, True)
    else:
        setattr(config, field.name, 1)
    text = text_format.MessageToString(config)
    assert [f.name for f, _ in parse_config(text).ListFields()] == [field.name], text
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["tensorrt", "onnx", "python"]), batching=st.booleans(),
       field=st.sampled_from(list(model_config_pb2.ModelConfig.DESCRIPTOR.fields)))
def test_a_fragment_sets_exactly_the_fields_its_model_kind_allows(tmp_path_factory: pytest.TempPathFactory,
                                                                    target: str, batching: bool, field: Any) -> None:
    """Issue 37, fragment scope: for any model kind and any ModelConfig field (read from the descriptor, so a field
    a newer Triton adds is covered), plan refuses the fragment at its pointer, naming the field and the kind, exactly
    when the one table (FRAGMENT_FIELDS) does not allow the field (parameters at a key the target's backend reads:
    tests/planning/test_fragments.py takes each key)."""
    kind = fragment_kind(target, 8 if batching else 0)
    words = f"pbtxt fragment may not set {field.name} ({kind}): "
    fragment = _fragment_setting(field, max(BACKEND_READS[target].parameters))
    try:
        model = one_model(tmp_path_factory.mktemp("fragment"), batch_graph(), target=target,
                          batching="batch" if batching else "none", pbtxt=fragment)
    except GenRepoError as error:
        refusals = [p for p in error.problems if p.message.startswith("pbtxt fragment may not set")]
        assert all(p.pointer == "/models/0/pbtxt" for p in refusals), refusals
        assert (field.name not in FRAGMENT_FIELDS[kind]) == any(p.message.startswith(words) for p in refusals), \
            error.problems
        return
    assert field.name in FRAGMENT_FIELDS[kind]
    assert field.name in {f.name for f, _ in model.config.ListFields()}  # merged


def test_an_ensemble_scheduling_fragment_on_a_model_is_refused_with_its_reason(tmp_path: Path) -> None:
    """The case issue 37 found: a step name that is a path, on a model that is not an ensemble."""
    fragment = 'ensemble_scheduling { step { model_name: "../../etc" model_version: -1 } }'
    with pytest.raises(GenRepoError) as info:
        one_model(tmp_path, batch_graph(), pbtxt=fragment)
    assert problems_of(info.value) == [
        "/models/0/pbtxt: pbtxt fragment may not set ensemble_scheduling (python model that batches): only an "
        "ensemble has steps; declare one under ensembles:, whose steps come from its maps"]


# ---- tuned: (gen-repo tune's block) over the model's own options ---------------------------------------------------
def _tuned(**settings: object) -> dict:
    measured = {"at": "2026-12-06T08:00:00Z", "hardware": "2 CPUs (Intel Xeon), no GPU", "engine": "loop",
                "concurrency": [8, 32], "throughput": 412.0, "noise": 0.04, "p99_ms": 12.3, "gen_repo": "0.2.0",
                "settings_digest": tuned_settings_digest(settings)}
    return {**settings, "measured": measured}


def test_figures_of_settings_never_measured_are_not_shown(tmp_path):
    tuned = _tuned(instance_group=[{"kind": "KIND_CPU", "count": 2}],
                   dynamic_batching={"max_queue_delay_microseconds": 100, "preferred_batch_size": []})
    edited = {**tuned, "instance_group": [{"kind": "KIND_CPU", "count": 3}]}  # by hand, after tune measured 2
    model = one_model(tmp_path, batch_graph(high=8), target="python", tuned=edited)
    assert [g.count for g in model.config.instance_group] == [3]  # the edit is served, but never credited
    (note,) = [d for d in model.decisions if d.startswith("tuned (")]
    assert "not measured: these settings were edited after they were measured" in note
    assert "412" not in note and "p99" not in note
    # A block written before the digest was recorded (still readable) shows no figure either.
    old = {**tuned, "measured": {k: v for k, v in tuned["measured"].items() if k != "settings_digest"}}
    (note,) = [d for d in one_model(tmp_path, batch_graph(high=8), target="python", tuned=old).decisions
               if d.startswith("tuned (")]
    assert "not measured: the block does not record which settings" in note and "412" not in note


def test_tuned_settings_replace_the_models_own_and_plan_says_where_they_came_from(tmp_path):
    tuned = _tuned(instance_group=[{"kind": "KIND_CPU", "count": 3}],
                   dynamic_batching={"max_queue_delay_microseconds": 500, "preferred_batch_size": []})
    model = one_model(tmp_path, batch_graph(high=8), target="python", tuned=tuned,
                      instance_group=[{"kind": "KIND_CPU", "count": 1}],
                      dynamic_batching={"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 7,
                                        "preserve_ordering": True})
    config = model.config
    assert [(g.kind, g.count) for g in config.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_CPU, 3)]
    assert list(config.dynamic_batching.preferred_batch_size) == []  # [] is "none", not "the default"
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert config.dynamic_batching.preserve_ordering  # the keys tuning leaves stay the model's own
    words = "\n".join(model.decisions)
    assert "preferred_batch_size [] (tuned), max_queue_delay_microseconds 500 (tuned)" in words
    assert ("tuned (/models/0/tuned): instance_group KIND_CPU x3; max_queue_delay_microseconds 500; "
            "preferred_batch_size [], over the model's own options; measured 2026-12-06T08:00:00Z on 2 CPUs (Intel "
            "Xeon), no GPU with the loop engine at concurrency [8, 32]: 412 inferences/s (noise 4%), p99 12.3 ms, "
            "gen-repo 0.2.0") in words
    # Partial: a tuned delay alone keeps the model's instance groups and preferred sizes.
    delay = one_model(tmp_path, batch_graph(high=8), target="python", tuned=_tuned(
        dynamic_batching={"max_queue_delay_microseconds": 0}), dynamic_batching={"preferred_batch_size": [4]})
    assert list(delay.config.dynamic_batching.preferred_batch_size) == [4]
    assert delay.config.dynamic_batching.max_queue_delay_microseconds == 0
    assert [g.count for g in delay.config.instance_group] == [DEFAULT_CPU_INSTANCE_COUNT]


def test_tuned_settings_the_engine_or_contract_cannot_take_are_refused_where_they_are(tmp_path):
    with pytest.raises(GenRepoError) as info:
        plan_for(tmp_path, {"models": [
            {"name": "big", "spec": batch_graph(high=8), "target": "python",
             "tuned": _tuned(dynamic_batching={"preferred_batch_size": [4, 16]})},
            {"name": "trt", "spec": batch_graph(high=8), "target": "tensorrt",
             "tuned": _tuned(instance_group=[{"kind": "KIND_GPU", "count": 2}, {"kind": "KIND_CPU", "count": 2}])},
            {"name": "static", "spec": str(AITUNE / "static_single_bs.graphspec.json"), "target": "python",
             "tuned": _tuned(dynamic_batching={"max_queue_delay_microseconds": 500})},
            {"name": "off", "spec": batch_graph(high=8), "target": "python", "dynamic_batching": False,
             "tuned": _tuned(dynamic_batching={"max_queue_delay_microseconds": 500})},
        ]})
    assert problems_of(info.value) == [
        "/models/0/tuned/dynamic_batching/preferred_batch_size/1: preferred_batch_size 16 is outside "
        "1..max_batch_size (8)",
        "/models/1/tuned/instance_group/1/kind: the tensorrt target runs on a GPU; instance group kind KIND_CPU "
        "cannot serve a plan",
        "/models/2/tuned/dynamic_batching: tuned dynamic_batching, but this model's dynamic batcher is off "
        "(max_batch_size 0); tune the repository again or remove the tuned dynamic_batching",
        "/models/3/tuned/dynamic_batching: tuned dynamic_batching, but this model's dynamic batcher is off "
        "(dynamic_batching: false); tune the repository again or remove the tuned dynamic_batching",
    ]


def test_a_tuned_config_is_byte_identical_whatever_the_key_order(tmp_path):
    one = _tuned(instance_group=[{"kind": "KIND_CPU", "count": 2}],
                 dynamic_batching={"max_queue_delay_microseconds": 500, "preferred_batch_size": [2]})
    other = {key: one[key] for key in reversed(list(one))}
    other["dynamic_batching"] = dict(reversed(list(one["dynamic_batching"].items())))
    a = one_model(tmp_path / "a", batch_graph(), target="python", tuned=one)
    b = one_model(tmp_path / "b", batch_graph(), target="python", tuned=other)
    assert render_config(a.config) == render_config(b.config)
    assert a.decisions == b.decisions
