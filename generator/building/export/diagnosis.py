"""A failed ONNX check told as what it is: the export's fault, with the node, the shapes and the other exporter.

onnxruntime ran the inputs torch already ran, so when it refuses or disagrees, the exported graph does not compute
what the module computes; the message names the node, the failing and working shapes and the exporters tried.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from generator.building.export.exchange import CaseLike, ExportResult
from generator.building.export.onnx import EXPORTER_CHOICES, EXPORTER_NAMES
from generator.errors import Problem

__all__ = ["export_fault", "onnxruntime_node"]

#: onnxruntime's words for the node a run failed in, and for the node a load failed on.
_RUN_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'(?: Status Message: (.*))?")
_LOAD_NODE = re.compile(r"Node \(([^)]*)\) Op \((\w+)\)(.*)")
#: The C++ file, line and failed condition onnxruntime puts before its words ("/onnxruntime_src/...h:563 void ...
#: axis == 1 || axis == largest was false. Attempting to broadcast ...").
_SOURCE_LINE = re.compile(r"^/\S+:\d+ .*? was false\. ")
#: The manifest's ``export: {exporter: ...}`` value that pins each exporter.
_PINNING = {chain[0]: choice for choice, chain in EXPORTER_CHOICES.items() if len(chain) == 1}


def onnxruntime_node(message: str) -> tuple[str, str, str] | None:
    """(op, node name, what went wrong) from onnxruntime's error text; None when it names no node."""
    run = _RUN_NODE.search(message)
    if run is not None:
        return run.group(1), run.group(2), _SOURCE_LINE.sub("", (run.group(3) or "").strip())
    load = _LOAD_NODE.search(message)
    if load is not None:
        return load.group(2), load.group(1), load.group(3).strip()
    return None


def _shapes(shapes: dict[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{name} {list(shape)}" for name, shape in shapes.items())


def _case_shapes(case: CaseLike) -> str:
    return _shapes({name: tuple(array.shape) for name, array in case.inputs.items()})


def _what_failed(problems: Sequence[Problem], cases: Sequence[CaseLike]) -> str:
    by_name = {case.name: case for case in cases}
    failed: dict[str, str] = {}
    other: list[str] = []
    for problem in problems:
        case = by_name.get(problem.pointer.removeprefix("/cases/")) if problem.pointer.startswith("/cases/") else None
        node = onnxruntime_node(problem.message)
        where = f" in node {node[1]!r} ({node[0]}: {node[2]})" if node else ""
        if case is not None:
            how = "fails" if "onnxruntime fails on case" in problem.message else "differs from torch"
            failed.setdefault(case.name, f"case {case.name!r} ({_case_shapes(case)}) {how}{where}")
        elif "cannot load" in problem.message:
            other.append(f"onnxruntime cannot load the graph{where or ': ' + problem.message}")
        else:
            other.append(f"the graph's inputs and outputs do not match the plan ({problem.message})")
    ran = [f"case {c.name!r} ({_case_shapes(c)})" for c in cases if c.name not in failed]
    parts = [*other, *failed.values()]
    if failed and ran:
        parts.append(f"{', '.join(ran)} {'runs' if len(ran) == 1 else 'run'}")
    return "; ".join(parts)


def _other_exporter(result: ExportResult, choice: str) -> str:
    """What the other exporter did, or how to ask for it."""
    failed = dict(result.failed)
    others = [e for e in EXPORTER_NAMES if e != result.exporter]
    tried = [e for e in others if e in failed]
    if tried:
        return "; ".join(f"{EXPORTER_NAMES[e]} (`export: {{exporter: {_PINNING[e]}}}`) was tried first and failed: "
                         f"{failed[e]}" for e in tried) + ": both exporters fail for this model"
    asks = " or ".join(f"`export: {{exporter: {_PINNING[e]}}}`" for e in others)
    pinned = f" (export.exporter is {choice!r})" if choice != "auto" else ""
    return f"the other exporter was not tried{pinned}: try it with {asks} in this model's manifest entry"


def export_fault(problems: Sequence[Problem], cases: Sequence[CaseLike], result: ExportResult, choice: str,
                 where: Problem) -> Problem:
    """One problem at ``where`` (the manifest entry's ``export``) that blames the export for the check's ``problems``.

    ``cases`` are the reference cases the check ran, ``result`` the export that wrote the graph, ``choice`` the
    manifest's ``export.exporter``.
    """
    return Problem(where.file, where.pointer, (
        f"the export is at fault, not the data: torch ran these very inputs (stage reference), the ONNX graph does "
        f"not: {_what_failed(problems, cases)}. {_capital(EXPORTER_NAMES[result.exporter])} wrote the graph from an "
        f"example of {_shapes(result.example_shapes)}; {_other_exporter(result, choice)}"))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
