"""Fast verdicts for valid GraphSpec documents: True/False answers, no pointers, no messages.

:func:`graph_all_clear` answers True only when :func:`generator.specs.semantics.graph_problems` would report
nothing; the ``*_has_tuple`` checks tell the schema's fast path whether a Python tuple stands where the schema expects
an array. Any doubt, and the full reporters run (:mod:`generator.specs.schema` explains the stages).
"""

from __future__ import annotations

from typing import Any, Literal

from generator.naming import format_tensor_name
from generator.specs.paths import path_from_json

__all__ = ["fixture_has_tuple", "graph_all_clear", "graph_has_tuple", "report_has_tuple"]


#: "batch<i>"/"dim<i>" labels by axis, built once (TensorRT allows 8 dims; longer shapes build the label per call).
_BATCH_LABELS = tuple(f"batch{axis}" for axis in range(16))
_DIM_LABELS = tuple(f"dim{axis}" for axis in range(16))


def _batch_label(axis: int) -> str:
    return _BATCH_LABELS[axis] if axis < len(_BATCH_LABELS) else f"batch{axis}"


def graph_has_tuple(graph: Any) -> bool:
    """Tell whether a tuple stands where the GraphSpec schema allows an array (jsonschema_rs would take it for one).

    Only called on a graph jsonschema_rs found valid, so the structure is known; elsewhere in a valid document a
    tuple is either rejected by both validators (every other typed position excludes arrays) or unconstrained.
    """
    if not isinstance(graph, dict):
        return False
    for key in ("input_spec", "output_spec", "post_input_spec"):
        meta = graph.get(key)
        if not isinstance(meta, dict):
            continue
        for field_name in ("tensor_data", "other_data"):
            entries = meta.get(field_name)
            if isinstance(entries, tuple):
                return True
            for entry in entries or ():
                if isinstance(entry.get("semantic_path"), tuple):
                    return True
                if field_name == "tensor_data" and (
                    isinstance(entry["shape"], tuple)
                    or isinstance(entry["min_shape"], tuple)
                    or isinstance(entry["max_shape"], tuple)
                ):
                    return True
    signature = graph.get("forward_signature")
    if isinstance(signature, dict) and isinstance(signature.get("parameters"), tuple):
        return True
    definitions = graph.get("dynamic_shapes")
    if isinstance(definitions, tuple):
        return True
    for definition in definitions or ():
        if isinstance(definition["path"], tuple) or isinstance(definition["shape"], tuple):
            return True
    return False


def fixture_has_tuple(document: Any) -> bool:
    """:func:`graph_has_tuple` for a fixture document (its graph at ``/graph``)."""
    return graph_has_tuple(document.get("graph"))


def report_has_tuple(report: Any) -> bool:
    """:func:`graph_has_tuple` for a tune report (its graphs at ``/modules/<i>/graphs/<j>``)."""
    modules = report.get("modules")
    if isinstance(modules, tuple):
        return True
    for module in modules or ():
        graphs = module.get("graphs")
        if isinstance(graphs, tuple) or any(graph_has_tuple(graph) for graph in graphs or ()):
            return True
    return False


def _tensor_all_clear(entry: dict[str, Any]) -> bool:
    """:func:`_tensor_problems` would report nothing (conservative: False may still be fine)."""
    shape, min_shape, max_shape = entry["shape"], entry["min_shape"], entry["max_shape"]
    rank = len(shape)
    if len(min_shape) != rank or len(max_shape) != rank:
        return False
    for axis in range(rank):
        label, low, high = shape[axis], min_shape[axis], max_shape[axis]
        if type(low) is not int or type(high) is not int:
            return False
        kind = type(label)
        if kind is int:
            if low != label or high != label:
                return False
        elif kind is str:
            if low > high:
                return False
            if axis >= len(_BATCH_LABELS) or (label != _BATCH_LABELS[axis] and label != _DIM_LABELS[axis]):
                return False
        else:
            return False
    declared = entry.get("batch_axis_multipliers")
    if declared:
        for key, multiplier in declared.items():
            axis = int(key)
            if axis >= rank or shape[axis] != _batch_label(axis) or type(multiplier) is not int:
                return False
            if min_shape[axis] % multiplier or max_shape[axis] % multiplier:
                return False
    return True


def _names_unique(entries: list[dict[str, Any]], prefix: Literal["input", "output"]) -> bool:
    names = {format_tensor_name(path_from_json(entry["semantic_path"]), prefix) for entry in entries}
    return len(names) == len(entries)


def graph_all_clear(graph: Any) -> bool:
    """True only when :func:`graph_problems` would report nothing for this schema-valid graph.

    One pass without pointers or messages, for the common case of a valid graph. Conservative: False means "maybe
    a problem" and the caller runs the full reporter, whose answer counts; so a rule may be checked more strictly
    here than there, never more loosely.
    """
    inputs = graph["input_spec"]["tensor_data"]
    outputs = graph["output_spec"]["tensor_data"]
    for entry in inputs:
        if not _tensor_all_clear(entry):
            return False
    for entry in outputs:
        if not _tensor_all_clear(entry):
            return False
    post = graph.get("post_input_spec")
    if post is not None:
        for entry in post["tensor_data"]:
            if not _tensor_all_clear(entry):
                return False
    if not _names_unique(inputs, "input") or not _names_unique(outputs, "output"):
        return False

    signature = graph.get("forward_signature")
    if signature is not None:
        names = [parameter["name"] for parameter in signature["parameters"]]
        if len(set(names)) != len(names):
            return False
        for entry in inputs:
            path = entry["semantic_path"]
            root = (path[0] if path else "") if isinstance(path, list) else path
            if root not in names:
                return False

    explicit: set[Any] = set()
    definitions = graph.get("dynamic_shapes")
    if definitions:
        by_path = {path_from_json(entry["semantic_path"]): entry for entry in inputs}
        dims_by_name: dict[Any, tuple[Any, ...]] = {}
        batch_reference: tuple[Any, int, int] | None = None
        for definition in definitions:
            key = path_from_json(definition["path"])
            tensor = by_path.get(key)
            if key in explicit or tensor is None or len(definition["shape"]) != len(tensor["shape"]):
                return False
            explicit.add(key)
            for dim in definition["shape"]:
                if not isinstance(dim, dict):
                    continue
                name, low, high, opt = dim["name"], dim["min"], dim["max"], dim.get("opt")
                # dim_problems' rules, stricter on types (a float bound goes to the full reporter).
                if type(name) is not str or not name or type(low) is not int or type(high) is not int:
                    return False
                if not 0 < low < high or (opt is not None and (type(opt) is not int or not low <= opt <= high)):
                    return False
                dim_key = (dim["type"], low, high, opt)
                if dims_by_name.setdefault(name, dim_key) != dim_key:
                    return False
                if dim["type"] == "BatchDim":
                    if batch_reference is None:
                        batch_reference = (name, low, high)
                    elif batch_reference[0] != name and (batch_reference[1], batch_reference[2]) != (low, high):
                        return False

    # Recorded batch axes of inputs without an explicit definition: one batch range explains them all.
    reference: tuple[int, int, Any] | None = None
    for entry in inputs:
        if explicit and path_from_json(entry["semantic_path"]) in explicit:
            continue
        declared = entry.get("batch_axis_multipliers") or {}
        shape = entry["shape"]
        for axis in range(len(shape)):
            if shape[axis] != _batch_label(axis):
                continue
            low, high = entry["min_shape"][axis], entry["max_shape"][axis]
            multiplier = declared.get(str(axis)) if declared else None
            if reference is None:
                reference = (low, high, multiplier)
                continue
            ref_low, ref_high, ref_multiplier = reference
            if multiplier is not None and ref_multiplier is not None:
                if low * ref_multiplier != ref_low * multiplier or high * ref_multiplier != ref_high * multiplier:
                    return False
            elif low * ref_high != high * ref_low:
                return False
    return True
