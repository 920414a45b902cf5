"""The one dtype table against what torch, numpy, ONNX, Triton's protobuf and tritonclient themselves say."""

from __future__ import annotations

import json
import struct

import numpy as np
import onnx
import pytest
import safetensors.torch
import torch
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import np_to_triton_dtype

from generator.dtypes import (
    DTYPES,
    SAFETENSORS_TO_NUMPY,
    TORCH_DTYPES,
    TORCH_TO_TRITON,
    by_onnx,
    by_torch,
    normalize_dtype,
)
from generator.errors import GenRepoError


def test_every_torch_dtype_is_known_and_every_torch_name_is_real() -> None:
    installed = {str(v) for v in vars(torch).values() if isinstance(v, torch.dtype)}
    assert installed <= TORCH_DTYPES  # else validate would call a real torch dtype "no torch dtype"
    assert {d.torch for d in DTYPES if d.torch is not None} <= installed
    assert "torch.float128" not in TORCH_DTYPES


@pytest.mark.parametrize("entry", DTYPES, ids=lambda d: d.triton)
def test_each_layer_agrees_with_its_library(entry) -> None:
    assert model_config_pb2.DataType.Value(entry.triton) > 0
    assert onnx.TensorProto.DataType.Name(entry.onnx).lower() in (entry.numpy.replace("float32", "float")
                                                                 .replace("float64", "double"), "string")
    assert by_onnx(entry.onnx) is entry
    if entry.torch is None:
        return
    assert by_torch(entry.torch) is entry
    torch_dtype = getattr(torch, entry.torch.removeprefix("torch."))
    assert torch.empty((), dtype=torch_dtype).element_size() == entry.byte_size
    if entry.native_numpy is not None:
        assert np.dtype(entry.native_numpy).itemsize == entry.byte_size
        assert np_to_triton_dtype(np.dtype(entry.native_numpy)) == entry.wire
    # The safetensors column is what the safetensors library writes for a tensor of this torch dtype.
    data = safetensors.torch.save({"x": torch.zeros(2, dtype=torch_dtype)})
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    assert header["x"]["dtype"] == entry.safetensors


def test_safetensors_arrays_read_as_numpy_are_the_tables_and_complex64() -> None:
    """What .safetensors files gen-repo reads (generator.contracts.array_files): every type numpy holds."""
    assert SAFETENSORS_TO_NUMPY == {
        "F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "U64": "uint64", "I32": "int32",
        "U32": "uint32", "I16": "int16", "U16": "uint16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
        "C64": "complex64",
    }
    assert "BF16" not in SAFETENSORS_TO_NUMPY and by_torch("torch.bfloat16").safetensors == "BF16"


def test_float64_and_the_unsigned_types_are_servable_string_is_not() -> None:
    for name in ("torch.float64", "torch.uint16", "torch.uint32", "torch.uint64"):
        assert name in TORCH_TO_TRITON
    assert by_torch("torch.float64").targets == {"onnx", "python"}  # TensorRT has no float64 tensors
    assert "TYPE_STRING" not in TORCH_TO_TRITON.values()


def test_normalize_dtype_takes_every_spelling() -> None:
    assert normalize_dtype(torch.float64) == normalize_dtype("TYPE_FP64") == normalize_dtype("FP64") == "float64"
    assert normalize_dtype(np.uint16) == normalize_dtype("torch.uint16") == "uint16"
    assert normalize_dtype("half") == normalize_dtype("bf16").replace("b", "", 1) == "float16"
    for bad in ("torch.complex64", "TYPE_STRING", "BYTES", "torch.float128"):
        with pytest.raises(GenRepoError):
            normalize_dtype(bad)
