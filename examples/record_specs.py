"""Record the example GraphSpecs the way AITune does: observe real calls at several batch sizes.

Run from the repository root: ``python -m examples.record_specs``. Writes ``examples/specs/*.graphspec.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from examples.models import make_mlp, make_text
from generator.specs.graphspec import GraphSpec
from generator.specs.sample_metadata import ForwardParameter, ForwardSignature, SampleMetadata
from generator.specs.tensor_spec import BatchDim, DynamicDim

OUT = Path(__file__).parent / "specs"


def _record(name: str, model: torch.nn.Module, params: list[str], calls: list[tuple[int, dict]]) -> GraphSpec:
    graph = None
    with torch.no_grad():
        for batch_size, inputs in calls:
            outputs = model(**inputs)
            in_meta = SampleMetadata.from_inputs(inputs, strict=True, batch_size=batch_size)
            out_meta = SampleMetadata.from_outputs(outputs, strict=True, batch_size=batch_size)
            if graph is None:
                graph = GraphSpec(name, in_meta, out_meta, ForwardSignature(tuple(ForwardParameter(p) for p in params)))
            else:
                graph.update_shapes_seen(in_meta, out_meta)
    assert graph is not None
    return graph


def main() -> None:
    """Record and write both example specs."""
    OUT.mkdir(exist_ok=True)
    mlp = _record("mlp", make_mlp(), ["x"], [(b, {"x": torch.randn(b, 16)}) for b in (1, 4, 16, 32)])
    text_calls = [
        (b, {"input_ids": torch.randint(0, 100, (b, s)), "attention_mask": torch.ones(b, s, dtype=torch.int64)})
        for b, s in ((1, 8), (4, 16), (8, 32))
    ]
    text = _record("text", make_text(), ["input_ids", "attention_mask"], text_calls)
    batch, seq = BatchDim("batch", min=1, max=16, opt=4), DynamicDim("seq", min=4, max=64, opt=16)
    text.dynamic_shapes = {"input_ids": (batch, seq), "attention_mask": (batch, seq)}
    for graph in (mlp, text):
        document = {"aitune_version": "0.6.0", "graph": graph.to_dict()}
        (OUT / f"{graph.name}.graphspec.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
