"""One input or output of a model's contract: its data type, config dims and the full request shapes it allows.

Shapes are full request shapes (batch axis first when the model batches); ``max_shape`` is None where a size has no
upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from generator.dtypes import numpy_dtype, wire_datatype
from generator.planning.values import ValueDomain

__all__ = ["MaxShape", "Shape", "TensorContract", "range_text", "tensor_shape_text"]

Shape = tuple[int, ...]
MaxShape = tuple[int | None, ...]


def range_text(low: int, high: int | None) -> str:
    """An axis's allowed sizes in words: ``>= 0``, ``exactly 16``, ``1..8``."""
    if high is None:
        return f">= {low}"
    if low == high:
        return f"exactly {low}"
    return f"{low}..{high}"


@dataclass(frozen=True, slots=True)
class TensorContract:
    """One input or output: config dims plus full request shapes (batch axis first when the model batches).

    ``max_shape`` entries are ``None`` where the size has no upper bound (a ``-1`` dim known only from a config).
    ``values`` is the input's value domain where contract.json gives one.
    """

    name: str
    data_type: str
    dims: Shape
    min_shape: Shape
    max_shape: MaxShape
    opt_shape: Shape | None = None
    optional: bool = False
    values: ValueDomain | None = None

    @property
    def dtype(self) -> np.dtype[Any]:
        """Numpy dtype of the tensor in a request."""
        return numpy_dtype(self.data_type)

    @property
    def datatype(self) -> str:
        """Triton wire datatype (``"FP32"``, ``"BYTES"``)."""
        return wire_datatype(self.data_type)

    @property
    def rank(self) -> int:
        """Number of axes of the full shape a request carries."""
        return len(self.min_shape)

    def to_dict(self) -> dict[str, Any]:
        """contract.json form of this tensor (``max_shape`` uses -1 for unbounded)."""
        out: dict[str, Any] = {
            "name": self.name,
            "data_type": self.data_type,
            "dims": list(self.dims),
            "min_shape": list(self.min_shape),
            "max_shape": [-1 if d is None else d for d in self.max_shape],
        }
        if self.opt_shape is not None:
            out["opt_shape"] = list(self.opt_shape)
        if self.optional:
            out["optional"] = True
        if self.values is not None:
            out.update(self.values.to_json())
        return out


def tensor_shape_text(tensor: TensorContract) -> str:
    """The allowed full shape in words: ``[1..8, 16]`` (``..`` with no end where a size is unbounded)."""
    parts = []
    for low, high in zip(tensor.min_shape, tensor.max_shape, strict=True):
        parts.append(str(low) if low == high else f"{low}..{'' if high is None else high}")
    return "[" + ", ".join(parts) + "]"
