"""Linked axes and the shape policy (generator/specs/shape_policy.py), on real AITune recordings and small graphs."""

from __future__ import annotations

import json

from generator.specs.graphspec import GraphSpec, infer_batch_multipliers
from generator.specs.shape_policy import linked_axes, resolve_shapes
from tests.manifest_helpers import AITUNE, REPO, batch_dim, graph, tensor

ZOO_SPECS = REPO / "tests" / "zoo" / "specs"


def _graph(path) -> GraphSpec:
    document = json.loads(path.read_text())
    spec = GraphSpec.from_dict(document["graph"])
    infer_batch_multipliers(spec)
    return spec


def _names(spec: GraphSpec) -> list[str]:
    return spec.input_tensor_names()


def test_partial_explicit_ranges_are_intersected_from_aitune_recording():
    # Recorded by aitune 0.6.0: input_ids/attention_mask declare batch 1..8 (opt 2) and seq 4..32 (opt 16);
    # token_type_ids keeps its recorded 1..4 x 6..20.
    spec = _graph(ZOO_SPECS / "bert_partial_ranges.graphspec.json")
    groups = linked_axes(spec, _names(spec))
    assert [(g.kind, [(m.input, m.axis) for m in g.members]) for g in groups] == [
        ("batch", [(0, 0), (1, 0), (2, 0)]),
        ("dim", [(0, 1), (1, 1), (2, 1)]),
    ]
    assert "DynamicDim 'seq'" in groups[1].label and "recorded over 6..20" in groups[1].label
    resolution = resolve_shapes(spec, _names(spec))
    assert set(map(str, resolution.shapes)) == {str(([1, 6], [2, 16], [4, 20]))}
    assert resolution.batch == (1, 2, 4) and resolution.batch_declared and resolution.batch_narrowed
    assert len(resolution.notes) == 2 and not resolution.problems
    # GraphSpec keeps AITune's own answers.
    locator, tensor_spec = spec.input_spec.tensor_data[0]
    assert spec.get_effective_input_shapes(locator, tensor_spec) == ([1, 4], [2, 16], [8, 32])
    assert spec.get_max_batch_size() == 8


def test_widen_gives_recorded_only_tensors_the_declared_range():
    spec = _graph(ZOO_SPECS / "bert_partial_ranges.graphspec.json")
    resolution = resolve_shapes(spec, _names(spec), "widen")
    assert set(map(str, resolution.shapes)) == {str(([1, 4], [2, 16], [8, 32]))}
    assert resolution.batch == (1, 2, 8) and not resolution.batch_narrowed
    assert all(n.startswith("shapes: widen") for n in resolution.notes)


def test_consistent_recordings_change_nothing():
    for name in ("text", "nested_dict", "mlp", "two_outputs"):
        spec = _graph(AITUNE / f"{name}.graphspec.json")
        resolution = resolve_shapes(spec, _names(spec))
        assert not resolution.notes and not resolution.problems, name
        expected = [spec.get_effective_input_shapes(loc, t) for loc, t in spec.input_spec.tensor_data]
        assert list(resolution.shapes) == expected, name


def test_stacked_batch_is_compared_in_batch_units():
    # latents [2b] and timestep [b]: ranges 2..8 and 1..4 agree once divided by their multipliers.
    spec = _graph(AITUNE / "stacked_cfg.graphspec.json")
    resolution = resolve_shapes(spec, _names(spec))
    assert resolution.batch == (1, 4, 4) and not resolution.notes
    (group,) = [g for g in resolution.groups if g.kind == "batch"]
    assert [(m.name, m.multiplier) for m in group.members] == [("input_latents", 2), ("input_timestep", 1)]


def test_two_axes_of_one_tensor_recorded_alike_are_not_linked():
    image = tensor("x", ["batch0", 3, "dim2", "dim3"], [1, 3, 32, 32], [4, 3, 64, 64])
    spec = GraphSpec.from_dict(graph([image], [tensor([], ["batch0", 5], [1, 5], [4, 5])]))
    assert [g.kind for g in linked_axes(spec, _names(spec))] == ["batch"]


def test_disjoint_ranges_are_a_problem():
    declared = {"path": "a", "shape": [batch_dim(1, 8), {"type": "DynamicDim", "name": "s", "min": 40, "max": 64,
                                                          "opt": None}]}
    inputs = [tensor("a", ["batch0", "dim1"], [1, 40], [8, 64]), tensor("b", ["batch0", "dim1"], [1, 40], [8, 64])]
    doc = graph(inputs, [tensor([], ["batch0"], [1], [8])], [declared])
    doc["input_spec"]["tensor_data"][1]["min_shape"] = [1, 40]
    spec = GraphSpec.from_dict(doc)
    # b's recorded axis 1 is 40..64, linked with a's (recorded alike); make a's declaration disjoint from it.
    spec.dynamic_shapes["a"] = (spec.dynamic_shapes["a"][0], type(spec.dynamic_shapes["a"][1])("s", 65, 90, None))
    resolution = resolve_shapes(spec, _names(spec))
    ((index, axis, message),) = resolution.problems
    assert (index, axis) == (0, 1) and "no common range" in message


def test_linked_axes_with_one_range_share_one_opt():
    # token_type_ids declared like the others except for its opt (recorded: opt = max): the opt case must be one call.
    seq = {"type": "DynamicDim", "name": "seq", "min": 6, "max": 20, "opt": 16}
    declared = [{"path": p, "shape": [batch_dim(1, 4, 2), seq]} for p in ("input_ids", "attention_mask")]
    inputs = [tensor(p, ["batch0", "dim1"], [1, 6], [4, 20], "torch.int64")
              for p in ("input_ids", "attention_mask", "token_type_ids")]
    spec = GraphSpec.from_dict(graph(inputs, [tensor([], ["batch0", 32], [1, 32], [4, 32])], declared))
    infer_batch_multipliers(spec)
    resolution = resolve_shapes(spec, _names(spec))
    assert {str(s) for s in resolution.shapes} == {str(([1, 6], [2, 16], [4, 20]))}
    assert resolution.batch == (1, 2, 4)
    assert len(resolution.notes) == 2 and all("so all take opt" in n for n in resolution.notes)
