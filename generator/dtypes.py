"""Every tensor data type gen-repo knows, once: torch <-> Triton <-> wire <-> numpy <-> ONNX <-> safetensors <-> size.

Pure data (numpy only), so the client library, lint and validate use it. A dtype is servable by a target when its
runtimes carry it (:data:`TARGET_RUNTIMES`, :data:`RUNTIME_GAPS`); :func:`unservable_reason` says why not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from generator.errors import GenRepoError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BACKEND_DATA_TYPES",
    "DATA_TYPES",
    "DTYPES",
    "DType",
    "TORCH_DTYPES",
    "TORCH_TO_TRITON",
    "by_numpy",
    "by_onnx",
    "by_torch",
    "by_triton",
    "config_data_type",
    "normalize_dtype",
    "numpy_dtype",
    "servable_torch_dtypes",
    "RUNTIME_GAPS",
    "SAFETENSORS_TO_NUMPY",
    "TARGET_RUNTIMES",
    "UNSERVED_ADVICE",
    "unservable_reason",
    "wire_datatype",
]

#: The runtimes a model of each target runs in, to be built and to be served. Every build checks the exported ONNX
#: model in onnxruntime's CPU kernels against torch (and keeps the reference data in numpy arrays); the onnx and
#: python targets are served by onnxruntime (the python target on the CPU), the tensorrt target by a TensorRT plan.
TARGET_RUNTIMES: dict[str, tuple[str, ...]] = {
    "tensorrt": ("onnxruntime-cpu", "tensorrt"),
    "onnx": ("onnxruntime-cpu",),
    "python": ("onnxruntime-cpu",),
}

#: What each runtime cannot execute: torch dtype -> why, as measured (docs/manifest.md). onnxruntime's CPU kernels
#: run float16 models (Gemm, Conv, attention and LSTM were checked against torch) but no bfloat16 ones.
RUNTIME_GAPS: dict[str, dict[str, str]] = {
    "onnxruntime-cpu": {
        "torch.bfloat16": "onnxruntime's CPU kernels have no bfloat16 (a bfloat16 Gemm or MatMul fails to load: "
                          "NOT_IMPLEMENTED), and numpy, which holds the build's reference data, has no bfloat16",
    },
    "tensorrt": {
        name: f"TensorRT has no {name.removeprefix('torch.')} tensors"
        for name in ("torch.float64", "torch.int16", "torch.uint16", "torch.uint32", "torch.uint64")
    },
}


#: What to do with a dtype no target serves (torch dtype -> advice), for the refusal's message.
UNSERVED_ADVICE: dict[str, str] = {
    "torch.bfloat16": "record and serve the model in float16 (model.half(): onnxruntime's CPU kernels run it) or "
                      "float32",
}


def unservable_reason(torch_dtype: str, target: str) -> str | None:
    """Why ``target`` cannot build and serve tensors of ``torch_dtype`` (AITune's string form); None when it can."""
    reasons = [RUNTIME_GAPS.get(runtime, {}).get(torch_dtype) for runtime in TARGET_RUNTIMES[target]]
    return "; ".join(r for r in reasons if r) or None


def _targets(torch_dtype: str | None) -> frozenset[str]:
    if torch_dtype is None:
        return frozenset()
    return frozenset(t for t in TARGET_RUNTIMES if unservable_reason(torch_dtype, t) is None)


@dataclass(frozen=True, slots=True)
class DType:
    """One data type as each layer spells it.

    ``numpy``: the numpy dtype name (``"bfloat16"`` is ml_dtypes', ``"object"`` holds BYTES); ``safetensors``: that
    format's spelling (None: none); ``byte_size``: None where it varies; ``targets``: the targets that serve a torch
    tensor of this type.
    """

    triton: str
    wire: str
    torch: str | None
    numpy: str
    onnx: int
    safetensors: str | None
    byte_size: int | None
    targets: frozenset[str]

    @property
    def host_numpy(self) -> str:
        """The numpy dtype that holds this type's values without ml_dtypes: bfloat16 widens to float32."""
        return "float32" if self.numpy == "bfloat16" else self.numpy

    @property
    def native_numpy(self) -> str | None:
        """The dtype numpy has of its own for this type; None for bfloat16 (ml_dtypes) and strings (object arrays)."""
        return None if self.numpy in ("bfloat16", "object") else self.numpy

    @property
    def floating(self) -> bool:
        """Whether values are floating point (bfloat16 included)."""
        return self.numpy in ("float16", "float32", "float64", "bfloat16")


#: Every Triton data type gen-repo handles, in Triton's DataType enum order (messages list them in this order).
DTYPES: tuple[DType, ...] = (
    DType("TYPE_BOOL", "BOOL", "torch.bool", "bool", 9, "BOOL", 1, _targets("torch.bool")),
    DType("TYPE_UINT8", "UINT8", "torch.uint8", "uint8", 2, "U8", 1, _targets("torch.uint8")),
    DType("TYPE_UINT16", "UINT16", "torch.uint16", "uint16", 4, "U16", 2, _targets("torch.uint16")),
    DType("TYPE_UINT32", "UINT32", "torch.uint32", "uint32", 12, "U32", 4, _targets("torch.uint32")),
    DType("TYPE_UINT64", "UINT64", "torch.uint64", "uint64", 13, "U64", 8, _targets("torch.uint64")),
    DType("TYPE_INT8", "INT8", "torch.int8", "int8", 3, "I8", 1, _targets("torch.int8")),
    DType("TYPE_INT16", "INT16", "torch.int16", "int16", 5, "I16", 2, _targets("torch.int16")),
    DType("TYPE_INT32", "INT32", "torch.int32", "int32", 6, "I32", 4, _targets("torch.int32")),
    DType("TYPE_INT64", "INT64", "torch.int64", "int64", 7, "I64", 8, _targets("torch.int64")),
    DType("TYPE_FP16", "FP16", "torch.float16", "float16", 10, "F16", 2, _targets("torch.float16")),
    DType("TYPE_FP32", "FP32", "torch.float32", "float32", 1, "F32", 4, _targets("torch.float32")),
    DType("TYPE_FP64", "FP64", "torch.float64", "float64", 11, "F64", 8, _targets("torch.float64")),
    DType("TYPE_STRING", "BYTES", None, "object", 8, None, None, _targets(None)),
    DType("TYPE_BF16", "BF16", "torch.bfloat16", "bfloat16", 16, "BF16", 2, _targets("torch.bfloat16")),
)

_BY_TRITON = {d.triton: d for d in DTYPES}
_BY_TORCH = {d.torch: d for d in DTYPES if d.torch is not None}
_BY_ONNX = {d.onnx: d for d in DTYPES}
_BY_NUMPY = {d.numpy: d for d in DTYPES}

#: Config data type -> (Triton wire datatype, numpy dtype name): the table as requests see it (the client library,
#: :mod:`generator.client`, exports these lookups). TYPE_STRING travels as BYTES in numpy object arrays; BF16 has no
#: numpy dtype, tritonclient uses ml_dtypes.bfloat16 (resolved lazily in :func:`numpy_dtype`).
DATA_TYPES: dict[str, tuple[str, str]] = {d.triton: (d.wire, d.numpy) for d in DTYPES}
_WIRE_TO_CONFIG = {wire: config for config, (wire, _) in DATA_TYPES.items()}


def wire_datatype(data_type: str) -> str:
    """Triton's protocol datatype (``"FP32"``) for a config data type (``"TYPE_FP32"``); wire names pass through."""
    if data_type in DATA_TYPES:
        return DATA_TYPES[data_type][0]
    if data_type in _WIRE_TO_CONFIG:
        return data_type
    raise ValueError(f"unknown Triton data type {data_type!r}; expected one of {', '.join(DATA_TYPES)}")


def config_data_type(datatype: str) -> str:
    """Config data type (``"TYPE_FP32"``) for a wire datatype (``"FP32"``); config names pass through."""
    if datatype in DATA_TYPES:
        return datatype
    if datatype in _WIRE_TO_CONFIG:
        return _WIRE_TO_CONFIG[datatype]
    raise ValueError(f"unknown Triton datatype {datatype!r}; expected one of {', '.join(_WIRE_TO_CONFIG)}")


def numpy_dtype(data_type: str) -> np.dtype[Any]:
    """Return the numpy dtype a request uses for a config (``TYPE_FP32``) or wire (``FP32``) data type."""
    import numpy as np  # here: validate, plan and lint use the tables above and must not pay for numpy's import

    name = DATA_TYPES[config_data_type(data_type)][1]
    if name == "bfloat16":
        import ml_dtypes  # tritonclient's own BF16 representation; imported only when a model uses BF16

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


#: safetensors dtype -> numpy dtype, for the arrays numpy holds (not BF16 or FP8): the table's column, and C64
#: (complex64), which numpy and safetensors have and Triton has no data type for (read as an .npz would read it).
SAFETENSORS_TO_NUMPY: dict[str, str] = {
    **{d.safetensors: d.numpy for d in DTYPES if d.safetensors is not None and d.native_numpy is not None},
    "C64": "complex64",
}

#: The config data types a Triton 2.51 backend maps to its runtime's tensors, for the backends that refuse the others
#: at load ("unsupported datatype"): the pytorch backend's ModelConfigDataTypeToTorchType (pytorch_backend
#: src/libtorch_utils.cc: no unsigned type wider than 8 bits, no BF16; TYPE_STRING is not a torch type, the backend
#: takes it apart, as 1-D lists), the onnxruntime backend's ModelConfigDataTypeToOnnxDataType (onnxruntime_backend
#: src/onnxruntime_utils.cc: no BF16 before 2.52). Other backends take every type at load.
BACKEND_DATA_TYPES: dict[str, frozenset[str]] = {
    "pytorch": frozenset({"TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
                          "TYPE_FP16", "TYPE_FP32", "TYPE_FP64"}),
    "onnxruntime": frozenset(d.triton for d in DTYPES if d.triton != "TYPE_BF16"),
}

#: Servable torch dtype (AITune's string form) -> Triton data type; anything else is refused with a clear message.
TORCH_TO_TRITON: dict[str, str] = {d.torch: d.triton for d in DTYPES if d.torch is not None and d.targets}

#: Every ``str(torch.dtype)`` torch 2.13 defines, servable or not: tells a dtype gen-repo cannot serve from a string
#: that is no torch dtype at all (a typo, ``torch.float128``). Held equal to the installed torch's.
TORCH_DTYPES = frozenset({
    "torch.bfloat16", "torch.bits16", "torch.bits1x8", "torch.bits2x4", "torch.bits4x2", "torch.bits8", "torch.bool",
    "torch.complex128", "torch.complex32", "torch.complex64", "torch.float16", "torch.float32",
    "torch.float4_e2m1fn_x2", "torch.float64", "torch.float8_e4m3fn", "torch.float8_e4m3fnuz", "torch.float8_e5m2",
    "torch.float8_e5m2fnuz", "torch.float8_e8m0fnu", "torch.int1", "torch.int16", "torch.int2", "torch.int3",
    "torch.int32", "torch.int4", "torch.int5", "torch.int6", "torch.int64", "torch.int7", "torch.int8",
    "torch.qint32", "torch.qint8", "torch.quint2x4", "torch.quint4x2", "torch.quint8", "torch.uint1", "torch.uint16",
    "torch.uint2", "torch.uint3", "torch.uint32", "torch.uint4", "torch.uint5", "torch.uint6", "torch.uint64",
    "torch.uint7", "torch.uint8",
})

#: Spellings :func:`normalize_dtype` accepts besides numpy's, Triton's and the wire names (torch's own aliases).
_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64",
            "bool_": "bool"}
#: Lower-case numpy, Triton (``TYPE_`` removed) and wire names -> numpy name, for the types torch has.
_NAMES = {
    **{name: d.numpy for d in DTYPES if d.torch is not None
       for name in (d.numpy, d.triton.removeprefix("TYPE_").lower(), d.wire.lower())},
    **_ALIASES,
}


def by_triton(data_type: str) -> DType | None:
    """The entry of a Triton config data type (``"TYPE_FP32"``); None when gen-repo does not know it."""
    return _BY_TRITON.get(data_type)


def by_torch(dtype: str | None) -> DType | None:
    """The entry of a torch dtype string (``"torch.float32"``); None for an unknown or no torch dtype."""
    return _BY_TORCH.get(dtype or "")


def by_numpy(name: str) -> DType | None:
    """The entry of a numpy dtype name (``"float32"``; ``"bfloat16"`` as ml_dtypes names it); None when unknown."""
    return _BY_NUMPY.get(name)


def by_onnx(elem_type: int) -> DType | None:
    """The entry of an ONNX ``TensorProto`` element type (1 is FLOAT); None when gen-repo does not know it."""
    return _BY_ONNX.get(elem_type)


def servable_torch_dtypes(target: str | None = None) -> list[str]:
    """The torch dtypes ``target`` serves (any target's when None), in :data:`DTYPES` order."""
    return [d.torch for d in DTYPES if d.torch is not None and d.targets and (target is None or target in d.targets)]


def normalize_dtype(dtype: Any) -> str:
    """Return a dtype as numpy spells it (``"float32"``, ``"int64"``, ``"bool"``, ``"bfloat16"``).

    Accepts torch dtypes and their strings (``"torch.float32"``), numpy dtypes, Triton names (``"TYPE_FP32"``,
    ``"FP32"``). Raises :class:`~generator.errors.GenRepoError` for a type torch has no tensors of here.
    """
    if isinstance(dtype, type):  # numpy scalar types (np.float32)
        # numpy only here: validate, plan and lint use the tables above and must not pay for numpy's import.
        import numpy as np

        dtype = np.dtype(dtype)
    text = str(dtype).removeprefix("torch.").removeprefix("TYPE_").lower()
    if text not in _NAMES:
        raise GenRepoError(f"unsupported tensor dtype {dtype!r}")
    return _NAMES[text]
