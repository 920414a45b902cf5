"""The manifest's fixes to a recording: ``dynamic_shapes`` and ``batch_axis_multipliers`` applied to a GraphSpec.

The result is the GraphSpec AITune would have written with those definitions, checked by the spec rules and AITune's
own fit check, each problem pointing into the manifest where the manifest caused it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from generator.errors import Problem, json_pointer
from generator.naming import format_tensor_name
from generator.specs.graphspec import GraphSpec, infer_batch_multipliers
from generator.specs.paths import Locator, path_from_json
from generator.specs.semantics import graph_problems

__all__ = ["OVERRIDE_KEYS", "Overridden", "apply_overrides"]

#: Manifest model keys that change the GraphSpec itself (never allowed in ``defaults``).
OVERRIDE_KEYS = ("dynamic_shapes", "batch_axis_multipliers")

_DEFINITION = re.compile(r"^/dynamic_shapes/(\d+)(.*)$")
_MULTIPLIER = re.compile(r"^/(input|output)_spec/tensor_data/(\d+)/batch_axis_multipliers(?:/(\d+))?(.*)$")


@dataclass(frozen=True, slots=True)
class Overridden:
    """A GraphSpec with the manifest's fixes (None when they are invalid), what they changed, and the problems."""

    graph: GraphSpec | None
    #: Sentences for ``gen-repo plan``: which definitions and multipliers came from the manifest.
    applied: tuple[str, ...] = ()
    #: What the loader still had to assume (batch multipliers the manifest did not declare).
    assumptions: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default=())
    #: Per definition of ``graph.dynamic_shapes``: the index of the manifest's ``dynamic_shapes`` entry it came from,
    #: or None where the spec's own definition stands.
    origins: tuple[int | None, ...] = ()


def apply_overrides(
    document: Mapping[str, Any],
    overrides: Mapping[str, Any],
    *,
    manifest_file: str,
    model_pointer: str,
    spec_file: str,
    spec_pointer: str,
) -> Overridden:
    """Apply a manifest model's ``dynamic_shapes`` and ``batch_axis_multipliers`` to the graph object ``document``.

    ``document`` is the graph as read from the spec (it is not modified). Problems caused by the manifest point at
    ``manifest_file`` under ``model_pointer``; the rest at the spec.
    """
    raw: dict[str, Any] = copy.deepcopy(dict(document))
    problems: list[Problem] = []
    applied: list[str] = []
    declared: list[Any] = list(overrides.get("dynamic_shapes") or [])
    recorded_definitions = list(raw.get("dynamic_shapes") or [])
    # A replacement takes the place of the spec's definition, additions come after: the spec's definitions keep their
    # indices, so messages that cite one point at it in the spec file. origin[k] is the manifest index or None.
    by_path = {path_from_json(entry["path"]): j for j, entry in enumerate(declared)}
    merged: list[Any] = []
    origin: list[int | None] = []
    for entry in recorded_definitions:
        j = by_path.pop(path_from_json(entry["path"]), None)
        merged.append(entry if j is None else copy.deepcopy(declared[j]))
        origin.append(j)
        if j is not None:
            applied.append(f"the manifest's dynamic_shapes replaces the definition of input {_show(entry['path'])}")
    for j in by_path.values():
        merged.append(copy.deepcopy(declared[j]))
        origin.append(j)
        applied.append(f"the manifest's dynamic_shapes adds the definition of input {_show(declared[j]['path'])}")
    if declared:
        raw["dynamic_shapes"] = merged

    owners: dict[tuple[str, int], tuple[str, bool]] = {}
    for key, value in (overrides.get("batch_axis_multipliers") or {}).items():
        where = model_pointer + json_pointer(("batch_axis_multipliers", key))
        found = _find_tensor(raw, key)
        if isinstance(found, str):
            problems.append(Problem(manifest_file, where, found))
            continue
        kind, index, entry = found
        if isinstance(value, int):
            axes = [axis for axis, label in enumerate(entry["shape"]) if label == f"batch{axis}"]
            if not axes:
                problems.append(Problem(manifest_file, where, f"{kind} {key!r} has no batch axis (shape "
                                                              f"{entry['shape']})"))
                continue
            entry["batch_axis_multipliers"] = {str(axis): value for axis in axes}
        else:
            entry["batch_axis_multipliers"] = {str(axis): k for axis, k in value.items()}
        owners[(kind, index)] = (key, not isinstance(value, int))
        shown = ", ".join(f"axis {a}: {k}" for a, k in entry["batch_axis_multipliers"].items())
        applied.append(f"the manifest declares the batch multipliers of {kind} {key!r} ({shown})")

    def locate(pointer: str, message: str) -> None:
        pointer = pointer[len(spec_pointer):]
        match = _DEFINITION.match(pointer)
        if match and declared and origin[int(match.group(1))] is not None:
            index = origin[int(match.group(1))]
            problems.append(Problem(manifest_file, f"{model_pointer}/dynamic_shapes/{index}{match.group(2)}", message))
            return
        match = _MULTIPLIER.match(pointer)
        if match and (match.group(1), int(match.group(2))) in owners:
            key, per_axis = owners[(match.group(1), int(match.group(2)))]
            parts: tuple[str, ...] = ("batch_axis_multipliers", key)
            if per_axis and match.group(3) is not None:
                parts += (match.group(3),)
            problems.append(Problem(manifest_file, model_pointer + json_pointer(parts), message))
            return
        # A message citing a definition the manifest replaced cites the manifest's entry instead.
        for k, j in enumerate(origin):
            if j is not None:
                message = message.replace(f"at {spec_pointer}/dynamic_shapes/{k}/",
                                          f"at {manifest_file} {model_pointer}/dynamic_shapes/{j}/")
        problems.append(Problem(spec_file, spec_pointer + pointer, message))

    graph_problems(raw, spec_pointer, locate, set())  # messages citing the spec cite it as in its file
    problems.extend(_recorded_fit_problems(raw, declared, manifest_file, model_pointer))
    if problems:
        return Overridden(None, tuple(applied), (), tuple(problems))
    graph = GraphSpec.from_dict(raw)
    assumptions = infer_batch_multipliers(graph)
    return Overridden(graph, tuple(applied), tuple(assumptions), (), tuple(origin) if declared else ())


def _show(path: Any) -> str:
    return Locator(path_from_json(path)).display_path


def _find_tensor(raw: Mapping[str, Any], key: str) -> tuple[str, int, dict[str, Any]] | str:
    """The tensor a manifest key names (default tensor name or access path), or why there is none."""
    matches = []
    names = []
    for kind in ("input", "output"):
        for index, entry in enumerate(raw[f"{kind}_spec"]["tensor_data"]):
            path = path_from_json(entry["semantic_path"])
            name = format_tensor_name(path, kind)
            names.append(name)
            if key in (name, entry.get("access_path"), Locator(path, is_output=kind == "output").display_path):
                matches.append((kind, index, entry))
    if not matches:
        return f"no tensor {key!r} in this graph (tensors: {', '.join(names)})"
    if len(matches) > 1:
        return f"{key!r} names more than one tensor; use its default name"
    return matches[0]


def _recorded_fit_problems(
    raw: Mapping[str, Any], declared: list[Any], manifest_file: str, model_pointer: str
) -> list[Problem]:
    """AITune checks a definition against every recorded call: recorded sizes must lie inside each declared axis."""
    by_path = {path_from_json(entry["semantic_path"]): entry for entry in raw["input_spec"]["tensor_data"]}
    problems = []
    for index, definition in enumerate(declared):
        tensor = by_path.get(path_from_json(definition["path"]))
        if tensor is None or len(tensor["shape"]) != len(definition["shape"]):
            continue  # reported by graph_problems
        for axis, dim in enumerate(definition["shape"]):
            low, high = tensor["min_shape"][axis], tensor["max_shape"][axis]
            where = f"{model_pointer}/dynamic_shapes/{index}/shape/{axis}"
            if isinstance(dim, int):
                if (low, high) != (dim, dim):
                    problems.append(Problem(manifest_file, where, f"axis {axis} of input {_show(definition['path'])} "
                                                                  f"is declared static {dim} but was recorded "
                                                                  f"{low}..{high}"))
            elif low < dim["min"] or high > dim["max"]:
                problems.append(Problem(
                    manifest_file, where,
                    f"{dim['type']} {dim['name']!r} {dim['min']}..{dim['max']} does not cover the sizes "
                    f"{low}..{high} recorded on axis {axis} of input {_show(definition['path'])}; AITune checks a "
                    "definition against every recorded call",
                ))
    return problems
