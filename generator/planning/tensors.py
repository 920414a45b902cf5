"""One graph's tensors as Triton serves them: names, shapes (with the shape policy), scalars and the batching decision.

Pure data: ``validate`` and ``plan`` share :func:`plan_tensors`. Every decision is a sentence in
:attr:`TensorsPlan.decisions`, so ``gen-repo plan`` says which case applied and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.dtypes import (
    TARGET_RUNTIMES,
    TORCH_DTYPES,
    TORCH_TO_TRITON,
    UNSERVED_ADVICE,
    by_torch,
    servable_torch_dtypes,
    unservable_reason,
)
from generator.errors import Problem
from generator.manifest.entries import ManifestModel
from generator.naming import SemanticPath, format_tensor_name
from generator.number_limits import INT64_MAX, element_count, shape_text
from generator.planning.values import ValueDomain
from generator.specs.graphspec import GraphSpec
from generator.specs.schema import LoadedGraph
from generator.specs.shape_policy import AxisGroup, ShapeResolution, resolve_shapes
from generator.specs.tensor_spec import TensorSpec

__all__ = ["DTYPE_TO_TRITON", "INT32_MAX", "TensorPlan", "TensorsPlan", "plan_tensors", "servability"]

#: torch dtype (AITune's string form) -> Triton data type, from the one table (:mod:`generator.dtypes`).
DTYPE_TO_TRITON = TORCH_TO_TRITON
#: TensorRT and Triton carry dims as int32.
INT32_MAX = 2**31 - 1

@dataclass(frozen=True, slots=True)
class TensorPlan:
    """One input or output as Triton and the TensorRT profile see it.

    ``dims`` are the config dims (no batch axis when batching; ``[1]`` for a scalar); ``min/opt/max_shape`` the full
    model-side shapes the profile and the exported graph see (``opt_shape == max_shape`` for outputs). A per-item scalar
    of a batching model has ``reshape == ()`` (request ``[b, 1]``, model ``[b]``); ``torch_scalar``: forward takes or
    returns a 0-d tensor, carried as ``[1]``. ``batch_axes``: the model-side batch axes with their multipliers;
    ``values``: the manifest's value domain.
    """

    name: str
    path: SemanticPath
    dtype: str
    data_type: str
    dims: tuple[int, ...]
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    batch_axis: int | None
    is_shape_tensor: bool = False
    reshape: tuple[int, ...] | None = None
    access_path: str = ""
    torch_scalar: bool = False
    batch_axes: tuple[tuple[int, int], ...] = ()
    values: ValueDomain | None = None


@dataclass(slots=True)
class _Batch:
    """The batch-axis facts of one tensor (``low/opt/high`` in batch units, after the shape policy)."""

    kind: str  # "input" | "output"
    name: str
    rank: int
    axes: list[int]
    multipliers: dict[int, int]
    low: int | None
    high: int | None
    opt: int | None
    explicit: bool
    pointer: str
    declared_low: int | None = None  # an explicit BatchDim's own minimum


@dataclass(slots=True)
class _Decision:
    batching: bool
    max_batch_size: int
    opt_batch: int
    notes: list[str]


@dataclass(frozen=True, slots=True)
class TensorsPlan:
    """What :func:`plan_tensors` decides: the tensors, the batching decision and why, and the problems.

    ``axis_groups`` are the linked input axes (:func:`generator.specs.shape_policy.linked_axes`), members named by
    their Triton tensor names: the optimization profiles name an axis once for its whole group.
    """

    inputs: tuple[TensorPlan, ...]
    outputs: tuple[TensorPlan, ...]
    batching: bool
    max_batch_size: int
    opt_batch: int
    decisions: tuple[str, ...]
    problems: tuple[Problem, ...]
    axis_groups: tuple[AxisGroup, ...] = ()


def plan_tensors(model: ManifestModel, manifest_file: Path | str, *, target: str | None = None) -> TensorsPlan:
    """Names, shapes (with the shape policy), the batching decision and every tensor of one model.

    The servability rules shared by ``gen-repo validate`` and ``gen-repo plan``: dtypes Triton carries (those
    ``target`` serves; any target's when None), scalars within Triton's rules, axes that must agree. Problems are
    returned, not raised.
    """
    file = str(manifest_file)
    problems: list[Problem] = []
    decisions: list[str] = [f"assumed: {note}" for note in model.assumptions]
    decisions.extend(model.graph_fixes)
    graph = model.graph
    spec_file = str(model.spec_file)
    changes = input_changes(graph)
    if changes:
        decisions.append(
            "the call changes its inputs (post_input_spec): " + "; ".join(changes) + "; Triton serves the model "
            "statelessly, so the change is lost: a request's inputs are dropped after the call (return what the "
            "next call needs as an output and send it back as an input)"
        )

    names, name_problems = _tensor_names(model, file)
    problems.extend(name_problems)
    input_names = [names[("input", j)] for j in range(len(graph.input_spec.tensor_data))]
    resolution = resolve_shapes(graph, input_names, str(model.options.get("shapes", "intersect")))
    decisions.extend(resolution.notes)
    for j, axis, message in resolution.problems:
        problems.append(Problem(spec_file, f"{model.spec_pointer}/input_spec/tensor_data/{j}/max_shape/{axis}",
                                message))
    batch_info = _batch_info(model, names, resolution)
    decision = _decide(model, batch_info, resolution, file, problems)
    decisions.extend(decision.notes)
    values = _value_domains(model, names, file, problems)

    inputs: list[TensorPlan] = []
    outputs: list[TensorPlan] = []
    for j in signature_order(graph):
        locator, spec = graph.input_spec.tensor_data[j]
        pointer = f"{model.spec_pointer}/input_spec/tensor_data/{j}"
        batch = batch_info[j]
        tensor = _tensor_plan(
            names[("input", j)], locator.path, locator.display_path, spec, resolution.shapes[j], batch, decision,
            spec_file, pointer, problems, values.get(j), target,
        )
        if tensor is not None:
            inputs.append(tensor)
    count = len(graph.input_spec.tensor_data)
    for j, (locator, spec) in enumerate(graph.output_spec.tensor_data):
        pointer = f"{model.spec_pointer}/output_spec/tensor_data/{j}"
        shapes = (list(spec.min_shape), list(spec.max_shape), list(spec.max_shape))
        tensor = _tensor_plan(
            names[("output", j)], locator.path, locator.display_path, spec, shapes, batch_info[count + j], decision,
            spec_file, pointer, problems, target=target,
        )
        if tensor is not None:
            outputs.append(tensor)
    scalars = [t.name for t in (*inputs, *outputs) if t.torch_scalar]
    if scalars:
        decisions.append(
            f"0-d tensors {scalars} travel as [1] (Triton never hands a model a 0-d tensor and refuses an empty "
            "reshape without batching); the exported graph reshapes them"
        )
    if not inputs and not problems:
        problems.append(Problem(spec_file, model.spec_pointer + "/input_spec", "the graph has no input tensors"))
    if not outputs and not problems:
        problems.append(Problem(spec_file, model.spec_pointer + "/output_spec", "the graph has no output tensors"))
    return TensorsPlan(tuple(inputs), tuple(outputs), decision.batching, decision.max_batch_size, decision.opt_batch,
                       tuple(decisions), tuple(problems), resolution.groups)


def input_changes(graph: GraphSpec) -> list[str]:
    """How forward changes its inputs, as AITune main records it (``post_input_spec``: the inputs after the call).

    One phrase per input path whose recorded metadata differs before and after the call (leaf order aside, as AITune
    compares them): a tensor's dtype or shape range, a tensor that appears or disappears, a non-tensor value. Empty
    without a ``post_input_spec`` or when nothing changed; values changed in place keep their metadata and do not
    show here.
    """
    post = graph.post_input_spec
    if post is None:
        return []
    before = {locator.path: spec for locator, spec in graph.input_spec.tensor_data}
    after = {locator.path: spec for locator, spec in post.tensor_data}
    others_before = {locator.path: value for locator, value in graph.input_spec.other_data}
    others_after = {locator.path: value for locator, value in post.other_data}
    locators = {locator.path: locator for meta in (graph.input_spec, post)
                for locator, _ in (*meta.tensor_data, *meta.other_data)}
    changes = []
    for path, locator in locators.items():
        old = _tensor_text(before[path]) if path in before else repr(others_before.get(path, _MISSING))
        new = _tensor_text(after[path]) if path in after else repr(others_after.get(path, _MISSING))
        if old != new:
            changes.append(f"{locator.display_path!r} {old} -> {new}")
    return changes


class _Missing:
    """A leaf recorded on one side of the call only."""

    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _tensor_text(spec: TensorSpec) -> str:
    """``a torch.float32 [1..4, 8] tensor``: dtype and the recorded range per axis."""
    axes = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(spec.min_shape, spec.max_shape, strict=True)]
    return f"a {spec.dtype} [{', '.join(axes)}] tensor"


def _tensor_keys(graph: GraphSpec) -> dict[tuple[str, int], set[str]]:
    """Per tensor the keys the manifest may name it by: AITune's default name and the access path."""
    keys: dict[tuple[str, int], set[str]] = {}
    for kind, meta in (("input", graph.input_spec), ("output", graph.output_spec)):
        for j, (locator, _) in enumerate(meta.tensor_data):
            keys[(kind, j)] = {format_tensor_name(locator.path, "input" if kind == "input" else "output"),
                               locator.display_path}
    return keys


def _tensor_names(model: ManifestModel, file: str) -> tuple[dict[tuple[str, int], str], list[Problem]]:
    """AITune's ``input_<path>``/``output_<path>`` names with the manifest's overrides; collisions refused."""
    graph = model.graph
    problems: list[Problem] = []
    names: dict[tuple[str, int], str] = {}
    for kind, meta in (("input", graph.input_spec), ("output", graph.output_spec)):
        for j, (locator, _) in enumerate(meta.tensor_data):
            names[(kind, j)] = format_tensor_name(locator.path, "input" if kind == "input" else "output")
    overrides: Mapping[str, str] = model.options.get("tensor_names") or {}
    keys = _tensor_keys(graph) if overrides else {}
    for key, new_name in sorted(overrides.items()):
        matches = [k for k, accepted in keys.items() if key in accepted]
        where = model.option_pointer("tensor_names", key)
        if not matches:
            known = ", ".join(sorted(n for n in names.values()))
            problems.append(Problem(file, where, f"no tensor {key!r} in this graph (tensors: {known})"))
        elif len(matches) > 1:
            problems.append(Problem(file, where, f"{key!r} names more than one tensor; use its default name"))
        else:
            names[matches[0]] = new_name
    seen: dict[str, tuple[str, int]] = {}
    for ident, name in names.items():
        if name in seen:
            other = seen[name]
            problems.append(
                Problem(
                    str(model.spec_file),
                    f"{model.spec_pointer}/{ident[0]}_spec/tensor_data/{ident[1]}",
                    f"tensor name {name!r} of {ident[0]} {ident[1]} collides with {other[0]} {other[1]} after "
                    "sanitising; rename one with the manifest's tensor_names",
                )
            )
        seen.setdefault(name, ident)
    return names, problems


def _value_domains(
    model: ManifestModel, names: Mapping[tuple[str, int], str], file: str, problems: list[Problem]
) -> dict[int, ValueDomain]:
    """The manifest's ``inputs:`` value domains by input index, keyed by default name, access path or final name."""
    if not model.input_values:
        return {}
    keys = _tensor_keys(model.graph)
    domains: dict[int, ValueDomain] = {}
    for key, body in model.input_values.items():
        where = f"{model.pointer}/inputs/{key.replace('~', '~0').replace('/', '~1')}"
        matches = [j for (kind, j), accepted in keys.items() if kind == "input" and
                   (key in accepted or names[(kind, j)] == key)]
        if len(matches) != 1:
            known = ", ".join(names[("input", j)] for j in range(len(model.graph.input_spec.tensor_data)))
            problems.append(Problem(file, where, f"no input {key!r} in this graph (inputs: {known})"))
            continue
        j = matches[0]
        domain = ValueDomain.from_json(body, source="manifest")
        entry = by_torch(model.graph.input_spec.tensor_data[j][1].dtype)
        message = domain.dtype_problem(entry.host_numpy) if entry is not None else None
        if message:
            problems.append(Problem(file, where, f"input {names[('input', j)]!r}: {message}"))
            continue
        domains[j] = domain
    return domains


def _batch_info(
    model: ManifestModel, names: Mapping[tuple[str, int], str], resolution: ShapeResolution
) -> list[_Batch]:
    """Batch facts per input (input_spec order), then per output, from the shape policy's groups."""
    graph = model.graph
    definitions = list(graph.dynamic_shapes)
    batch_members = next((g.members for g in resolution.groups if g.kind == "batch"), ())
    info = []
    for j, (locator, spec) in enumerate(graph.input_spec.tensor_data):
        members = [m for m in batch_members if m.input == j]
        multipliers = {m.axis: m.multiplier for m in members}
        axes = list(multipliers)
        definition = graph.get_shape_definition(locator)
        if definition is not None:
            k = definitions.index(locator.path)
            pointer = f"{model.spec_pointer}/dynamic_shapes/{k}/shape/{axes[0] if axes else 0}"
        else:
            pointer = f"{model.spec_pointer}/input_spec/tensor_data/{j}"
        low = opt = high = None
        if axes:
            k0 = multipliers[axes[0]]
            lows, opts, highs = resolution.shapes[j]
            low, opt, high = lows[axes[0]] // k0, opts[axes[0]] // k0, highs[axes[0]] // k0
        declared_low = members[0].low if members and definition is not None else None
        info.append(_Batch("input", names[("input", j)], spec.rank, axes, multipliers, low, high, opt,
                           definition is not None, pointer, declared_low))
    for j, (_, spec) in enumerate(graph.output_spec.tensor_data):
        multipliers = spec.get_batch_axis_multipliers()
        axes = list(multipliers)
        low = spec.min_shape[axes[0]] if axes else None
        high = spec.max_shape[axes[0]] if axes else None
        pointer = f"{model.spec_pointer}/output_spec/tensor_data/{j}"
        info.append(_Batch("output", names[("output", j)], spec.rank, axes, multipliers, low, high, high, False,
                           pointer))
    return info


def signature_order(graph: GraphSpec) -> list[int]:
    """Indices of the input tensors in forward-signature order.

    Nested inputs are flattened by semantic path, in forward-signature order. Recorded order is kept within one
    parameter and for roots the signature does not name.
    """
    position = {p.name: i for i, p in enumerate(graph.forward_signature.parameters)}
    unknown = len(position)
    order = [position.get(str(locator.root_name), unknown) for locator, _ in graph.input_spec.tensor_data]
    return sorted(range(len(order)), key=order.__getitem__)  # stable: recorded order within one parameter


def _structural_reasons(info: list[_Batch]) -> list[str]:
    """Why the tensors cannot carry Triton's batch dimension (empty when they all can)."""
    reasons = []
    if not any(b.kind == "input" for b in info):
        reasons.append("the graph has no input tensors")
    for b in info:
        if b.axes == [0] and b.multipliers.get(0, 1) == 1:
            continue
        label = f"{b.kind} {b.name!r}"
        if not b.axes and b.rank == 0:
            reasons.append(f"{label} is 0-d (one value for the whole call), which no per-request batch can carry")
        elif not b.axes:
            reasons.append(f"{label} has no batch axis")
        elif b.axes != [0]:
            reasons.append(
                f"{label} has batch axes at {b.axes}; Triton's batch dimension must be axis 0 and the only one"
            )
        else:
            reasons.append(
                f"{label} batch axis 0 has multiplier {b.multipliers[0]} (it holds {b.multipliers[0]} x the batch "
                "size, e.g. a stacked batch); Triton's batch dimension must equal the request's batch size"
            )
    return reasons


def _range_text(b: _Batch) -> str:
    return f"{b.kind} {b.name!r} {b.low}..{b.high} ({'declared' if b.explicit else 'recorded'})"


def _range_reasons(info: list[_Batch], resolution: ShapeResolution) -> list[str]:
    """Why the outputs' batch ranges do not fit the inputs' (the shape policy made the inputs agree).

    An output recorded narrower than the inputs is fine when a declaration widened the inputs, and wider when the
    policy narrowed them; otherwise a different range means the axis does not follow the request's batch size.
    """
    inputs = [b for b in info if b.kind == "input"]
    highs = {b.high for b in inputs}
    if len(highs) > 1:  # defensive: the shape policy gives every input batch axis one range
        return [
            "batch ranges differ across inputs: " + ", ".join(_range_text(b) for b in inputs)
            + "; Triton gives every tensor of a request the same batch size"
        ]
    high = next(iter(highs)) if highs else None
    reasons = []
    for b in info:
        if b.kind != "output" or b.high == high or high is None or b.high is None:
            continue
        if (b.high < high and resolution.batch_declared) or (b.high > high and resolution.batch_narrowed):
            continue
        reasons.append(
            f"output {b.name!r} batch range {b.low}..{b.high} differs from the inputs' ..{high}; Triton gives "
            "every tensor of a request the same batch size"
        )
    return reasons


def _decide(
    model: ManifestModel, info: list[_Batch], resolution: ShapeResolution, file: str, problems: list[Problem]
) -> _Decision:
    """Decide batching, with the sentences that explain it; problems are appended to ``problems``."""
    options = model.options
    mode = options.get("batching", "auto")
    structural = _structural_reasons(info)
    ranges = [] if structural else _range_reasons(info, resolution)
    notes: list[str] = []
    spec_limit = model.graph.get_max_batch_size()
    limit = resolution.batch[2] if resolution.batch is not None else spec_limit
    narrowed = f", narrowed to {limit} by the shape policy" if limit != spec_limit else ""

    if mode == "none":
        note = "no batching (manifest batching: none): max_batch_size 0 and full dims"
        if not structural and not ranges:
            note += "; the spec itself would allow batching"
        return _Decision(False, 0, 1, [note])
    if mode == "batch":
        if structural:
            problems.append(
                Problem(
                    file, model.option_pointer("batching"), "batching: batch cannot apply: " + "; ".join(structural)
                )
            )
            return _Decision(False, 0, 1, [])
        notes.append("batching forced by the manifest (batching: batch)")
        if ranges:
            notes.append(
                "; ".join(ranges) + f"; every batch axis is unified to 1..{limit} (tensors "
                "recorded over a narrower range are widened)"
            )
    elif structural or ranges:
        notes = ["no batching: " + "; ".join(structural or ranges) + "; so max_batch_size 0 and full dims (every "
                 "axis as in the spec, the batch axis included)"]
        stacked = sorted({k for b in info for k in b.multipliers.values() if k != 1})
        if resolution.batch is not None and stacked:
            low, _, high = resolution.batch
            notes.append(f"batch sizes {low}..{high} (GraphSpec.get_max_batch_size(normalized=True) = "
                         f"{model.graph.get_max_batch_size(normalized=True)}); axes holding {stacked} x the batch "
                         "take that many times these sizes")
        return _Decision(False, 0, 1, notes)
    else:
        bounds = sorted({(b.low, b.high) for b in info if b.kind == "input"}, key=str)
        shown = ", ".join(f"{lo}..{hi}" for lo, hi in bounds)
        notes.append(
            "batching: every input and output has its batch axis at position 0 with multiplier 1 and the batch "
            f"ranges agree ({shown}), so max_batch_size = GraphSpec.get_max_batch_size() = {spec_limit}{narrowed} "
            "and dims leave the batch axis out"
        )

    # Batch minimum: the dynamic batcher forms any batch from 1 up, so every profile's batch min must be 1.
    widen = bool(options.get("widen_batch_min", False))
    for b in info:
        if b.kind != "input" or b.low is None:
            continue
        if b.declared_low is not None and b.declared_low > 1 and not widen:
            problems.append(
                Problem(
                    str(model.spec_file), b.pointer + "/min",
                    f"{b.kind} {b.name!r} declares BatchDim min {b.declared_low}, but with max_batch_size > 0 "
                    "Triton's dynamic batcher can form any batch from 1 up, so the profile's batch minimum must be "
                    "1; lower the min or set widen_batch_min: true in the manifest",
                )
            )
        elif b.low > 1:
            how = "declared" if b.declared_low is not None and b.declared_low > 1 else "recorded"
            notes.append(
                f"{b.kind} {b.name!r}: {how} batch minimum {b.low} widened to 1 (with max_batch_size > 0 Triton's "
                "dynamic batcher can form any batch from 1 up)"
            )

    max_batch_size = limit
    if "max_batch_size" in options:
        wanted = int(options["max_batch_size"])
        if wanted > limit:
            problems.append(
                Problem(
                    file, model.option_pointer("max_batch_size"),
                    f"max_batch_size {wanted} exceeds the spec's batch range maximum {limit} (the optimization "
                    "profile cannot serve larger batches)",
                )
            )
        elif wanted < limit:
            max_batch_size = wanted
            notes.append(f"max_batch_size lowered to {wanted} by the manifest (the profile's batch max follows)")
    resolved_opt = resolution.batch[1] if resolution.batch is not None else max_batch_size
    opt_batch = min(resolved_opt if resolution.batch_declared else max_batch_size, max_batch_size)
    notes.append(f"batch range 1..{max_batch_size}, opt batch {opt_batch}")
    return _Decision(True, max_batch_size, opt_batch, notes)


def _tensor_plan(
    name: str,
    path: SemanticPath,
    access_path: str,
    spec: TensorSpec,
    shapes: tuple[list[int], list[int], list[int]],
    batch: _Batch,
    decision: _Decision,
    spec_file: str,
    pointer: str,
    problems: list[Problem],
    values: ValueDomain | None = None,
    target: str | None = None,
) -> TensorPlan | None:
    entry = by_torch(spec.dtype)
    if entry is None or not entry.targets or (target is not None and target not in entry.targets):
        problems.append(Problem(spec_file, pointer + "/dtype", _dtype_refusal(spec.dtype, target)))
        return None
    data_type = entry.triton
    low, opt, high = (list(s) for s in shapes)
    reshape: tuple[int, ...] | None = None
    batch_axis: int | None = None
    torch_scalar = False
    batch_axes = tuple(batch.multipliers.items())
    if decision.batching:
        batch_axis = 0
        batch_axes = ((0, 1),)
        low[0], opt[0], high[0] = 1, decision.opt_batch, decision.max_batch_size
        dims = [-1 if a != b else b for a, b in zip(low[1:], high[1:], strict=True)]
        if not dims:
            dims, reshape = [1], ()  # a per-item scalar: Triton needs non-empty dims; reshape [] gives the model [b]
    elif not low:
        # One value for the whole call: Triton carries it as [1] (never 0-d, and no empty reshape without batching).
        low, opt, high, dims, torch_scalar = [1], [1], [1], [1], True
    else:
        dims = [-1 if a != b else b for a, b in zip(low, high, strict=True)]
    for label, shape in (("min", low), ("opt", opt), ("max", high)):
        if shape and (min(shape) < 1 or max(shape) > INT32_MAX):
            problems.append(
                Problem(spec_file, pointer, f"tensor {name!r} {label} shape {shape_text(shape)} does not fit int32 "
                        f"dims (1..{INT32_MAX})")
            )
            return None
    # Triton and TensorRT size a tensor in bytes as int64: a shape whose product overflows it cannot be served. The
    # product stops at the limit, so a very high rank never makes a huge number.
    if element_count(high, INT64_MAX // (entry.byte_size or 8)) is None:
        problems.append(
            Problem(spec_file, pointer, f"tensor {name!r} max shape {shape_text(high)} holds more bytes than an "
                    f"int64 byte size can count ({INT64_MAX}); its dims multiply to too many elements")
        )
        return None
    return TensorPlan(
        name=name,
        path=path,
        dtype=str(spec.dtype),
        data_type=data_type,
        dims=tuple(dims),
        min_shape=tuple(low),
        opt_shape=tuple(opt),
        max_shape=tuple(high),
        batch_axis=batch_axis,
        reshape=reshape,
        access_path=access_path,
        torch_scalar=torch_scalar,
        batch_axes=batch_axes,
        values=values,
    )


def _dtype_refusal(dtype: str | None, target: str | None) -> str:
    """Why a tensor of ``dtype`` cannot be served (by ``target``, or by any target when None), naming what can.

    The reasons come from the one table of what each target's runtimes execute (:mod:`generator.dtypes`).
    """
    servable = ", ".join(servable_torch_dtypes())
    if isinstance(dtype, str) and dtype not in TORCH_DTYPES:
        return f"dtype {dtype!r} is no torch dtype; gen-repo serves {servable}"
    entry = by_torch(dtype)
    if entry is None or entry.torch is None:
        return f"dtype {dtype!r} has no Triton data type here (supported: {servable})"
    if entry.targets:
        assert target is not None  # a dtype some target serves is refused only for another target
        others = " or ".join(sorted(entry.targets))
        return (f"dtype {dtype!r} cannot be served by target {target} (it serves "
                f"{', '.join(servable_torch_dtypes(target))}): {unservable_reason(entry.torch, target)}; target "
                f"{others} serves it")
    reasons = list(dict.fromkeys(r for t in TARGET_RUNTIMES if (r := unservable_reason(entry.torch, t))))
    shown = f"target {target}, nor by any other target" if target is not None else "any target"
    advice = UNSERVED_ADVICE.get(entry.torch)
    return (f"dtype {dtype!r} cannot be served by {shown} gen-repo builds: {'; '.join(reasons)}"
            + (f"; {advice}" if advice else ""))


def servability(loaded: LoadedGraph) -> TensorsPlan:
    """What gen-repo would serve for a spec on its own (manifest defaults): ``gen-repo validate``'s view of it.

    The same rules and messages as ``gen-repo plan`` (:func:`plan_tensors`), problems located in the spec file.
    """
    model = ManifestModel(
        index=0, name=loaded.graph.name, version=1, graph=loaded.graph, spec_file=Path(loaded.file),
        spec_pointer=loaded.pointer, source=None, target="python", options={},
        assumptions=tuple(loaded.assumptions), module_name=loaded.module_name,
    )
    return plan_tensors(model, loaded.file)
