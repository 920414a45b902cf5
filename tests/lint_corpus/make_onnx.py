"""Write the small ONNX graphs the lint corpus uses (run once by hand; the .onnx files are checked in).

Each graph is Identity/Add nodes over declared inputs and outputs: lint only reads names, element types and shapes.
A string dim is symbolic (dynamic), an int is static. Output is deterministic (fixed producer, no timestamps).
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

Tensor = tuple[str, int, list[int | str]]

FP32, INT32, FP16 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.FLOAT16

#: corpus-relative path -> (inputs, outputs)
GRAPHS: dict[str, tuple[list[Tensor], list[Tensor]]] = {
    "good/simple_add/1/model.onnx": (
        [("INPUT0", INT32, ["batch", 16]), ("INPUT1", INT32, ["batch", 16])],
        [("OUTPUT0", INT32, ["batch", 16]), ("OUTPUT1", INT32, ["batch", 16])],
    ),
    "good/tiny_classifier/1/model.onnx": (
        [("data_0", FP32, [1, 3, 8, 8])],
        [("fc6_1", FP32, [1, 10, 1, 1])],
    ),
    "good/mlp_python/1/model.onnx": (
        [("input_x", FP32, ["batch", 16])],
        [("output", FP32, ["batch", 4])],
    ),
    "good/text_encoder/2/model.onnx": (
        [("input_ids", TensorProto.INT64, ["batch", "seq"]), ("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [("last_hidden_state", FP32, ["batch", "seq", 32])],
    ),
    "bad/onnx-io-name/detector/1/model.onnx": (
        [("input0", FP32, ["batch", 16])],
        [("OUTPUT0", FP32, ["batch", 16])],
    ),
    "bad/onnx-data-type/detector/1/model.onnx": (
        [("INPUT0", FP32, ["batch", 16])],
        [("OUTPUT0", FP32, ["batch", 16])],
    ),
    "bad/onnx-rank/detector/1/model.onnx": (
        [("INPUT0", FP32, ["batch", 16])],
        [("OUTPUT0", FP32, ["batch", 16])],
    ),
    "bad/onnx-dim/detector/1/model.onnx": (
        [("INPUT0", FP32, ["batch", 32])],
        [("OUTPUT0", FP32, ["batch", 16])],
    ),
    "bad/onnx-dim-batch/detector/1/model.onnx": (
        [("INPUT0", FP32, [1, 16])],
        [("OUTPUT0", FP32, ["batch", 16])],
    ),
    "bad/onnx-dim-dynamic/mlp_python/1/model.onnx": (
        [("input_x", FP32, ["batch", 16])],
        [("output", FP32, ["batch", 4])],
    ),
}


def _value_info(tensor: Tensor) -> onnx.ValueInfoProto:
    name, elem_type, shape = tensor
    return helper.make_tensor_value_info(name, elem_type, shape)


def build(inputs: list[Tensor], outputs: list[Tensor]) -> onnx.ModelProto:
    """A graph whose i-th output is Identity of input min(i, last): shapes are declared, not inferred."""
    nodes = [
        helper.make_node("Identity", [inputs[min(i, len(inputs) - 1)][0]], [out[0]], name=f"identity_{i}")
        for i, out in enumerate(outputs)
    ]
    graph = helper.make_graph(nodes, "lint_corpus", [_value_info(t) for t in inputs], [_value_info(t) for t in outputs])
    model = helper.make_model(graph, producer_name="gen-repo-lint-corpus", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main(root: Path) -> None:
    """Write every graph under ``root``."""
    for rel, (inputs, outputs) in GRAPHS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(build(inputs, outputs).SerializeToString(deterministic=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
