"""Optimization profiles: the manifest's buckets (or AITune's saved profiles) checked against a model's inputs.

Each bucket lies inside its axis's planned range, together they cover the contract's range (or narrow it), and
max_batch_size fits the largest; every refusal is said in words (docs/tensorrt.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from generator.errors import Problem, json_pointer
from generator.naming import format_tensor_name
from generator.specs.tensor_spec import BatchDim, DynamicDim

if TYPE_CHECKING:
    from generator.manifest.entries import ManifestModel
    from generator.planning.tensors import TensorPlan, TensorsPlan

__all__ = ["OptimizationProfile", "ProfileAxis", "plan_profiles", "profile_axes"]

#: How many sub-boxes the coverage check may visit before it gives up (64 buckets over a few axes need far fewer).
_COVERAGE_BUDGET = 200_000
#: Triton's words for a request no profile holds (tensorrt_backend src/instance_state.cc, GetMostOptimizedProfile).
NO_PROFILE = "failed to find any Optimization Profile"


@dataclass(frozen=True, slots=True)
class OptimizationProfile:
    """One optimization profile: its name and the model's inputs at the bucket's min/opt/max (model-side shapes).

    The inputs are the contract's tensor plans (names, dims, dtypes) with the bucket's shapes, so everything that
    takes tensor plans (the TensorRT profile, reference inputs, the contract) takes a profile's as they are.
    """

    name: str
    inputs: tuple[TensorPlan, ...]


@dataclass(frozen=True, slots=True)
class ProfileAxis:
    """One dimension the profiles range over: the linked input axes it stands for and the contract's range.

    ``key`` is the name the plan shows, ``names`` every name that means it; ``members`` are ``(input index,
    model-side axis, multiplier)`` (sizes there are ``multiplier`` x the axis's).
    """

    key: str
    names: frozenset[str]
    members: tuple[tuple[int, int, int], ...]
    low: int
    opt: int
    high: int


@dataclass(slots=True)
class _Bucket:
    """One bucket as read: its name, a (min, opt, max) per axis, and where each axis's numbers were written."""

    name: str
    ranges: list[tuple[int, int, int]]
    #: axis index -> (file, pointer of min, of opt, of max); absent for axes the bucket left out
    where: dict[int, tuple[str, str, str, str]]


# -- Axes ------------------------------------------------------------------------------------------------------------
def profile_axes(model: ManifestModel, tensors: TensorsPlan) -> list[ProfileAxis]:
    """The dynamic dimensions of ``tensors``' inputs, one per group of linked axes (the batch axes first).

    Static axes are left out: a profile cannot change them.
    """
    inputs = tensors.inputs
    index = {t.name: i for i, t in enumerate(inputs)}
    by_path = {t.path: i for i, t in enumerate(inputs)}
    dim_names: dict[tuple[int, int], str] = {}
    for locator, _ in model.graph.input_spec.tensor_data:
        definition = model.graph.get_shape_definition(locator)
        if definition is None or locator.path not in by_path:
            continue
        for axis, dim in enumerate(definition):
            if isinstance(dim, DynamicDim) and not isinstance(dim, BatchDim):
                dim_names[(by_path[locator.path], axis)] = dim.name
    out: list[ProfileAxis] = []
    grouped: set[tuple[int, int]] = set()
    for group in tensors.axis_groups:
        members = tuple((index[m.name], m.axis, m.multiplier) for m in group.members if m.name in index)
        grouped.update((i, a) for i, a, _ in members)
        if group.kind == "batch":
            names = ["batch"]
        else:
            names = [*dict.fromkeys(dim_names[(i, a)] for i, a, _ in members if (i, a) in dim_names),
                     *(f"{inputs[i].name}:{a}" for i, a, _ in members)]
        if (found := _axis(inputs, names, members)) is not None:
            out.append(found)
    for i, tensor in enumerate(inputs):
        for a in range(len(tensor.min_shape)):
            if (i, a) in grouped:
                continue
            names = [*([dim_names[(i, a)]] if (i, a) in dim_names else []), f"{tensor.name}:{a}"]
            if (found := _axis(inputs, names, ((i, a, 1),))) is not None:
                out.append(found)
    return out


def _axis(
    inputs: Sequence[TensorPlan], names: list[str], members: tuple[tuple[int, int, int], ...]
) -> ProfileAxis | None:
    if not members:
        return None
    i, a, k = members[0]
    tensor = inputs[i]
    low, opt, high = tensor.min_shape[a] // k, tensor.opt_shape[a] // k, tensor.max_shape[a] // k
    if low == high:
        return None
    return ProfileAxis(names[0], frozenset(names), members, low, opt, high)


def _axis_words(axis: ProfileAxis, inputs: Sequence[TensorPlan]) -> str:
    """``input_input_ids:1 (input_input_ids, input_attention_mask axis 1) 6..20 opt 20``."""
    tensors = ", ".join(f"{inputs[i].name} axis {a}" + (f" ({k} x)" if k != 1 else "") for i, a, k in axis.members)
    return f"{axis.key} = {tensors}: {axis.low}..{axis.high} opt {axis.opt}"


# -- Reading the buckets ---------------------------------------------------------------------------------------------
def _manifest_buckets(
    raw: Sequence[Mapping[str, Any]], axes: Sequence[ProfileAxis], inputs: Sequence[TensorPlan], model: ManifestModel,
    file: str, problems: list[Problem],
) -> list[_Bucket]:
    """The manifest's ``profiles:`` list: names unique, every axis named once, known and dynamic."""
    by_name = {name: n for n, axis in enumerate(axes) for name in axis.names}
    known = "; ".join(_axis_words(axis, inputs) for axis in axes) or "none: every input shape is static"
    statics = {f"{t.name}:{a}": size for t in inputs for a, size in enumerate(t.min_shape)
               if t.min_shape[a] == t.max_shape[a]}
    batch_members = {f"{inputs[i].name}:{a}" for axis in axes if axis.key == "batch" for i, a, _ in axis.members}
    buckets = []
    seen: dict[str, int] = {}
    for k, entry in enumerate(raw):
        name = str(entry["name"])
        if name in seen:
            problems.append(Problem(file, model.option_pointer("profiles", k, "name"),
                                    f"profile name {name!r} is used by /profiles/{seen[name]} too; names must differ "
                                    "(they name the reference cases)"))
        seen.setdefault(name, k)
        bucket = _Bucket(name, [(a.low, a.opt, a.high) for a in axes], {})
        for key, numbers in entry["axes"].items():
            at = model.option_pointer("profiles", k, "axes", key)
            n = by_name.get(key)
            if n is None:
                if key in batch_members:
                    why = f"{key!r} is a batch axis; name it 'batch' (in batch units)"
                elif key in statics or key == "batch":
                    why = (f"axis {key!r} is static (size {statics[key]}); a profile cannot change it" if key in statics
                           else "this model has no dynamic batch axis")
                else:
                    why = f"no dynamic axis {key!r} in this model"
                problems.append(Problem(file, at, f"profile {name!r}: {why} (axes: {known})"))
                continue
            if n in bucket.where:
                problems.append(Problem(file, at, f"profile {name!r} names axis {axes[n].key!r} twice (as "
                                        f"{key!r} too); linked axes are one dimension"))
                continue
            bucket.ranges[n] = (int(numbers["min"]), int(numbers["opt"]), int(numbers["max"]))
            bucket.where[n] = (file, at + "/min", at + "/opt", at + "/max")
        buckets.append(bucket)
    return buckets


def _aitune_buckets(
    model: ManifestModel, axes: Sequence[ProfileAxis], inputs: Sequence[TensorPlan], file: str,
    problems: list[Problem],
) -> list[_Bucket]:
    """AITune's saved profiles: each names exactly the inputs (AITune's words), linked axes agree, statics fit."""
    assert model.profiles_file is not None
    path = str(model.profiles_file.path)
    names = {format_tensor_name(t.path, "input"): i for i, t in enumerate(inputs)}
    of_axis = {(i, a): (n, k) for n, axis in enumerate(axes) for i, a, k in axis.members}
    buckets = []
    for p, profile in enumerate(model.profiles_file.profiles):
        bucket = _Bucket(f"aitune_{p}", [(a.low, a.opt, a.high) for a in axes], {})
        missing = sorted(set(names) - set(profile))
        unknown = sorted(set(profile) - set(names))
        if missing or unknown:
            problems.append(Problem(path, f"/{p}", f"TensorRT profile inputs {sorted(profile)} do not match recorded "
                                    f"tensor inputs {sorted(names)} (missing: {missing}, unknown: {unknown})."))
            buckets.append(bucket)
            continue
        for tensor_name, shapes in profile.items():
            i = names[tensor_name]
            tensor = inputs[i]
            at = json_pointer((p, tensor_name))
            if any(len(shape) != len(tensor.min_shape) for shape in shapes):
                problems.append(Problem(path, at, f"input {tensor.name!r} has rank {len(tensor.min_shape)} (shape "
                                        f"{list(tensor.min_shape)}..{list(tensor.max_shape)}); the profile gives "
                                        f"{[list(s) for s in shapes]}"))
                continue
            for a in range(len(tensor.min_shape)):
                where = (path, f"{at}/0/{a}", f"{at}/1/{a}", f"{at}/2/{a}")
                values = tuple(int(s[a]) for s in shapes)
                if (i, a) not in of_axis:
                    size = tensor.min_shape[a]
                    if values != (size, size, size):
                        problems.append(Problem(path, where[1], f"input {tensor.name!r} axis {a} is static (size "
                                                f"{size}); the profile gives {list(values)}"))
                    continue
                n, k = of_axis[(i, a)]
                scaled = (values[0] // k, values[1] // k, values[2] // k)
                if n in bucket.where:
                    if scaled != bucket.ranges[n]:
                        first = bucket.where[n][1].rsplit("/", 2)[0]
                        differs = next(f for f in range(3) if scaled[f] != bucket.ranges[n][f])
                        problems.append(Problem(path, where[1 + differs], f"input {tensor.name!r} axis {a} has "
                                                f"{list(values)}, but the linked axis at {first} has "
                                                f"{list(bucket.ranges[n])}; linked axes are one dimension "
                                                f"({axes[n].key})"))
                    continue
                bucket.ranges[n] = scaled
                bucket.where[n] = where
        buckets.append(bucket)
    return buckets


# -- Checks ----------------------------------------------------------------------------------------------------------
def _range_problems(bucket: _Bucket, axes: Sequence[ProfileAxis], batching: bool, max_batch_size: int) -> list[Problem]:
    """Every axis the bucket sets: its min <= opt <= max, inside the contract's range."""
    out = []
    for n, (file, at_min, at_opt, at_max) in bucket.where.items():
        axis = axes[n]
        low, opt, high = bucket.ranges[n]
        if not low <= opt <= high:
            out.append(Problem(file, at_opt, f"profile {bucket.name!r} {axis.key}: min {low}, opt {opt}, max {high} "
                               "must satisfy min <= opt <= max"))
            continue
        origin = (f"1..max_batch_size {max_batch_size}" if axis.key == "batch" and batching else
                  f"{axis.low}..{axis.high} (GraphSpec.get_effective_input_shapes after the shape policy)")
        for value, label, at in ((low, "min", at_min), (high, "max", at_max)):
            if not axis.low <= value <= axis.high:
                out.append(Problem(file, at, f"profile {bucket.name!r} {axis.key} {label} {value} is outside the "
                                   f"spec's range {origin}"))
    return out


def _uncovered(box: Sequence[tuple[int, int]], buckets: Sequence[Sequence[tuple[int, int]]],
               budget: list[int]) -> list[tuple[int, int]] | None:
    """A sub-box of ``box`` no bucket touches (a range per axis), or None when the buckets cover all of it.

    Cuts the first axis at every bucket edge: within each piece a bucket covers it whole or not at all, so the
    piece is covered when the buckets over it cover the remaining axes. ``budget[0]`` counts down the pieces visited.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooManyProfilesError
    if not box:
        return None if buckets else []
    low, high = box[0]
    over = [b for b in buckets if all(lo <= bh and bl <= hi for (lo, hi), (bl, bh) in zip(box, b, strict=True))]
    if not over:
        return list(box)
    cuts = sorted({low, high + 1, *(max(low, b[0][0]) for b in over), *(min(high, b[0][1]) + 1 for b in over)})
    for start, stop in itertools.pairwise(cuts):
        holding = [b[1:] for b in over if b[0][0] <= start and stop - 1 <= b[0][1]]
        gap = _uncovered(box[1:], holding, budget)
        if gap is not None:
            return [(start, stop - 1), *gap]
    return None


class _TooManyProfilesError(Exception):
    """The coverage check visited more pieces than its budget."""


def _box_words(axes: Sequence[ProfileAxis], box: Sequence[tuple[int, int]]) -> str:
    return " with ".join(f"{axis.key} {lo}" if lo == hi else f"{axis.key} {lo}..{hi}"
                         for axis, (lo, hi) in zip(axes, box, strict=True))


def _bucket_words(index: int, bucket: _Bucket, axes: Sequence[ProfileAxis]) -> str:
    parts = [f"{axis.key} {lo}..{hi} opt {opt}" for axis, (lo, opt, hi) in zip(axes, bucket.ranges, strict=True)]
    return f"{index} {bucket.name!r}: " + ", ".join(parts)


# -- The plan's profiles ---------------------------------------------------------------------------------------------
def plan_profiles(
    model: ManifestModel, tensors: TensorsPlan, file: str, target: str
) -> tuple[TensorsPlan, tuple[OptimizationProfile, ...]]:
    """Check the manifest's ``profiles:`` against ``tensors`` and make the optimization profiles.

    Returns the tensors the contract promises (narrowed to the profiles' union with ``narrow_to_profiles``) with
    the decisions and problems added, and the profiles in order (empty when the manifest names none: the plan then
    builds one profile from the contract's range, as before).
    """
    raw = model.options.get("profiles")
    notes: list[str] = []
    problems: list[Problem] = []
    narrow = bool(model.options.get("narrow_to_profiles", False))
    if raw is None:
        if narrow:
            problems.append(Problem(file, model.option_pointer("narrow_to_profiles"),
                                    "narrow_to_profiles needs profiles: to narrow to; set profiles or remove it"))
        return _with(tensors, notes, problems), ()
    if tensors.problems or (isinstance(raw, Mapping) and model.profiles_file is None):
        return tensors, ()  # the tensors (or the profiles file) failed already: their problems say why
    inputs = tensors.inputs
    axes = profile_axes(model, tensors)
    if isinstance(raw, Mapping):
        assert model.profiles_file is not None  # checked above
        buckets = _aitune_buckets(model, axes, inputs, file, problems)
        origin = f"AITune's {model.profiles_file.path.name}"
    else:
        buckets = _manifest_buckets(raw, axes, inputs, model, file, problems)
        origin = "the manifest's profiles"
    for bucket in buckets:
        problems += _range_problems(bucket, axes, tensors.batching, tensors.max_batch_size)
    if model.profiles_file is not None and problems:
        problems.insert(0, Problem(file, model.option_pointer("profiles", "aitune"), f"AITune profiles file "
                                   f"{model.profiles_file.path.name!r} does not fit model {model.name!r} (see below)"))
    if problems:
        return _with(tensors, notes, problems), ()

    notes.append(f"optimization profiles ({origin}): {len(buckets)}, in this order (the index is TensorRT's and "
                 "Triton's profile index): " + "; ".join(_bucket_words(k, b, axes) for k, b in enumerate(buckets))
                 + (f"; axes: {'; '.join(_axis_words(a, inputs) for a in axes)}" if axes else ""))
    contract_box = [(a.low, a.high) for a in axes]
    spans = [[(lo, hi) for lo, _, hi in b.ranges] for b in buckets]
    batch = next((n for n, a in enumerate(axes) if a.key == "batch"), None)
    union = [(min(s[n][0] for s in spans), max(s[n][1] for s in spans)) for n in range(len(axes))]
    try:
        gap = _uncovered(contract_box, spans, [_COVERAGE_BUDGET])
        gap_in_union = _uncovered(union, spans, [_COVERAGE_BUDGET]) if narrow and gap is not None else None
    except _TooManyProfilesError:
        problems.append(Problem(file, model.option_pointer("profiles"), "the profiles split the range into too "
                                f"many pieces to check their coverage ({_COVERAGE_BUDGET}); use fewer profiles"))
        return _with(tensors, notes, problems), ()
    batch_max = max(s[batch][1] for s in spans) if batch is not None else None
    if tensors.batching and batch_max is not None and batch_max < tensors.max_batch_size and not narrow:
        problems.append(Problem(file, model.option_pointer("profiles"), f"max_batch_size {tensors.max_batch_size} "
                                f"exceeds the largest profile batch max {batch_max}: Triton's TensorRT backend "
                                f"refuses the config (autofill failed for model '{model.name}': configuration "
                                f"specified max-batch {tensors.max_batch_size} but TensorRT engine only supports "
                                f"max-batch {batch_max}); raise a profile's batch max or lower max_batch_size"
                                + _samples_used_hint(model)))
    elif gap is not None and not narrow:
        problems.append(Problem(file, model.option_pointer("profiles"), _gap_message(model, tensors, axes, gap)))
    elif gap is not None:
        if gap_in_union is not None:
            problems.append(Problem(file, model.option_pointer("narrow_to_profiles"), "narrow_to_profiles: the "
                                    "profiles' union is not one box (the contract gives each axis one range): no "
                                    f"profile holds {_box_words(axes, gap_in_union)}; add a profile there"))
        elif tensors.batching and batch is not None and union[batch][0] > 1:
            problems.append(Problem(file, model.option_pointer("profiles"), "narrow_to_profiles: no profile holds "
                                    "batch 1, but Triton's dynamic batcher forms any batch from 1 up; start a "
                                    "profile at batch 1"))
        else:
            tensors = _narrowed(tensors, axes, union)
            notes.append(f"narrow_to_profiles: the contract promises only the profiles' union, "
                         f"{_box_words(axes, union)} (the spec allows {_box_words(axes, contract_box)}), so every "
                         "request the contract accepts has a profile")
    else:
        formed = ("every batch Triton's dynamic batcher can form, with every shape," if tensors.batching else
                  "every shape a request can take")
        notes.append(f"together they cover the contract's range ({_box_words(axes, contract_box) or 'static'}): "
                     f"{formed} has a profile")
    if problems:
        return _with(tensors, notes, problems), ()
    notes += _overlap_notes(buckets, axes)
    if model.graph.dynamic_shapes:
        notes.append("AITune's own TensorRT backend refuses profiles together with dynamic_shapes ('TensorRT "
                     "profiles cannot be provided together with module dynamic shape definitions.'); gen-repo checks "
                     "the profiles against them instead")
    if target != "tensorrt":
        accelerator = ("; ONNX Runtime's TensorRT accelerator builds its one profile over the contract's range"
                       if target == "onnx" and model.options.get("onnx_tensorrt_accelerator") else "")
        notes.append(f"target {target} builds no TensorRT plan: the profiles give the contract its "
                     "optimization_profiles and the reference data a case at each profile's min, opt and max (smoke "
                     f"sends them){accelerator}")
    profiles = tuple(OptimizationProfile(b.name, _profile_inputs(tensors.inputs, axes, b)) for b in buckets)
    return _with(tensors, notes, problems), profiles


def _with(tensors: TensorsPlan, notes: list[str], problems: list[Problem]) -> TensorsPlan:
    if not notes and not problems:
        return tensors
    return replace(tensors, decisions=(*tensors.decisions, *notes), problems=(*tensors.problems, *problems))


def _gap_message(model: ManifestModel, tensors: TensorsPlan, axes: Sequence[ProfileAxis],
                 gap: Sequence[tuple[int, int]]) -> str:
    formed = (f"Triton's dynamic batcher forms any batch 1..{tensors.max_batch_size} of requests in the contract's "
              "range" if tensors.batching else "a request may take any shape in the contract's range")
    message = (f"the profiles do not cover the range the contract promises: no profile holds {_box_words(axes, gap)} "
               f"({formed}; Triton's TensorRT backend fails such a request: '{NO_PROFILE}'); add a profile there, or "
               "set narrow_to_profiles: true to promise only what the profiles hold")
    return message + _samples_used_hint(model)


def _samples_used_hint(model: ManifestModel) -> str:
    """Why AITune's ``ProfileMode.SAMPLES_USED`` profiles (min = opt = max: one recorded shape each) cannot serve."""
    if model.profiles_file is None or not all(
            shapes[0] == shapes[2] for profile in model.profiles_file.profiles for shapes in profile.values()):
        return ""
    return ("; these look like AITune ProfileMode.SAMPLES_USED profiles (one shape each), but Triton forms batches "
            "of 1..max_batch_size and requests of every shape in range: write buckets in the manifest instead, or "
            "set narrow_to_profiles")


def _overlap_notes(buckets: Sequence[_Bucket], axes: Sequence[ProfileAxis]) -> list[str]:
    notes = []
    for j, second in enumerate(buckets):
        for first in buckets[:j]:
            shared = [(max(a[0], b[0]), min(a[2], b[2])) for a, b in zip(first.ranges, second.ranges, strict=True)]
            if all(lo <= hi for lo, hi in shared):
                where = _box_words(axes, shared) or "every shape"
                notes.append(f"profiles {first.name!r} and {second.name!r} overlap ({where}): Triton's TensorRT "
                             "backend picks among the profiles holding a request by "
                             "EvaluateTensorRTContext's distance to each opt shape, which compares opt axis i+1 with "
                             "request axis i (src/instance_state.cc), and AITune's runtime takes the first; profiles "
                             "that do not overlap leave no choice to either")
    return notes


def _set_axis(shapes: list[list[int]], member: tuple[int, int, int], values: tuple[int, int, int]) -> None:
    _, axis, k = member
    for shape, value in zip(shapes, values, strict=True):
        shape[axis] = value * k


def _profile_inputs(
    inputs: Sequence[TensorPlan], axes: Sequence[ProfileAxis], bucket: _Bucket
) -> tuple[TensorPlan, ...]:
    shapes = [[list(t.min_shape), list(t.opt_shape), list(t.max_shape)] for t in inputs]
    for axis, values in zip(axes, bucket.ranges, strict=True):
        for member in axis.members:
            _set_axis(shapes[member[0]], member, values)
    return tuple(replace(t, min_shape=tuple(s[0]), opt_shape=tuple(s[1]), max_shape=tuple(s[2]))
                 for t, s in zip(inputs, shapes, strict=True))


def _narrowed(tensors: TensorsPlan, axes: Sequence[ProfileAxis], box: Sequence[tuple[int, int]]) -> TensorsPlan:
    """``tensors`` with each axis's range narrowed to ``box`` (opt kept where it fits), dims and batch to match."""
    shapes = [[list(t.min_shape), list(t.opt_shape), list(t.max_shape)] for t in tensors.inputs]
    max_batch_size, opt_batch = tensors.max_batch_size, tensors.opt_batch
    for axis, (low, high) in zip(axes, box, strict=True):
        opt = min(max(axis.opt, low), high)
        for member in axis.members:
            _set_axis(shapes[member[0]], member, (low, opt, high))
        if axis.key == "batch" and tensors.batching:
            max_batch_size, opt_batch = high, opt
    inputs = tuple(replace(t, min_shape=tuple(s[0]), opt_shape=tuple(s[1]), max_shape=tuple(s[2]),
                           dims=_dims(t, s[0], s[2])) for t, s in zip(tensors.inputs, shapes, strict=True))
    outputs = tensors.outputs
    if tensors.batching:  # every output's batch axis follows max_batch_size
        outputs = tuple(replace(t, opt_shape=(max_batch_size, *t.opt_shape[1:]),
                                max_shape=(max_batch_size, *t.max_shape[1:])) for t in outputs)
    return replace(tensors, inputs=inputs, outputs=outputs, max_batch_size=max_batch_size, opt_batch=opt_batch)


def _dims(tensor: TensorPlan, low: Sequence[int], high: Sequence[int]) -> tuple[int, ...]:
    """Config dims for the narrowed range (the batch axis left out; a per-item scalar keeps its ``[1]``)."""
    if tensor.reshape is not None or tensor.torch_scalar:
        return tensor.dims
    first = 0 if tensor.batch_axis is None else 1
    return tuple(-1 if lo != hi else lo for lo, hi in zip(low[first:], high[first:], strict=True))
