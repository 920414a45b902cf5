"""The manifest's ``ensembles:`` planned: I/O derived from the maps, the wiring checked, the ensemble ModelConfig.

Pure, like :mod:`generator.planning.plan`: the steps' exact tensors make the wiring checkable before any export.
Problems are located in the manifest; an ensemble with any is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.errors import Problem, json_pointer
from generator.manifest.entries import ManifestEnsemble, ModelSource
from generator.planning.compare import CompareSettings, resolve_compare
from generator.planning.config import PicklesModelConfig
from generator.planning.contract import PlannedModel, request_shape
from generator.planning.tensors import TensorPlan
from generator.triton.ensemble import Location, Step, StepModel, Wiring, WiringTensor, step_order, wiring_problems
from generator.triton.proto import model_config_pb2

__all__ = ["EnsemblePlan", "plan_ensemble", "step_models"]

ENSEMBLE_PLATFORM = "ensemble"


@dataclass(frozen=True, slots=True)
class EnsemblePlan(PicklesModelConfig):
    """One ensemble: its tensors (request-side shapes, as for any model's contract), steps, order and ModelConfig.

    ``inputs``/``outputs`` are tensor plans without reshapes: an ensemble passes tensors as the config dims say.
    ``step_order`` runs each step after its inputs exist. ``source`` is the whole pipeline's torch factory.
    """

    name: str
    version: int
    max_batch_size: int
    inputs: tuple[TensorPlan, ...]
    outputs: tuple[TensorPlan, ...]
    steps: tuple[Step, ...]
    step_order: tuple[int, ...]
    config: model_config_pb2.ModelConfig
    decisions: tuple[str, ...]
    manifest_file: Path
    manifest_pointer: str
    source: ModelSource | None = None
    index: int = 0
    #: How its outputs are compared (the entry's ``compare:``): the check against ``source`` and smoke.
    compare: CompareSettings = field(default_factory=CompareSettings)
    #: The manifest entry it was planned from: the build plans it again over the steps' built output ranges.
    entry: ManifestEnsemble | None = None

    @property
    def target(self) -> str:
        """What the build reports as the target."""
        return ENSEMBLE_PLATFORM



def _io(tensor: TensorPlan) -> WiringTensor:
    return WiringTensor(tensor.name, tensor.data_type, tuple(tensor.dims), False,
                    tuple(request_shape(tensor, tensor.min_shape)), tuple(request_shape(tensor, tensor.max_shape)))


def step_models(models: Sequence[PlannedModel]) -> dict[str, StepModel]:
    """Planned models as the wiring rules see them (config dims, request-side shape ranges)."""
    return {m.name: StepModel(m.name, m.max_batch_size, tuple(_io(t) for t in m.inputs),
                              tuple(_io(t) for t in m.outputs)) for m in models}


def plan_ensemble(
    ensemble: ManifestEnsemble, manifest_file: Path, models: Sequence[PlannedModel], refused: Collection[str] = ()
) -> tuple[EnsemblePlan | None, list[Problem]]:
    """Plan one ensemble over the planned ``models``; (None, problems) when it cannot be served.

    ``refused`` names the manifest's models that could not be planned (a step running one is refused too).
    """
    file = str(manifest_file)
    by_name = {m.name: m for m in models}
    known = step_models(models)
    steps = ensemble.steps
    problems = [Problem(file, f"{ensemble.pointer}/steps/{j}/model",
                        f"step {j} runs model {s.model_name!r}, which is refused (see its problems)")
                for j, s in enumerate(steps) if s.model_name in refused]
    decisions: list[str] = []
    consumed = _ordered(t for s in steps for t in s.input_map.values())  # dicts: membership in constant time
    produced = _ordered(t for s in steps for t in s.output_map.values())
    input_names = list(ensemble.inputs) if ensemble.inputs is not None else [t for t in consumed if t not in produced]
    output_names = (list(ensemble.outputs) if ensemble.outputs is not None
                    else [t for t in produced if t not in consumed])
    if ensemble.inputs is None:
        decisions.append(f"inputs from the maps (consumed, never produced): {', '.join(input_names) or 'none'}")
    if ensemble.outputs is None:
        decisions.append(f"outputs from the maps (produced, never consumed): {', '.join(output_names) or 'none'}")
    step_batches = [known[s.model_name].max_batch_size for s in steps if s.model_name in known]
    if ensemble.max_batch_size is not None:
        max_batch_size = ensemble.max_batch_size
    else:
        max_batch_size = min(step_batches) if step_batches and all(b > 0 for b in step_batches) else 0
        decisions.append(f"max_batch_size {max_batch_size}: " + (
            "the smallest of the steps'" if max_batch_size else "a step does not batch, so the ensemble does not"))
    batching = max_batch_size > 0
    consumers, producers = _mapped(steps, by_name, consume=True), _mapped(steps, by_name, consume=False)
    inputs = [_ensemble_tensor(name, consumers.get(name, []), batching, max_batch_size, consume=True, notes=decisions)
              for name in input_names]
    outputs = [_ensemble_tensor(name, producers.get(name, []), batching, max_batch_size, consume=False,
                                notes=decisions) for name in output_names]
    def declared(names: list[str], tensors: list[TensorPlan | None]) -> tuple[WiringTensor, ...]:
        # A name no known step tensor is mapped to has no type: the wiring rules report why.
        return tuple(_io(t) if t is not None else WiringTensor(n, "", ()) for n, t in zip(names, tensors, strict=True))

    wiring = Wiring(ensemble.name, max_batch_size, declared(input_names, inputs), declared(output_names, outputs),
                    steps)
    for problem in wiring_problems(wiring, known):
        problems.append(Problem(file, _pointer(ensemble, problem.where), problem.message))
    problems += [Problem(file, _pointer(ensemble, ("input", i)), f"ensemble input {n!r}: no step input to take its "
                         "type and dims from") for i, (n, t) in enumerate(zip(input_names, inputs, strict=True))
                 if t is None and n in consumed]
    problems += [Problem(file, _pointer(ensemble, ("input", i)), f"ensemble input {t.name!r}: its consumers accept no "
                         f"common shape (min {list(t.min_shape)} is above max {list(t.max_shape)} on some axis)")
                 for i, t in enumerate(inputs) if t is not None and any(lo > hi for lo, hi in
                                                                         zip(t.min_shape, t.max_shape, strict=True))]
    compare, compare_problems = resolve_compare(
        ensemble.compare, [(t.name, ()) for t in inputs if t is not None],
        [(t.name, ()) for t in outputs if t is not None], file, f"{ensemble.pointer}/compare")
    problems += compare_problems
    if problems:
        return None, problems
    order = tuple(step_order(wiring))
    decisions.insert(0, "steps run in order: " + " -> ".join(steps[j].model_name for j in order))
    final_inputs = tuple(t for t in inputs if t is not None)
    final_outputs = tuple(t for t in outputs if t is not None)
    return EnsemblePlan(
        ensemble.name, ensemble.version, max_batch_size, final_inputs, final_outputs, steps, order,
        _config(ensemble.name, max_batch_size, final_inputs, final_outputs, steps), tuple(decisions),
        Path(manifest_file), ensemble.pointer, ensemble.source, ensemble.index, compare, ensemble,
    ), []


def _ordered(names: Any) -> dict[str, None]:
    """``names`` without repeats, in first-seen order (a dict: ordered, and membership in constant time)."""
    return dict.fromkeys(names)


def _mapped(steps: Sequence[Step], models: Mapping[str, PlannedModel], *, consume: bool) -> dict[str, list[TensorPlan]]:
    """Ensemble tensor name -> the known step tensors mapped to it (inputs when ``consume``), in step order.

    One pass over the maps, so finding every ensemble tensor's step tensors costs the maps' size, not tensors times
    steps.
    """
    found: dict[str, list[TensorPlan]] = {}
    tensors_of: dict[str, dict[str, TensorPlan]] = {}
    for step in steps:
        model = models.get(step.model_name)
        if model is None:
            continue
        if step.model_name not in tensors_of:
            tensors_of[step.model_name] = {t.name: t for t in (model.inputs if consume else model.outputs)}
        tensors = tensors_of[step.model_name]
        for key, value in (step.input_map if consume else step.output_map).items():
            if key in tensors:
                found.setdefault(value, []).append(tensors[key])
    return found


def _ensemble_tensor(
    name: str,
    found: Sequence[TensorPlan],
    batching: bool,
    max_batch_size: int,
    *,
    consume: bool,
    notes: list[str],
) -> TensorPlan | None:
    """The ensemble's tensor ``name`` from the step tensors mapped to it (request-side shapes, no reshape).

    An input's range is the intersection of every consumer's; an output is its producer's. None when no known step
    tensor is mapped to it (the wiring rules say why).
    """
    if not found:
        return None
    first = found[0]
    step_batching = first.batch_axis is not None
    shapes = [[list(request_shape(t, getattr(t, s))) for s in ("min_shape", "opt_shape", "max_shape")]
              for t in found if (t.batch_axis is not None) == step_batching]
    low = [max(s[0][a] for s in shapes) for a in range(len(shapes[0][0]))]
    high = [min(s[2][a] for s in shapes) for a in range(len(shapes[0][0]))]
    opt = [min(max(o, lo), hi) for o, lo, hi in zip(shapes[0][1], low, high, strict=True)]
    dims = list(first.dims)
    if batching and step_batching:
        high[0] = min(high[0], max_batch_size)
        opt[0] = min(opt[0], high[0])
    elif batching:  # a non-batching step's first dim plays the ensemble's batch axis
        dims = dims[1:]
    elif step_batching:
        dims = [-1, *dims]
    if consume and len(shapes) > 1:
        notes.append(f"input {name!r}: shapes {low}..{high}, the range every consumer accepts")
    return replace(first, name=name, dims=tuple(dims), min_shape=tuple(low), opt_shape=tuple(opt),
                   max_shape=tuple(high), batch_axis=0 if batching else None, reshape=None, torch_scalar=False,
                   batch_axes=((0, 1),) if batching else (), values=first.values if consume else None)


def _pointer(ensemble: ManifestEnsemble, where: Location) -> str:
    """The manifest pointer of a wiring location."""
    base: list[str | int] = ["ensembles", ensemble.index]
    if not where:
        return json_pointer(base)
    head = where[0]
    if head == "step":
        parts: list[str | int] = [*base, "steps", where[1]]
        if len(where) > 2:
            field_name = {"model_name": "model", "input_map": "inputs", "output_map": "outputs"}[str(where[2])]
            parts += [field_name, *where[3:]]
        return json_pointer(parts)
    if head == "max_batch_size":
        return json_pointer([*base, "max_batch_size"] if ensemble.max_batch_size is not None else base)
    listed = ensemble.inputs if head == "input" else ensemble.outputs
    if listed is not None:
        return json_pointer([*base, "inputs" if head == "input" else "outputs", where[1]])
    return json_pointer([*base, "steps"])  # derived from the maps: the steps are where to look


def _config(
    name: str, max_batch_size: int, inputs: Sequence[TensorPlan], outputs: Sequence[TensorPlan], steps: Sequence[Step]
) -> model_config_pb2.ModelConfig:
    """The ensemble's ModelConfig: platform ``ensemble``, its tensors and ``ensemble_scheduling``."""
    config = model_config_pb2.ModelConfig(name=name, platform=ENSEMBLE_PLATFORM, max_batch_size=max_batch_size)
    config.version_policy.latest.num_versions = 1
    for target, tensors in ((config.input, inputs), (config.output, outputs)):
        for tensor in tensors:
            io = target.add()
            io.name = tensor.name
            io.data_type = model_config_pb2.DataType.Value(tensor.data_type)
            io.dims.extend(tensor.dims)
    for step in steps:
        entry = config.ensemble_scheduling.step.add()
        entry.model_name = step.model_name
        entry.model_version = -1
        for key, value in step.input_map.items():
            entry.input_map[key] = value
        for key, value in step.output_map.items():
            entry.output_map[key] = value
    return config
