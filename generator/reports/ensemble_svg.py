"""An ensemble's wiring as an SVG picture: inputs, steps as boxes, outputs; tensors as labelled arrows.

Laid out by hand in layers (graphviz needs a system binary a reader may lack) and built with ElementTree, so every
name is escaped; deterministic for identical input.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["EnsembleStep", "ensemble_svg"]

_NODE_HEIGHT = 40
_ROW_GAP = 28
_CHAR = 7.2  # px per character of the 12px labels (generous: sans-serif digits and capitals)
_PAD = 20
_MIN_GAP = 90


@dataclass(frozen=True, slots=True)
class EnsembleStep:
    """One step: the model it runs, ``input_map`` (model input -> tensor) and ``output_map`` (output -> tensor)."""

    model: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]


@dataclass(slots=True)
class _Node:
    key: str
    label: str
    kind: str  # "input", "step", "output"
    layer: int
    width: float = 0.0
    x: float = 0.0
    y: float = 0.0


def _layers(inputs: Sequence[str], steps: Sequence[EnsembleStep]) -> list[int]:
    """Each step's column: one after the latest producer of a tensor it reads (inputs are column 0)."""
    producer: dict[str, int] = {}  # tensor -> step index
    for index, step in enumerate(steps):
        for tensor in step.output_map.values():
            producer.setdefault(tensor, index)
    layer = [1] * len(steps)
    for _ in range(len(steps)):  # a valid ensemble is acyclic: at most len(steps) rounds settle it
        changed = False
        for index, step in enumerate(steps):
            want = 1 + max((layer[producer[t]] for t in step.input_map.values() if t in producer), default=0)
            if want != layer[index] and want <= len(steps) + 1:
                layer[index], changed = want, True
        if not changed:
            break
    return layer


def ensemble_svg(name: str, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[EnsembleStep],
                 salt: str) -> str:
    """The picture of ensemble ``name`` as SVG markup (for inlining in HTML); ``salt`` makes its ids unique."""
    step_layers = _layers(inputs, steps)
    last = max(step_layers, default=0) + 1
    nodes: list[_Node] = [_Node(f"in:{t}", t, "input", 0) for t in inputs]
    nodes += [_Node(f"step:{i}", s.model, "step", step_layers[i]) for i, s in enumerate(steps)]
    nodes += [_Node(f"out:{t}", t, "output", last) for t in outputs]
    by_key = {n.key: n for n in nodes}

    edges: list[tuple[str, str, str]] = []  # (from key, to key, tensor)
    source = {t: f"in:{t}" for t in inputs}
    for index, step in enumerate(steps):
        for tensor in step.output_map.values():
            source.setdefault(tensor, f"step:{index}")
    for index, step in enumerate(steps):
        for tensor in sorted(set(step.input_map.values())):
            if tensor in source:
                edges.append((source[tensor], f"step:{index}", tensor))
    for tensor in outputs:
        if tensor in source:
            edges.append((source[tensor], f"out:{tensor}", tensor))

    columns: dict[int, list[_Node]] = {}
    for node in nodes:
        node.width = max(90.0, _CHAR * len(node.label) + 2 * _PAD)
        columns.setdefault(node.layer, []).append(node)
    label_width = {layer: 0.0 for layer in columns}
    for start, _end, tensor in edges:
        layer = by_key[start].layer
        label_width[layer] = max(label_width[layer], _CHAR * len(tensor))
    height = max((len(c) * (_NODE_HEIGHT + _ROW_GAP) for c in columns.values()), default=0) + _ROW_GAP
    x = float(_PAD)
    for layer in sorted(columns):
        column = columns[layer]
        width = max(n.width for n in column)
        top = (height - len(column) * (_NODE_HEIGHT + _ROW_GAP) + _ROW_GAP) / 2
        for row, node in enumerate(column):
            node.x, node.y = x + (width - node.width) / 2, top + row * (_NODE_HEIGHT + _ROW_GAP)
        x += width + max(_MIN_GAP, label_width[layer] + 40)
    total_width = x - max(_MIN_GAP, label_width[max(columns)] + 40) + _PAD if columns else 2 * _PAD

    marker = f"arrow-{salt}"
    svg = ET.Element("svg", {"class": "ensemble-graph", "role": "img", "width": _n(total_width),
                             "height": _n(height), "viewBox": f"0 0 {_n(total_width)} {_n(height)}",
                             "font-family": "sans-serif", "font-size": "12"})
    ET.SubElement(svg, "title").text = f"ensemble {name}"
    defs = ET.SubElement(svg, "defs")
    head = ET.SubElement(defs, "marker", {"id": marker, "viewBox": "0 0 10 10", "refX": "10", "refY": "5",
                                          "markerWidth": "8", "markerHeight": "8", "orient": "auto-start-reverse"})
    ET.SubElement(head, "path", {"d": "M 0 0 L 10 5 L 0 10 z", "fill": "#555"})
    for start, end, tensor in edges:
        a, b = by_key[start], by_key[end]
        x1, y1 = a.x + a.width, a.y + _NODE_HEIGHT / 2
        x2, y2 = b.x, b.y + _NODE_HEIGHT / 2
        group = ET.SubElement(svg, "g", {"class": "edge"})
        ET.SubElement(group, "title").text = f"{tensor}: {a.label} -> {b.label}"
        ET.SubElement(group, "line", {"x1": _n(x1), "y1": _n(y1), "x2": _n(x2), "y2": _n(y2), "stroke": "#555",
                                      "stroke-width": "1.5", "marker-end": f"url(#{marker})"})
        label = ET.SubElement(group, "text", {"class": "edge-label", "x": _n(x1 + 8),
                                              "y": _n(y1 + (y2 - y1) * 0.15 - 6), "fill": "#333", "stroke": "#fff",
                                              "stroke-width": "3", "paint-order": "stroke"})
        label.text = tensor
    for node in nodes:
        group = ET.SubElement(svg, "g", {"class": f"node {node.kind}"})
        ET.SubElement(group, "title").text = _node_title(node, steps)
        fill = {"input": "#e5f5e0", "step": "#deebf7", "output": "#fee6ce"}[node.kind]
        radius = "18" if node.kind != "step" else "4"
        ET.SubElement(group, "rect", {"x": _n(node.x), "y": _n(node.y), "width": _n(node.width),
                                      "height": str(_NODE_HEIGHT), "rx": radius, "fill": fill, "stroke": "#444"})
        text = ET.SubElement(group, "text", {"x": _n(node.x + node.width / 2), "y": _n(node.y + 25),
                                             "text-anchor": "middle"})
        text.text = node.label
    return ET.tostring(svg, encoding="unicode") + "\n"


def _node_title(node: _Node, steps: Sequence[EnsembleStep]) -> str:
    if node.kind != "step":
        return f"ensemble {node.kind} {node.label}"
    step = steps[int(node.key.split(":", 1)[1])]
    ins = ", ".join(f"{k} <- {v}" for k, v in sorted(step.input_map.items()))
    outs = ", ".join(f"{k} -> {v}" for k, v in sorted(step.output_map.items()))
    return f"step {step.model}: {ins}; {outs}"


def _n(value: float) -> str:
    """A coordinate with at most one decimal (stable text for stable input)."""
    return f"{round(value, 1):g}"
