"""The repository plan: one :class:`ModelPlan` per manifest model, with its tensors, decisions and ModelConfig.

Pure: no file writes, no torch. A model that cannot be planned is refused with every reason; with ``keep_going`` the
others are planned anyway (:attr:`RepositoryPlan.refused`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from generator.errors import GenRepoError, Problem
from generator.manifest.entries import (
    Manifest,
    ManifestEnsemble,
    ManifestModel,
    ModelSource,
    RefusedModel,
    SampleSource,
)
from generator.naming import format_tensor_name
from generator.planning import config as config_mod
from generator.planning.compare import CompareSettings, resolve_compare
from generator.planning.ensemble_plan import EnsemblePlan, plan_ensemble
from generator.planning.options import TARGETS
from generator.planning.profiles import OptimizationProfile, plan_profiles
from generator.planning.tensors import DTYPE_TO_TRITON, INT32_MAX, TensorPlan, plan_tensors
from generator.specs.graphspec import GraphSpec
from generator.triton.proto import model_config_pb2

__all__ = [
    "DTYPE_TO_TRITON",
    "INT32_MAX",
    "TARGETS",
    "ModelPlan",
    "ModelSource",
    "RepositoryPlan",
    "TargetResolver",
    "OutputRange",
    "TensorPlan",
    "axis_origin",
    "output_ranges_from_contract",
    "with_output_ranges",
    "describe_plan",
    "plan_model",
    "plan_repository",
]

#: Chooses a concrete target for a model whose target is ``auto``.
TargetResolver = Callable[[ManifestModel], str]


@dataclass(frozen=True, slots=True)
class ModelPlan(config_mod.PicklesModelConfig):
    """Everything needed to write one Triton model: names, shapes, the batching decision and the ModelConfig."""

    name: str
    version: int
    target: str
    graph: GraphSpec
    spec_file: Path
    spec_pointer: str
    source: ModelSource | None
    max_batch_size: int
    batching: bool
    decisions: tuple[str, ...]
    inputs: tuple[TensorPlan, ...]
    outputs: tuple[TensorPlan, ...]
    options: Mapping[str, Any]
    config: model_config_pb2.ModelConfig
    opt_batch_size: int = 1
    samples: SampleSource | None = None
    #: Where the manifest entry is (file and ``/models/<i>``): problems about the source or samples point there.
    manifest_file: Path | None = None
    manifest_pointer: str = ""
    #: How its outputs are compared (the manifest's ``compare:``): build checks, reference data and smoke.
    compare: CompareSettings = field(default_factory=CompareSettings)
    #: Per definition of ``graph.dynamic_shapes``: the manifest ``dynamic_shapes`` index it came from, or None.
    shape_origins: tuple[int | None, ...] = ()
    #: The manifest's ``export.exporter``: auto (both exporters, generator.building.export.onnx.exporter_order), dynamo
    #: or torchscript (that exporter alone).
    exporter: str = "auto"
    #: The manifest's optimization profiles, in order (empty: one profile, the inputs' own min/opt/max).
    profiles: tuple[OptimizationProfile, ...] = ()

    def engine_profiles(self) -> list[tuple[TensorPlan, ...]]:
        """The inputs of each optimization profile a TensorRT plan of this model holds, in order."""
        return [p.inputs for p in self.profiles] or [self.inputs]


@dataclass(frozen=True, slots=True)
class RepositoryPlan:
    """The whole repository: the manifest it came from, where it goes, and its models in manifest order.

    ``refused`` are the models that cannot be built, with every reason (only when planned with ``keep_going``);
    ``code_path`` the manifest's extra folders for factories.
    """

    manifest_file: Path
    output_dir: Path
    models: tuple[ModelPlan, ...] = field(default_factory=tuple)
    refused: tuple[RefusedModel, ...] = ()
    code_path: tuple[Path, ...] = ()
    ensembles: tuple[EnsemblePlan, ...] = ()


def default_target_resolver(model: ManifestModel) -> str:
    """Resolve ``target: auto`` to ``python``, the target that runs anywhere (the build passes a real resolver)."""
    return "python"


def plan_repository(
    manifest: Manifest,
    target_resolver: TargetResolver | None = None,
    *,
    keep_going: bool = False,
    warmup_data: bool = False,
) -> RepositoryPlan:
    """Plan every model of ``manifest``.

    ``warmup_data``: warmup reads the data files a build writes (else zeros and random bytes). Without ``keep_going``
    raise GenRepoError with every model's problems at once; with it, unplannable (and refused) models are in
    :attr:`RepositoryPlan.refused`.
    """
    problems: list[Problem] = []
    plans = []
    refused = list(manifest.refused)
    for model in manifest.models:
        try:
            plans.append(plan_model(model, manifest.file, target_resolver, warmup_data=warmup_data))
        except GenRepoError as error:
            problems.extend(error.problems)
            refused.append(RefusedModel(model.index, model.name, tuple(error.problems)))
    ensembles, refused_ensembles = plan_ensembles(manifest.file, manifest.ensembles, plans, refused,
                                                  len(manifest.models) + len(manifest.refused))
    problems.extend(p for r in refused_ensembles for p in r.problems)
    refused.extend(refused_ensembles)
    if problems and not keep_going:
        names = ", ".join(repr(r.name) for r in sorted(refused, key=lambda r: r.index))
        raise GenRepoError(problems, f"refused: {names} (--keep-going builds the other models)")
    refused.sort(key=lambda r: r.index)
    return RepositoryPlan(manifest.file, manifest.output_dir, tuple(plans), tuple(refused), manifest.code_path,
                          tuple(ensembles))


def plan_ensembles(
    manifest_file: Path,
    ensembles: Sequence[ManifestEnsemble],
    models: Sequence[ModelPlan],
    refused: Sequence[RefusedModel],
    entry_count: int,
) -> tuple[tuple[EnsemblePlan, ...], tuple[RefusedModel, ...]]:
    """Plan the manifest's ensembles over its planned ``models`` (at least every step's); the refused ones apart.

    ``refused``: the models that could not be planned; ``entry_count``: the manifest's ``models:`` entries (an
    ensemble's refusal index comes after all of them, as the build orders its work).
    """
    planned = []
    refused_ensembles = []
    refused_names = {r.name for r in refused}
    for ensemble in ensembles:
        plan, problems = plan_ensemble(ensemble, manifest_file, models, refused_names)
        if plan is not None:
            planned.append(plan)
        else:
            refused_ensembles.append(RefusedModel(entry_count + ensemble.index, ensemble.name, tuple(problems),
                                                  ensemble.pointer))
    return tuple(planned), tuple(refused_ensembles)


# -- One model -------------------------------------------------------------------------------------------------------
def plan_model(
    model: ManifestModel,
    manifest_file: Path | str,
    target_resolver: TargetResolver | None = None,
    *,
    warmup_data: bool = False,
) -> ModelPlan:
    """Plan one manifest model: target, tensor names and shapes, batching decision, ModelConfig.

    ``warmup_data`` as in :func:`plan_repository`.
    """
    file = str(manifest_file)
    target = model.target
    target_notes = []
    if target == "auto":
        resolved = (target_resolver or default_target_resolver)(model)
        if resolved not in TARGETS:
            raise GenRepoError([Problem(file, model.option_pointer("target"), f"target resolver chose {resolved!r}")])
        target_notes.append(f"target auto resolved to {resolved}")
        target = resolved
    tensors = plan_tensors(model, file, target=target)
    if not tensors.problems:
        tensors, profiles = plan_profiles(model, tensors, file, target)
    if tensors.problems:
        raise GenRepoError(tensors.problems)
    decisions = [*tensors.decisions[: len(model.assumptions)], *target_notes,
                 *tensors.decisions[len(model.assumptions):]]

    built = config_mod.build_model_config(
        config_mod.ConfigRequest(
            name=model.name,
            target=target,
            max_batch_size=tensors.max_batch_size,
            opt_batch=tensors.opt_batch,
            inputs=tensors.inputs,
            outputs=tensors.outputs,
            options=model.options,
            own_options=model.own_options,
            file=file,
            model_pointer=model.pointer,
            option_pointer=model.option_pointer,
            version=model.version,
            warmup_data=warmup_data,
            profiles=profiles,
            tuned=model.tuned,
            tuned_pointer=model.tuned_pointer,
        )
    )
    decisions.extend(built.notes)
    compare, compare_problems = resolve_compare(
        model.options.get("compare"), _tensor_keys(tensors.inputs, "input"), _tensor_keys(tensors.outputs, "output"),
        file, model.option_pointer("compare"))
    if built.problems or compare_problems:
        raise GenRepoError([*built.problems, *compare_problems])
    return ModelPlan(
        name=model.name,
        version=model.version,
        target=target,
        graph=model.graph,
        spec_file=model.spec_file,
        spec_pointer=model.spec_pointer,
        source=model.source,
        max_batch_size=tensors.max_batch_size,
        batching=tensors.batching,
        decisions=tuple(decisions),
        inputs=tensors.inputs,
        outputs=tensors.outputs,
        options=dict(model.options),
        config=built.config,
        opt_batch_size=tensors.opt_batch,
        samples=model.samples,
        manifest_file=Path(manifest_file),
        manifest_pointer=model.pointer,
        compare=compare,
        shape_origins=model.shape_origins,
        exporter=str((model.options.get("export") or {}).get("exporter", "auto")),
        profiles=profiles,
    )


@dataclass(frozen=True, slots=True)
class OutputRange:
    """What an output produces over the whole input range: model-side min/max shapes and the config dims."""

    min_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    dims: tuple[int, ...]


def with_output_ranges(model: ModelPlan, ranges: Mapping[str, OutputRange]) -> ModelPlan:
    """``model`` with its outputs' shape ranges (and config dims) replaced by ``ranges`` (by output name).

    The build derives them from what the model produces over the whole input range (the recording alone may be
    narrower, :func:`generator.building.artifacts.derive_output_ranges`); the contract, the config and ensemble checks
    use them.
    """
    changed = {t.name: ranges[t.name] for t in model.outputs
               if t.name in ranges and (ranges[t.name].min_shape, ranges[t.name].max_shape, ranges[t.name].dims)
               != (t.min_shape, t.max_shape, t.dims)}
    if not changed:
        return model
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(model.config)
    for entry in config.output:
        if entry.name in changed:
            del entry.dims[:]
            entry.dims.extend(changed[entry.name].dims)
    outputs = tuple(
        replace(t, min_shape=changed[t.name].min_shape, opt_shape=changed[t.name].max_shape,
                max_shape=changed[t.name].max_shape, dims=changed[t.name].dims) if t.name in changed else t
        for t in model.outputs
    )
    return replace(model, outputs=outputs, config=config)


def output_ranges_from_contract(model: ModelPlan, contract: Mapping[str, Any]) -> dict[str, OutputRange]:
    """The output ranges a build wrote into ``contract`` (the parsed ``contract.json``), model-side, by name.

    The contract carries request-side shapes: a per-item scalar's ``[b, 1]`` is ``[b]`` to the model.
    """
    plans = {t.name: t for t in model.outputs}
    ranges = {}
    for entry in contract.get("outputs", []):
        tensor = plans.get(entry.get("name"))
        if tensor is None:
            continue

        def model_side(shape: Sequence[int], tensor: TensorPlan = tensor) -> tuple[int, ...]:
            if tensor.reshape is not None and tensor.batch_axis is not None:
                return (int(shape[0]), *tensor.reshape)
            return tuple(int(d) for d in shape)

        ranges[tensor.name] = OutputRange(model_side(entry["min_shape"]), model_side(entry["max_shape"]),
                                          tuple(int(d) for d in entry["dims"]))
    return ranges


def axis_origin(model: ModelPlan, tensor: TensorPlan, axis: int) -> tuple[str, str, str]:
    """Where the range of input ``tensor``'s (model-side) ``axis`` came from: (file, JSON pointer, in words).

    The manifest's ``dynamic_shapes`` entry that declared it, the spec's explicit definition, or the recording.
    """
    graph = model.graph
    definitions = list(graph.dynamic_shapes)
    for j, (locator, _) in enumerate(graph.input_spec.tensor_data):
        if locator.path != tensor.path:
            continue
        if graph.get_shape_definition(locator) is not None:
            k = definitions.index(locator.path)
            origin = model.shape_origins[k] if k < len(model.shape_origins) else None
            if origin is not None and model.manifest_file is not None:
                return (str(model.manifest_file), f"{model.manifest_pointer}/dynamic_shapes/{origin}/shape/{axis}",
                        "the manifest's dynamic_shapes")
            return str(model.spec_file), f"{model.spec_pointer}/dynamic_shapes/{k}/shape/{axis}", \
                "the spec's dynamic_shapes"
        return str(model.spec_file), f"{model.spec_pointer}/input_spec/tensor_data/{j}/max_shape/{axis}", \
            "the recorded calls"
    return str(model.spec_file), model.spec_pointer, "the spec"


def _tensor_keys(tensors: Sequence[TensorPlan], kind: Literal["input", "output"]) -> list[tuple[str, list[str]]]:
    """Each tensor's Triton name with the keys a manifest may name it by: access path and AITune's default name."""
    return [(t.name, [t.access_path, format_tensor_name(t.path, kind)]) for t in tensors]


def describe_plan(plan: RepositoryPlan) -> dict[str, Any]:
    """Plain JSON-able summary of a plan (what ``gen-repo plan --json`` prints)."""
    return {
        "manifest": str(plan.manifest_file),
        "output": str(plan.output_dir),
        "models": [
            {
                "name": m.name,
                "version": m.version,
                "target": m.target,
                "spec": f"{_relative(m.spec_file, plan.manifest_file)}#{m.spec_pointer}",
                "source": None if m.source is None else {
                    "kind": m.source.kind,
                    "path": None if m.source.path is None else str(m.source.path),
                    "factory": m.source.factory,
                },
                "samples": None if m.samples is None else {
                    "kind": m.samples.kind,
                    "path": None if m.samples.path is None else _relative(m.samples.path, plan.manifest_file),
                    "factory": m.samples.factory,
                },
                "max_batch_size": m.max_batch_size,
                "batching": m.batching,
                "decisions": list(m.decisions),
                "inputs": [_describe_tensor(t) for t in m.inputs],
                "outputs": [_describe_tensor(t) for t in m.outputs],
                "profiles": [{"name": p.name, "inputs": [_describe_tensor(t) for t in p.inputs]} for p in m.profiles],
            }
            for m in plan.models
        ],
        "ensembles": [
            {
                "name": e.name,
                "version": e.version,
                "max_batch_size": e.max_batch_size,
                "steps": [{"model": e.steps[j].model_name, "inputs": dict(e.steps[j].input_map),
                           "outputs": dict(e.steps[j].output_map)} for j in e.step_order],
                "source": None if e.source is None else {"kind": "factory", "factory": e.source.factory},
                "decisions": list(e.decisions),
                "inputs": [_describe_tensor(t) for t in e.inputs],
                "outputs": [_describe_tensor(t) for t in e.outputs],
            }
            for e in plan.ensembles
        ],
        "refused": [
            {"name": r.name, "index": r.index, "pointer": r.pointer or f"/models/{r.index}",
             "problems": [p.to_dict() for p in r.problems]} for r in plan.refused
        ],
    }


def _relative(path: Path, manifest_file: Path) -> str:
    """``path`` relative to the manifest's folder when inside it (plan output stays free of absolute paths)."""
    base = Path(manifest_file).resolve().parent
    try:
        return Path(path).resolve().relative_to(base).as_posix()
    except ValueError:
        return str(path)


def _describe_tensor(t: TensorPlan) -> dict[str, Any]:
    return {
        "name": t.name,
        "access_path": t.access_path,
        "data_type": t.data_type,
        "dims": list(t.dims),
        "min_shape": list(t.min_shape),
        "opt_shape": list(t.opt_shape),
        "max_shape": list(t.max_shape),
        **({"reshape": list(t.reshape)} if t.reshape is not None else {}),
        **(t.values.to_json() if t.values is not None else {}),
    }
