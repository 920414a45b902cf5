"""The values an input takes, and valid synthetic data drawn from them: one home for the build and the client.

A :class:`ValueDomain` travels in the contract, so reference data, smoke requests, example inputs and ``check-request``
all respect it (docs/manifest.md). numpy is imported lazily.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_INT_RANGE", "ValueDomain", "draw", "is_mask_like"]

#: Integers without a domain are drawn from this closed range: valid as an index into any table of 8+ rows.
DEFAULT_INT_RANGE = (0, 7)


def is_mask_like(name: str) -> bool:
    """Whether an input is a mask by its name (``attention_mask``, ``input_mask``): synthetic data is all ones."""
    return "mask" in name.lower()


@dataclass(frozen=True, slots=True)
class ValueDomain:
    """The values one input takes: ``low..high`` (inclusive) or exactly ``values``; ``source`` says who said so.

    ``mask_keep``: for a mask, the value that keeps a position (what synthetic data fills it with); None otherwise.
    """

    low: float | None = None
    high: float | None = None
    values: tuple[Any, ...] | None = None
    source: str = ""
    mask_keep: bool | int | None = None

    def describe(self) -> str:
        """``0..1`` or ``one of [1, 500, 999]``."""
        if self.values is not None:
            return f"one of {list(self.values)}"
        return f"{_number(self.low)}..{_number(self.high)}"

    def to_json(self) -> dict[str, Any]:
        """The contract's form: ``{"value_range": [lo, hi]}`` or ``{"values": [...]}``, with ``source``."""
        body: dict[str, Any] = (
            {"values": list(self.values)} if self.values is not None else {"value_range": [self.low, self.high]}
        )
        if self.mask_keep is not None:
            body["mask_keep"] = self.mask_keep
        if self.source:
            body["source"] = self.source
        return body

    @staticmethod
    def from_json(data: Mapping[str, Any], source: str = "") -> ValueDomain:
        """Inverse of :meth:`to_json` (also reads the manifest's ``{value_range}``/``{values}``)."""
        keep = data.get("mask_keep")
        # A contract is read from anywhere: false/true or 0/1 only (anything else says nothing).
        keep = keep if isinstance(keep, bool) or (type(keep) is int and keep in (0, 1)) else None
        if "values" in data:
            return ValueDomain(values=tuple(data["values"]), source=str(data.get("source", source)), mask_keep=keep)
        low, high = data["value_range"]
        return ValueDomain(low, high, source=str(data.get("source", source)), mask_keep=keep)

    def dtype_problem(self, dtype: str) -> str | None:
        """Why this domain cannot hold values of numpy ``dtype`` (None when it can)."""
        import numpy as np

        numbers = list(self.values) if self.values is not None else [self.low, self.high]
        if self.values is None and self.low is not None and self.high is not None and self.low > self.high:
            return f"value_range low {_number(self.low)} is above high {_number(self.high)}"
        kind = np.dtype(dtype).kind
        if kind == "b":
            if any(v not in (0, 1) for v in numbers):
                return f"a bool input takes only 0/1 (false/true), not {self.describe()}"
        elif kind in "iu":
            if any(isinstance(v, float) and not v.is_integer() for v in numbers):
                return f"an integer input ({dtype}) takes integer values, not {self.describe()}"
            info = np.iinfo(dtype)
            if any(not info.min <= v <= info.max for v in numbers if v is not None):
                return f"{self.describe()} does not fit {dtype} ({info.min}..{info.max})"
        return None

    def array_problem(self, array: np.ndarray[Any, Any]) -> str | None:
        """Why some value of ``array`` is outside this domain (None when all are inside, or the array is empty)."""
        import numpy as np

        if array.size == 0 or array.dtype.kind not in "biuf":
            return None
        if self.values is not None:
            outside = ~np.isin(array, np.asarray(self.values))
            if outside.any():
                return f"value {array[outside].flat[0]!r} is not {self.describe()}"
            return None
        low, high = array.min(), array.max()
        if self.low is not None and low < self.low:
            return f"value {low!r} is below {self.describe()}"
        if self.high is not None and high > self.high:
            return f"value {high!r} is above {self.describe()}"
        return None


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(value)


def draw(
    rng: np.random.Generator, name: str, dtype: str, shape: Sequence[int], domain: ValueDomain | None = None
) -> np.ndarray[Any, Any]:
    """Valid synthetic values of numpy ``dtype`` for input ``name`` at ``shape`` (see the module docstring)."""
    import numpy as np

    shape = tuple(int(s) for s in shape)
    kind = np.dtype(dtype).kind
    if domain is not None and domain.mask_keep is not None:
        return np.full(shape, domain.mask_keep, dtype=dtype)  # a mask: every position kept
    if domain is not None and domain.values is not None:
        choices = np.asarray(domain.values).astype(dtype)
        return choices[rng.integers(0, len(choices), size=shape)]
    if domain is None and is_mask_like(name) and kind in "biu":
        return np.ones(shape, dtype=dtype)  # every position valid: no fully masked row (NaN in a softmax)
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if domain is None:
        if kind == "f":
            return rng.standard_normal(size=shape, dtype=np.float32).astype(dtype)
        low, high = DEFAULT_INT_RANGE
    else:
        assert domain.low is not None and domain.high is not None  # a range: values were handled above
        if kind == "f":
            return rng.uniform(float(domain.low), float(domain.high), size=shape).astype(dtype)
        low, high = math.ceil(domain.low), math.floor(domain.high)
    info = np.iinfo(dtype)
    low, high = max(int(low), int(info.min)), min(int(high), int(info.max))
    return rng.integers(low, high + 1, size=shape, dtype=np.int64).astype(dtype)
