"""Client-side request validation for Triton models: a model's contract and the checks Triton applies to a request.

Importable with numpy and tritonclient only, so client teams check a request before it leaves them (docs/client.md). The
classes live in :mod:`generator.contracts`; this module is their public home.
"""

from __future__ import annotations

from generator.contracts.model_contract import (
    ModelContract,
    RequestProblem,
    RequestProblemKind,
    RequestValidationError,
    config_to_contract,
    to_infer_inputs,
)
from generator.contracts.request_schema import json_request
from generator.contracts.tensor_contract import TensorContract
from generator.dtypes import DATA_TYPES, numpy_dtype, wire_datatype
from generator.planning.contract import CONTRACT_FORMAT

__all__ = [
    "CONTRACT_FORMAT",
    "DATA_TYPES",
    "ModelContract",
    "RequestProblem",
    "RequestProblemKind",
    "RequestValidationError",
    "TensorContract",
    "config_to_contract",
    "json_request",
    "numpy_dtype",
    "to_infer_inputs",
    "wire_datatype",
]
