"""GraphSpec data model with AITune's shape and batch semantics (``aitune.torch.module.graph_spec``).

Pure data plus the methods AITune defines, importable without torch. Names and results follow AITune 0.6.0 for the
same input; where this module must differ, the docstring says so and why. The JSON form read and written here is
the one AITune writes (``SampleMetadata.to_json_dict()`` plus ``dynamic_shapes_to_json()``); AITune's pickled
binary form is never read (see :mod:`generator.specs.schema`).
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from generator.errors import SpecError
from generator.naming import SemanticPath, format_tensor_name

__all__ = [
    "BatchDim",
    "DynamicDim",
    "ForwardParameter",
    "ForwardSignature",
    "GraphSpec",
    "Locator",
    "SampleMetadata",
    "ShapeDefinition",
    "TensorSpec",
    "dtype_name",
    "path_from_json",
    "path_to_json",
]


# --------------------------------------------------------------------------------------------------------------------
# Semantic paths
# --------------------------------------------------------------------------------------------------------------------
def path_from_json(value: Any) -> SemanticPath:
    """AITune's JSON semantic path (scalar, or list for deeper paths; ``[]`` for a bare output) to a Locator path."""
    if isinstance(value, list):
        return tuple(value)
    return value


def path_to_json(path: SemanticPath) -> str | int | list[str | int]:
    """Inverse of :func:`path_from_json`."""
    return list(path) if isinstance(path, tuple) else path


def _path_steps(path: SemanticPath) -> tuple[str | int, ...]:
    return path if isinstance(path, tuple) else (path,)


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a tensor lives in forward's arguments (or in its returned structure).

    AITune's Locator records container types per step; the JSON form keeps only the semantic ``path`` and the
    display ``access_path``, which is all gen-repo needs: dict keys are strings, sequence indices are ints.
    """

    path: SemanticPath
    access_path: str = field(default="", compare=False)
    is_output: bool = field(default=False, compare=False)

    @property
    def display_path(self) -> str:
        """Python-like access path (``extras["mask"]``), as AITune prints it."""
        return self.access_path or _display_path(self.path, self.is_output)

    @property
    def root_name(self) -> str | int:
        """First step of the path: the forward parameter for inputs."""
        steps = _path_steps(self.path)
        return steps[0] if steps else ""

    def get_value(self, obj: Any) -> Any:
        """The value at this path inside ``obj``."""
        for step in _path_steps(self.path):
            obj = obj[step]
        return obj

    def set_value(self, obj: Any, value: Any) -> Any:
        """Return ``obj`` with the value at this path replaced (tuples are rebuilt, other containers edited)."""
        return _set_in(obj, _path_steps(self.path), value)

    def __str__(self) -> str:
        return self.display_path


def _display_path(path: SemanticPath, is_output: bool = False) -> str:
    steps = _path_steps(path)
    if is_output or not steps:
        text = "output"
        rest = list(steps)
    else:
        text, rest = str(steps[0]), list(steps[1:])
    for step in rest:
        text += f'["{step}"]' if isinstance(step, str) else f"[{step}]"
    return text


def _set_in(obj: Any, steps: tuple[str | int, ...], value: Any) -> Any:
    if not steps:
        return value
    head, rest = steps[0], steps[1:]
    child = _set_in(obj[head], rest, value)
    if isinstance(obj, tuple):
        items = list(obj)
        items[head] = child  # type: ignore[index]
        return type(obj)(items) if type(obj) is tuple else type(obj)(*items)
    obj[head] = child
    return obj


# --------------------------------------------------------------------------------------------------------------------
# Explicit dynamic shapes
# --------------------------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------------------------
# TensorSpec
# --------------------------------------------------------------------------------------------------------------------
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

    ``shape`` holds ints for static axes and ``batch<i>`` / ``dim<i>`` for axes seen changing. ``dtype`` is AITune's
    string form (``"torch.float32"``) so this module needs no torch.

    ``bs_multipliers`` is AITune's private ``_bs_multipliers`` (per axis: size / batch size; ``None`` where AITune
    has NaN). AITune's JSON does not carry it, so it is ``None`` for specs read from JSON unless the optional
    extension field ``batch_axis_multipliers`` gave the batch axes' multipliers (or :func:`infer_batch_multipliers`
    inferred them). Deviations, with the reason:

    - Where a batch axis's multiplier is unknown, :meth:`get_batch_axis_multipliers` assumes 1 (AITune would crash
      on ``int(nan)``; it never has to, because it always recorded them).
    - ``__eq__`` compares all fields; AITune compares ranks only, because it uses TensorSpec as a graph-matching
      key, whereas gen-repo needs value equality for round trips and caching.
    - :meth:`update_shapes_seen` keeps an axis's existing ``batch``/``dim`` label when either side's multiplier is
      unknown and the other side carries the same label (JSON-read specs cannot recompute it).
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


# --------------------------------------------------------------------------------------------------------------------
# SampleMetadata and ForwardSignature
# --------------------------------------------------------------------------------------------------------------------
def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (str, bytes))


def _find_leaves(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if _is_array(value):
        yield prefix, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _find_leaves(item, (*prefix, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _find_leaves(item, (*prefix, index))
    else:
        yield prefix, value


def _collapse(steps: tuple[str | int, ...]) -> SemanticPath:
    return steps[0] if len(steps) == 1 else steps


@dataclass(slots=True)
class SampleMetadata:
    """Tensors (and, when ``strict``, other leaves) of forward's inputs or outputs, by semantic path."""

    tensor_data: tuple[tuple[Locator, TensorSpec], ...]
    other_data: tuple[tuple[Locator, Any], ...] = ()
    strict: bool = True
    llm_phase: str | None = None

    @property
    def tensor_specs(self) -> list[TensorSpec]:
        """The TensorSpecs in order."""
        return [spec for _, spec in self.tensor_data]

    @staticmethod
    def from_inputs(inputs: Mapping[str, Any], strict: bool = False, batch_size: float | None = None) -> SampleMetadata:
        """Metadata of inputs keyed by forward parameter name (numpy arrays or torch tensors are the tensors)."""
        bs = float("nan") if batch_size is None else float(batch_size)
        tensors, others = [], []
        for steps, value in _find_leaves(dict(inputs)):
            locator = Locator(_collapse(steps))
            if _is_array(value):
                tensors.append((locator, TensorSpec.from_tensor(value, bs)))
            elif strict:
                others.append((locator, value))
        return SampleMetadata(tuple(tensors), tuple(others), strict, None)

    @staticmethod
    def from_outputs(output: Any, strict: bool = False, batch_size: float | None = None) -> SampleMetadata:
        """Metadata of a forward's return value; a bare tensor has the empty path ``()``."""
        bs = float("nan") if batch_size is None else float(batch_size)
        tensors, others = [], []
        for steps, value in _find_leaves(output):
            locator = Locator(steps[0] if len(steps) == 1 else steps, is_output=True)
            if _is_array(value):
                tensors.append((locator, TensorSpec.from_tensor(value, bs)))
            elif strict:
                others.append((locator, value))
        return SampleMetadata(tuple(tensors), tuple(others), strict, None)

    def describe(self) -> str:
        """Table-like text of the tensors and other leaves."""
        lines = ["Tensors:"]
        lines += [f"  {loc.display_path} ({loc.path!r}): {spec.describe()}" for loc, spec in self.tensor_data]
        if self.other_data:
            lines.append("Other:")
            lines += [f"  {loc.display_path} ({loc.path!r}) = {value!r}" for loc, value in self.other_data]
        return "\n".join(lines) + "\n"

    def make_batch(self, inputs: dict[str, Any], batch_size: int) -> dict[str, Any]:
        """Copy of ``inputs`` with every tensor resized along its batch axes to ``multiplier * batch_size``."""
        inputs = copy.deepcopy(inputs)
        for locator, tensor_spec in self.tensor_data:
            inputs = locator.set_value(inputs, batch_tensor(locator.get_value(inputs), tensor_spec, batch_size))
        return inputs

    def update_shapes_seen(self, other: SampleMetadata) -> None:
        """Widen every tensor's ranges with another observation of the same structure."""
        mine = dict(self.tensor_data)
        theirs = dict(other.tensor_data)
        if mine.keys() != theirs.keys() or any(mine[k].rank != theirs[k].rank for k in mine):
            raise SpecError(f"Cannot update shapes seen, because tensor data is different:\n{self.describe()}"
                            f"!=\n{other.describe()}")
        for locator, spec in mine.items():
            spec.update_shapes_seen(theirs[locator])

    def update_max_batch_size(self, inputs: dict[str, Any], max_batch_size: int) -> None:
        """Record what the inputs look like at ``max_batch_size``."""
        batched = self.make_batch(inputs, max_batch_size)
        self.update_shapes_seen(SampleMetadata.from_inputs(batched, strict=True, batch_size=max_batch_size))

    def to_json_dict(self) -> dict[str, Any]:
        """AITune's ``SampleMetadata.to_json_dict()`` form."""
        return {
            "tensor_data": [spec.to_json_dict(loc) for loc, spec in self.tensor_data],
            "other_data": [
                {"access_path": loc.display_path, "semantic_path": path_to_json(loc.path), "value": value}
                for loc, value in self.other_data
            ],
            "strict": self.strict,
            "llm_phase": self.llm_phase,
        }

    @staticmethod
    def from_json_dict(data: Mapping[str, Any], is_output: bool = False) -> SampleMetadata:
        """Inverse of :meth:`to_json_dict`; expects a schema-valid document."""
        tensors = tuple(TensorSpec.from_json_dict(entry, is_output) for entry in data.get("tensor_data", []))
        others = tuple(
            (Locator(path_from_json(e["semantic_path"]), e.get("access_path", ""), is_output), e.get("value"))
            for e in data.get("other_data", [])
        )
        return SampleMetadata(tensors, others, bool(data.get("strict", True)), data.get("llm_phase"))


def batch_tensor(tensor: Any, tensor_spec: TensorSpec, batch_size: int) -> Any:
    """Resize ``tensor`` along its batch axes to ``multiplier * batch_size`` (slice, or repeat the first slice)."""
    for axis, multiplier in tensor_spec.get_batch_axis_multipliers().items():
        target = multiplier * batch_size
        size = int(tensor.shape[axis])
        index = [slice(None)] * len(tensor.shape)
        if size > target:
            index[axis] = slice(target)
            tensor = tensor[tuple(index)]
        elif size < target:
            index[axis] = slice(1)
            first = tensor[tuple(index)]
            if type(tensor).__module__.startswith("torch"):
                repeats = [1] * len(tensor.shape)
                repeats[axis] = target
                tensor = first.repeat(repeats)
            else:
                import numpy as np

                tensor = np.repeat(first, target, axis=axis)
    return tensor


_KINDS: dict[str, Any] = {
    kind.name: kind
    for kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}


@dataclass(frozen=True, slots=True)
class ForwardParameter:
    """One parameter of forward: name, ``inspect.Parameter`` kind name, whether it has a default."""

    name: str
    kind: str = "POSITIONAL_OR_KEYWORD"
    has_default: bool = False


@dataclass(frozen=True, slots=True)
class ForwardSignature:
    """Serializable forward signature used to bind a call's args/kwargs to parameter names."""

    parameters: tuple[ForwardParameter, ...]

    def _signature(self) -> inspect.Signature:
        return inspect.Signature(
            [
                inspect.Parameter(
                    p.name, _KINDS[p.kind], default=None if p.has_default else inspect.Parameter.empty
                )
                for p in self.parameters
            ]
        )

    def normalize(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        """Bind a call to the parameters, as ``inspect.Signature.bind`` does."""
        return self._signature().bind(*args, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """AITune's JSON form."""
        return {
            "parameters": [{"name": p.name, "kind": p.kind, "has_default": p.has_default} for p in self.parameters]
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ForwardSignature:
        """Inverse of :meth:`to_dict`."""
        return ForwardSignature(
            tuple(ForwardParameter(p["name"], p["kind"], bool(p["has_default"])) for p in data["parameters"])
        )


# --------------------------------------------------------------------------------------------------------------------
# GraphSpec
# --------------------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class GraphSpec:
    """One computational graph of a torch module (``aitune.torch.module.graph_spec.GraphSpec``).

    ``assumptions`` (not in AITune) lists what the loader had to assume about the JSON, e.g. inferred batch
    multipliers, so that ``gen-repo plan`` can say so.
    """

    name: str
    input_spec: SampleMetadata
    output_spec: SampleMetadata
    forward_signature: ForwardSignature
    dynamic_shapes: dict[SemanticPath, ShapeDefinition] = field(default_factory=dict)
    post_input_spec: SampleMetadata | None = None
    assumptions: list[str] = field(default_factory=list, compare=False)

    # -- AITune's recording API ---------------------------------------------------------------------------------------
    def update_shapes_seen(
        self,
        inputs_metadata: SampleMetadata,
        outputs_metadata: SampleMetadata,
        post_inputs_metadata: SampleMetadata | None = None,
    ) -> None:
        """Update metadata observed before, during and after another call."""
        self.input_spec.update_shapes_seen(inputs_metadata)
        if post_inputs_metadata is not None:
            if self.post_input_spec is None:
                self.post_input_spec = post_inputs_metadata
            else:
                self.post_input_spec.update_shapes_seen(post_inputs_metadata)
        self.output_spec.update_shapes_seen(outputs_metadata)

    def make_batch(self, args: tuple[Any, ...], kwargs: dict[str, Any], batch_size: int) -> tuple[tuple, dict]:
        """The call ``(args, kwargs)`` normalized and resized to ``batch_size``."""
        bound = self.forward_signature.normalize(args, kwargs)
        bound.arguments = self.input_spec.make_batch(dict(bound.arguments), batch_size)
        return bound.args, bound.kwargs

    def update_max_batch_size(self, sample: tuple[tuple, dict], max_batch_size: int) -> None:
        """Update input metadata with the specified maximum batch size."""
        args, kwargs = sample
        bound = self.forward_signature.normalize(args, kwargs)
        self.input_spec.update_max_batch_size(dict(bound.arguments), max_batch_size)

    # -- shapes and batch sizes ---------------------------------------------------------------------------------------
    def get_shape_definition(self, locator: Locator | SemanticPath) -> ShapeDefinition | None:
        """The explicit shape definition for an input path, or None."""
        path = locator.path if isinstance(locator, Locator) else locator
        return self.dynamic_shapes.get(path)

    def get_effective_input_shapes(
        self, locator: Locator | SemanticPath, tensor_spec: TensorSpec
    ) -> tuple[list[int], list[int], list[int]]:
        """(min, opt, max) shapes for compilation: an explicit definition wins, else (min_shape, max, max)."""
        definition = self.get_shape_definition(locator)
        if definition is None:
            return tensor_spec.min_shape[:], tensor_spec.max_shape[:], tensor_spec.max_shape[:]
        min_shape: list[int] = []
        opt_shape: list[int] = []
        max_shape: list[int] = []
        for dimension in definition:
            if isinstance(dimension, int):
                min_shape.append(dimension)
                opt_shape.append(dimension)
                max_shape.append(dimension)
            else:
                min_shape.append(dimension.min)
                opt_shape.append(dimension.max if dimension.opt is None else dimension.opt)
                max_shape.append(dimension.max)
        return min_shape, opt_shape, max_shape

    def iter_batch_size_ranges(self, normalized: bool = False) -> Iterator[tuple[int, int]]:
        """AITune's ``_iter_batch_size_ranges``: (min, max) of each batch axis.

        Per BatchDim of an explicit definition, else per recorded batch axis (divided by its multiplier when
        ``normalized``).
        """
        for locator, tensor_spec in self.input_spec.tensor_data:
            definition = self.get_shape_definition(locator)
            if definition is not None:
                for dimension in definition:
                    if isinstance(dimension, BatchDim):
                        yield dimension.min, dimension.max
                continue
            for axis, multiplier in tensor_spec.get_batch_axis_multipliers().items():
                divisor = multiplier if normalized else 1
                yield tensor_spec.min_shape[axis] // divisor, tensor_spec.max_shape[axis] // divisor

    _iter_batch_size_ranges = iter_batch_size_ranges

    def get_max_batch_size(self, normalized: bool = False) -> int:
        """Largest max over the batch ranges; 1 when there are none."""
        return max((hi for _, hi in self.iter_batch_size_ranges(normalized)), default=1)

    def get_min_batch_size(self) -> int | None:
        """Smallest min over the batch ranges; None when there are none."""
        return min((lo for lo, _ in self.iter_batch_size_ranges()), default=None)

    # -- names --------------------------------------------------------------------------------------------------------
    def input_tensor_names(self) -> list[str]:
        """AITune's TensorRT input names (``input_<path>``) in input_spec order."""
        return [format_tensor_name(loc.path, "input") for loc, _ in self.input_spec.tensor_data]

    def output_tensor_names(self) -> list[str]:
        """AITune's TensorRT output names (``output_<path>``) in output_spec order."""
        return [format_tensor_name(loc.path, "output") for loc, _ in self.output_spec.tensor_data]

    # -- JSON form ----------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """AITune's JSON form of a graph (the ``graph`` object of the fixtures).

        Deviation: AITune's own ``to_dict`` embeds pickled SampleMetadata; gen-repo never pickles, so this is the
        JSON form its tune reports carry.
        """
        data: dict[str, Any] = {
            "type": "GraphSpec",
            "name": self.name,
            "input_spec": self.input_spec.to_json_dict(),
            "output_spec": self.output_spec.to_json_dict(),
            "forward_signature": self.forward_signature.to_dict(),
            "dynamic_shapes": [
                {
                    "path": path_to_json(path),
                    "shape": [d if isinstance(d, int) else d.to_dict() for d in shape],
                }
                for path, shape in self.dynamic_shapes.items()
            ],
        }
        if self.post_input_spec is not None:
            data["post_input_spec"] = self.post_input_spec.to_json_dict()
        return data

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> GraphSpec:
        """A GraphSpec from its JSON form (also a tune report's graph entry: ``graph_name``, no signature).

        Expects a document that passed :mod:`generator.specs.schema`; a tune report graph without ``forward_signature``
        gets one parameter per distinct input root, in order of appearance (kind POSITIONAL_OR_KEYWORD).
        """
        input_spec = SampleMetadata.from_json_dict(data["input_spec"])
        output_spec = SampleMetadata.from_json_dict(data["output_spec"], is_output=True)
        if "forward_signature" in data and data["forward_signature"] is not None:
            signature = ForwardSignature.from_dict(data["forward_signature"])
        else:
            roots: list[str] = []
            for loc, _ in (*input_spec.tensor_data, *input_spec.other_data):
                root = loc.root_name
                if isinstance(root, str) and root not in roots:
                    roots.append(root)
            signature = ForwardSignature(tuple(ForwardParameter(r) for r in roots))
        dynamic_shapes = {
            path_from_json(entry["path"]): shape_definition_from_json(entry["shape"])
            for entry in data.get("dynamic_shapes") or []
        }
        post = data.get("post_input_spec")
        name = data.get("name", data.get("graph_name"))
        return GraphSpec(
            name=str(name),
            input_spec=input_spec,
            output_spec=output_spec,
            forward_signature=signature,
            dynamic_shapes=dynamic_shapes,
            post_input_spec=SampleMetadata.from_json_dict(post) if post else None,
        )

    def __str__(self) -> str:
        return f"Name={self.name}\nInput_spec:\n{self.input_spec.describe()}Output_spec:\n{self.output_spec.describe()}"

    def __repr__(self) -> str:
        return self.__str__()


def infer_batch_multipliers(graph: GraphSpec) -> list[str]:
    """Fill unknown batch-axis multipliers from the recorded ranges; return what was assumed, as sentences.

    AITune's JSON carries no multipliers. The reference range is the narrowest recorded batch range among inputs
    without an explicit definition; an axis whose (min, max) is exactly k times it gets multiplier k, any other
    unknown axis gets 1. Explicitly declared multipliers are kept.
    """
    # One pass that finds each tensor's batch axes: this runs for every spec validated (bench/bench_validate.py).
    found: list[tuple[Literal["input", "output"], Locator, TensorSpec, list[int]]] = []
    ranges: list[tuple[int, int]] = []
    for kind, meta in (("input", graph.input_spec), ("output", graph.output_spec)):
        for loc, spec in meta.tensor_data:
            axes = [i for i, d in enumerate(spec.shape) if type(d) is str and d[:5] == "batch"]
            if not axes:
                continue
            found.append((kind, loc, spec, axes))  # type: ignore[arg-type]
            if kind == "input" and loc.path not in graph.dynamic_shapes:
                ranges.extend((spec.min_shape[a], spec.max_shape[a]) for a in axes)
    if not ranges:
        return []
    ref_min, ref_max = min(ranges, key=lambda r: (r[1], r[0]))
    notes = []
    inferred: list[str] = []
    for kind, loc, spec, axes in found:
        known = spec.bs_multipliers
        if known is not None and all(known[a] is not None for a in axes):
            continue
        multipliers: list[float | None] = list(known or [None] * len(spec.shape))
        for axis in axes:
            if multipliers[axis] is not None:
                continue
            lo, hi = spec.min_shape[axis], spec.max_shape[axis]
            k = hi // ref_max if ref_max else 1
            if k >= 1 and lo == k * ref_min and hi == k * ref_max:
                multipliers[axis] = float(k)
                inferred.append(format_tensor_name(loc.path, kind))
                if k != 1:
                    notes.append(
                        f"{kind} {format_tensor_name(loc.path, kind)!r} axis {axis}: batch multiplier {k} inferred "
                        f"from its range {lo}..{hi} against the batch range {ref_min}..{ref_max}"
                    )
            else:
                multipliers[axis] = 1.0
                notes.append(
                    f"{kind} {format_tensor_name(loc.path, kind)!r} axis {axis}: batch multiplier unknown "
                    f"(range {lo}..{hi} is no integer multiple of {ref_min}..{ref_max}); assumed 1"
                )
        spec.bs_multipliers = multipliers
    # The narrowest range is taken as the batch size itself. That is certain when it starts at 1 (k * b >= k) or
    # when no k > 1 divides both ends; otherwise every tensor may be stacked (a [uncond; cond] guidance batch holds
    # 2 x the batch in every tensor), which the JSON cannot tell: say so.
    if inferred and ref_min > 1 and math.gcd(ref_min, ref_max) > 1:
        shown = ", ".join(repr(name) for name in dict.fromkeys(inferred))
        notes.append(
            f"batch multipliers of {shown} inferred against the narrowest batch range {ref_min}..{ref_max}, taken "
            f"as the batch size itself (multiplier 1); a stacked batch (e.g. 2 x the batch for guidance) would "
            "record the same ranges and AITune's JSON does not carry multipliers: set batch_axis_multipliers in the "
            "manifest if the tensors hold k x the batch"
        )
    graph.assumptions.extend(notes)
    return notes
