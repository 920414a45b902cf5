"""Client-side request validation for Triton models: a model's contract and the checks Triton applies to a request.

Importable with numpy and tritonclient only (no torch, no onnx): client teams use it before a request leaves them.

A :class:`ModelContract` holds what a request must look like (input names, data types, full shapes with the batch axis
first when ``max_batch_size > 0``, and per-axis size ranges). It comes from

- a repository gen-repo built (``<model>/<version>/gen_repo/contract.json``: exact min/opt/max ranges),
- any ``config.pbtxt`` (ranges from ``dims`` alone, see below), or
- a live server (``get_model_config`` over gRPC or HTTP).

Ranges from a config alone: a static dim allows exactly that size; a ``-1`` dim allows any size ``>= 0`` with no upper
bound, because that is what Triton itself accepts for a variable-size dimension (model_configuration.md: "any value
greater-or-equal-to 0"); the batch axis allows ``1..max_batch_size``. Only contract.json knows tighter ranges (the
TensorRT optimization profile), so prefer :meth:`ModelContract.from_repository` for gen-repo repositories: it reads
the version Triton serves (the config's ``version_policy``, else the highest version folder).

The classes live in :mod:`generator.contracts`; this module is their public home.
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
