"""generator.building.export.onnx: real torch -> ONNX exports, checked in onnxruntime against torch."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from torch import nn

from examples.models import make_mlp, make_text
from generator.building.export.exchange import ExportError, OnnxCheckError, constants_from_graph
from generator.building.export.onnx import export_onnx, exporter_order, load_pt2, normalize_dtype, prepare_source_onnx
from generator.building.export.onnx_checks import check_onnx, onnx_io_problems, tolerance_for
from generator.building.reference import make_reference_cases
from generator.errors import GenRepoError
from generator.specs.graphspec import GraphSpec
from tests.build_helpers import GraphTensorPlan, io_from_graph

ROOT = Path(__file__).resolve().parents[3]


def _graph(path: Path) -> GraphSpec:
    return GraphSpec.from_dict(json.loads(path.read_text())["graph"])


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param if d.dim_param else d.dim_value for d in value_info.type.tensor_type.shape.dim]


class Nested(nn.Module):
    """``forward(x, extras={mask, scale, pair: (a, b), mode})`` -> ``{"logits", "aux": (features,)}``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.head = nn.Linear(16, 4)
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, extras: dict) -> dict:
        mask = extras["mask"].unsqueeze(-1).to(x.dtype)
        pooled = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        a, b = extras["pair"]
        h = pooled * extras["scale"] + a - b
        if extras["mode"] == "sum":  # a non-tensor leaf, fixed at export
            h = h + 1.0
        return {"logits": self.head(h), "aux": (self.proj(h),)}


class TwoOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.body = nn.Linear(16, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.relu(self.body(x))
        return self.head(features), features


class IntBool(nn.Module):
    """int64 ids and a bool flag per position -> float scores and an int64 count."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.embed = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values = self.embed(ids) * keep.unsqueeze(-1).to(torch.float32)
        return values.sum(dim=1), keep.to(torch.int64).sum(dim=1)


INT_BOOL_INPUTS = [
    GraphTensorPlan("input_ids", "ids", "int64", (1, 3), (4, 6), (8, 12), 0),
    GraphTensorPlan("input_keep", "keep", "bool", (1, 3), (4, 6), (8, 12), 0),
]
INT_BOOL_OUTPUTS = [
    GraphTensorPlan("output_0", 0, "float32", (1, 4), (8, 4), (8, 4), 0),
    GraphTensorPlan("output_1", 1, "int64", (1,), (8,), (8,), 0),
]


def _export_and_check(module: nn.Module, inputs, outputs, tmp_path: Path, name: str, max_batch_size: int, **kw):
    path = tmp_path / "model.onnx"
    result = export_onnx(module, path, inputs, outputs, **kw)
    cases, _ = make_reference_cases(module, inputs, outputs, model_name=name, max_batch_size=max_batch_size,
                                 forward_signature=kw.get("forward_signature"), constants=kw.get("constants"))
    results = check_onnx(path, inputs, outputs, cases)
    assert results and all(r.ok for r in results)
    assert [r.case for r in results][:: len(outputs)] == ["min", "opt", "max"]
    return result, path


def _check_at_sizes(path: Path, module_fn, feeds_list) -> None:
    """onnxruntime equals torch at shapes the export never saw."""
    session = _session(path)
    for feeds in feeds_list:
        got = session.run(None, feeds)
        want = module_fn(feeds)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_mlp(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    assert inputs[0].name == "input_x" and inputs[0].min_shape == (1, 16) and inputs[0].max_shape == (32, 16)
    model = make_mlp()
    result, path = _export_and_check(model, inputs, outputs, tmp_path, "mlp", 32,
                                     forward_signature=graph.forward_signature)
    assert result.exporter == "dynamo" and not result.notes
    assert result.dynamic_axes == {"input_x": [0]}
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["input_x"]
    assert [o.name for o in proto.graph.output] == ["output"]
    dims = _dims(proto.graph.input[0])
    assert isinstance(dims[0], str) and dims[1] == 16  # batch dynamic, feature static
    with torch.no_grad():
        _check_at_sizes(path, lambda f: [model(torch.from_numpy(f["input_x"])).numpy()],
                        [{"input_x": np.random.default_rng(b).standard_normal((b, 16), dtype=np.float32)}
                         for b in (1, 3, 17, 32)])
    # The feature axis is really static.
    with pytest.raises(InvalidArgument, match=r"dimensions for input: input_x .*\s+index: 1 Got: 15 Expected: 16"):
        _session(path).run(None, {"input_x": np.zeros((2, 15), np.float32)})


def test_the_wrapper_recorded_in_the_file_has_one_name_wherever_the_code_lives(tmp_path: Path) -> None:
    """torch's dynamo exporter writes the wrapper's class path into every node's metadata: it is pinned (an exported
    model's bytes, and the build cache's artifacts, must not change when gen-repo's own modules move)."""
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    result = export_onnx(make_mlp(), tmp_path / "mlp.onnx", inputs, outputs, forward_signature=graph.forward_signature)
    assert result.exporter == "dynamo"
    wrapper = "generator.export.onnx._make_flat_module_class.<locals>._FlatModule"
    recorded = [(p.key, p.value) for n in onnx.load(str(result.path)).graph.node for p in n.metadata_props
                if p.key in ("namespace", "pkg.torch.onnx.class_hierarchy")]
    assert recorded and all(wrapper in value for _, value in recorded)
    assert not any("generator.building" in value for _, value in recorded)


def test_tiny_text_dynamic_batch_and_sequence(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/text.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    assert [p.name for p in inputs] == ["input_input_ids", "input_attention_mask"]
    assert inputs[0].min_shape == (1, 4) and inputs[0].opt_shape == (4, 16) and inputs[0].max_shape == (16, 64)
    model = make_text()
    _, path = _export_and_check(model, inputs, outputs, tmp_path, "text", 16)
    proto = onnx.load(str(path))
    assert [o.name for o in proto.graph.output] == ["output_0", "output_1"]
    assert all(isinstance(d, str) for i in proto.graph.input for d in _dims(i))

    def run_torch(feeds):
        with torch.no_grad():
            out = model(torch.from_numpy(feeds["input_input_ids"]), torch.from_numpy(feeds["input_attention_mask"]))
        return [o.numpy() for o in out]

    rng = np.random.default_rng(0)
    _check_at_sizes(path, run_torch, [
        {"input_input_ids": rng.integers(0, 100, (b, s)), "input_attention_mask": np.ones((b, s), np.int64)}
        for b, s in ((1, 4), (5, 9), (16, 64), (2, 33))
    ])


def test_nested_inputs_and_outputs(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    graph = _graph(aitune_fixture_dir / "nested_dict.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    assert [p.name for p in inputs] == [
        "input_x", "input_extras_mask", "input_extras_scale", "input_extras_pair_0", "input_extras_pair_1"]
    assert [p.name for p in outputs] == ["output_logits", "output_aux_0"]
    constants = constants_from_graph(graph)
    assert constants == {("extras", "mode"): "sum"}
    _, path = _export_and_check(Nested().eval(), inputs, outputs, tmp_path, "nested", 8,
                                forward_signature=graph.forward_signature, constants=constants)
    proto = onnx.load(str(path))
    elem = {i.name: i.type.tensor_type.elem_type for i in proto.graph.input}
    assert elem["input_extras_mask"] == onnx.TensorProto.BOOL
    assert _dims(proto.graph.input[2])[1] == 1  # scale's second axis is static


def test_multi_output_fixture(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    graph = _graph(aitune_fixture_dir / "two_outputs.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    _, path = _export_and_check(TwoOutputs().eval(), inputs, outputs, tmp_path, "two", 16)
    proto = onnx.load(str(path))
    assert [(_dims(o)[1]) for o in proto.graph.output] == [4, 32]


def test_int64_and_bool_inputs(tmp_path: Path) -> None:
    model = IntBool().eval()
    _, path = _export_and_check(model, INT_BOOL_INPUTS, INT_BOOL_OUTPUTS, tmp_path, "intbool", 8)
    session = _session(path)
    ids = np.array([[1, 2, 3, 4, 5]], np.int64)
    keep = np.array([[True, False, True, True, False]])
    scores, count = session.run(None, {"input_ids": ids, "input_keep": keep})
    assert count.dtype == np.int64 and count.tolist() == [3]
    with torch.no_grad():
        np.testing.assert_allclose(scores, model(torch.from_numpy(ids), torch.from_numpy(keep))[0].numpy(), rtol=1e-6)


def test_static_shape_model(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    graph = _graph(aitune_fixture_dir / "static_single_bs.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    assert inputs[0].min_shape == inputs[0].max_shape == (4, 16)
    torch.manual_seed(6)
    model = nn.Linear(16, 4).eval()
    result, path = _export_and_check(model, inputs, outputs, tmp_path, "static", 0,
                                     forward_signature=graph.forward_signature)
    assert result.dynamic_axes == {"input_x": []}
    proto = onnx.load(str(path))
    assert _dims(proto.graph.input[0]) == [4, 16]
    assert _dims(proto.graph.output[0]) == [4, 4]
    with pytest.raises(InvalidArgument, match=r"dimensions for input: input_x .*\s+index: 0 Got: 3 Expected: 4"):
        _session(path).run(None, {"input_x": np.zeros((3, 16), np.float32)})


def test_file_is_self_contained_after_move(tmp_path: Path) -> None:
    """The dynamo exporter's external ``.data`` pitfall: the file alone, elsewhere, still loads and runs."""
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    export_dir = tmp_path / "export"
    result = export_onnx(make_mlp(), export_dir / "model.onnx", inputs, outputs)
    assert sorted(p.name for p in export_dir.iterdir()) == ["model.onnx"]  # no .data, no temp files left
    moved = tmp_path / "elsewhere" / "renamed.onnx"
    moved.parent.mkdir()
    shutil.copy(result.path, moved)
    shutil.rmtree(export_dir)
    proto = onnx.load(str(moved))
    assert all(init.data_location != onnx.TensorProto.EXTERNAL for init in proto.graph.initializer)
    assert onnx_io_problems(moved, inputs, outputs) == []
    out = _session(moved).run(None, {"input_x": np.ones((2, 16), np.float32)})[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, make_mlp()(torch.ones(2, 16)).numpy(), rtol=1e-5, atol=1e-6)


def test_external_data_source_is_inlined(tmp_path: Path) -> None:
    """A source ONNX with external weights is refused by the I/O check, and copied in as one file."""
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    src = tmp_path / "src" / "model.onnx"
    src.parent.mkdir()
    torch.onnx.export(make_mlp(), (torch.randn(2, 16),), str(src), input_names=["input_x"], output_names=["output"],
                      dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), dynamo=True, external_data=True)
    assert (src.parent / "model.onnx.data").exists()  # the pitfall is real
    problems = onnx_io_problems(src, inputs, outputs)
    assert any("external file" in p.message for p in problems)
    target = prepare_source_onnx(src, tmp_path / "repo" / "model.onnx", inputs, outputs)
    shutil.rmtree(src.parent)
    assert onnx_io_problems(target, inputs, outputs) == []
    assert _session(target).run(None, {"input_x": np.ones((3, 16), np.float32)})[0].shape == (3, 4)


def test_source_onnx_mismatching_spec_is_refused(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    src = tmp_path / "other.onnx"
    # Wrong input name, wrong element type, static batch.
    torch.onnx.export(make_mlp().double(), (torch.randn(2, 16, dtype=torch.float64),), str(src),
                      input_names=["features"], output_names=["output"], dynamo=True, external_data=False)
    with pytest.raises(OnnxCheckError) as info:
        prepare_source_onnx(src, tmp_path / "repo" / "model.onnx", inputs, outputs)
    text = str(info.value)
    assert "missing ['input_x']" in text and "unexpected ['features']" in text
    assert "element type float64, the plan expects float32" in text  # the output's dtype
    assert not (tmp_path / "repo" / "model.onnx").exists()
    # Right names, static batch axis: refused because the plan lets the batch vary.
    torch.onnx.export(make_mlp(), (torch.randn(2, 16),), str(src), input_names=["input_x"], output_names=["output"],
                      dynamo=True, external_data=False)
    problems = onnx_io_problems(src, inputs, outputs)
    assert any("axis 0 is fixed to 2, the plan lets it vary 1..32" in p.message for p in problems)
    # Wrong rank.
    wrong_rank = [replace(inputs[0], min_shape=(1, 16, 1), opt_shape=(32, 16, 1), max_shape=(32, 16, 1))]
    assert any("rank" in p.message for p in onnx_io_problems(src, wrong_rank, outputs))


def test_onnxruntime_disagreeing_with_torch_is_caught(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    path = export_onnx(make_mlp(), tmp_path / "model.onnx", inputs, outputs).path
    torch.manual_seed(99)
    other = make_mlp()
    with torch.no_grad():
        other.net[0].bias.add_(0.01)
    cases, _ = make_reference_cases(other, inputs, outputs, model_name="mlp", max_batch_size=32)
    with pytest.raises(OnnxCheckError, match="onnxruntime differs from torch"):
        check_onnx(path, inputs, outputs, cases)


def test_pt2_source(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/text.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=4, max=64)
    program = torch.export.export(
        make_text(), (torch.zeros(4, 16, dtype=torch.int64), torch.ones(4, 16, dtype=torch.int64)),
        dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
    )
    archive = tmp_path / "text.pt2"
    torch.export.save(program, str(archive))
    module = load_pt2(archive)
    _export_and_check(module, inputs, outputs, tmp_path, "text", 16)
    with pytest.raises(GenRepoError, match=r"cannot load torch\.export archive"):
        load_pt2(tmp_path / "missing.pt2")


def test_model_not_matching_plan_gives_clear_error(tmp_path: Path) -> None:
    graph = _graph(ROOT / "examples/specs/mlp.graphspec.json")
    inputs, outputs = io_from_graph(graph)
    bad_outputs = [replace(outputs[0], path=("logits",))]
    with pytest.raises(ExportError, match=r"forward's result has no output\['logits'\]"):
        export_onnx(make_mlp(), tmp_path / "model.onnx", inputs, bad_outputs)
    wrong_rank = [replace(outputs[0], min_shape=(1,), max_shape=(32,))]
    with pytest.raises(ExportError, match="forward returns rank 2, the plan says 1"):
        export_onnx(make_mlp(), tmp_path / "model.onnx", inputs, wrong_rank)
    assert not (tmp_path / "model.onnx").exists()
    assert list(tmp_path.iterdir()) == []


def test_model_that_forces_a_dynamic_axis_static_fails_clearly(tmp_path: Path) -> None:
    class FixedBatch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.reshape(4, 16) * 2  # only works for batch 4

    inputs = [GraphTensorPlan("input_x", "x", "float32", (1, 16), (4, 16), (8, 16), 0)]
    outputs = [GraphTensorPlan("output", (), "float32", (1, 16), (8, 16), (8, 16), 0)]
    with pytest.raises(ExportError) as info:
        export_onnx(FixedBatch(), tmp_path / "model.onnx", inputs, outputs,
                    example=[torch.zeros(4, 16)])
    assert "does not allow the plan's dynamic axes {'input_x': [0]}" in str(info.value)
    assert "static shape of 4" in str(info.value)
    assert not (tmp_path / "model.onnx").exists()


def test_legacy_fallback_is_used_and_reported(tmp_path: Path) -> None:
    """Data-dependent control flow defeats torch.export; the legacy tracer still exports it, and says so."""

    class DataDependent(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool((x.abs() >= 0).all()):  # always true for real inputs
                return x * 2
            return x * 3

    inputs = [GraphTensorPlan("input_x", "x", "float32", (1, 16), (4, 16), (8, 16), 0)]
    outputs = [GraphTensorPlan("output", (), "float32", (1, 16), (8, 16), (8, 16), 0)]
    result = export_onnx(DataDependent(), tmp_path / "model.onnx", inputs, outputs)
    assert result.exporter == "legacy"
    assert len(result.notes) == 1 and "dynamo=True): failed (GuardOnDataDependentSymNode" in result.notes[0]
    cases, _ = make_reference_cases(DataDependent(), inputs, outputs, model_name="dd", max_batch_size=8)
    check_onnx(result.path, inputs, outputs, cases)
    with pytest.raises(ExportError, match="dynamo=True") as info:
        export_onnx(DataDependent(), tmp_path / "strict.onnx", inputs, outputs, exporter="dynamo")
    assert "(export.exporter is 'dynamo'; 'auto' tries both exporters)" in str(info.value)
    assert "TorchScript" not in str(info.value)  # the pinned exporter alone was tried
    pinned = export_onnx(DataDependent(), tmp_path / "pinned.onnx", inputs, outputs, exporter="torchscript")
    assert (pinned.exporter, pinned.notes) == ("legacy", [])


def test_dtype_names_and_tolerances() -> None:
    assert normalize_dtype("torch.float32") == normalize_dtype("TYPE_FP32") == normalize_dtype(np.float32) == "float32"
    assert normalize_dtype(torch.bool) == normalize_dtype("TYPE_BOOL") == "bool"
    assert normalize_dtype("torch.int64") == "int64"
    assert tolerance_for("int64") == (0.0, 0.0)
    assert tolerance_for("float16")[0] > tolerance_for("float32")[0]
    with pytest.raises(GenRepoError, match="unsupported tensor dtype"):
        normalize_dtype("torch.complex64")


def test_zero_d_inputs_and_outputs_travel_as_one(tmp_path: Path) -> None:
    """A 0-d input and output (Triton carries neither): the exported graph takes and gives [1], torch sees 0-d."""

    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            assert scale.dim() == 0
            y = x * scale
            return y, y.sum()

    inputs = [GraphTensorPlan("input_x", "x", "float32", (4, 3), (4, 3), (4, 3)),
              GraphTensorPlan("input_scale", "scale", "float32", (1,), (1,), (1,), torch_scalar=True)]
    outputs = [GraphTensorPlan("output_0", 0, "float32", (4, 3), (4, 3), (4, 3)),
               GraphTensorPlan("output_1", 1, "float32", (1,), (1,), (1,), torch_scalar=True)]
    path = tmp_path / "scaled.onnx"
    export_onnx(Scaled(), path, inputs, outputs)
    graph = onnx.load(str(path)).graph
    assert [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in (*graph.input, *graph.output)] == [
        [4, 3], [1], [4, 3], [1]]
    cases, _ = make_reference_cases(Scaled(), inputs, outputs, model_name="scaled", max_batch_size=0)
    assert {c.inputs["input_scale"].shape for c in cases} == {(1,)}
    assert {c.outputs["output_1"].shape for c in cases} == {(1,)}
    for case in cases:
        np.testing.assert_allclose(case.outputs["output_1"][0], (case.inputs["input_x"] * case.inputs["input_scale"])
                                   .sum(), rtol=1e-5)
    results = check_onnx(path, inputs, outputs, cases)
    assert len(results) == 6 and all(r.ok for r in results)


class Tagger(nn.Module):
    """Embedding -> bidirectional 2-layer LSTM or GRU -> tags; the initial state is optional (None, h0, (h0, c0))."""

    def __init__(self, rnn: str) -> None:
        super().__init__()
        torch.manual_seed(6)
        self.embed = nn.Embedding(30, 8)
        self.rnn = (nn.LSTM if rnn == "lstm" else nn.GRU)(8, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(12, 3)

    def forward(self, ids: torch.Tensor, state: Any = None) -> torch.Tensor:
        return self.out(self.rnn(self.embed(ids), state)[0])


def _tagger_io(rnn: str, with_state: bool) -> tuple[list[GraphTensorPlan], list[GraphTensorPlan]]:
    """ids [b, s] (s dynamic 2..24) and, with a state, h0 (and c0) [4, b, 6]: the batch on axis 1, no batching."""
    inputs = [GraphTensorPlan("input_ids", "ids", "int64", (1, 2), (3, 10), (4, 24), 0)]
    if with_state:
        paths: list[Any] = [("state", 0), ("state", 1)] if rnn == "lstm" else ["state"]
        inputs += [GraphTensorPlan(f"input_state_{i}", path, "float32", (4, 1, 6), (4, 3, 6), (4, 4, 6))
                   for i, path in enumerate(paths)]
    return inputs, [GraphTensorPlan("output", (), "float32", (1, 2, 3), (4, 24, 3), (4, 24, 3), 0)]


@pytest.mark.parametrize(("rnn", "with_state"), [("lstm", True), ("gru", False), ("gru", True)])
def test_rnns_export_with_their_dynamic_sequence_axis_and_match_torch_at_other_lengths(tmp_path, rnn, with_state):
    """torch.export specialises an RNN's sequence axis (a constraint violation, or a graph whose output fixes it);
    the TorchScript-based exporter keeps it dynamic. Both reasons are kept; onnxruntime matches torch at lengths
    the export never saw. (The zoo's LSTM tagger without a state: tests/test_zoo.py.)"""
    module = Tagger(rnn).eval()
    inputs, outputs = _tagger_io(rnn, with_state)
    result = export_onnx(module, tmp_path / "model.onnx", inputs, outputs)
    assert result.exporter == "legacy"
    # The dynamo exporter is not tried (test_an_rnn_pinned_to_dynamo_still_loses_its_sequence_axis: it fails).
    layer = "LSTM" if rnn == "lstm" else "GRU"
    assert result.notes == [f"torch.onnx.export(dynamo=True): not tried: the module holds nn.{layer} ('rnn') and "
                            "input 'input_ids' axis 1 is dynamic; torch.export fixes an RNN's sequence axis"]
    graph_inputs = onnx.load(str(result.path)).graph.input
    assert all(isinstance(_dims(i)[1], str) for i in graph_inputs)  # the sequence (ids) and batch (state) axes vary
    session = _session(result.path)
    generator = torch.Generator().manual_seed(0)
    for batch, seq in ((1, 3), (2, 17), (4, 24)):
        ids = torch.randint(0, 30, (batch, seq), generator=generator)
        state = [torch.randn(4, batch, 6, generator=generator) for _ in inputs[1:]]
        with torch.no_grad():
            want = module(ids, None if not state else tuple(state) if rnn == "lstm" else state[0]).numpy()
        feed = {"input_ids": ids.numpy(), **{f"input_state_{i}": s.numpy() for i, s in enumerate(state)}}
        np.testing.assert_allclose(session.run(None, feed)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("rnn", "with_state"), [("lstm", True), ("gru", False)])
def test_an_rnn_pinned_to_dynamo_still_loses_its_sequence_axis(tmp_path, rnn, with_state):
    """Why ``auto`` skips dynamo for these modules: torch.export specialises the sequence axis (a constraint
    violation, or a graph whose output fixes it), and ``exporter: dynamo`` says so as before, nothing written."""
    inputs, outputs = _tagger_io(rnn, with_state)
    with pytest.raises(ExportError) as info:
        export_onnx(Tagger(rnn).eval(), tmp_path / "model.onnx", inputs, outputs, exporter="dynamo")
    (problem,) = info.value.problems
    assert problem.message.startswith("torch.onnx.export(dynamo=True): ")
    assert ("the model does not allow the plan's dynamic axes" in problem.message
            or "its graph does not fit the plan" in problem.message), problem.message
    assert problem.message.endswith("(export.exporter is 'dynamo'; 'auto' tries both exporters)")
    assert list(tmp_path.iterdir()) == []


class RnnBesideFft(nn.Module):
    """A GRU over a fixed length beside an FFT over a dynamic one: only the dynamo exporter has ``aten::fft_rfft``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.rnn = nn.GRU(4, 4, batch_first=True)

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rnn(a)[0], torch.fft.rfft(x, dim=-1).abs()


def _fft_io() -> tuple[list[GraphTensorPlan], list[GraphTensorPlan]]:
    inputs = [GraphTensorPlan("input_a", "a", "float32", (1, 5, 4), (2, 5, 4), (4, 5, 4), 0),
              GraphTensorPlan("input_x", "x", "float32", (1, 2, 4), (2, 8, 4), (4, 16, 4), 0)]
    return inputs, [GraphTensorPlan("output_0", 0, "float32", (1, 5, 4), (4, 5, 4), (4, 5, 4), 0),
                    GraphTensorPlan("output_1", 1, "float32", (1, 2, 3), (4, 16, 3), (4, 16, 3), 0)]


def test_an_rnn_module_falls_back_to_dynamo_when_the_torchscript_export_fails(tmp_path):
    """``auto`` tries the TorchScript-based exporter first for a module with an RNN and a dynamic non-batch axis
    (here not the RNN's own); when it fails, dynamo still runs, so nothing that exported before stops exporting."""
    inputs, outputs = _fft_io()
    result = export_onnx(RnnBesideFft().eval(), tmp_path / "model.onnx", inputs, outputs)
    assert result.exporter == "dynamo"
    assert result.notes == [
        "the TorchScript-based exporter torch.onnx.export(dynamo=False) tried first: the module holds nn.GRU ('rnn') "
        "and input 'input_x' axis 1 is dynamic; torch.export fixes an RNN's sequence axis",
        "the TorchScript-based exporter torch.onnx.export(dynamo=False): failed (UnsupportedOperatorError: Exporting "
        "the operator 'aten::fft_rfft' to ONNX opset version 17 is not supported); tried the next exporter",
    ]
    cases, _ = make_reference_cases(RnnBesideFft().eval(), inputs, outputs, model_name="fft", max_batch_size=4)
    assert all(r.ok for r in check_onnx(result.path, inputs, outputs, cases))
    with pytest.raises(ExportError, match=r"aten::fft_rfft.*\(export.exporter is 'torchscript'"):
        export_onnx(RnnBesideFft().eval(), tmp_path / "pinned.onnx", inputs, outputs, exporter="torchscript")
    assert not (tmp_path / "pinned.onnx").exists()


def test_the_exporter_order_for_each_choice() -> None:
    tagger = Tagger("lstm")
    inputs, _ = _tagger_io("lstm", with_state=False)
    batch_only = [GraphTensorPlan("input_ids", "ids", "int64", (1, 24), (3, 24), (4, 24), 0)]
    assert exporter_order(tagger, inputs)[0] == ("legacy", "dynamo")
    assert exporter_order(tagger, batch_only) == (("dynamo", "legacy"), None)  # only the batch axis varies
    assert exporter_order(TwoOutputs(), inputs) == (("dynamo", "legacy"), None)  # no RNN
    assert exporter_order(tagger, inputs, "dynamo") == (("dynamo",), None)
    assert exporter_order(tagger, inputs, "torchscript") == (("legacy",), None)
    with pytest.raises(ValueError, match="'onnxscript' is not one of"):
        exporter_order(tagger, inputs, "onnxscript")


class PaddingEncoder(nn.Module):
    """``nn.TransformerEncoder`` with a PyTorch key-padding mask: ``True`` marks padding, all ``True`` raises."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=padding_mask)


PADDING_INPUTS = [GraphTensorPlan("input_x", "x", "float32", (1, 2, 8), (2, 5, 8), (4, 9, 8), 0),
                  GraphTensorPlan("input_padding_mask", "padding_mask", "bool", (1, 2), (2, 5), (4, 9), 0)]
PADDING_OUTPUTS = [GraphTensorPlan("output", (), "float32", (1, 2, 8), (4, 9, 8), (4, 9, 8), 0)]


def test_a_made_up_mask_is_tried_both_ways(tmp_path):
    """The synthetic example's mask is all true first (a Hugging Face mask keeps every position so); a PyTorch
    key-padding mask then pads every position and forward raises, so all false is tried, and the result says so."""
    result = export_onnx(PaddingEncoder().eval(), tmp_path / "model.onnx", PADDING_INPUTS, PADDING_OUTPUTS)
    mask = result.masks["input_padding_mask"]
    assert mask.mask_keep is False and (mask.low, mask.high) == (0, 1)
    assert mask.source.startswith("a mask: forward fails with it all true (RuntimeError: to_padded_tensor")
    assert mask.source.endswith("and runs with it all false")


class NoPaddingAllowed(nn.Module):
    """A mask that must mark some positions but not all: neither made-up fill works."""

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        if bool(padding_mask.all()) or not bool(padding_mask.any()):
            raise ValueError("padding_mask must pad some positions, not all")
        return x.masked_fill(padding_mask.unsqueeze(-1), 0.0)


def test_a_mask_that_fails_both_ways_says_both(tmp_path):
    with pytest.raises(ExportError) as info:
        export_onnx(NoPaddingAllowed(), tmp_path / "model.onnx", PADDING_INPUTS, PADDING_OUTPUTS)
    first, second = (p.message for p in info.value.problems)
    assert first == ("the model's forward fails on the example inputs: ValueError: padding_mask must pad some "
                     "positions, not all")
    assert second == "with 'input_padding_mask' all false (0) instead: " + first
    assert not (tmp_path / "model.onnx").exists()
