"""Index inputs found in an ONNX graph (generator/building/export/onnx_indices.py)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from generator.building.export.onnx_indices import index_domains


def _model(nodes, inputs, initializers):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in inputs],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros(shape, np.float32), name) for name, shape in initializers.items()],
    )
    return helper.make_model(graph)


def test_direct_and_reshaped_gathers_take_the_smallest_table():
    nodes = [
        helper.make_node("Gather", ["words", "ids"], ["e1"]),
        helper.make_node("Reshape", ["types", "shape"], ["flat"]),
        helper.make_node("Cast", ["flat"], ["flat64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["segments", "flat64"], ["e2"]),
        helper.make_node("Gather", ["words", "types"], ["e3"]),
        helper.make_node("Add", ["mask", "mask"], ["m2"]),
        helper.make_node("Gather", ["words", "m2"], ["e4"]),  # through arithmetic: not the mask's own values
        helper.make_node("Concat", ["e1", "e2", "e3", "e4"], ["out"], axis=0),
    ]
    model = _model(nodes, ["ids", "types", "mask"], {"words": (99, 8), "segments": (2, 8)})
    model.graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), "shape"))
    domains = index_domains(model, ["ids", "types", "mask"])
    assert set(domains) == {"ids", "types"}
    assert (domains["ids"].low, domains["ids"].high) == (0, 98)
    assert (domains["types"].low, domains["types"].high) == (0, 1)
    assert "2-row table 'segments'" in domains["types"].source


def test_constant_node_tables_and_axis():
    table = helper.make_tensor("t", TensorProto.FLOAT, [4, 7], np.zeros(28, np.float32).tolist())
    nodes = [
        helper.make_node("Constant", [], ["table"], value=table),
        helper.make_node("Gather", ["table", "ids"], ["out"], axis=-1),
    ]
    domains = index_domains(_model(nodes, ["ids"], {}), ["ids"])
    assert (domains["ids"].low, domains["ids"].high) == (0, 6)


def test_gather_on_a_computed_table_says_nothing():
    nodes = [helper.make_node("Relu", ["w"], ["w2"]), helper.make_node("Gather", ["w2", "ids"], ["out"])]
    assert index_domains(_model(nodes, ["ids"], {"w": (5, 3)}), ["ids"]) == {}
