"""The tensors of a call: AITune's ``SampleMetadata`` (tensors and other leaves by locator) and forward's signature."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from generator.errors import SpecError
from generator.naming import SemanticPath
from generator.specs.paths import Locator, path_from_json, path_to_json
from generator.specs.tensor_spec import TensorSpec

__all__ = ["ForwardParameter", "ForwardSignature", "SampleMetadata", "resize_axis"]


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
        leaves = [(Locator(_collapse(steps)), value) for steps, value in _find_leaves(dict(inputs))]
        return SampleMetadata._from_leaves(leaves, strict, batch_size)

    @staticmethod
    def from_outputs(output: Any, strict: bool = False, batch_size: float | None = None) -> SampleMetadata:
        """Metadata of a forward's return value; a bare tensor has the empty path ``()``."""
        leaves = [(Locator(steps[0] if len(steps) == 1 else steps, is_output=True), value)
                  for steps, value in _find_leaves(output)]
        return SampleMetadata._from_leaves(leaves, strict, batch_size)

    @staticmethod
    def _from_leaves(leaves: list[tuple[Locator, Any]], strict: bool, batch_size: float | None) -> SampleMetadata:
        bs = float("nan") if batch_size is None else float(batch_size)
        tensors = tuple((locator, TensorSpec.from_tensor(value, bs)) for locator, value in leaves if _is_array(value))
        others = tuple((locator, value) for locator, value in leaves if strict and not _is_array(value))
        return SampleMetadata(tensors, others, strict, None)

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
    """Resize ``tensor`` along its batch axes to ``multiplier * batch_size``."""
    for axis, multiplier in tensor_spec.get_batch_axis_multipliers().items():
        tensor = resize_axis(tensor, axis, multiplier * batch_size)
    return tensor


def resize_axis(tensor: Any, axis: int, size: int) -> Any:
    """``tensor`` (numpy or torch) resized along ``axis`` to ``size`` items as AITune's ``make_batch`` does it.

    The first ``size`` items, or the first item repeated ``size`` times.
    """
    index: list[Any] = [slice(None)] * len(tensor.shape)
    current = int(tensor.shape[axis])
    if current > size:
        index[axis] = slice(size)
        return tensor[tuple(index)]
    if current == size:
        return tensor
    index[axis] = slice(1)
    first = tensor[tuple(index)]
    if type(tensor).__module__.startswith("torch"):
        repeats = [1] * len(tensor.shape)
        repeats[axis] = size
        return first.repeat(repeats)
    import numpy as np  # numpy only when a numpy array is resized: specs stays importable without it

    return np.repeat(first, size, axis=axis)


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
