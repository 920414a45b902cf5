"""GraphSpec semantics against AITune's own results (the fixtures' ``expected``), plus property-based invariants."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.errors import GenRepoError, SpecError
from generator.specs.graphspec import GraphSpec, infer_batch_multipliers
from generator.specs.paths import Locator, path_from_json
from generator.specs.sample_metadata import ForwardParameter, ForwardSignature, SampleMetadata
from generator.specs.schema import validate_document
from generator.specs.tensor_spec import BatchDim, DynamicDim, TensorSpec, dim_problems
from tests.graphspec_strategies import graph_documents, invalid_graph_documents
from tests.manifest_helpers import FIXTURES
from tests.requirements import missing, require_module


def _fixture(directory: Path, name: str) -> dict[str, Any]:
    return json.loads((directory / f"{name}.graphspec.json").read_text())


def _graph(directory: Path, name: str) -> GraphSpec:
    graph = GraphSpec.from_dict(_fixture(directory, name)["graph"])
    infer_batch_multipliers(graph)
    return graph


def test_fixture_list_is_complete(aitune_fixture_dir: Path) -> None:
    on_disk = sorted(p.name.removesuffix(".graphspec.json") for p in aitune_fixture_dir.glob("*.graphspec.json"))
    assert on_disk == FIXTURES


def test_fixture_copy_matches_shared(aitune_fixture_dir: Path) -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "aitune"
    copy_dir = Path(__file__).resolve().parents[1] / "data" / "aitune"
    if not shared.is_dir():
        raise missing("shared_fixtures", f"no {shared} next to this checkout")
    for path in shared.iterdir():
        assert (copy_dir / path.name).read_bytes() == path.read_bytes(), f"tests/data/aitune/{path.name} is stale"


# --------------------------------------------------------------------------------------------------------------------
# AITune oracles
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FIXTURES)
def test_graph_level_values_equal_aitune(aitune_fixture_dir: Path, name: str) -> None:
    expected = _fixture(aitune_fixture_dir, name)["expected"]
    graph = _graph(aitune_fixture_dir, name)
    assert graph.get_max_batch_size() == expected["max_batch_size"]
    assert graph.get_max_batch_size(normalized=True) == expected["max_batch_size_normalized"]
    assert graph.get_min_batch_size() == expected["min_batch_size"]
    assert any(s.has_batch_axis() for s in graph.input_spec.tensor_specs) == expected["input_spec_has_batch_axis"]
    assert (
        any(s.has_dynamic_axis() or s.has_batch_axis() for s in graph.input_spec.tensor_specs)
        == expected["input_spec_detected_dynamic_axis"]
    )


@pytest.mark.parametrize("name", FIXTURES)
def test_every_input_equals_aitune(aitune_fixture_dir: Path, name: str) -> None:
    expected = _fixture(aitune_fixture_dir, name)["expected"]
    graph = _graph(aitune_fixture_dir, name)
    assert len(graph.input_spec.tensor_data) == len(expected["inputs"])
    names = graph.input_tensor_names()
    for (locator, spec), tensor_name, want in zip(graph.input_spec.tensor_data, names, expected["inputs"], strict=True):
        assert locator.path == path_from_json(want["semantic_path"])
        assert locator.display_path == want["access_path"]
        assert tensor_name == want["tensor_name"]
        assert (graph.get_shape_definition(locator) is not None) == want["has_explicit_definition"]
        min_shape, opt_shape, max_shape = graph.get_effective_input_shapes(locator, spec)
        assert min_shape == want["effective_min_shape"]
        assert opt_shape == want["effective_opt_shape"]
        assert max_shape == want["effective_max_shape"]
        assert {str(a): m for a, m in spec.get_batch_axis_multipliers().items()} == want["batch_axis_multipliers"]
        assert spec.has_batch_axis() == want["has_batch_axis"]
        assert spec.has_dynamic_axis() == want["has_dynamic_axis"]
        assert spec.get_max_batch_size() == want["tensor_spec_max_batch_size"]
        assert spec.get_min_batch_size() == want["tensor_spec_min_batch_size"]
        # Looking up by bare path works the same as by Locator.
        assert graph.get_effective_input_shapes(locator.path, spec) == (min_shape, opt_shape, max_shape)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_output_equals_aitune(aitune_fixture_dir: Path, name: str) -> None:
    expected = _fixture(aitune_fixture_dir, name)["expected"]
    graph = _graph(aitune_fixture_dir, name)
    names = graph.output_tensor_names()
    for (locator, spec), tensor_name, want in zip(
        graph.output_spec.tensor_data, names, expected["outputs"], strict=True
    ):
        assert tensor_name == want["tensor_name"]
        assert locator.display_path == want["access_path"]
        assert {str(a): m for a, m in spec.get_batch_axis_multipliers().items()} == want["batch_axis_multipliers"]


@pytest.mark.parametrize("name", FIXTURES)
def test_json_form_round_trips_unchanged(aitune_fixture_dir: Path, name: str) -> None:
    original = _fixture(aitune_fixture_dir, name)["graph"]
    graph = GraphSpec.from_dict(original)
    assert graph.to_dict() == original
    assert GraphSpec.from_dict(graph.to_dict()) == graph


def test_stacked_cfg_normalized_needs_multipliers(aitune_fixture_dir: Path) -> None:
    graph = GraphSpec.from_dict(_fixture(aitune_fixture_dir, "stacked_cfg")["graph"])
    # Without multipliers (AITune's JSON has none) 1 is assumed, so normalized equals raw ...
    assert graph.get_max_batch_size(normalized=True) == 8
    notes = infer_batch_multipliers(graph)
    # ... and inferring them from the ranges recovers AITune's value and says so.
    assert graph.get_max_batch_size(normalized=True) == 4
    assert any("input_latents" in n and "multiplier 2" in n for n in notes)
    assert graph.assumptions == notes


def test_declared_multiplier_extension_is_used(aitune_fixture_dir: Path) -> None:
    data = _fixture(aitune_fixture_dir, "stacked_cfg")["graph"]
    data["input_spec"]["tensor_data"][0]["batch_axis_multipliers"] = {"0": 2}
    graph = GraphSpec.from_dict(data)
    assert graph.get_max_batch_size(normalized=True) == 4
    assert graph.to_dict()["input_spec"]["tensor_data"][0]["batch_axis_multipliers"] == {"0": 2}


def test_uninferable_multiplier_is_assumed_one_with_a_note() -> None:
    graph = GraphSpec.from_dict(_doc_with_ranges([(2, 6), (3, 9)]))
    notes = infer_batch_multipliers(graph)
    assert graph.input_spec.tensor_specs[1].get_batch_axis_multipliers() == {0: 1}
    assert "assumed 1" in notes[0]
    # The narrowest range 2..6 could itself be a stacked batch (2 x 1..3): that is an assumption too.
    assert len(notes) == 2 and "narrowest batch range 2..6" in notes[1] and "batch_axis_multipliers" in notes[1]


def test_narrowest_range_from_one_is_no_assumption() -> None:
    graph = GraphSpec.from_dict(_doc_with_ranges([(1, 4), (2, 8)]))
    notes = infer_batch_multipliers(graph)
    assert [spec.get_batch_axis_multipliers() for spec in graph.input_spec.tensor_specs] == [{0: 1}, {0: 2}]
    assert len(notes) == 1 and "multiplier 2 inferred" in notes[0]


def test_every_tensor_stacked_is_reported_as_an_assumption(aitune_fixture_dir: Path) -> None:
    # All tensors [2b, ...] (guidance without a [b] tensor): nothing anchors the batch, so 1 is an assumption.
    data = _fixture(aitune_fixture_dir, "stacked_cfg")["graph"]
    del data["input_spec"]["tensor_data"][1]
    graph = GraphSpec.from_dict(data)
    notes = infer_batch_multipliers(graph)
    assert graph.get_max_batch_size(normalized=True) == 8
    assert len(notes) == 1 and "'input_latents', 'output'" in notes[0] and "2..8" in notes[0]


def _doc_with_ranges(ranges: list[tuple[int, int]]) -> dict[str, Any]:
    tensors = [
        {"access_path": f"in{i}", "semantic_path": f"in{i}", "shape": ["batch0"], "min_shape": [lo],
         "max_shape": [hi], "dtype": "torch.float32"}
        for i, (lo, hi) in enumerate(ranges)
    ]
    return {
        "type": "GraphSpec",
        "name": "0",
        "input_spec": {"tensor_data": tensors, "other_data": [], "strict": True, "llm_phase": None},
        "output_spec": {"tensor_data": [], "other_data": [], "strict": True, "llm_phase": None},
        "forward_signature": {"parameters": [{"name": f"in{i}", "kind": "POSITIONAL_OR_KEYWORD",
                                              "has_default": False} for i in range(len(ranges))]},
        "dynamic_shapes": [],
    }


def test_tune_report_graph_without_signature_gets_one_from_inputs(aitune_fixture_dir: Path) -> None:
    report = json.loads((aitune_fixture_dir / "tune_report.json").read_text())
    graph = GraphSpec.from_dict(report["modules"][2]["graphs"][0])
    assert graph.name == "0"
    assert [p.name for p in graph.forward_signature.parameters] == ["x", "extras"]


# --------------------------------------------------------------------------------------------------------------------
# make_batch, update_shapes_seen, update_max_batch_size
# --------------------------------------------------------------------------------------------------------------------
def _nested_inputs(lib: str, batch: int) -> dict[str, Any]:
    if lib == "torch":
        torch = require_module("torch")
        x = torch.arange(batch * 5 * 16, dtype=torch.float32).reshape(batch, 5, 16)
        mask = torch.ones(batch, 5, dtype=torch.bool)
        scale = torch.ones(batch, 1)
        pair = (torch.zeros(batch, 16), torch.ones(batch, 16))
    else:
        x = np.arange(batch * 5 * 16, dtype=np.float32).reshape(batch, 5, 16)
        mask = np.ones((batch, 5), dtype=bool)
        scale = np.ones((batch, 1), dtype=np.float32)
        pair = (np.zeros((batch, 16), np.float32), np.ones((batch, 16), np.float32))
    return {"x": x, "extras": {"mask": mask, "scale": scale, "pair": pair, "mode": "sum"}}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("target", [1, 3, 8])
def test_make_batch_resizes_every_batch_axis(aitune_fixture_dir: Path, lib: str, target: int) -> None:
    graph = _graph(aitune_fixture_dir, "nested_dict")
    inputs = _nested_inputs(lib, 2)
    args, kwargs = graph.make_batch((inputs["x"],), {"extras": inputs["extras"]}, target)
    bound = graph.forward_signature.normalize(args, kwargs).arguments
    x, extras = bound["x"], bound["extras"]
    assert tuple(x.shape) == (target, 5, 16)
    assert tuple(extras["mask"].shape) == (target, 5)
    assert tuple(extras["scale"].shape) == (target, 1)
    assert isinstance(extras["pair"], tuple)
    assert [tuple(t.shape) for t in extras["pair"]] == [(target, 16), (target, 16)]
    assert extras["mode"] == "sum"
    assert type(x) is type(inputs["x"])
    # Smaller: the first rows; larger: the first row repeated.
    if target <= 2:
        assert np.array_equal(np.asarray(x), np.asarray(inputs["x"])[:target])
    else:
        assert all(np.array_equal(np.asarray(x)[i], np.asarray(inputs["x"])[0]) for i in range(target))
    # The caller's inputs are left alone.
    assert tuple(inputs["x"].shape) == (2, 5, 16)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_make_batch_uses_batch_multipliers(aitune_fixture_dir: Path, lib: str) -> None:
    graph = _graph(aitune_fixture_dir, "stacked_cfg")
    if lib == "torch":
        torch = require_module("torch")
        latents, timestep = torch.zeros(4, 4, 8, 8), torch.zeros(2)
    else:
        latents, timestep = np.zeros((4, 4, 8, 8), np.float32), np.zeros(2, np.float32)
    args, kwargs = graph.make_batch((latents,), {"timestep": timestep}, 3)
    bound = graph.forward_signature.normalize(args, kwargs).arguments
    assert tuple(bound["latents"].shape) == (6, 4, 8, 8)
    assert tuple(bound["timestep"].shape) == (3,)


def test_update_shapes_seen_detects_batch_and_dynamic_axes() -> None:
    def observe(batch: int, seq: int) -> SampleMetadata:
        return SampleMetadata.from_inputs(
            {"ids": np.zeros((batch, seq), np.int64), "cond": np.zeros((2 * batch, 7), np.float32)},
            strict=True,
            batch_size=batch,
        )

    def outputs(batch: int) -> SampleMetadata:
        return SampleMetadata.from_outputs(np.zeros((batch, 4), np.float32), strict=True, batch_size=batch)

    signature = ForwardSignature((ForwardParameter("ids"), ForwardParameter("cond")))
    graph = GraphSpec("0", observe(1, 8), outputs(1), signature)
    for batch, seq in ((4, 16), (2, 128)):
        graph.update_shapes_seen(observe(batch, seq), outputs(batch))
    ids, cond = graph.input_spec.tensor_specs
    assert ids.shape == ["batch0", "dim1"]
    assert (ids.min_shape, ids.max_shape) == ([1, 8], [4, 128])
    assert cond.shape == ["batch0", 7]
    assert cond.get_batch_axis_multipliers() == {0: 2}
    assert graph.output_spec.tensor_specs[0].shape == ["batch0", 4]
    assert graph.get_max_batch_size() == 8
    assert graph.get_max_batch_size(normalized=True) == 4
    assert graph.get_min_batch_size() == 1
    assert graph.input_tensor_names() == ["input_ids", "input_cond"]


def test_update_shapes_seen_refuses_a_different_structure() -> None:
    one = SampleMetadata.from_inputs({"x": np.zeros((1, 3))}, batch_size=1)
    other = SampleMetadata.from_inputs({"y": np.zeros((1, 3))}, batch_size=1)
    with pytest.raises(SpecError):
        one.update_shapes_seen(other)
    with pytest.raises(SpecError, match="same rank"):
        TensorSpec([1, 3], [1, 3], [1, 3], "torch.float32").update_shapes_seen(
            TensorSpec([1], [1], [1], "torch.float32")
        )


def test_update_shapes_seen_on_a_json_read_spec_keeps_batch_labels(aitune_fixture_dir: Path) -> None:
    graph = GraphSpec.from_dict(_fixture(aitune_fixture_dir, "mlp")["graph"])
    inputs = SampleMetadata.from_inputs({"x": np.zeros((16, 16), np.float32)}, strict=True, batch_size=16)
    outputs = SampleMetadata.from_outputs(np.zeros((16, 4), np.float32), strict=True, batch_size=16)
    graph.update_shapes_seen(inputs, outputs)
    spec = graph.input_spec.tensor_specs[0]
    assert spec.shape == ["batch0", 16]
    assert (spec.min_shape, spec.max_shape) == ([1, 16], [16, 16])
    assert graph.get_max_batch_size() == 16


@pytest.mark.parametrize("name", ["mlp", "stacked_cfg", "nested_dict"])
def test_update_max_batch_size_widens_to_the_new_maximum(aitune_fixture_dir: Path, name: str) -> None:
    graph = _graph(aitune_fixture_dir, name)
    before_min = graph.get_min_batch_size()
    if name == "mlp":
        sample: tuple[tuple, dict] = ((np.zeros((2, 16), np.float32),), {})
    elif name == "stacked_cfg":
        sample = ((np.zeros((4, 4, 8, 8), np.float32), np.zeros(2, np.float32)), {})
    else:
        inputs = _nested_inputs("numpy", 2)
        sample = ((inputs["x"], inputs["extras"]), {})
    graph.update_max_batch_size(sample, 32)
    assert graph.get_max_batch_size(normalized=True) == 32
    assert graph.get_min_batch_size() == before_min
    for spec in graph.input_spec.tensor_specs:
        for axis, multiplier in spec.get_batch_axis_multipliers().items():
            assert spec.max_shape[axis] == 32 * multiplier


def test_str_and_repr(aitune_fixture_dir: Path) -> None:
    graph = _graph(aitune_fixture_dir, "nested_dict")
    text = str(graph)
    assert text.startswith("Name=0\nInput_spec:\n")
    assert "Output_spec:" in text
    assert 'extras["mask"]' in text and "dtype=torch.bool" in text
    assert "sum" in text  # other_data is described
    assert repr(graph) == text
    spec = graph.input_spec.tensor_specs[0]
    assert str(spec) == "shape=[batch0, dim1, 16]"
    assert repr(spec) == "shape=[batch0, dim1, 16] dtype=torch.float32"
    assert str(Locator(("extras", "pair", 0))) == 'extras["pair"][0]'
    assert str(Locator((), is_output=True)) == "output"


def test_explicit_dims_raise_spec_error_like_aitune() -> None:
    assert BatchDim("b", 1, 4, 2).to_dict() == {"type": "BatchDim", "name": "b", "min": 1, "max": 4, "opt": 2}
    with pytest.raises(SpecError, match="min < max"):
        DynamicDim("seq", 8, 8)
    with pytest.raises(SpecError, match="min <= opt <= max"):
        DynamicDim("seq", 1, 8, 9)
    with pytest.raises(SpecError, match="positive"):
        BatchDim("b", 0, 8)
    with pytest.raises(SpecError, match="non-empty"):
        DynamicDim("", 1, 8)


# --------------------------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------------------------
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(graph_documents())
def test_property_valid_specs_keep_the_invariants(data: dict[str, Any]) -> None:
    loaded = validate_document({"graph": copy.deepcopy(data)}, "generated.json")
    graph = loaded[0].graph
    for locator, spec in graph.input_spec.tensor_data:
        min_shape, opt_shape, max_shape = graph.get_effective_input_shapes(locator, spec)
        assert len(min_shape) == len(opt_shape) == len(max_shape) == spec.rank
        assert all(lo <= opt <= hi for lo, opt, hi in zip(min_shape, opt_shape, max_shape, strict=True))
    raw = list(graph.iter_batch_size_ranges())
    normalized = list(graph.iter_batch_size_ranges(normalized=True))
    max_raw, max_norm = graph.get_max_batch_size(), graph.get_max_batch_size(normalized=True)
    min_batch = graph.get_min_batch_size()
    assert (min_batch is None) == (not raw)
    for lo, hi in raw:
        assert min_batch is not None and min_batch <= lo <= hi <= max_raw
    for lo, hi in normalized:
        assert 1 <= lo <= hi <= max_norm <= max_raw
    # Every batch size of a tensor's normalized range fits every batch axis of that tensor after make_batch.
    inputs = {locator.root_name: np.zeros([1] * spec.rank) for locator, spec in graph.input_spec.tensor_data}
    for locator, spec in graph.input_spec.tensor_data:
        if graph.get_shape_definition(locator) is not None:
            continue
        lows_highs = [
            (spec.min_shape[a] // k, spec.max_shape[a] // k) for a, k in spec.get_batch_axis_multipliers().items()
        ]
        for lo, hi in lows_highs:
            for batch in {lo, hi}:
                resized = graph.input_spec.make_batch(inputs, batch)
                shape = resized[locator.root_name].shape
                for axis, k in spec.get_batch_axis_multipliers().items():
                    assert shape[axis] == k * batch
                    assert spec.min_shape[axis] <= shape[axis] <= spec.max_shape[axis]


@PROPERTY_SETTINGS
@given(graph_documents())
def test_property_round_trip_is_identity(data: dict[str, Any]) -> None:
    graph = GraphSpec.from_dict(data)
    assert graph.to_dict() == data
    assert GraphSpec.from_dict(graph.to_dict()) == graph
    assert GraphSpec.from_dict(json.loads(json.dumps(graph.to_dict()))) == graph


@PROPERTY_SETTINGS
@given(invalid_graph_documents())
def test_property_invalid_specs_name_every_violation(case: tuple[dict[str, Any], list[tuple[str, str, str]]]) -> None:
    document, expected = case
    with pytest.raises(GenRepoError) as info:  # and no other exception type
        validate_document(document, "generated.json")
    problems = info.value.problems
    assert all(p.file == "generated.json" for p in problems)
    for kind, pointer, fragment in expected:
        assert any(p.pointer == pointer and fragment in p.message for p in problems), (kind, pointer, problems)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.text(max_size=3), st.integers()),
    st.integers(-3, 10),
    st.integers(-3, 10),
    st.one_of(st.none(), st.integers(-3, 12)),
)
def test_property_dynamic_dim_rules(name: Any, lo: int, hi: int, opt: int | None) -> None:
    problems = dim_problems(name, lo, hi, opt)
    valid = isinstance(name, str) and name != "" and 0 < lo < hi and (opt is None or lo <= opt <= hi)
    assert (problems == []) == valid
    if valid:
        assert DynamicDim(name, lo, hi, opt).to_dict()["max"] == hi
    else:
        with pytest.raises(SpecError) as info:
            DynamicDim(name, lo, hi, opt)
        for problem in problems:
            assert problem in str(info.value)
