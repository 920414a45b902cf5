"""Load and validate GraphSpec documents: JSON Schema first, then the semantic rules a schema cannot express.

Three document kinds are accepted, all as AITune writes them:

- a fixture/example file ``{"aitune_version", "graph": {...}, "expected"}`` (the graph is at ``/graph``),
- a bare GraphSpec object (the graph is the document),
- an AITune tune report (graphs at ``/modules/<i>/graphs/<j>``).

Every problem of a document is collected before one :class:`~generator.errors.GenRepoError` is raised, each with the
JSON pointer of the offending field. AITune's pickled binary form is refused by
:func:`generator.specs.documents.load_document`; nothing from a spec file is ever unpickled, evaluated or imported.

Speed (10,000 specs must validate in well under a second, every error still reported with its location). Each stage
has a fast verdict for the common case, a valid document, and falls back to the full reporter for anything else,
so the problems of an invalid document are exactly what the full checks report:

1. Schema: :func:`generator.specs.documents.schema_problems` asks ``jsonschema_rs`` (when installed) whether the
   document is valid and runs the reference ``jsonschema`` only when it is not (see that module).
   :func:`_has_tuple` tells it, cheaply, whether a Python tuple stands where the schema expects an array (the one
   case jsonschema_rs is more lenient than jsonschema), instead of a scan of the whole document.
2. Semantic rules: :func:`_graph_all_clear` is one tight pass over a schema-valid graph that answers True only when
   :func:`graph_problems` would report nothing (it builds no pointers or messages). Any doubt, and the full
   reporter runs and its answer counts. ``tests/specs/test_schema_fast.py`` checks this on fixtures, every invalid
   document of the tests and random valid and mutated documents.
3. GraphSpec construction (:meth:`GraphSpec.from_dict`, :func:`infer_batch_multipliers`) is unchanged.

:func:`validate_documents` validates a batch and reports every problem of every document at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from generator.errors import GenRepoError, Problem, SpecError
from generator.naming import format_tensor_name
from generator.specs.documents import load_document, schema_problems
from generator.specs.graphspec import GraphSpec, infer_batch_multipliers
from generator.specs.paths import path_from_json
from generator.specs.tensor_spec import BatchDim, dim_problems

__all__ = [
    "GRAPHSPEC_SCHEMA",
    "TUNE_REPORT_SCHEMA",
    "DocumentKind",
    "LoadedGraph",
    "document_kind",
    "graph_problems",
    "graph_summary",
    "load_graphspecs",
    "validate_document",
    "validate_documents",
    "validate_file",
]

GRAPHSPEC_SCHEMA = "graphspec.schema.json"
TUNE_REPORT_SCHEMA = "tune_report.schema.json"

DocumentKind = Literal["fixture", "graph", "tune_report"]

#: TensorRT and Triton carry dims as int32 (the schema enforces this bound too; kept here for callers).
INT32_MAX = 2**31 - 1

_AXIS_LABEL = re.compile(r"^(batch|dim)(\d+)$")


@dataclass(slots=True)
class LoadedGraph:
    """One GraphSpec read from a file, with where it came from and what the loader had to assume."""

    file: str
    #: JSON pointer of the graph inside the document: ``""`` (bare graph), ``"/graph"``, ``"/modules/0/graphs/1"``.
    pointer: str
    #: The tune report's module name; None for fixture files and bare graphs.
    module_name: str | None
    graph: GraphSpec
    #: Sentences saying what was assumed (e.g. inferred batch multipliers); empty when nothing was.
    assumptions: list[str] = field(default_factory=list)
    #: The graph object as read (not copied): the manifest's overrides apply to it
    #: (:mod:`generator.manifest.overrides`).
    document: Any = field(default=None, repr=False, compare=False)


# --------------------------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------------------------
def load_graphspecs(path: Path | str) -> list[LoadedGraph]:
    """Every GraphSpec in a JSON/YAML file (fixture wrapper, bare graph or tune report), validated.

    Raises GenRepoError carrying every problem of the document (schema and semantic), each with its JSON pointer.
    """
    name = str(path)
    document = load_document(path)
    return validate_document(document, name)


def validate_document(document: Any, file: str) -> list[LoadedGraph]:
    """Validate an already parsed document (see :func:`load_graphspecs`); ``file`` names it in problems.

    ``document`` is JSON data as ``json.load``/``yaml.safe_load`` return it (dicts, lists, strings, numbers, bools,
    None); anything else is judged by the reference validator, as before.
    """
    kind = document_kind(document)
    if kind is None:
        raise GenRepoError(
            [
                Problem(
                    file,
                    "",
                    f"expected a JSON object (a GraphSpec, a {{'graph': GraphSpec}} file or an AITune tune report), "
                    f"got {type(document).__name__}",
                )
            ]
        )
    if kind == "tune_report":
        problems = schema_problems(document, TUNE_REPORT_SCHEMA, file, has_tuple=_report_has_tuple)
        locations = _tune_report_graphs(document)
    else:
        has_tuple = _fixture_has_tuple if kind == "fixture" else _has_tuple
        problems = schema_problems(document, GRAPHSPEC_SCHEMA, file, has_tuple=has_tuple)
        locations = [("/graph", document.get("graph"), None)] if kind == "fixture" else [("", document, None)]

    # Fast verdict first (schema-valid graphs only); the full reporter runs on any doubt and its answer counts.
    if problems or not all(_graph_all_clear(graph) for _, graph, _ in locations):
        broken = {p.pointer for p in problems}
        add = _collector(problems, file)
        for pointer, graph, _ in locations:
            if isinstance(graph, dict):
                graph_problems(graph, pointer, add, broken)
        if problems:
            raise GenRepoError(sorted(problems, key=_document_order(document)))

    loaded = []
    for pointer, graph, module_name in locations:
        try:
            spec = GraphSpec.from_dict(graph)
        except SpecError as error:  # defensive: the checks above should have caught everything
            raise GenRepoError([Problem(file, pointer, p.message) for p in error.problems]) from None
        notes = infer_batch_multipliers(spec)
        loaded.append(LoadedGraph(file, pointer, module_name, spec, list(notes), graph))
    return loaded


def validate_documents(documents: Iterable[tuple[Any, str]]) -> list[LoadedGraph]:
    """Validate many parsed documents, given as ``(document, file)`` pairs; every graph of every document, in order.

    Raises one GenRepoError carrying every problem of every invalid document (each names its file), after all of
    them were checked, so a batch reports everything at once like a single document does.
    """
    loaded: list[LoadedGraph] = []
    problems: list[Problem] = []
    for document, file in documents:
        try:
            loaded.extend(validate_document(document, file))
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    return loaded


def validate_file(path: Path | str) -> list[Problem]:
    """Every problem of one spec file (empty when it is valid); never raises for bad input."""
    try:
        load_graphspecs(path)
    except GenRepoError as error:
        return error.problems
    return []


def document_kind(document: Any) -> DocumentKind | None:
    """Which kind of document this is: ``modules`` -> tune report, ``graph`` -> fixture wrapper, else a bare graph.

    None when the document is not a JSON object at all.
    """
    if not isinstance(document, dict):
        return None
    if "modules" in document:
        return "tune_report"
    if "graph" in document:
        return "fixture"
    return "graph"


def graph_summary(loaded: LoadedGraph) -> dict[str, Any]:
    """Plain-data summary of a loaded graph for ``gen-repo validate`` (table and ``--json``)."""
    graph = loaded.graph
    inputs = []
    for (locator, tensor), name in zip(graph.input_spec.tensor_data, graph.input_tensor_names(), strict=True):
        min_shape, opt_shape, max_shape = graph.get_effective_input_shapes(locator, tensor)
        definition = graph.get_shape_definition(locator)
        batch_ranges: list[dict[str, int]] = []
        if definition is not None:
            batch_ranges = [
                {"axis": axis, "min": dim.min, "max": dim.max, "multiplier": 1}
                for axis, dim in enumerate(definition)
                if isinstance(dim, BatchDim)
            ]
        else:
            batch_ranges = [
                {"axis": axis, "min": tensor.min_shape[axis], "max": tensor.max_shape[axis], "multiplier": k}
                for axis, k in tensor.get_batch_axis_multipliers().items()
            ]
        inputs.append(
            {
                "name": name,
                "path": locator.display_path,
                "dtype": tensor.dtype,
                "explicit_definition": definition is not None,
                "min_shape": min_shape,
                "opt_shape": opt_shape,
                "max_shape": max_shape,
                "batch_ranges": batch_ranges,
            }
        )
    outputs = [
        {
            "name": name,
            "path": locator.display_path,
            "dtype": tensor.dtype,
            "min_shape": list(tensor.min_shape),
            "max_shape": list(tensor.max_shape),
        }
        for (locator, tensor), name in zip(graph.output_spec.tensor_data, graph.output_tensor_names(), strict=True)
    ]
    return {
        "file": loaded.file,
        "pointer": loaded.pointer or "/",
        "module_name": loaded.module_name,
        "graph_name": graph.name,
        "max_batch_size": graph.get_max_batch_size(),
        "max_batch_size_normalized": graph.get_max_batch_size(normalized=True),
        "min_batch_size": graph.get_min_batch_size(),
        "inputs": inputs,
        "outputs": outputs,
        "assumptions": list(loaded.assumptions),
    }


# --------------------------------------------------------------------------------------------------------------------
# Semantic checks
# --------------------------------------------------------------------------------------------------------------------
Add = Callable[[str, str], None]


def _collector(problems: list[Problem], file: str) -> Add:
    def add(pointer: str, message: str) -> None:
        problems.append(Problem(file, pointer, message))

    return add


def _document_order(document: Any) -> Callable[[Problem], tuple[Any, ...]]:
    """Sort key putting problems in the order their fields appear in the document (then by message)."""

    def key(problem: Problem) -> tuple[Any, ...]:
        node = document
        steps: list[tuple[int, str]] = []
        for raw in problem.pointer.split("/")[1:]:
            step = raw.replace("~1", "/").replace("~0", "~")
            position = 1 << 30
            if isinstance(node, dict):
                if step in node:
                    position = list(node).index(step)
                node = node.get(step)
            elif isinstance(node, list) and step.isdigit():
                position = int(step)
                node = node[position] if position < len(node) else None
            else:
                node = None
            steps.append((position, step))
        return (problem.file, steps, problem.message)

    return key


def _tune_report_graphs(report: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    out: list[tuple[str, Any, str | None]] = []
    modules = report.get("modules")
    if not isinstance(modules, list):
        return out
    for i, module in enumerate(modules):
        if not isinstance(module, dict) or not isinstance(module.get("graphs"), list):
            continue
        module_name = module.get("module_name")
        for j, graph in enumerate(module["graphs"]):
            out.append((f"/modules/{i}/graphs/{j}", graph, module_name if isinstance(module_name, str) else None))
    return out


def _is_clean(pointer: str, broken: set[str]) -> bool:
    """Tell whether the schema reported nothing at or below ``pointer`` (its structure can be trusted)."""
    if not broken:
        return True
    prefix = pointer + "/"
    return not any(b == pointer or b.startswith(prefix) for b in broken)


def _path_key(value: Any) -> Any:
    """Hashable semantic path (lists become tuples), as GraphSpec.from_dict builds it."""
    return path_from_json(value)


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
    recorded = [(p, e) for p, e in inputs if ranks_ok[p] and _path_key(e["semantic_path"]) not in explicit]
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
        name = format_tensor_name(_path_key(path), prefix)
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
    by_path = {_path_key(entry["semantic_path"]): entry for _, entry in inputs}
    known_paths = {_path_key(path) for _, path in input_paths}
    first_path: dict[Any, str] = {}
    dims_by_name: dict[str, tuple[str, dict[str, Any]]] = {}
    batch_reference: tuple[str, dict[str, Any]] | None = None
    for index, definition in enumerate(definitions):
        where = f"{pointer}/{index}"
        if not isinstance(definition, dict) or not _is_clean(where, broken):
            continue
        key = _path_key(definition["path"])
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

    A batch axis records ``k * b`` for every batch size ``b`` seen (integer ``k`` per axis), so every axis's
    (min, max) is proportional to the batch range. An axis whose range is not proportional to the first one cannot
    come from the same calls: an error. Proportional but not an exact integer multiple of the narrowest range is
    possible and left to :func:`generator.specs.graphspec.infer_batch_multipliers`, which says what it assumes. Where
    both axes declare multipliers, their normalized ranges must be equal.
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


# --------------------------------------------------------------------------------------------------------------------
# Fast verdicts for valid documents (see the module docstring): True/False answers, no pointers, no messages
# --------------------------------------------------------------------------------------------------------------------
#: "batch<i>"/"dim<i>" labels by axis, built once (TensorRT allows 8 dims; longer shapes build the label per call).
_BATCH_LABELS = tuple(f"batch{axis}" for axis in range(16))
_DIM_LABELS = tuple(f"dim{axis}" for axis in range(16))


def _batch_label(axis: int) -> str:
    return _BATCH_LABELS[axis] if axis < len(_BATCH_LABELS) else f"batch{axis}"


def _has_tuple(graph: Any) -> bool:
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


def _fixture_has_tuple(document: Any) -> bool:
    return _has_tuple(document.get("graph"))


def _report_has_tuple(report: Any) -> bool:
    modules = report.get("modules")
    if isinstance(modules, tuple):
        return True
    for module in modules or ():
        graphs = module.get("graphs")
        if isinstance(graphs, tuple) or any(_has_tuple(graph) for graph in graphs or ()):
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


def _graph_all_clear(graph: Any) -> bool:
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
