"""One smoke request: sent as numpy arrays, its answer judged against the contract, a refusal told in one line.

Also the request a ``reject_shape`` check sends: opt-shape inputs with one axis just outside its range.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
from tritonclient.utils import InferenceServerException

from generator.client import ModelContract, to_infer_inputs
from generator.errors import one_line
from generator.triton.connection import Connection

__all__ = ["exception_text", "infer", "out_of_range_inputs", "output_problems"]

#: Triton prefixes request errors with the request id; ours are anonymous, so the prefix is noise.
_REQUEST_ID = re.compile(r"^\[request id: [^\]]*\]\s*")


def infer(
    connection: Connection,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    datatypes: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Run one request of numpy arrays; return every requested output by name (raises when refused)."""
    infer_inputs = to_infer_inputs(inputs, protocol=connection.protocol, datatypes=datatypes)
    return connection.infer(model, infer_inputs, outputs)


def exception_text(exc: BaseException) -> str:
    """A server's or client's error as one line, without Triton's request-id prefix."""
    told = (exc.message() or exc) if isinstance(exc, InferenceServerException) else exc
    return _REQUEST_ID.sub("", one_line(told, limit=None))  # whole: a refusal's details keep Triton's full text


def output_problems(
    contract: ModelContract, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]
) -> list[str]:
    """Missing outputs, wrong dtypes, shapes that do not fit the config dims or the request's batch size."""
    problems = []
    batch = next(iter(inputs.values())).shape[0] if contract.batching and inputs else None
    for tensor in contract.outputs:
        array = outputs.get(tensor.name)
        if array is None:
            problems.append(f"output '{tensor.name}' missing")
            continue
        if tensor.data_type != "TYPE_STRING" and array.dtype != tensor.dtype:
            problems.append(f"output '{tensor.name}' has dtype {array.dtype}, expected {tensor.dtype}")
        shape = list(array.shape)
        want = ([batch] if batch is not None else []) + list(tensor.dims)
        if len(shape) != len(want) or any(w >= 0 and s != w for s, w in zip(shape, want, strict=False)):
            shown = ["-1" if w < 0 else str(w) for w in want]
            problems.append(f"output '{tensor.name}' has shape {shape}, expected [{', '.join(shown)}]")
    return problems


def out_of_range_inputs(contract: ModelContract) -> tuple[dict[str, np.ndarray], list[str]]:
    """Return opt-shape inputs with each input's first bounded non-batch axis just outside its range.

    One above the maximum, or one below the minimum when unbounded above; with a description of each change. No
    changes when no axis is bounded.
    """
    base = contract.example_inputs("opt", batch_size=1 if contract.batching else None)
    first_axis = 1 if contract.batching else 0
    changed: dict[str, np.ndarray] = {}
    changes = []
    for tensor in contract.inputs:
        array = base[tensor.name]
        for axis in range(first_axis, tensor.rank):
            low, high = tensor.min_shape[axis], tensor.max_shape[axis]
            if high is not None:
                size = high + 1
            elif low > 1:
                size = low - 1
            else:
                continue
            shape = list(array.shape)
            shape[axis] = size
            changed[tensor.name] = _fill(array, tuple(shape))
            allowed = f"{low}..{'' if high is None else high}" if low != high else f"exactly {low}"
            changes.append(f"input '{tensor.name}' axis {axis} = {size}, allowed {allowed}")
            break
    return {**base, **changed}, changes


def _fill(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Return an array of ``shape`` with ``array``'s dtype and values (repeated), so ids and masks stay valid."""
    if array.size == 0:
        return np.zeros(shape, dtype=array.dtype)
    return np.resize(array, shape).astype(array.dtype, copy=False)
