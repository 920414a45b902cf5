"""Mask inputs an ONNX graph uses to drop positions, and which of their values keeps a position.

A PyTorch key-padding mask drops a position where it is ``True``, a Hugging Face ``attention_mask`` where it is ``0``;
the graph says which, so synthetic data keeps every position (docs/manifest.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from generator.building.export.onnx_indices import VALUE_KEEPING, graph_consumers
from generator.planning.values import ValueDomain

__all__ = ["MASKING_VALUE", "mask_domains"]

#: A constant at or below this is a masking value (``-inf``, ``finfo(float32).min``, ``-1e4`` as some models use).
MASKING_VALUE = -1e4
#: Tensors followed from one input at most (the search stops there: a mask is consumed near the graph's inputs).
_MAX_VISITED = 2000


def _constants(graph: Any) -> dict[str, Any]:
    """Initializers and ``Constant`` node outputs by name, as numpy arrays (small ones only)."""
    from onnx import numpy_helper

    values: dict[str, Any] = {}
    for init in graph.initializer:
        if _small(init.dims):
            values[init.name] = numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.HasField("t") and _small(attribute.t.dims):
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
                elif attribute.name in ("value_float", "value_int"):
                    values[node.output[0]] = attribute.f if attribute.name == "value_float" else attribute.i
    # A constant reshaped, cast or expanded is still that constant (e.g. -inf broadcast to the scores' shape).
    for node in graph.node:
        if node.op_type in ("Cast", "CastLike", "Expand", "Reshape", "Identity", "Unsqueeze") and node.input and \
                node.input[0] in values:
            values[node.output[0]] = values[node.input[0]]
    return values


def _small(dims: Iterable[int]) -> bool:
    size = 1
    for dim in dims:
        size *= int(dim)
    return size <= 64


def _masking(values: dict[str, Any], name: str) -> bool:
    """Whether tensor ``name`` is a constant whose every element is a masking value."""
    import numpy as np

    if name not in values:
        return False
    array = np.asarray(values[name])
    return array.size > 0 and array.dtype.kind == "f" and bool(np.all(array <= MASKING_VALUE))


def _shown(values: dict[str, Any], name: str) -> str:
    """A masking constant as a message shows it (``-inf``, ``-3.4e+38``)."""
    import numpy as np

    return f"{float(np.asarray(values[name]).max()):.3g}"


def _is_one(values: dict[str, Any], name: str) -> bool:
    import numpy as np

    return name in values and np.asarray(values[name]).size > 0 and bool(np.all(np.asarray(values[name]) == 1))


def _verdicts(start: str, consumers: dict[str, list[tuple[Any, int]]],
              values: dict[str, Any]) -> set[tuple[bool, str]]:
    """Where ``start`` drops positions: (whether a true value of ``start`` drops one, the operator that says so)."""
    found: set[tuple[bool, str]] = set()
    # Each tensor reached carries how it derives from ``start`` as a message shows it ("Not(keep)", "1 - mask"): the
    # operator quoted as evidence must say what it really reads, not the input it started from.
    frontier: list[tuple[str, bool, str]] = [(start, False, start)]
    seen = {(start, False)}
    while frontier and len(seen) < _MAX_VISITED:
        tensor, flipped, shown = frontier.pop()
        for node, position in consumers.get(tensor, ()):
            nexts: list[tuple[str, bool, str]] = []
            if node.op_type == "Where" and position == 0 and len(node.input) == 3:
                if _masking(values, node.input[1]):
                    found.add((not flipped, f"Where({shown}, {_shown(values, node.input[1])}, x)"))
                elif _masking(values, node.input[2]):
                    found.add((flipped, f"Where({shown}, x, {_shown(values, node.input[2])})"))
            elif node.op_type == "Mul" and len(node.input) == 2 and _masking(values, node.input[1 - position]):
                found.add((not flipped, f"Mul({shown}, {_shown(values, node.input[1 - position])})"))
            elif node.op_type == "Not":  # ~mask
                nexts = [(node.output[0], not flipped, f"Not({shown})")]
            elif node.op_type == "Sub" and position == 1 and _is_one(values, node.input[0]):  # 1 - mask
                nexts = [(node.output[0], not flipped, f"1 - {shown}")]
            elif position in VALUE_KEEPING.get(node.op_type, ()):
                nexts = [(output, flipped, shown) for output in node.output if output]
            for output, output_flipped, output_shown in nexts:
                if (output, output_flipped) not in seen:
                    seen.add((output, output_flipped))
                    frontier.append((output, output_flipped, output_shown))
    return found


def mask_domains(model: Any, inputs: Iterable[tuple[str, str]]) -> dict[str, ValueDomain]:
    """Mask inputs of ``model`` (an ``onnx.ModelProto``) whose graph shows which value keeps a position.

    ``inputs`` are ``(name, numpy dtype name)`` pairs; only bool and integer inputs are considered. An input whose
    uses disagree (one drops on true, another on false) is left out: synthetic data cannot satisfy both.
    """
    import numpy as np

    graph = model.graph
    values = _constants(graph)
    consumers = graph_consumers(graph)
    domains: dict[str, ValueDomain] = {}
    for name, dtype in inputs:
        if np.dtype(dtype).kind not in "biu":
            continue
        verdicts = _verdicts(name, consumers, values)
        drops_on_true = {drop for drop, _ in verdicts}
        if len(drops_on_true) != 1:
            continue
        drop = drops_on_true.pop()
        keep: bool | int = (not drop) if np.dtype(dtype).kind == "b" else int(not drop)
        where = sorted(op for _, op in verdicts)[0]
        shown = "true" if drop else "false"
        if np.dtype(dtype).kind != "b":
            shown = "non-zero" if drop else "0"
        domains[name] = ValueDomain(0, 1, mask_keep=keep,
                                    source=f"a mask: {shown} drops a position ({where} in the graph)")
    return domains
