"""AITune's rules a JSON Schema cannot express, checked on a schema-valid graph, each problem at its pointer.

Unique names, forward's parameters, explicit dynamic shapes against the recorded ranges, one batch size across inputs;
:func:`graph_problems` reports them through ``add(pointer, message)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Literal

from generator.naming import format_tensor_name
from generator.specs.paths import path_from_json
from generator.specs.tensor_spec import dim_problems

__all__ = ["Add", "graph_problems"]

_AXIS_LABEL = re.compile(r"^(batch|dim)(\d+)$")


Add = Callable[[str, str], None]


def _is_clean(pointer: str, broken: set[str]) -> bool:
    """Tell whether the schema reported nothing at or below ``pointer`` (its structure can be trusted)."""
    if not broken:
        return True
    prefix = pointer + "/"
    return not any(b == pointer or b.startswith(prefix) for b in broken)


def _show_path(value: Any) -> str:
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def _tensors(meta: Any, pointer: str, broken: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """(pointer, entry) of each tensor entry whose own structure passed the schema."""
    if not isinstance(meta, dict) or not isinstance(meta.get("tensor_data"), list):
        return []
    base = pointer + "/tensor_data/"
    out = []
    for index, entry in enumerate(meta["tensor_data"]):
        entry_pointer = base + str(index)
        if isinstance(entry, dict) and _is_clean(entry_pointer, broken):
            out.append((entry_pointer, entry))
    return out


def graph_problems(graph: dict[str, Any], base: str, add: Add, broken: set[str]) -> None:
    """Every semantic problem of one schema-checked graph object at JSON pointer ``base``, reported through ``add``.

    ``broken`` holds the pointers the schema reported (their structure is not trusted).
    """
    inputs = _tensors(graph.get("input_spec"), base + "/input_spec", broken)
    outputs = _tensors(graph.get("output_spec"), base + "/output_spec", broken)
    post = _tensors(graph.get("post_input_spec"), base + "/post_input_spec", broken)
    ranks_ok: dict[str, bool] = {}
    for pointer, entry in (*inputs, *outputs, *post):
        ranks_ok[pointer] = _tensor_problems(entry, pointer, add)

    input_paths = _paths(graph.get("input_spec"), base + "/input_spec", broken)
    _name_problems(input_paths, "input", add)
    _name_problems(_paths(graph.get("output_spec"), base + "/output_spec", broken), "output", add)
    _signature_problems(graph.get("forward_signature"), base + "/forward_signature", input_paths, add, broken)
    explicit = _dynamic_shape_problems(
        graph.get("dynamic_shapes"), base + "/dynamic_shapes", inputs, input_paths, add, broken
    )
    recorded = [(p, e) for p, e in inputs if ranks_ok[p] and path_from_json(e["semantic_path"]) not in explicit]
    _batch_consistency_problems(recorded, add)


def _paths(meta: Any, pointer: str, broken: set[str]) -> list[tuple[str, Any]]:
    """(entry pointer, semantic path) of every tensor whose path is well-formed (its other fields may be broken)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("tensor_data"), list):
        return []
    out = []
    for index, entry in enumerate(meta["tensor_data"]):
        entry_pointer = f"{pointer}/tensor_data/{index}"
        if isinstance(entry, dict) and "semantic_path" in entry and _is_clean(entry_pointer + "/semantic_path", broken):
            out.append((entry_pointer, entry["semantic_path"]))
    return out


def _tensor_problems(entry: dict[str, Any], pointer: str, add: Add) -> bool:
    """Ranks, per-axis ranges, axis labels and declared multipliers of one tensor entry; False if ranks differ."""
    shape, min_shape, max_shape = entry["shape"], entry["min_shape"], entry["max_shape"]
    rank = len(shape)
    ok = True
    for key, values in (("min_shape", min_shape), ("max_shape", max_shape)):
        if len(values) != rank:
            add(f"{pointer}/{key}", f"has {len(values)} axes but shape has {rank}; shape, min_shape and max_shape "
                                    "must have the same rank")
            ok = False
    # JSON Schema's "integer" accepts 1.0; sizes must be real ints so that shapes compare and print as AITune's.
    for key, values in (("shape", shape), ("min_shape", min_shape), ("max_shape", max_shape)):
        for axis, value in enumerate(values):
            if type(value) is float:
                add(f"{pointer}/{key}/{axis}", f"must be an integer, got {value!r}")
                ok = False
    if not ok:
        return False
    for axis in range(rank):
        label, low, high = shape[axis], min_shape[axis], max_shape[axis]
        if isinstance(label, int):
            if low != label:
                add(f"{pointer}/min_shape/{axis}", f"axis {axis} is static ({label}) but min_shape[{axis}] is {low}")
            if high != label:
                add(f"{pointer}/max_shape/{axis}", f"axis {axis} is static ({label}) but max_shape[{axis}] is {high}")
            continue
        match = _AXIS_LABEL.match(label)
        if match is not None and int(match.group(2)) != axis:
            add(f"{pointer}/shape/{axis}", f"{label!r} is on axis {axis}; AITune labels an axis with its own index "
                                           f"({match.group(1)}{axis})")
        if low > high:
            add(f"{pointer}/min_shape/{axis}", f"min_shape[{axis}]={low} is larger than max_shape[{axis}]={high}")
    declared = entry.get("batch_axis_multipliers")
    if declared:
        for key, multiplier in declared.items():
            axis = int(key)
            where = f"{pointer}/batch_axis_multipliers/{key}"
            if axis >= rank or shape[axis] != f"batch{axis}":
                actual = shape[axis] if axis < rank else "missing"
                add(where, f"axis {axis} is not a batch axis (shape[{axis}] is {actual!r}); multipliers are only "
                           "for batch<i> axes")
            elif min_shape[axis] % multiplier or max_shape[axis] % multiplier:
                add(where, f"batch axis {axis} range {min_shape[axis]}..{max_shape[axis]} is not a multiple of its "
                           f"multiplier {multiplier}")
    return True


def _name_problems(paths: list[tuple[str, Any]], prefix: Literal["input", "output"], add: Add) -> None:
    """Tensor names (AITune's ``input_<path>``/``output_<path>``) must be unique after sanitising."""
    seen: dict[str, str] = {}
    for pointer, path in paths:
        name = format_tensor_name(path_from_json(path), prefix)
        first = seen.setdefault(name, pointer)
        if first != pointer:
            add(f"{pointer}/semantic_path", f"{prefix} tensor name {name!r} (from path "
                                            f"{_show_path(path)}) is also the name of the tensor at "
                                            f"{first}; names must be unique after replacing characters outside "
                                            "[A-Za-z0-9_] by '_'")


def _signature_problems(
    signature: Any, pointer: str, input_paths: list[tuple[str, Any]], add: Add, broken: set[str]
) -> None:
    """Parameter names unique; every input tensor rooted at a parameter (make_batch binds calls by name)."""
    if not isinstance(signature, dict) or not _is_clean(pointer, broken):
        return
    names: list[str] = []
    for index, parameter in enumerate(signature["parameters"]):
        if parameter["name"] in names:
            add(f"{pointer}/parameters/{index}/name", f"parameter {parameter['name']!r} is listed twice")
        names.append(parameter["name"])
    for tensor_pointer, path in input_paths:
        root = (path[0] if path else "") if isinstance(path, list) else path
        if root not in names:
            add(f"{tensor_pointer}/semantic_path", f"input path {_show_path(path)} does not start at a parameter of "
                                                   f"forward_signature ({', '.join(names) or 'none'})")


def _describe_dim(dim: dict[str, Any]) -> str:
    return f"{dim['type']}(min={dim['min']}, max={dim['max']}, opt={dim.get('opt')})"


def _dynamic_shape_problems(
    definitions: Any,
    pointer: str,
    inputs: list[tuple[str, dict[str, Any]]],
    input_paths: list[tuple[str, Any]],
    add: Add,
    broken: set[str],
) -> set[Any]:
    """Explicit definitions: known input path, once; rank; AITune's dim rules; shared names; one batch range.

    Returns the input paths that have a definition (their recorded batch ranges do not count, as in AITune).
    """
    defined: set[Any] = set()
    if not isinstance(definitions, list):
        return defined
    by_path = {path_from_json(entry["semantic_path"]): entry for _, entry in inputs}
    known_paths = {path_from_json(path) for _, path in input_paths}
    first_path: dict[Any, str] = {}
    dims_by_name: dict[str, tuple[str, dict[str, Any]]] = {}
    batch_reference: tuple[str, dict[str, Any]] | None = None
    for index, definition in enumerate(definitions):
        where = f"{pointer}/{index}"
        if not isinstance(definition, dict) or not _is_clean(where, broken):
            continue
        key = path_from_json(definition["path"])
        defined.add(key)
        if key in first_path:
            add(f"{where}/path", f"input {_show_path(definition['path'])} already has a definition at "
                                 f"{first_path[key]}; only one definition per input is allowed")
        first_path.setdefault(key, where)
        tensor = by_path.get(key)
        shape = definition["shape"]
        if key not in known_paths:
            known = ", ".join(_show_path(p) for _, p in input_paths) or "none"
            add(f"{where}/path", f"{_show_path(definition['path'])} names no input tensor (input paths: {known})")
        elif tensor is not None and len(shape) != len(tensor["shape"]):
            add(f"{where}/shape", f"has {len(shape)} axes but input {_show_path(definition['path'])} has "
                                  f"{len(tensor['shape'])}")
        for axis, dim in enumerate(shape):
            if not isinstance(dim, dict):
                continue
            dim_pointer = f"{where}/shape/{axis}"
            label = f"{dim['type']} {dim['name']!r}"
            for message in dim_problems(dim["name"], dim["min"], dim["max"], dim.get("opt")):
                add(_dim_field(dim_pointer, message), f"{label}: {message}")
            previous = dims_by_name.get(dim["name"])
            if previous is None:
                dims_by_name[dim["name"]] = (dim_pointer, dim)
            elif _dim_key(previous[1]) != _dim_key(dim):
                add(dim_pointer, f"{label} is {_describe_dim(dim)} here but {_describe_dim(previous[1])} at "
                                 f"{previous[0]}; a shared dimension must have identical type and bounds")
                continue
            if dim["type"] == "BatchDim":
                if batch_reference is None:
                    batch_reference = (dim_pointer, dim)
                    continue
                ref_pointer, ref = batch_reference
                if ref["name"] != dim["name"] and (ref["min"], ref["max"]) != (dim["min"], dim["max"]):
                    bad = "min" if ref["min"] != dim["min"] else "max"
                    add(f"{dim_pointer}/{bad}", f"{label} range {dim['min']}..{dim['max']} differs from BatchDim "
                                                f"{ref['name']!r} {ref['min']}..{ref['max']} at {ref_pointer}; every "
                                                "BatchDim is the module's one batch size")
    return defined


def _dim_key(dim: dict[str, Any]) -> tuple[Any, ...]:
    return dim["type"], dim["min"], dim["max"], dim.get("opt")


def _dim_field(dim_pointer: str, message: str) -> str:
    """Point at the field a :func:`dim_problems` message is about."""
    for name in ("name", "min", "max", "opt"):
        if message.startswith(name + " "):
            return f"{dim_pointer}/{name}"
    if "opt" in message:
        return f"{dim_pointer}/opt"
    return f"{dim_pointer}/max"


def _batch_consistency_problems(recorded: Iterable[tuple[str, dict[str, Any]]], add: Add) -> None:
    """Check that one batch size range explains the recorded batch axes of all inputs.

    A batch axis records ``k * b`` for every batch size ``b`` seen, so every axis's (min, max) is proportional to the
    batch range; one that is not cannot come from the same calls. Non-integer multiples are left to
    :func:`generator.specs.graphspec.infer_batch_multipliers`. Declared multipliers must give equal normalized ranges.
    """
    reference: tuple[str, int, int, int | None] | None = None
    for pointer, entry in recorded:
        declared = entry.get("batch_axis_multipliers") or {}
        for axis, label in enumerate(entry["shape"]):
            if label != f"batch{axis}":
                continue
            low, high = entry["min_shape"][axis], entry["max_shape"][axis]
            multiplier = declared.get(str(axis))
            here = f"{pointer}/max_shape/{axis}"
            if reference is None:
                reference = (here, low, high, multiplier)
                continue
            ref_pointer, ref_low, ref_high, ref_multiplier = reference
            if multiplier is not None and ref_multiplier is not None:
                if low * ref_multiplier != ref_low * multiplier or high * ref_multiplier != ref_high * multiplier:
                    add(here, f"batch axis {axis} range {low}..{high} with multiplier {multiplier} gives batch sizes "
                              f"{low // multiplier}..{high // multiplier}, but {ref_pointer} gives "
                              f"{ref_low // ref_multiplier}..{ref_high // ref_multiplier}")
            elif low * ref_high != high * ref_low:
                add(here, f"batch axis {axis} range {low}..{high} is not proportional to the batch range "
                          f"{ref_low}..{ref_high} at {ref_pointer}; no batch size multiplier explains both")
