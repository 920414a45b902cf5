"""Load and validate GraphSpec documents: JSON Schema first, then the semantic rules a schema cannot express.

Fixture files, bare GraphSpecs and AITune tune reports; every problem is located before one GenRepoError is raised.
Nothing from a spec file is unpickled, evaluated or imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from generator.errors import GenRepoError, Problem, SpecError
from generator.specs.documents import load_document
from generator.specs.graphspec import GraphSpec, infer_batch_multipliers
from generator.specs.json_schema import schema_problems
from generator.specs.semantics import Add, graph_problems
from generator.specs.tensor_spec import BatchDim

__all__ = [
    "GRAPHSPEC_SCHEMA",
    "TUNE_REPORT_SCHEMA",
    "DocumentKind",
    "LoadedGraph",
    "document_kind",
    "graph_summary",
    "load_graphspecs",
    "validate_document",
    "spec_file_problems",
]

GRAPHSPEC_SCHEMA = "graphspec.schema.json"
TUNE_REPORT_SCHEMA = "tune_report.schema.json"

DocumentKind = Literal["fixture", "graph", "tune_report"]

#: TensorRT and Triton carry dims as int32 (the schema enforces this bound too; kept here for callers).
INT32_MAX = 2**31 - 1


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


# -- Public API ------------------------------------------------------------------------------------------------------
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
        problems = schema_problems(document, TUNE_REPORT_SCHEMA, file)
        locations = _tune_report_graphs(document)
    else:
        problems = schema_problems(document, GRAPHSPEC_SCHEMA, file)
        locations = [("/graph", document.get("graph"), None)] if kind == "fixture" else [("", document, None)]

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


def spec_file_problems(path: Path | str) -> list[Problem]:
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
