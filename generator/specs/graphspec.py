"""GraphSpec data model with AITune's shape and batch semantics (``aitune.torch.module.graph_spec``).

Importable without torch; names and results follow AITune 0.6.0 (a method that must differ says so and why). The
JSON form is AITune's; its pickled form is never read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from generator.naming import SemanticPath, format_tensor_name
from generator.specs.paths import Locator, path_from_json, path_to_json
from generator.specs.sample_metadata import ForwardParameter, ForwardSignature, SampleMetadata
from generator.specs.tensor_spec import BatchDim, ShapeDefinition, TensorSpec, shape_definition_from_json

__all__ = ["GraphSpec", "infer_batch_multipliers"]


# -- GraphSpec -------------------------------------------------------------------------------------------------------
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
