"""One tensor's spec: AITune's ``TensorSpec`` (dtype, recorded shapes, batch axes) and explicit dynamic dims.

``DynamicDim``/``BatchDim`` are ``aitune.torch.dynamic_shapes``'s; a shape definition mixes them with static sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from generator.errors import SpecError
from generator.specs.paths import Locator, path_from_json, path_to_json

__all__ = ["BatchDim", "DynamicDim", "ShapeDefinition", "TensorSpec", "dtype_name"]


# -- Explicit dynamic shapes -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DynamicDim:
    """Named dynamic dimension with inclusive bounds (``aitune.torch.dynamic_shapes.DynamicDim``).

    Raises :class:`SpecError` on the same conditions as AITune's ``AITuneUserInputError``: empty name, non-integer
    or non-positive bounds, ``not min < max``, ``not min <= opt <= max``.
    """

    name: str
    min: int
    max: int
    opt: int | None = None

    def __post_init__(self) -> None:
        problems = dim_problems(self.name, self.min, self.max, self.opt)
        if problems:
            raise SpecError(f"{type(self).__name__} {self.name!r}: {'; '.join(problems)}")

    def to_dict(self) -> dict[str, Any]:
        """AITune's JSON form (``{"type", "name", "min", "max", "opt"}``)."""
        return {"type": type(self).__name__, "name": self.name, "min": self.min, "max": self.max, "opt": self.opt}


@dataclass(frozen=True, slots=True)
class BatchDim(DynamicDim):
    """Dynamic dimension representing the module's logical batch size."""


ShapeDefinition = tuple[int | DynamicDim, ...]


def dim_problems(name: Any, min_: Any, max_: Any, opt: Any) -> list[str]:
    """AITune's rules for a dynamic dimension, as messages (empty when valid)."""
    problems = []
    if not isinstance(name, str) or not name:
        problems.append(f"name must be a non-empty string, got {name!r}")
    ints_ok = True
    for label, value in (("min", min_), ("max", max_), ("opt", opt)):
        if value is None and label == "opt":
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"{label} must be an integer, got {value!r}")
            ints_ok = False
        elif value <= 0:
            problems.append(f"{label} must be positive, got {value}")
    if ints_ok:
        if not min_ < max_:
            problems.append(f"must satisfy min < max, got min={min_}, max={max_}")
        if opt is not None and not min_ <= opt <= max_:
            problems.append(f"must satisfy min <= opt <= max, got min={min_}, opt={opt}, max={max_}")
    return problems


def shape_definition_from_json(shape: list[Any]) -> ShapeDefinition:
    """``[int | {"type": "BatchDim"|"DynamicDim", ...}]`` to a ShapeDefinition."""
    out: list[int | DynamicDim] = []
    for entry in shape:
        if isinstance(entry, Mapping):
            cls = BatchDim if entry.get("type") == "BatchDim" else DynamicDim
            out.append(cls(entry["name"], entry["min"], entry["max"], entry.get("opt")))
        else:
            out.append(int(entry))
    return tuple(out)


# -- TensorSpec ------------------------------------------------------------------------------------------------------
_NUMPY_TO_TORCH_DTYPE = {"bool": "torch.bool"}


def dtype_name(array: Any) -> str:
    """AITune's dtype string (``str(torch.dtype)``) for a torch tensor or numpy array."""
    text = str(array.dtype)
    if text.startswith("torch."):
        return text
    return _NUMPY_TO_TORCH_DTYPE.get(text, f"torch.{text}")


@dataclass(slots=True)
class TensorSpec:
    """Tensor metadata (``aitune.torch.module.tensor_spec.TensorSpec``).

    ``shape`` holds ints for static axes and ``batch<i>`` / ``dim<i>`` for axes seen changing; ``dtype`` is AITune's
    string form (``"torch.float32"``). ``bs_multipliers`` is AITune's private ``_bs_multipliers`` (size / batch size per
    axis, ``None`` for NaN); AITune's JSON lacks it, so it is ``None`` unless ``batch_axis_multipliers`` gave it (or
    :func:`infer_batch_multipliers` inferred it). Deviations, with the reason:

    - an unknown batch axis multiplier is 1 in :meth:`get_batch_axis_multipliers` (AITune would crash on ``int(nan)``;
      it never has to, as it always recorded them);
    - ``__eq__`` compares all fields; AITune compares ranks only (a graph-matching key), gen-repo needs value equality
      for round trips and caching;
    - :meth:`update_shapes_seen` keeps an axis's ``batch``/``dim`` label when either side's multiplier is unknown and
      the other carries the same label (JSON-read specs cannot recompute it).
    """

    shape: list[str | int]
    min_shape: list[int]
    max_shape: list[int]
    dtype: str | None
    bs_multipliers: list[float | None] | None = None

    @staticmethod
    def from_tensor(tensor: Any, batch_size: float) -> TensorSpec:
        """TensorSpec of one observed tensor (numpy array or torch tensor); ``batch_size`` NaN when unknown."""
        shape = [int(s) for s in tensor.shape]
        multipliers: list[float | None]
        # NaN batch size: AITune records NaN multipliers; None is this module's "unknown".
        multipliers = [None] * len(shape) if math.isnan(batch_size) else [size / batch_size for size in shape]
        return TensorSpec(list(shape), shape[:], shape[:], dtype_name(tensor), multipliers)

    def describe(self) -> str:
        """One-line description: shape, min/max shape and dtype."""
        shape = ", ".join(str(d) for d in self.shape)
        mins = ", ".join(str(d) for d in self.min_shape)
        maxs = ", ".join(str(d) for d in self.max_shape)
        return f"shape=[{shape}] min_shape=[{mins}] max_shape=[{maxs}] dtype={self.dtype}"

    def __str__(self) -> str:
        return "shape=[" + ", ".join(str(d) for d in self.shape) + "]"

    def __repr__(self) -> str:
        return f"{self} dtype={self.dtype}"

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    def batch_axes(self) -> list[int]:
        """Axes labelled ``batch<i>``."""
        return [i for i, d in enumerate(self.shape) if type(d) is str and d[:5] == "batch"]

    def multipliers_known(self) -> bool:
        """Whether every batch axis has a recorded (or declared) integer multiplier."""
        if self.bs_multipliers is None:
            return not self.batch_axes()
        return all(self.bs_multipliers[a] is not None for a in self.batch_axes())

    def get_batch_axis_multipliers(self) -> dict[int, int]:
        """Mapping of batch axis to its integer multiplier (1 assumed where unknown, see class docstring)."""
        result = {}
        for axis in self.batch_axes():
            value = None if self.bs_multipliers is None else self.bs_multipliers[axis]
            result[axis] = 1 if value is None else int(value)
        return result

    def get_max_batch_size(self) -> int:
        """Largest size seen on any batch axis; 1 without batch axes."""
        return max((self.max_shape[a] for a in self.batch_axes()), default=1)

    def get_min_batch_size(self) -> int | None:
        """Smallest size seen on any batch axis; None without batch axes."""
        return min((self.min_shape[a] for a in self.batch_axes()), default=None)

    def has_batch_axis(self) -> bool:
        """Whether any axis is a batch axis."""
        return bool(self.batch_axes())

    def has_dynamic_axis(self) -> bool:
        """Whether any axis is a ``dim<i>`` axis."""
        return any(isinstance(d, str) and d.startswith("dim") for d in self.shape)

    def matches(self, other: TensorSpec) -> bool:
        """Same rank and equal static sizes wherever both are static."""
        if self.rank != other.rank:
            return False
        pairs = zip(self.shape, other.shape, strict=True)
        return all(not (isinstance(a, int) and isinstance(b, int) and a != b) for a, b in pairs)

    def update_shapes_seen(self, other: TensorSpec) -> None:
        """Widen the recorded ranges with another observation (AITune's batch-axis detection by multipliers)."""
        if self.rank != other.rank:
            raise SpecError("Tensors must have the same rank")
        unknown: list[float | None] = [None] * self.rank
        mine: list[float | None] = list(self.bs_multipliers) if self.bs_multipliers is not None else unknown[:]
        theirs: list[float | None] = other.bs_multipliers if other.bs_multipliers is not None else unknown
        for i in range(self.rank):
            if self.shape[i] == other.shape[i]:
                continue
            self.min_shape[i] = min(self.min_shape[i], other.min_shape[i])
            self.max_shape[i] = max(self.max_shape[i], other.max_shape[i])
            a, b = mine[i], theirs[i]
            if a is not None and b is not None:
                if a == b and float(a).is_integer():
                    self.shape[i] = f"batch{i}"
                else:
                    mine[i] = None
                    self.shape[i] = f"dim{i}"
            else:
                # Unknown multiplier (JSON-read spec): keep a label one side already established.
                label = self.shape[i] if isinstance(self.shape[i], str) else other.shape[i]
                if isinstance(label, str) and label.startswith("batch"):
                    known = a if a is not None else b
                    mine[i] = known
                    self.shape[i] = f"batch{i}"
                else:
                    mine[i] = None
                    self.shape[i] = f"dim{i}"
        self.bs_multipliers = mine if (self.bs_multipliers is not None or any(m is not None for m in mine)) else None

    def to_json_dict(self, locator: Locator) -> dict[str, Any]:
        """One ``tensor_data`` entry of AITune's JSON form (plus the ``batch_axis_multipliers`` extension if known)."""
        entry: dict[str, Any] = {
            "access_path": locator.display_path,
            "semantic_path": path_to_json(locator.path),
            "shape": list(self.shape),
            "min_shape": list(self.min_shape),
            "max_shape": list(self.max_shape),
            "dtype": self.dtype,
        }
        if self.bs_multipliers is not None and self.batch_axes() and self.multipliers_known():
            entry["batch_axis_multipliers"] = {str(a): m for a, m in self.get_batch_axis_multipliers().items()}
        return entry

    @staticmethod
    def from_json_dict(entry: Mapping[str, Any], is_output: bool = False) -> tuple[Locator, TensorSpec]:
        """Inverse of :meth:`to_json_dict`; expects a schema-valid entry."""
        shape = list(entry["shape"])
        multipliers: list[float | None] | None = None
        declared = entry.get("batch_axis_multipliers")
        if declared:
            multipliers = [None] * len(shape)
            for axis, value in declared.items():
                multipliers[int(axis)] = float(value)
        spec = TensorSpec(shape, list(entry["min_shape"]), list(entry["max_shape"]), entry.get("dtype"), multipliers)
        locator = Locator(path_from_json(entry["semantic_path"]), entry.get("access_path", ""), is_output)
        return locator, spec
