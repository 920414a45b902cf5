"""The fast schema validator (jsonschema_rs) agrees with the reference (jsonschema) on every test document.

generator/specs/json_schema.py and generator/specs/schema.py answer "valid" fast and fall back to the reference
(``jsonschema``) on any doubt. These tests hold the two paths to the same answer:
validity, error pointers and the exact problems, on the fixtures, the examples, every invalid document of
tests/specs/test_schema.py (``INVALID_CASES`` below, one per rule) and random valid and mutated documents from
tests/graphspec_strategies.py.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.errors import GenRepoError, json_pointer
from generator.specs import json_schema
from generator.specs.schema import GRAPHSPEC_SCHEMA, TUNE_REPORT_SCHEMA, validate_document
from tests.graphspec_strategies import graph_documents, invalid_graph_documents
from tests.manifest_helpers import FIXTURES

SCHEMAS = [GRAPHSPEC_SCHEMA, TUNE_REPORT_SCHEMA, "manifest.schema.json"]
HYPOTHESIS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

pytestmark = pytest.mark.requires("jsonschema_rs")

Doc = dict[str, Any]
T = ["graph", "input_spec", "tensor_data"]
D = ["graph", "dynamic_shapes"]


# --------------------------------------------------------------------------------------------------------------------
# Every document tests/specs/test_schema.py validates, as (fixture, edit): the edits mirror that file test by test.
# --------------------------------------------------------------------------------------------------------------------
def _at(doc: Any, *path: str | int) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _set(*path: str | int, value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        _at(doc, *path[:-1])[path[-1]] = copy.deepcopy(value)

    return edit


def _edits(*edits: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        for one in edits:
            one(doc)

    return edit


def _each_definition(*path: str | int, value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        for definition in doc["graph"]["dynamic_shapes"]:
            _at(definition, *path[:-1])[path[-1]] = value

    return edit


def _append(*path: str | int, value: Callable[[Doc], Any]) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        _at(doc, *path).append(value(doc))

    return edit


def _rename_dynamic_shapes(doc: Doc) -> None:
    doc["graph"]["dynamic_shape"] = doc["graph"].pop("dynamic_shapes")


def _tune_report_edits(report: Doc) -> None:
    report["modules"][3]["graphs"][0]["dynamic_shapes"][1]["shape"][1]["max"] = 128
    report["modules"][1]["graphs"][0]["input_spec"]["tensor_data"][0]["shape"][0] = "batch1"
    del report["modules"][0]["graphs"][0]["graph_name"]


def _tune_report_extras(report: Doc) -> None:
    report["modules"][0]["graphs"][0]["dynamic_shapes"] = None
    report["modules"][0]["graphs"][0]["something_new"] = {"x": 1}
    report["new_top_level"] = True


def _strip_optional(doc: Doc) -> None:
    for key in ("type", "forward_signature", "dynamic_shapes"):
        del doc["graph"][key]
    for entry in doc["graph"]["input_spec"]["tensor_data"]:
        del entry["access_path"]
    doc["graph"]["post_input_spec"] = None


def _many_errors(doc: Doc) -> None:
    tensors = doc["graph"]["input_spec"]["tensor_data"]
    tensors[0]["dtype"] = "float"
    tensors[1]["min_shape"] = [1]
    tensors[2]["max_shape"][1] = 3
    tensors[3]["shape"][0] = "batch3"
    doc["graph"]["output_spec"]["tensor_data"][1]["semantic_path"] = "aux 0"
    doc["graph"]["dynamic_shapes"] = [{"path": "nowhere", "shape": [1]}]
    doc["graph"]["forward_signature"]["parameters"][0]["kind"] = "POSITIONAL"


def _static_zero(doc: Doc) -> None:
    doc["graph"]["dynamic_shapes"] = [
        {"path": "x", "shape": [{"type": "BatchDim", "name": "b", "min": 1, "max": 4, "opt": None}, 0]}
    ]


def _stacked(**shapes: tuple[int, int]) -> Callable[[Doc], None]:
    """Edit stacked_cfg's batch ranges: ``in0=(min, max)``, ``in1=...``, ``out0=...``."""

    def edit(doc: Doc) -> None:
        for key, (low, high) in shapes.items():
            side = "input_spec" if key.startswith("in") else "output_spec"
            entry = doc["graph"][side]["tensor_data"][int(key[-1])]
            entry["min_shape"][0], entry["max_shape"][0] = low, high

    return edit


INVALID_CASES: dict[str, tuple[str, Callable[[Doc], None]]] = {
    "dtype_float32": ("mlp", _set(*T, 0, "dtype", value="float32")),
    "rank": ("text", _set(*T, 1, "max_shape", value=[8])),
    "min_above_max": ("text", _set(*T, 0, "min_shape", 1, value=200)),
    "static_axis": ("mlp", _edits(_set(*T, 0, "min_shape", 1, value=8), _set(*T, 0, "max_shape", 1, value=32))),
    "label_index": ("text", _set(*T, 0, "shape", 1, value="dim0")),
    "label_pattern": ("text", _set(*T, 0, "shape", 1, value="seq")),
    "size_zero": ("mlp", _set("graph", "output_spec", "tensor_data", 0, "min_shape", 0, value=0)),
    "size_negative": ("mlp", _set("graph", "output_spec", "tensor_data", 0, "min_shape", 0, value=-1)),
    "size_int32": ("mlp", _set(*T, 0, "max_shape", 0, value=2**31)),
    "dim_int32": ("explicit_dynamic", _set(*D, 0, "shape", 1, "max", value=2**40)),
    "size_float_integral": ("mlp", _set(*T, 0, "max_shape", 0, value=8.0)),
    "size_float": ("mlp", _set(*T, 0, "max_shape", 0, value=8.5)),
    "size_bool": ("mlp", _set(*T, 0, "max_shape", 0, value=True)),
    "dim_min_max": ("explicit_dynamic", _each_definition("shape", 1, "min", value=256)),
    "dim_opt": ("explicit_dynamic", _each_definition("shape", 0, "opt", value=64)),
    "dim_min_zero": ("explicit_dynamic", _set(*D, 0, "shape", 0, "min", value=0)),
    "static_negative": ("explicit_dynamic", _set(*D, 0, "shape", 1, value=-1)),
    "shared_dim_opt": ("explicit_dynamic", _set(*D, 1, "shape", 1, "opt", value=64)),
    "shared_dim_type": ("explicit_dynamic", _set(*D, 1, "shape", 1, "type", value="BatchDim")),
    "batch_dim_range": (
        "explicit_dynamic",
        _edits(_set(*D, 1, "shape", 0, "name", value="batch2"), _set(*D, 1, "shape", 0, "max", value=16),
               _set(*D, 1, "shape", 0, "opt", value=None)),
    ),
    "definition_rank": ("explicit_dynamic", _append(*D, 0, "shape", value=lambda doc: 16)),
    "definition_path_unknown": ("explicit_dynamic", _set(*D, 0, "path", value="inputs_ids")),
    "definition_path_short": ("explicit_dynamic", _set(*D, 0, "path", value=["input_ids"])),
    "definition_path_index": ("explicit_dynamic", _set(*D, 0, "path", value=["input_ids", 0])),
    "definition_twice": ("explicit_dynamic", _append(*D, value=lambda doc: copy.deepcopy(_at(doc, *D, 0)))),
    "not_proportional": ("stacked_cfg", _set(*T, 1, "max_shape", 0, value=5)),
    "declared_disagree": (
        "stacked_cfg",
        _edits(_set(*T, 0, "batch_axis_multipliers", value={"0": 2}), _set(*T, 1, "batch_axis_multipliers",
               value={"0": 1}), _stacked(in0=(4, 16))),
    ),
    "multiplier_not_batch": ("stacked_cfg", _set(*T, 0, "batch_axis_multipliers", value={"1": 2})),
    "multiplier_not_dividing": ("stacked_cfg", _set(*T, 0, "batch_axis_multipliers", value={"0": 3})),
    "multiplier_zero": ("stacked_cfg", _set(*T, 0, "batch_axis_multipliers", value={"0": 0})),
    "input_names_collide": ("nested_dict", _set(*T, 4, "semantic_path", value=["extras", "pair", "0"])),
    "output_names_collide": ("two_outputs", _set("graph", "output_spec", "tensor_data", 1, "semantic_path",
                                                 value="0")),
    "input_not_a_parameter": ("nested_dict", _set(*T, 1, "semantic_path", value=["extra", "mask"])),
    "parameter_twice": ("mlp", _append("graph", "forward_signature", "parameters",
                                        value=lambda doc: dict(doc["graph"]["forward_signature"]["parameters"][0]))),
    "unknown_key": ("explicit_dynamic", _rename_dynamic_shapes),
    "tune_report": ("tune_report", _tune_report_edits),
    "many_errors": ("nested_dict", _many_errors),
    "rank_one_error": ("mlp", _set(*T, 0, "max_shape", value=[8])),
}
#: Edited documents tests/specs/test_schema.py expects to stay valid.
VALID_CASES: dict[str, tuple[str, Callable[[Doc], None]]] = {
    "tune_report_extras": ("tune_report", _tune_report_extras),
    "optional_parts": ("mlp", _strip_optional),
    "post_input_spec": ("mlp", lambda doc: doc["graph"].update(post_input_spec=copy.deepcopy(
        doc["graph"]["input_spec"]))),
    "static_zero": ("mlp", _static_zero),
    "complex64": ("mlp", _set(*T, 0, "dtype", value="torch.complex64")),
    "batch_dim_other_name": (
        "explicit_dynamic",
        _edits(_set(*D, 1, "shape", 0, "name", value="batch2"), _set(*D, 1, "shape", 0, "max", value=32),
               _set(*D, 1, "shape", 0, "opt", value=8)),
    ),
    "proportional_inferred": ("stacked_cfg", _stacked(in0=(3, 12), out0=(3, 12))),
    "proportional_assumed": ("stacked_cfg", _stacked(in0=(2, 6), in1=(3, 9), out0=(3, 12))),
    "declared_agree": (
        "stacked_cfg",
        _edits(_set(*T, 0, "batch_axis_multipliers", value={"0": 2}), _set(*T, 1, "batch_axis_multipliers",
               value={"0": 1})),
    ),
}


# --------------------------------------------------------------------------------------------------------------------
# Helpers: the two paths, side by side
# --------------------------------------------------------------------------------------------------------------------
@contextmanager
def reference_only() -> Iterator[None]:
    """Switch the fast path off (generator.specs.documents' own switch; jsonschema_rs itself is untouched)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_schema, "FAST_VALIDATOR_MODULE", None)
        assert json_schema.fast_validator(GRAPHSPEC_SCHEMA) is None
        yield


def outcome(document: Any) -> tuple[str, Any]:
    """What validate_document says, as plain data: every problem, or every graph with its assumptions."""
    try:
        loaded = validate_document(document, "spec.json")
    except GenRepoError as error:
        return "invalid", [(p.file, p.pointer, p.message) for p in error.problems]
    return "valid", [(g.pointer, g.module_name, g.graph.to_dict(), g.assumptions) for g in loaded]


def assert_paths_agree(document: Any) -> tuple[str, Any]:
    fast = outcome(copy.deepcopy(document))
    with reference_only():
        reference = outcome(copy.deepcopy(document))
    assert fast == reference
    return fast


def schema_for(document: Any) -> str:
    return TUNE_REPORT_SCHEMA if isinstance(document, dict) and "modules" in document else GRAPHSPEC_SCHEMA


def assert_validators_agree(document: Any, schema_file: str | None = None) -> bool:
    """jsonschema_rs and jsonschema: same validity and the same error pointers (with multiplicity)."""
    schema_file = schema_file or schema_for(document)
    fast = json_schema.fast_validator(schema_file)
    reference = json_schema.schema_validator(schema_file)
    assert fast is not None
    fast_pointers = sorted(json_pointer(e.instance_path) for e in fast.iter_errors(document))
    reference_pointers = sorted(json_pointer(e.absolute_path) for e in reference.iter_errors(document))
    assert fast.is_valid(document) == reference.is_valid(document) == (not reference_pointers)
    assert fast_pointers == reference_pointers
    return not reference_pointers


def check_everything(document: Doc) -> tuple[str, Any]:
    assert_validators_agree(document)
    return assert_paths_agree(document)


@pytest.fixture
def load(aitune_fixture_dir: Path) -> Callable[[str], Doc]:
    def _load(name: str) -> Doc:
        file = "tune_report.json" if name == "tune_report" else f"{name}.graphspec.json"
        data: Doc = json.loads((aitune_fixture_dir / file).read_text())
        return data

    return _load


# --------------------------------------------------------------------------------------------------------------------
# Fixtures, examples and the documents of tests/specs/test_schema.py
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*FIXTURES, "tune_report"])
def test_fixtures_take_the_fast_path_and_agree(load: Callable[[str], Doc], name: str) -> None:
    document = load(name)
    for variant in ([document] if name == "tune_report" else [document, document["graph"]]):
        assert check_everything(variant)[0] == "valid"
        # The fast verdicts really answer for a valid document (no fallback taken).
        schema_file = schema_for(variant)
        assert json_schema.fast_schema_valid(variant, schema_file)


def test_example_specs_and_manifest_agree(examples_dir: Path) -> None:
    specs = sorted((examples_dir / "specs").glob("*.graphspec.json"))
    assert specs
    for spec in specs:
        assert check_everything(json.loads(spec.read_text()))[0] == "valid"
    manifest = yaml.safe_load((examples_dir / "gen-repo.yaml").read_text())
    assert assert_validators_agree(manifest, "manifest.schema.json")
    manifest["models"][0]["unknown"] = 1
    manifest["models"][1]["name"] = 7
    assert not assert_validators_agree(manifest, "manifest.schema.json")
    fast = json_schema.schema_problems(manifest, "manifest.schema.json", "m.yaml")
    with reference_only():
        assert json_schema.schema_problems(manifest, "manifest.schema.json", "m.yaml") == fast != []


@pytest.mark.parametrize("case", sorted(INVALID_CASES))
def test_invalid_documents_of_the_schema_tests_agree(load: Callable[[str], Doc], case: str) -> None:
    fixture, edit = INVALID_CASES[case]
    document = load(fixture)
    edit(document)
    status, problems = check_everything(document)
    assert status == "invalid" and problems


@pytest.mark.parametrize("case", sorted(VALID_CASES))
def test_valid_edits_of_the_schema_tests_agree(load: Callable[[str], Doc], case: str) -> None:
    fixture, edit = VALID_CASES[case]
    document = load(fixture)
    edit(document)
    assert check_everything(document)[0] == "valid"


# --------------------------------------------------------------------------------------------------------------------
# Random documents
# --------------------------------------------------------------------------------------------------------------------
@HYPOTHESIS
@given(graph_documents(), st.sampled_from(["bare", "fixture", "tune_report"]))
def test_random_valid_documents_agree(graph: Doc, form: str) -> None:
    if form == "bare":
        document = graph
    elif form == "fixture":
        document = {"aitune_version": "0.6.0", "graph": graph, "expected": {}}
    else:
        entry = {k: v for k, v in graph.items() if k not in {"type", "name"}}
        document = {"schema_version": 4, "modules": [{"module_name": "m", "graphs": [{"graph_name": "0", **entry}]}]}
    assert check_everything(document)[0] == "valid"


@HYPOTHESIS
@given(invalid_graph_documents())
def test_random_invalid_documents_agree(case: tuple[Doc, list[tuple[str, str, str]]]) -> None:
    document, expected = case
    status, problems = check_everything(document)
    assert status == "invalid"
    pointers = {pointer for _, pointer, _ in problems}
    assert {pointer for _, pointer, _ in expected} <= pointers


def _containers(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Path of every list inside ``value``."""
    if isinstance(value, list):
        yield path
        for index, item in enumerate(value):
            yield from _containers(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _containers(item, (*path, key))


@HYPOTHESIS
@given(graph_documents(), st.data())
def test_a_tuple_where_an_array_goes_is_judged_like_jsonschema(graph: Doc, data: st.DataObject) -> None:
    # jsonschema_rs accepts a tuple as an array, jsonschema does not: the fast path must not vouch for it.
    document = {"graph": graph}
    paths = list(_containers(document))
    path = data.draw(st.sampled_from(paths))
    parent = _at(document, *path[:-1])
    parent[path[-1]] = tuple(parent[path[-1]])
    assert assert_paths_agree(document)[0] == "invalid"


# --------------------------------------------------------------------------------------------------------------------
# Where the two validators differ, the reference wins
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [datetime.date(2026, 1, 1), {1, 2}, b"x", "\ud800", ("a", "b")],
    ids=["date", "set", "bytes", "lone_surrogate", "tuple"],
)
def test_non_json_values_are_judged_by_the_reference(load: Callable[[str], Doc], value: Any) -> None:
    for path in (("graph", "input_spec", "tensor_data", 0, "dtype"), ("graph", "name"),
                 ("graph", "input_spec", "tensor_data", 0, "semantic_path")):
        document = load("mlp")
        _at(document, *path[:-1])[path[-1]] = value
        if not isinstance(value, str):  # a lone surrogate is still a str: valid for both where a string goes
            assert not json_schema.fast_schema_valid(document, GRAPHSPEC_SCHEMA)
        assert_paths_agree(document)
    document = load("mlp")
    document["graph"][1] = "int key"  # json never makes one; YAML can
    assert assert_paths_agree(document)[0] == "invalid"


def test_yaml_pairs_make_tuples_and_agree(tmp_path: Path, load: Callable[[str], Doc]) -> None:
    document = load("mlp")
    text = yaml.safe_dump(document).replace("other_data: []", "other_data: !!pairs [{a: 1}]", 1)
    parsed = yaml.safe_load(text)
    assert parsed["graph"]["input_spec"]["other_data"] == [("a", 1)]
    assert assert_paths_agree(parsed)[0] == "invalid"


def test_a_final_newline_fails_a_pattern_in_both_validators(load: Callable[[str], Doc]) -> None:
    # Python's re lets "$" match before a final newline; ECMA-262 (JSON Schema's dialect, jsonschema_rs) does not.
    # The reference reads patterns as ECMA-262 too: "torch.float32" and a newline is no dtype for either.
    document = load("mlp")
    document["graph"]["input_spec"]["tensor_data"][0]["dtype"] = "torch.float32\n"
    assert not json_schema.fast_validator(GRAPHSPEC_SCHEMA).is_valid(document)
    assert not json_schema.schema_validator(GRAPHSPEC_SCHEMA).is_valid(document)
    assert assert_paths_agree(document)[0] == "invalid"


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


SCHEMA_PATTERNS = sorted({p for name in SCHEMAS for p in _patterns(json.loads(
    (Path(json_schema.__file__).resolve().parents[2] / "schemas" / name).read_text()))})


@pytest.mark.parametrize("pattern", SCHEMA_PATTERNS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_schema_pattern_means_the_same_to_both_validators(pattern: str, data: st.DataObject) -> None:
    """Strings the pattern accepts, with a final newline or a control character around them: one verdict."""
    import jsonschema_rs

    schema = {"type": "string", "pattern": pattern}
    fast = jsonschema_rs.Draft202012Validator(schema)
    reference = json_schema._validator_class(False)(schema)
    text = data.draw(st.from_regex(json_schema.ecma_pattern(pattern), fullmatch=True))
    suffix = data.draw(st.sampled_from(["", "\n", "\r", "\x00", " ", "\n\n"]))
    for candidate in (text, text + suffix, suffix + text):
        assert fast.is_valid(candidate) == reference.is_valid(candidate), repr(candidate)
    assert reference.is_valid(text) and not reference.is_valid(text + "\n")


def test_deep_nesting_in_free_fields_is_safe(load: Callable[[str], Doc]) -> None:
    document = load("mlp")
    deep: list[Any] = []
    for _ in range(200_000):
        deep = [deep]
    document["expected"] = {"deep": deep}
    assert outcome(document)[0] == "valid"


def test_schemas_without_ref_cycles_take_the_fast_path() -> None:
    schemas = json_schema._schema_documents()
    for schema_file in SCHEMAS:
        assert json_schema.fast_validator(schema_file) is not None, schema_file
    assert not any(json_schema.has_ref_cycle(schema_id, schemas) for schema_id in schemas)
    cyclic = {"urn:a": {"$ref": "#/$defs/node", "$defs": {"node": {"items": {"$ref": "#/$defs/node"}}}}}
    assert json_schema.has_ref_cycle("urn:a", cyclic)
    across = {
        "urn:a": {"$ref": "urn:b#/$defs/x"},
        "urn:b": {"$defs": {"x": {"properties": {"y": {"$ref": "urn:a"}}}}},
    }
    assert json_schema.has_ref_cycle("urn:a", across)
    assert json_schema.has_ref_cycle("urn:a", {"urn:a": {"$ref": "https://elsewhere.example/x.json"}})


# --------------------------------------------------------------------------------------------------------------------
# Fallback
# --------------------------------------------------------------------------------------------------------------------
def test_fallback_without_jsonschema_rs(monkeypatch: pytest.MonkeyPatch, load: Callable[[str], Doc]) -> None:
    valid = load("nested_dict")
    invalid = load("nested_dict")
    _many_errors(invalid)
    expected = [outcome(valid), outcome(invalid)]
    monkeypatch.setattr(json_schema, "FAST_VALIDATOR_MODULE", None)
    assert json_schema.fast_validator(GRAPHSPEC_SCHEMA) is None
    assert not json_schema.fast_schema_valid(valid, GRAPHSPEC_SCHEMA)
    assert [outcome(valid), outcome(invalid)] == expected
    assert expected[1][0] == "invalid" and len(expected[1][1]) == 6
