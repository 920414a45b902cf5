"""Schema and semantic validation of GraphSpec documents (generator/specs/schema.py, schemas/*.schema.json)."""

from __future__ import annotations

import copy
import json
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from generator.errors import GenRepoError, Problem
from generator.resources import resource_dir
from generator.specs import documents, json_schema
from generator.specs.schema import document_kind, graph_summary, load_graphspecs, spec_file_problems, validate_document
from tests.manifest_helpers import FIXTURES


@pytest.fixture
def load(aitune_fixture_dir: Path) -> Callable[[str], dict[str, Any]]:
    def _load(name: str) -> dict[str, Any]:
        file = "tune_report.json" if name == "tune_report" else f"{name}.graphspec.json"
        data: dict[str, Any] = json.loads((aitune_fixture_dir / file).read_text())
        return data

    return _load


def _problems(document: Any) -> list[Problem]:
    with pytest.raises(GenRepoError) as info:
        validate_document(document, "spec.json")
    return info.value.problems


def _expect(document: Any, pointer: str, fragment: str) -> list[Problem]:
    problems = _problems(document)
    assert any(p.pointer == pointer and fragment in p.message for p in problems), problems
    return problems


# --------------------------------------------------------------------------------------------------------------------
# What AITune writes is accepted as is
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_validates(aitune_fixture_dir: Path, name: str) -> None:
    loaded = load_graphspecs(aitune_fixture_dir / f"{name}.graphspec.json")
    assert len(loaded) == 1
    assert loaded[0].pointer == "/graph"
    assert loaded[0].module_name is None
    assert loaded[0].file == str(aitune_fixture_dir / f"{name}.graphspec.json")
    assert spec_file_problems(aitune_fixture_dir / f"{name}.graphspec.json") == []


@pytest.mark.parametrize("name", FIXTURES)
def test_bare_graph_validates(tmp_path: Path, load: Callable[[str], dict[str, Any]], name: str) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(load(name)["graph"]))
    loaded = load_graphspecs(path)
    assert [g.pointer for g in loaded] == [""]
    written = loaded[0].graph.to_dict()
    for meta in (written["input_spec"], written["output_spec"]):
        for entry in meta["tensor_data"]:
            entry.pop("batch_axis_multipliers", None)  # inferred by the loader, not in AITune's JSON
    assert written == load(name)["graph"]


def test_tune_report_validates(aitune_fixture_dir: Path, load: Callable[[str], dict[str, Any]]) -> None:
    loaded = load_graphspecs(aitune_fixture_dir / "tune_report.json")
    report = load("tune_report")
    assert [g.module_name for g in loaded] == [m["module_name"] for m in report["modules"]]
    assert [g.pointer for g in loaded] == [f"/modules/{i}/graphs/0" for i in range(len(report["modules"]))]
    by_module = {g.module_name: g.graph for g in loaded}
    # The report's graphs are the same graphs as the fixtures (same AITune run).
    for module in ("mlp", "text", "explicit_dynamic", "two_outputs", "nested_dict"):
        expected = load(module)["expected"]
        assert by_module[module].get_max_batch_size() == expected["max_batch_size"], module
        assert by_module[module].input_tensor_names() == [i["tensor_name"] for i in expected["inputs"]]


def test_tune_report_null_dynamic_shapes_and_extra_fields(load: Callable[[str], dict[str, Any]]) -> None:
    report = load("tune_report")
    report["modules"][0]["graphs"][0]["dynamic_shapes"] = None  # dynamic_shapes_to_json(None)
    report["modules"][0]["graphs"][0]["something_new"] = {"x": 1}
    report["new_top_level"] = True
    assert len(validate_document(report, "r.json")) == len(report["modules"])


def test_example_specs_validate(examples_dir: Path) -> None:
    specs = sorted((examples_dir / "specs").glob("*.graphspec.json"))
    assert specs
    for spec in specs:
        assert spec_file_problems(spec) == [], spec


def test_yaml_input_gives_the_same_graph(tmp_path: Path, aitune_fixture_dir: Path, load: Callable) -> None:
    for suffix in (".yaml", ".yml"):
        path = tmp_path / f"nested{suffix}"
        path.write_text(yaml.safe_dump(load("nested_dict")))
        from_yaml = load_graphspecs(path)[0].graph
        from_json = load_graphspecs(aitune_fixture_dir / "nested_dict.graphspec.json")[0].graph
        assert from_yaml == from_json


def test_optional_parts_are_optional(load: Callable[[str], dict[str, Any]]) -> None:
    graph = load("mlp")["graph"]
    for key in ("type", "forward_signature", "dynamic_shapes"):
        del graph[key]
    for entry in graph["input_spec"]["tensor_data"]:
        del entry["access_path"]
    graph["post_input_spec"] = None
    assert validate_document(graph, "g.json")[0].graph.get_max_batch_size() == 8
    graph["post_input_spec"] = copy.deepcopy(graph["input_spec"])
    assert validate_document(graph, "g.json")[0].graph.post_input_spec is not None


def test_explicit_static_zero_is_allowed_like_aitune(load: Callable[[str], dict[str, Any]]) -> None:
    doc = load("mlp")
    doc["graph"]["dynamic_shapes"] = [{"path": "x", "shape": [{"type": "BatchDim", "name": "b", "min": 1,
                                                               "max": 4, "opt": None}, 0]}]
    graph = validate_document(doc, "g.json")[0].graph
    assert graph.get_effective_input_shapes("x", graph.input_spec.tensor_specs[0]) == ([1, 0], [4, 0], [4, 0])


def test_any_torch_dtype_is_accepted_by_the_schema(load: Callable[[str], dict[str, Any]]) -> None:
    doc = load("mlp")
    doc["graph"]["input_spec"]["tensor_data"][0]["dtype"] = "torch.complex64"
    assert validate_document(doc, "g.json")
    doc["graph"]["input_spec"]["tensor_data"][0]["dtype"] = "float32"
    _expect(doc, "/graph/input_spec/tensor_data/0/dtype", "does not match")


def test_document_kinds() -> None:
    assert document_kind({"graph": {}}) == "fixture"
    assert document_kind({"modules": []}) == "tune_report"
    assert document_kind({"input_spec": {}}) == "graph"
    assert document_kind([1]) is None
    problems = _problems([1, 2])
    assert problems[0].pointer == "" and "JSON object" in problems[0].message


# --------------------------------------------------------------------------------------------------------------------
# One failing document per rule, with the exact pointer
# --------------------------------------------------------------------------------------------------------------------
T = "/graph/input_spec/tensor_data"


def test_rank_mismatch(load: Callable) -> None:
    doc = load("text")
    doc["graph"]["input_spec"]["tensor_data"][1]["max_shape"] = [8]
    _expect(doc, f"{T}/1/max_shape", "same rank")


def test_min_larger_than_max(load: Callable) -> None:
    doc = load("text")
    doc["graph"]["input_spec"]["tensor_data"][0]["min_shape"][1] = 200
    _expect(doc, f"{T}/0/min_shape/1", "larger than max_shape[1]=128")


def test_static_axis_must_have_equal_min_and_max(load: Callable) -> None:
    doc = load("mlp")
    doc["graph"]["input_spec"]["tensor_data"][0]["min_shape"][1] = 8
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][1] = 32
    problems = _expect(doc, f"{T}/0/min_shape/1", "static (16)")
    assert any(p.pointer == f"{T}/0/max_shape/1" for p in problems)


def test_axis_label_must_use_its_own_index(load: Callable) -> None:
    doc = load("text")
    doc["graph"]["input_spec"]["tensor_data"][0]["shape"][1] = "dim0"
    _expect(doc, f"{T}/0/shape/1", "own index")
    doc = load("text")
    doc["graph"]["input_spec"]["tensor_data"][0]["shape"][1] = "seq"
    _expect(doc, f"{T}/0/shape/1", "does not match")


@pytest.mark.parametrize("value", [0, -1])
def test_recorded_sizes_must_be_positive(load: Callable, value: int) -> None:
    doc = load("mlp")
    doc["graph"]["output_spec"]["tensor_data"][0]["min_shape"][0] = value
    _expect(doc, "/graph/output_spec/tensor_data/0/min_shape/0", "minimum of 1")


def test_sizes_must_fit_int32(load: Callable) -> None:
    doc = load("mlp")
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = 2**31
    _expect(doc, f"{T}/0/max_shape/0", "maximum of 2147483647")
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][0]["shape"][1]["max"] = 2**40
    _expect(doc, "/graph/dynamic_shapes/0/shape/1/max", "maximum")


def test_sizes_must_be_integers(load: Callable) -> None:
    doc = load("mlp")
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = 8.0
    _expect(doc, f"{T}/0/max_shape/0", "must be an integer")
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = 8.5
    _expect(doc, f"{T}/0/max_shape/0", "not of type 'integer'")
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = True
    _expect(doc, f"{T}/0/max_shape/0", "not of type 'integer'")


D = "/graph/dynamic_shapes"


def test_dynamic_dim_min_below_max(load: Callable) -> None:
    doc = load("explicit_dynamic")
    for definition in doc["graph"]["dynamic_shapes"]:
        definition["shape"][1]["min"] = 256
    problems = _expect(doc, f"{D}/0/shape/1/max", "min < max")
    assert any(p.pointer == f"{D}/1/shape/1/max" for p in problems)


def test_dynamic_dim_opt_inside_bounds(load: Callable) -> None:
    doc = load("explicit_dynamic")
    for definition in doc["graph"]["dynamic_shapes"]:
        definition["shape"][0]["opt"] = 64
    _expect(doc, f"{D}/0/shape/0/opt", "min <= opt <= max")


def test_dynamic_dim_bounds_positive(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][0]["shape"][0]["min"] = 0
    _expect(doc, f"{D}/0/shape/0/min", "minimum of 1")


def test_explicit_static_size_not_negative(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][0]["shape"][1] = -1
    _expect(doc, f"{D}/0/shape/1", "minimum of 0")


def test_shared_dim_name_needs_identical_definition(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][1]["shape"][1]["opt"] = 64
    _expect(doc, f"{D}/1/shape/1", "identical type and bounds")
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][1]["shape"][1]["type"] = "BatchDim"
    _expect(doc, f"{D}/1/shape/1", "identical type and bounds")


def test_batch_dims_with_other_names_share_one_range(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][1]["shape"][0].update(name="batch2", max=16, opt=None)
    _expect(doc, f"{D}/1/shape/0/max", "one batch size")
    doc["graph"]["dynamic_shapes"][1]["shape"][0].update(max=32, opt=8)
    assert validate_document(doc, "ok.json")  # another name with the same range is fine


def test_definition_rank_must_equal_tensor_rank(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][0]["shape"].append(16)
    _expect(doc, f"{D}/0/shape", "has 3 axes but input 'input_ids' has 2")


def test_definition_path_must_name_an_input(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"][0]["path"] = "inputs_ids"
    _expect(doc, f"{D}/0/path", "names no input tensor")
    doc["graph"]["dynamic_shapes"][0]["path"] = ["input_ids"]
    _expect(doc, f"{D}/0/path", "too short")  # a one-step path is the bare name
    doc["graph"]["dynamic_shapes"][0]["path"] = ["input_ids", 0]
    _expect(doc, f"{D}/0/path", "names no input tensor")


def test_definition_path_only_once(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shapes"].append(copy.deepcopy(doc["graph"]["dynamic_shapes"][0]))
    _expect(doc, f"{D}/2/path", "already has a definition at /graph/dynamic_shapes/0")


def test_recorded_batch_ranges_must_be_proportional(load: Callable) -> None:
    doc = load("stacked_cfg")
    doc["graph"]["input_spec"]["tensor_data"][1]["max_shape"][0] = 5
    _expect(doc, f"{T}/1/max_shape/0", "not proportional")


def test_proportional_but_not_integer_multiple_is_left_to_inference(load: Callable) -> None:
    doc = load("stacked_cfg")
    doc["graph"]["input_spec"]["tensor_data"][0]["min_shape"][0] = 3
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = 12
    doc["graph"]["output_spec"]["tensor_data"][0]["min_shape"][0] = 3
    doc["graph"]["output_spec"]["tensor_data"][0]["max_shape"][0] = 12
    (loaded,) = validate_document(doc, "g.json")
    assert any("multiplier 3 inferred" in note for note in loaded.assumptions)
    doc["graph"]["input_spec"]["tensor_data"][0]["min_shape"][0] = 2
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"][0] = 6
    doc["graph"]["input_spec"]["tensor_data"][1]["min_shape"][0] = 3
    doc["graph"]["input_spec"]["tensor_data"][1]["max_shape"][0] = 9
    (loaded,) = validate_document(doc, "g.json")
    assert any("assumed 1" in note for note in loaded.assumptions)


def test_declared_multipliers_must_agree(load: Callable) -> None:
    doc = load("stacked_cfg")
    tensors = doc["graph"]["input_spec"]["tensor_data"]
    tensors[0]["batch_axis_multipliers"] = {"0": 2}
    tensors[1]["batch_axis_multipliers"] = {"0": 1}
    (loaded,) = validate_document(doc, "g.json")
    assert loaded.assumptions == [] or all("output" in n for n in loaded.assumptions)
    tensors[0]["min_shape"][0] = 4
    tensors[0]["max_shape"][0] = 16
    _expect(doc, f"{T}/1/max_shape/0", "gives batch sizes")


def test_multipliers_only_on_batch_axes_and_dividing_the_range(load: Callable) -> None:
    doc = load("stacked_cfg")
    doc["graph"]["input_spec"]["tensor_data"][0]["batch_axis_multipliers"] = {"1": 2}
    _expect(doc, f"{T}/0/batch_axis_multipliers/1", "not a batch axis")
    doc["graph"]["input_spec"]["tensor_data"][0]["batch_axis_multipliers"] = {"0": 3}
    _expect(doc, f"{T}/0/batch_axis_multipliers/0", "not a multiple of its multiplier 3")
    doc["graph"]["input_spec"]["tensor_data"][0]["batch_axis_multipliers"] = {"0": 0}
    _expect(doc, f"{T}/0/batch_axis_multipliers/0", "minimum of 1")


def test_input_names_unique_after_sanitising(load: Callable) -> None:
    doc = load("nested_dict")
    doc["graph"]["input_spec"]["tensor_data"][4]["semantic_path"] = ["extras", "pair", "0"]
    _expect(doc, f"{T}/4/semantic_path", "'input_extras_pair_0'")


def test_output_names_unique_after_sanitising(load: Callable) -> None:
    doc = load("two_outputs")
    outputs = doc["graph"]["output_spec"]["tensor_data"]
    assert outputs[0]["semantic_path"] == 0
    outputs[1]["semantic_path"] = "0"
    _expect(doc, "/graph/output_spec/tensor_data/1/semantic_path", "'output_0'")


def test_inputs_must_start_at_a_forward_parameter(load: Callable) -> None:
    doc = load("nested_dict")
    doc["graph"]["input_spec"]["tensor_data"][1]["semantic_path"] = ["extra", "mask"]
    _expect(doc, f"{T}/1/semantic_path", "does not start at a parameter")
    doc = load("mlp")
    doc["graph"]["forward_signature"]["parameters"].append(doc["graph"]["forward_signature"]["parameters"][0])
    _expect(doc, "/graph/forward_signature/parameters/1/name", "listed twice")


def test_unknown_keys_are_refused_in_the_graph(load: Callable) -> None:
    doc = load("explicit_dynamic")
    doc["graph"]["dynamic_shape"] = doc["graph"].pop("dynamic_shapes")
    _expect(doc, "/graph", "'dynamic_shape' was unexpected")


def test_tune_report_problems_point_into_modules(load: Callable) -> None:
    report = load("tune_report")
    report["modules"][3]["graphs"][0]["dynamic_shapes"][1]["shape"][1]["max"] = 128
    report["modules"][1]["graphs"][0]["input_spec"]["tensor_data"][0]["shape"][0] = "batch1"
    del report["modules"][0]["graphs"][0]["graph_name"]
    problems = _problems(report)
    pointers = [p.pointer for p in problems]
    assert pointers == [
        "/modules/0/graphs/0",
        "/modules/1/graphs/0/input_spec/tensor_data/0/shape/0",
        "/modules/3/graphs/0/dynamic_shapes/1/shape/1",
    ]


def test_many_errors_at_once_in_document_order(load: Callable) -> None:
    doc = load("nested_dict")
    tensors = doc["graph"]["input_spec"]["tensor_data"]
    tensors[0]["dtype"] = "float"  # schema
    tensors[1]["min_shape"] = [1]  # rank
    tensors[2]["max_shape"][1] = 3  # static axis
    tensors[3]["shape"][0] = "batch3"  # label
    doc["graph"]["output_spec"]["tensor_data"][1]["semantic_path"] = "aux 0"  # fine on its own
    doc["graph"]["dynamic_shapes"] = [{"path": "nowhere", "shape": [1]}]  # unknown input
    doc["graph"]["forward_signature"]["parameters"][0]["kind"] = "POSITIONAL"  # schema
    problems = _problems(doc)
    assert [p.pointer for p in problems] == [
        f"{T}/0/dtype",
        f"{T}/1/min_shape",
        f"{T}/2/max_shape/1",
        f"{T}/3/shape/0",
        "/graph/forward_signature/parameters/0/kind",
        "/graph/dynamic_shapes/0/path",
    ]
    assert all(p.file == "spec.json" for p in problems)


def test_validate_file_collects_instead_of_raising(tmp_path: Path, load: Callable) -> None:
    doc = load("mlp")
    doc["graph"]["input_spec"]["tensor_data"][0]["max_shape"] = [8]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    problems = spec_file_problems(path)
    assert [str(p) for p in problems] == [f"{path}: {T}/0/max_shape: has 1 axes but shape has 2; shape, min_shape "
                                          "and max_shape must have the same rank"]


# --------------------------------------------------------------------------------------------------------------------
# Hostile files
# --------------------------------------------------------------------------------------------------------------------
class _Marker:
    """Unpickling this would create a file; a refused pickle leaves no file behind."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickled_binary_form_is_refused_and_never_unpickled(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "unpickled"
    path = tmp_path / "graph_spec.json"
    path.write_bytes(pickle.dumps({"graph": _Marker(str(marker))}, protocol=protocol))
    problems = spec_file_problems(path)
    assert len(problems) == 1
    assert "pickled binary form" in problems[0].message and "JSON form" in problems[0].message
    assert not marker.exists()


def test_torch_save_zip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph_spec.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"x": 1}))
    (problem,) = spec_file_problems(path)
    assert "never unpickles" in problem.message


@pytest.mark.parametrize("text", ['{"graph": NaN}', '{"graph": {"name": Infinity}}', '{"a": -Infinity}'])
def test_nan_and_infinity_refused_in_json(tmp_path: Path, text: str) -> None:
    path = tmp_path / "nan.json"
    path.write_text(text)
    (problem,) = spec_file_problems(path)
    assert "not valid JSON" in problem.message


def test_nan_refused_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "nan.yaml"
    path.write_text("graph:\n  name: .nan\n")
    (problem,) = spec_file_problems(path)
    assert problem.pointer == "/graph/name" and "past the float limit (NaN and Infinity included)" in problem.message


@pytest.mark.parametrize("fan_out", [9, 3])
def test_yaml_alias_bomb_refused(tmp_path: Path, fan_out: int) -> None:
    # fan_out 9: 81 aliases (under the alias budget) expanding to 9**10 values; 3: too many aliases (3 * 40).
    levels = 10 if fan_out == 9 else 40
    lines = ["a0: &a0 [" + ", ".join(['"x"'] * fan_out) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan_out) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    (problem,) = spec_file_problems(path)
    assert "alias" in problem.message


def test_yaml_python_tags_refused(tmp_path: Path) -> None:
    marker = tmp_path / "evaluated"
    path = tmp_path / "tag.yaml"
    path.write_text(f"graph: !!python/object/apply:os.system ['touch {marker}']\n")
    (problem,) = spec_file_problems(path)
    assert "invalid YAML" in problem.message
    assert not marker.exists()


def test_huge_file_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(documents.MAX_DOCUMENT_BYTES + 1)  # sparse: no disk used
    (problem,) = spec_file_problems(path)
    assert "at most" in problem.message and problem.pointer == ""


def test_deep_nesting_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"graph": ' + "[" * 5000 + "]" * 5000 + "}")
    (problem,) = spec_file_problems(path)
    assert "nests deeper" in problem.message or "cannot parse" in problem.message


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    (missing,) = spec_file_problems(tmp_path / "missing.json")
    assert "cannot read" in missing.message
    broken = tmp_path / "broken.json"
    broken.write_text('{"graph": ')
    (problem,) = spec_file_problems(broken)
    assert "invalid JSON at line 1" in problem.message
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    (problem,) = spec_file_problems(binary)
    assert "UTF-8" in problem.message


# --------------------------------------------------------------------------------------------------------------------
# The schemas themselves
# --------------------------------------------------------------------------------------------------------------------
SCHEMAS = ["graphspec.schema.json", "tune_report.schema.json", "report_tune.schema.json"]


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_is_valid_draft_2020_12_with_id_titles_and_descriptions(name: str) -> None:
    schema = json.loads((resource_dir("schemas") / name).read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://gen-repo.dev/schemas/{name}"
    assert schema["title"] and schema["description"]
    for def_name, definition in schema.get("$defs", {}).items():
        assert definition.get("title") and definition.get("description"), def_name

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                has_ref = "$ref" in sub
                assert has_ref or sub.get("description"), f"{where}/properties/{key} has no description"
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(schema, "")


def test_tune_report_refs_the_graphspec_schema_by_id_offline(load: Callable) -> None:
    text = (resource_dir("schemas") / "tune_report.schema.json").read_text()
    assert '"$ref": "https://gen-repo.dev/schemas/graphspec.schema.json#/$defs/sampleMetadata"' in text
    registry = json_schema.schema_registry()
    resolved = registry.resolver().lookup("https://gen-repo.dev/schemas/graphspec.schema.json#/$defs/tensorSpec")
    assert resolved.contents["title"] == "TensorSpec"
    # A violation inside a $ref'd definition is found through the registry (no network: nothing to fetch from).
    report = load("tune_report")
    report["modules"][0]["graphs"][0]["input_spec"]["tensor_data"][0]["dtype"] = "fp32"
    problems = json_schema.schema_problems(report, "tune_report.schema.json", "r.json")
    assert [p.pointer for p in problems] == ["/modules/0/graphs/0/input_spec/tensor_data/0/dtype"]


def test_fixture_wrapper_and_bare_graph_both_valid_against_the_schema_file(load: Callable) -> None:
    validator = json_schema.schema_validator("graphspec.schema.json")
    for name in FIXTURES:
        assert list(validator.iter_errors(load(name))) == []
        assert list(validator.iter_errors(load(name)["graph"])) == []


def test_graph_summary(aitune_fixture_dir: Path) -> None:
    (loaded,) = load_graphspecs(aitune_fixture_dir / "stacked_cfg.graphspec.json")
    summary = graph_summary(loaded)
    assert summary["max_batch_size"] == 8
    assert summary["max_batch_size_normalized"] == 4
    assert summary["min_batch_size"] == 1
    assert [i["name"] for i in summary["inputs"]] == ["input_latents", "input_timestep"]
    assert summary["inputs"][0]["batch_ranges"] == [{"axis": 0, "min": 2, "max": 8, "multiplier": 2}]
    assert summary["inputs"][0]["opt_shape"] == [8, 4, 8, 8]
    assert summary["outputs"][0]["name"] == "output"
    assert len(summary["assumptions"]) == 2
    json.dumps(summary)  # plain data


def test_no_environment_needed_for_schemas(monkeypatch: pytest.MonkeyPatch, aitune_fixture_dir: Path) -> None:
    # Loading works from any working directory (schemas come from the package, not the cwd).
    monkeypatch.chdir(os.sep)
    assert load_graphspecs(aitune_fixture_dir / "mlp.graphspec.json")
