"""A small project for build tests: a models module, recorded GraphSpecs, a .pt2 and an ONNX source, a manifest.

:func:`make_project` writes it into a folder. The models module counts every factory call in ``factory_calls.log``
next to it (proof that a cached build exported nothing) and ``make_flaky`` raises while ``broken.flag`` exists.
Specs are recorded the way AITune does (``SampleMetadata.from_inputs``/``from_outputs`` over real calls).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from generator.dtypes import normalize_dtype
from generator.naming import SemanticPath, format_tensor_name
from generator.specs.graphspec import GraphSpec

MODELS_SOURCE = '''\
"""Test models for gen-repo build tests (written by tests/build_helpers.py)."""
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).parent


def _count(name):
    with open(HERE / "factory_calls.log", "a") as stream:
        stream.write(name + "\\n")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        return self.net(x)


class TwoOutputs(nn.Module):
    """ids int64 [b, s], mask bool [b, s] -> (logits [b, 4], features [b, 8])."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, ids, mask):
        weights = mask.unsqueeze(-1).to(torch.float32)
        features = (self.embed(ids) * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.head(features), features


class Nested(nn.Module):
    """forward(x, extras) like AITune's nested_dict fixture; returns {"logits", "aux": (h,)}."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 4)

    def forward(self, x, extras):
        weights = extras["mask"].unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(dim=1) if extras["mode"] == "sum" else (x * weights).mean(dim=1)
        hidden = pooled * extras["scale"] + extras["pair"][0] - 0.5 * extras["pair"][1]
        return {"logits": self.head(hidden), "aux": (hidden,)}


class Static(nn.Module):
    """x [3, 16] -> [3, 4]: one fixed shape, no batch axis."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 4)

    def forward(self, x):
        return torch.tanh(self.linear(x))


def _seeded(cls, seed):
    torch.manual_seed(seed)
    return cls().eval()


def make_mlp():
    _count("mlp")
    return _seeded(MLP, 0)


def make_two():
    _count("two")
    return _seeded(TwoOutputs, 1)


def make_nested():
    _count("nested")
    return _seeded(Nested, 2)


def make_static():
    _count("static")
    return _seeded(Static, 3)


def make_flaky():
    _count("flaky")
    if (HERE / "broken.flag").exists():
        raise RuntimeError("the flaky model is broken (broken.flag exists)")
    return _seeded(MLP, 5)
'''

MARKER_SOURCE = '''\
"""Writes a marker file when imported: proves whether gen-repo imported it."""
from pathlib import Path

(Path(__file__).parent / "imported.marker").write_text("imported\\n")


def make():
    raise AssertionError("must never be called")
'''


def load_module(path: Path, name: str) -> ModuleType:
    """Import ``path`` under a private ``name`` (never the name the build imports it by)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def record(name: str, model: Any, params: list[str], calls: list[tuple[int | None, dict[str, Any]]]) -> dict:
    """Record a GraphSpec document from real calls, as examples/record_specs.py (and AITune) does."""
    import torch

    from generator.specs.graphspec import GraphSpec
    from generator.specs.sample_metadata import ForwardParameter, ForwardSignature, SampleMetadata

    graph = None
    with torch.no_grad():
        for batch_size, inputs in calls:
            outputs = model(**inputs)
            in_meta = SampleMetadata.from_inputs(inputs, strict=True, batch_size=batch_size)
            out_meta = SampleMetadata.from_outputs(outputs, strict=True, batch_size=batch_size)
            if graph is None:
                signature = ForwardSignature(tuple(ForwardParameter(p) for p in params))
                graph = GraphSpec(name, in_meta, out_meta, signature)
            else:
                graph.update_shapes_seen(in_meta, out_meta)
    assert graph is not None
    return {"aitune_version": "0.6.0", "graph": graph.to_dict()}


def nested_inputs(batch: int, seq: int) -> dict[str, Any]:
    """Inputs of the Nested model: x, and extras with a bool mask, a scale, a pair and a non-tensor mode."""
    import torch

    return {
        "x": torch.randn(batch, seq, 16),
        "extras": {
            "mask": torch.ones(batch, seq, dtype=torch.bool),
            "scale": torch.rand(batch, 1),
            "pair": (torch.randn(batch, 16), torch.randn(batch, 16)),
            "mode": "sum",
        },
    }


def make_project(root: Path, module_name: str, models: tuple[str, ...] | None = None) -> Path:
    """Write the project into ``root`` and return its manifest; ``models`` picks manifest entries by name."""
    import torch

    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module_name}.py").write_text(MODELS_SOURCE)
    zoo = load_module(root / f"{module_name}.py", f"_recording_{module_name}")
    specs = root / "specs"
    specs.mkdir(exist_ok=True)
    torch.manual_seed(123)
    documents = {
        "mlp": record("mlp", zoo.MLP().eval(), ["x"], [(b, {"x": torch.randn(b, 16)}) for b in (1, 4, 16)]),
        "two": record(
            "two",
            zoo.TwoOutputs().eval(),
            ["ids", "mask"],
            [
                (b, {"ids": torch.randint(0, 20, (b, s)), "mask": torch.ones(b, s, dtype=torch.bool)})
                for b, s in ((1, 6), (4, 7), (2, 16))  # seq not in proportion to the batch
            ],
        ),
        "nested": record(
            "nested", zoo.Nested().eval(), ["x", "extras"], [(b, nested_inputs(b, s)) for b, s in ((1, 4), (4, 8),
                                                                                               (8, 16))]
        ),
        "static": record("static", zoo.Static().eval(), ["x"], [(None, {"x": torch.randn(3, 16)})]),
    }
    for name, document in documents.items():
        (specs / f"{name}.graphspec.json").write_text(json.dumps(document, indent=2) + "\n")

    # A torch.export archive and a plain ONNX file (the MLP with other weights).
    torch.manual_seed(7)
    exported = torch.export.export(
        zoo.MLP().eval(), (torch.randn(2, 16),), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=16)}}
    )
    torch.export.save(exported, str(root / "mlp.pt2"))
    _write_onnx_source(zoo, root / "mlp.onnx")

    entries = [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{module_name}:make_mlp"},
         "target": "python"},
        {"name": "two", "spec": "specs/two.graphspec.json", "source": {"factory": f"{module_name}:make_two"},
         "target": "onnx"},
        {"name": "nested", "spec": "specs/nested.graphspec.json", "source": {"factory": f"{module_name}:make_nested"},
         "target": "python"},
        {"name": "static", "spec": "specs/static.graphspec.json", "source": {"factory": f"{module_name}:make_static"},
         "target": "onnx"},
        {"name": "frompt2", "spec": "specs/mlp.graphspec.json", "source": {"pt2": "mlp.pt2"}, "target": "python"},
        {"name": "fromonnx", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, "target": "onnx"},
        {"name": "flaky", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{module_name}:make_flaky"},
         "target": "onnx"},
    ]
    chosen = [e for e in entries if models is None or e["name"] in models]
    manifest = root / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"output": "model_repository", "models": chosen}, sort_keys=False))
    return manifest


def write_manifest(root: Path, name: str, entries: list[dict[str, Any]]) -> Path:
    """Write another manifest next to the project (same specs and sources)."""
    path = root / name
    path.write_text(yaml.safe_dump({"output": "model_repository", "models": entries}, sort_keys=False))
    return path


def _write_onnx_source(zoo: Any, path: Path) -> None:
    """An ONNX file made outside gen-repo: the legacy TorchScript exporter with a dynamic batch axis."""
    import contextlib
    import io
    import warnings

    import torch

    torch.manual_seed(11)
    model = zoo.MLP().eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (torch.randn(2, 16),), str(path), input_names=["input_x"], output_names=["output"],
            dynamic_axes={"input_x": {0: "batch"}, "output": {0: "batch"}}, dynamo=False, opset_version=17,
        )


def factory_calls(root: Path) -> list[str]:
    """Factory calls logged by the project's models module (one name per call)."""
    log = root / "factory_calls.log"
    return log.read_text().split() if log.exists() else []


def tree_digest(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder`` (to prove a tree unchanged)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def leftovers(parent: Path) -> list[str]:
    """Staging/aside/trash folders a writer left beside its destination."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".") and (
        "staging" in p.name or ".old-" in p.name or "trash" in p.name))


def example_io(name: str):  # type: ignore[no-untyped-def]
    """The tensor I/O plans (:func:`io_from_graph`) of ``examples/specs/<name>``."""
    spec = Path(__file__).resolve().parents[1] / "examples" / "specs" / f"{name}.graphspec.json"
    return io_from_graph(GraphSpec.from_dict(json.loads(spec.read_text())["graph"]))


@dataclass(frozen=True, slots=True)
class GraphTensorPlan:
    """A minimal tensor plan: name, semantic path, dtype and full min/opt/max shapes."""

    name: str
    path: SemanticPath
    dtype: str
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    batch_axis: int | None = None
    #: forward takes (returns) a 0-d tensor here; the graph's I/O carries it as [1]
    #: (``generator.planning.plan.TensorPlan``).
    torch_scalar: bool = False


def io_from_graph(
    graph: GraphSpec, *, widen_batch_min: bool = True
) -> tuple[list[GraphTensorPlan], list[GraphTensorPlan]]:
    """Input and output plans of a GraphSpec with AITune's tensor names.

    Inputs take min/opt/max from ``get_effective_input_shapes``; outputs min/max from the output spec (opt = max).
    With ``widen_batch_min`` a batch axis's minimum becomes its multiplier (batch size 1), as Triton's dynamic
    batcher may form any batch from 1 (see the config issue). For the build, pass ``generator.planning.plan``'s plans
    instead.
    """
    from generator.specs.tensor_spec import BatchDim

    inputs = []
    for locator, spec in graph.input_spec.tensor_data:
        lo, opt, hi = graph.get_effective_input_shapes(locator, spec)
        definition = graph.get_shape_definition(locator)
        if definition is not None:
            batch_axes = {i: 1 for i, d in enumerate(definition) if isinstance(d, BatchDim)}
        else:
            batch_axes = spec.get_batch_axis_multipliers()
        if widen_batch_min:
            for axis, multiplier in batch_axes.items():
                lo[axis] = min(lo[axis], multiplier)
        first = min(batch_axes, default=None)
        inputs.append(
            GraphTensorPlan(
                format_tensor_name(locator.path, "input"),
                locator.path,
                normalize_dtype(spec.dtype),
                tuple(lo),
                tuple(opt),
                tuple(hi),
                first,
            )
        )
    outputs = []
    for locator, spec in graph.output_spec.tensor_data:
        lo, hi = list(spec.min_shape), list(spec.max_shape)
        batch_axes = spec.get_batch_axis_multipliers()
        if widen_batch_min:
            for axis, multiplier in batch_axes.items():
                lo[axis] = min(lo[axis], multiplier)
        outputs.append(
            GraphTensorPlan(
                format_tensor_name(locator.path, "output"),
                locator.path,
                normalize_dtype(spec.dtype),
                tuple(lo),
                tuple(hi),
                tuple(hi),
                min(batch_axes, default=None),
            )
        )
    return inputs, outputs
