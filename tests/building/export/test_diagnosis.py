"""A failed ONNX check blamed on the export (generator/building/export/fault.py), on onnxruntime's own words.

The words are those onnxruntime 1.32 gave for Mamba and Mamba2 (tests/test_heldout.py builds Mamba for real): a
Gather out of bounds and a broadcast at run time, a Transpose it cannot load.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from generator.building.export.diagnosis import export_fault, onnxruntime_node
from generator.building.export.exchange import ExportResult
from generator.contracts.reference_data import ReferenceCase
from generator.errors import Problem

GATHER = ("InvalidArgument: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while running "
          "Gather node. Name:'/module/backbone/layers.0/mixer/Gather_66' Status Message: indices element out of data "
          "bounds, idx=15 must be within the inclusive range [-2,1]")
ADD = ("Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Add node. "
       "Name:'/module/backbone/layers.0/mixer/Add_18' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/"
       "math/element_wise_ops.h:563 void onnxruntime::BroadcastIterator::Init(ptrdiff_t, ptrdiff_t) axis == 1 || axis "
       "== largest was false. Attempting to broadcast an axis by a dimension other than 1. 16 by 40")
TRANSPOSE = ("onnxruntime cannot load the model: Fail: [ONNXRuntimeError] : 1 : FAIL : Load model from model.onnx "
             "failed:Node (/m/backbone/layers.0/mixer/Transpose_9) Op (Transpose) [TypeInferenceError] Invalid "
             "attribute perm {0, -2, -1, 1}, input shape = {0, 0, 0, 0}")
ENTRY = Problem("gen-repo.yaml", "/models/0/export", "")


def _case(name: str, shape: tuple[int, ...]) -> ReferenceCase:
    return ReferenceCase(name, shape[0], {"input_ids": np.zeros(shape, np.int64)})


CASES = [_case("min", (1, 2)), _case("opt", (2, 16)), _case("max", (4, 40))]


def _export(exporter: str, failed: tuple[tuple[str, str], ...] = ()) -> ExportResult:
    return ExportResult(Path("model.onnx"), exporter, ["input_ids"], ["logits"], {"input_ids": [0, 1]}, 1.0,
                        example_shapes={"input_ids": (2, 16)}, failed=failed)


def test_onnxruntime_names_the_op_the_node_and_what_went_wrong() -> None:
    assert onnxruntime_node(GATHER) == ("Gather", "/module/backbone/layers.0/mixer/Gather_66", "indices element out "
                                        "of data bounds, idx=15 must be within the inclusive range [-2,1]")
    assert onnxruntime_node(ADD) == ("Add", "/module/backbone/layers.0/mixer/Add_18",
                                     "Attempting to broadcast an axis by a dimension other than 1. 16 by 40")
    assert onnxruntime_node(TRANSPOSE) == ("Transpose", "/m/backbone/layers.0/mixer/Transpose_9",
                                           "[TypeInferenceError] Invalid attribute perm {0, -2, -1, 1}, input shape = "
                                           "{0, 0, 0, 0}")
    assert onnxruntime_node("onnxruntime differs from torch") is None


def test_when_auto_tried_both_exporters_the_message_says_both_fail() -> None:
    problems = [Problem("model.onnx", "/cases/min", f"onnxruntime fails on case 'min': {GATHER}"),
                Problem("model.onnx", "/cases/max", f"onnxruntime fails on case 'max': {ADD}")]
    blame = export_fault(problems, CASES, _export("legacy", (("dynamo", "tracing inferred a static shape of 16"),)),
                         "auto", ENTRY)
    assert (blame.file, blame.pointer) == ("gen-repo.yaml", "/models/0/export")
    assert blame.message == (
        "the export is at fault, not the data: torch ran these very inputs (stage reference), the ONNX graph does not: "
        "case 'min' (input_ids [1, 2]) fails in node '/module/backbone/layers.0/mixer/Gather_66' (Gather: indices "
        "element out of data bounds, idx=15 must be within the inclusive range [-2,1]); case 'max' (input_ids [4, 40]) "
        "fails in node '/module/backbone/layers.0/mixer/Add_18' (Add: Attempting to broadcast an axis by a dimension "
        "other than 1. 16 by 40); case 'opt' (input_ids [2, 16]) runs. The TorchScript-based exporter "
        "torch.onnx.export(dynamo=False) wrote the graph from an example of input_ids [2, 16]; "
        "torch.onnx.export(dynamo=True) (`export: {exporter: dynamo}`) was tried first and failed: tracing inferred a "
        "static shape of 16: both exporters fail for this model")


def test_a_graph_onnxruntime_cannot_load_names_its_node_and_the_exporter_to_try() -> None:
    blame = export_fault([Problem("model.onnx", "", TRANSPOSE)], CASES, _export("legacy"), "torchscript", ENTRY)
    assert "the ONNX graph does not: onnxruntime cannot load the graph in node '/m/backbone/layers.0/mixer/" \
           "Transpose_9' (Transpose: [TypeInferenceError] Invalid attribute perm" in blame.message
    assert "runs" not in blame.message  # no case ran at all
    assert blame.message.endswith("the other exporter was not tried (export.exporter is 'torchscript'): try it with "
                                  "`export: {exporter: dynamo}` in this model's manifest entry")
    dynamo = export_fault([Problem("model.onnx", "/cases/min", "case 'min' output 'logits': onnxruntime differs "
                                   "from torch: 3 of 8 compared elements out of tolerance")], CASES, _export("dynamo"),
                          "auto", ENTRY)
    assert "case 'min' (input_ids [1, 2]) differs from torch; case 'opt' (input_ids [2, 16]), case 'max' " \
           "(input_ids [4, 40]) run." in dynamo.message
    assert dynamo.message.endswith("try it with `export: {exporter: torchscript}` in this model's manifest entry")
