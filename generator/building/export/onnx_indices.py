"""Integer inputs an ONNX graph uses as indices into constant tables (embeddings), and how many rows each has.

Synthetic data must stay inside such a table (BERT's ``token_type_ids`` index 2 rows): an input reaching a constant
``Gather``'s indices takes ``0..rows-1``. Reads the graph only, exported or given as the source.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from generator.planning.values import ValueDomain

__all__ = ["VALUE_KEEPING", "graph_consumers", "index_domains"]

#: Operators whose output holds (some of) the values of the listed inputs, unchanged.
VALUE_KEEPING: dict[str, tuple[int, ...]] = {
    "Cast": (0,), "CastLike": (0,), "Identity": (0,), "Reshape": (0,), "Unsqueeze": (0,), "Squeeze": (0,),
    "Flatten": (0,), "Expand": (0,), "Transpose": (0,), "Slice": (0,), "Tile": (0,), "Gather": (0,),
    "GatherElements": (0,), "Split": (0,), "Concat": tuple(range(64)),
}


def _constant_shapes(graph: Any) -> dict[str, list[int]]:
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.HasField("t"):
                    shapes[node.output[0]] = list(attribute.t.dims)
    return shapes


def graph_consumers(graph: Any) -> dict[str, list[tuple[Any, int]]]:
    """Each tensor name of ``graph`` -> the ``(node, input position)`` pairs that read it."""
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    return consumers


def index_domains(model: Any, input_names: Iterable[str]) -> dict[str, ValueDomain]:
    """The values each of ``input_names`` may take where ``model`` (an ``onnx.ModelProto``) indexes a table with it.

    ``0..rows-1`` of the smallest constant table the input indexes, with the table named in ``source``.
    """
    graph = model.graph
    constants = _constant_shapes(graph)
    consumers = graph_consumers(graph)
    domains: dict[str, ValueDomain] = {}
    for input_name in input_names:
        best: tuple[int, str] | None = None
        frontier, seen = [input_name], {input_name}
        while frontier:
            tensor = frontier.pop()
            for node, position in consumers.get(tensor, ()):
                if node.op_type == "Gather" and position == 1 and node.input[0] in constants:
                    table = constants[node.input[0]]
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    axis = axis + len(table) if axis < 0 else axis
                    if 0 <= axis < len(table) and (best is None or table[axis] < best[0]):
                        best = (table[axis], node.input[0])
                elif position in VALUE_KEEPING.get(node.op_type, ()):
                    for output in node.output:
                        if output and output not in seen:
                            seen.add(output)
                            frontier.append(output)
        if best is not None:
            rows, table_name = best
            domains[input_name] = ValueDomain(0, rows - 1, source=f"index into the {rows}-row table {table_name!r}")
    return domains
