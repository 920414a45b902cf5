"""Outputs against their references: the dtype-aware tolerances and the one element test.

Used by the build's check (onnxruntime against torch, :mod:`generator.export.onnx`) and by ``gen-repo smoke``
(the server against the stored references, :mod:`generator.smoke`), so both judge an output the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from generator.dtypes import normalize_dtype

__all__ = ["DEFAULT_TOLERANCES", "Comparison", "compare_arrays", "tolerance_for"]

#: (rtol, atol) per numpy dtype name: onnxruntime/TensorRT against torch, a server against the references. Integers
#: and bool compare exactly. float32's atol allows for accumulation order.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One output against its reference: whether every element is in tolerance, and the largest finite errors.

    The errors are None for strings (compared for equality only).
    """

    ok: bool
    max_abs_error: float | None
    max_rel_error: float | None


def tolerance_for(
    dtype: Any,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of ``dtype``: the table's, (0, 0) for integers, bool and strings.

    ``overrides`` replace table entries by dtype name; ``rtol``/``atol`` replace the result for every dtype. A numpy
    dtype is looked up by its name; any other spelling (torch, Triton) through :func:`generator.dtypes.normalize_dtype`,
    which refuses a type torch has no tensors of.
    """
    name = dtype.name if isinstance(dtype, np.dtype) else normalize_dtype(dtype)
    default = {**DEFAULT_TOLERANCES, **(overrides or {})}.get(name, (0.0, 0.0))
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def compare_arrays(have: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> Comparison:
    """Compare two arrays of one shape element by element: ``|have - want| <= atol + rtol * |want|``.

    NaN matches NaN and an infinity the same infinity. Integers and bool under a zero tolerance must be equal (compared
    as integers: float64 would round values above 2**53); strings must be equal. The reported errors are the largest
    finite ones (0 when there are none), so that they always serialise as JSON numbers.
    """
    if have.dtype.kind in "OSU" or want.dtype.kind in "OSU":
        return Comparison(bool(np.array_equal(have, want)), None, None)
    if have.size == 0:
        return Comparison(True, 0.0, 0.0)
    a, b = have.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: left out of the errors below, matched by allclose
        diff = np.abs(a - b)
    finite = np.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    rel = diff / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
    max_rel = float(rel[finite].max()) if finite.any() else 0.0
    if have.dtype.kind in "biu" and want.dtype.kind in "biu" and rtol == 0 and atol == 0:
        ok = bool(np.array_equal(have, want))
    else:
        ok = bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return Comparison(ok, max_abs, max_rel)
