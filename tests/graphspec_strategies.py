"""Hypothesis strategies for GraphSpec documents in AITune's JSON form (valid ones, and valid ones made invalid).

Shared by tests/specs/test_graphspec.py and tests/specs/test_schema.py (a helper module, not a test file).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

DTYPES = ["torch.float32", "torch.float16", "torch.bfloat16", "torch.int64", "torch.int32", "torch.bool"]
INT32_MAX = 2**31 - 1


def _dim(kind: str, name: str, lo: int, hi: int, opt: int | None) -> dict[str, Any]:
    return {"type": kind, "name": name, "min": lo, "max": hi, "opt": opt}


@st.composite
def graph_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid bare GraphSpec (the ``graph`` object of a fixture) as AITune records it.

    Every recorded batch axis is ``k * b`` over one batch range ``b in [bmin, bmax]`` (the first input has k=1, as in
    AITune's stacked-CFG case); ``dim<i>`` axes have their own ranges; some inputs get explicit definitions sharing
    one BatchDim; multipliers are declared (extension) for all batch axes or for none.
    """
    n_inputs = draw(st.integers(1, 3))
    bmin = draw(st.integers(1, 8))
    bmax = draw(st.integers(bmin, 64))
    batched = bmax > bmin
    declare = draw(st.booleans())
    batch_dim = None
    if batched and draw(st.booleans()):
        dmin = draw(st.integers(1, 8))
        dmax = draw(st.integers(dmin + 1, 128))
        dopt = draw(st.one_of(st.none(), st.integers(dmin, dmax)))
        batch_dim = _dim("BatchDim", "batch", dmin, dmax, dopt)
    tensors, definitions = [], []
    for i in range(n_inputs):
        rank = draw(st.integers(1, 4))
        k = 1 if i == 0 else draw(st.integers(1, 3))
        shape: list[Any] = []
        min_shape: list[int] = []
        max_shape: list[int] = []
        defined: list[Any] = []
        for axis in range(rank):
            if axis == 0 and batched:
                shape.append("batch0")
                min_shape.append(k * bmin)
                max_shape.append(k * bmax)
                defined.append(batch_dim)
            elif draw(st.booleans()):
                lo = draw(st.integers(1, 32))
                hi = draw(st.integers(lo + 1, 128))
                shape.append(f"dim{axis}")
                min_shape.append(lo)
                max_shape.append(hi)
                opt = draw(st.one_of(st.none(), st.integers(lo, hi)))
                defined.append(_dim("DynamicDim", f"d{i}_{axis}", lo, hi, opt))
            else:
                size = draw(st.integers(1, 64))
                shape.append(size)
                min_shape.append(size)
                max_shape.append(size)
                defined.append(size)
        entry: dict[str, Any] = {
            "access_path": f"in{i}",
            "semantic_path": f"in{i}",
            "shape": shape,
            "min_shape": min_shape,
            "max_shape": max_shape,
            "dtype": draw(st.sampled_from(DTYPES)),
        }
        if declare and batched:
            entry["batch_axis_multipliers"] = {"0": k}
        tensors.append(entry)
        if batch_dim is not None and draw(st.booleans()):
            definitions.append({"path": f"in{i}", "shape": defined})
    if batched:
        output = {"shape": ["batch0", 4], "min_shape": [bmin, 4], "max_shape": [bmax, 4]}
    else:
        output = {"shape": [bmin, 4], "min_shape": [bmin, 4], "max_shape": [bmin, 4]}
    output_entry = {"access_path": "output", "semantic_path": [], **output, "dtype": "torch.float32"}
    if declare and batched:
        output_entry["batch_axis_multipliers"] = {"0": 1}
    return {
        "type": "GraphSpec",
        "name": draw(st.sampled_from(["0", "1", "model"])),
        "input_spec": {"tensor_data": tensors, "other_data": [], "strict": True, "llm_phase": None},
        "output_spec": {"tensor_data": [output_entry], "other_data": [], "strict": True, "llm_phase": None},
        "forward_signature": {
            "parameters": [
                {"name": f"in{i}", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False} for i in range(n_inputs)
            ]
        },
        "dynamic_shapes": definitions,
    }


# A mutation edits a valid graph in place and returns the (pointer, message fragment) the validator must report.
Mutation = Callable[[dict[str, Any], int], tuple[str, str]]


def _tensor(graph: dict[str, Any], i: int) -> dict[str, Any]:
    tensor: dict[str, Any] = graph["input_spec"]["tensor_data"][i]
    return tensor


def _at(i: int, field: str) -> str:
    return f"/graph/input_spec/tensor_data/{i}/{field}"


def _rank(graph: dict[str, Any], i: int) -> tuple[str, str]:
    _tensor(graph, i)["min_shape"].append(1)
    return _at(i, "min_shape"), "same rank"


def _range(graph: dict[str, Any], i: int) -> tuple[str, str]:
    t = _tensor(graph, i)
    if isinstance(t["shape"][0], int):
        t["max_shape"][0] = t["shape"][0] + 1
        return _at(i, "max_shape/0"), "is static"
    t["min_shape"][0] = t["max_shape"][0] + 1
    return _at(i, "min_shape/0"), "is larger than"


def _label(graph: dict[str, Any], i: int) -> tuple[str, str]:
    _tensor(graph, i)["shape"][0] = "dim7"
    return _at(i, "shape/0"), "own index"


def _zero(graph: dict[str, Any], i: int) -> tuple[str, str]:
    _tensor(graph, i)["min_shape"][0] = 0
    return _at(i, "min_shape/0"), "minimum"


def _int32(graph: dict[str, Any], i: int) -> tuple[str, str]:
    t = _tensor(graph, i)
    t["max_shape"][-1] = INT32_MAX + 1
    return _at(i, f"max_shape/{len(t['max_shape']) - 1}"), "maximum"


def _dtype(graph: dict[str, Any], i: int) -> tuple[str, str]:
    _tensor(graph, i)["dtype"] = "float32"
    return _at(i, "dtype"), "does not match"


def _float(graph: dict[str, Any], i: int) -> tuple[str, str]:
    t = _tensor(graph, i)
    t["max_shape"][-1] = float(t["max_shape"][-1])
    return _at(i, f"max_shape/{len(t['max_shape']) - 1}"), "must be an integer"


def _multiplier(graph: dict[str, Any], i: int) -> tuple[str, str]:
    _tensor(graph, i).setdefault("batch_axis_multipliers", {})["9"] = 1
    return _at(i, "batch_axis_multipliers/9"), "not a batch axis"


def _collision(graph: dict[str, Any], i: int) -> tuple[str, str]:
    # "in0." sanitises to the same tensor name as "in0".
    # The later of two colliding tensors is reported, so only a tensor after in0 can collide with it.
    if i == 0:
        return _label(graph, i)
    _tensor(graph, i)["semantic_path"] = "in0."
    return _at(i, "semantic_path"), "unique"


def _append_definition(graph: dict[str, Any], definition: dict[str, Any]) -> str:
    graph["dynamic_shapes"].append(definition)
    return f"/graph/dynamic_shapes/{len(graph['dynamic_shapes']) - 1}"


def _unknown_path(graph: dict[str, Any], i: int) -> tuple[str, str]:
    return _append_definition(graph, {"path": f"nope{i}", "shape": [1]}) + "/path", "names no input tensor"


def _min_max(graph: dict[str, Any], i: int) -> tuple[str, str]:
    where = _append_definition(graph, {"path": "x", "shape": [_dim("DynamicDim", f"mm{i}", 5, 5, None)]})
    return where + "/shape/0/max", "min < max"


def _opt(graph: dict[str, Any], i: int) -> tuple[str, str]:
    where = _append_definition(graph, {"path": "x", "shape": [_dim("DynamicDim", f"op{i}", 2, 4, 9)]})
    return where + "/shape/0/opt", "min <= opt <= max"


def _shared(graph: dict[str, Any], i: int) -> tuple[str, str]:
    dims = [_dim("DynamicDim", f"sh{i}", 1, 4, None), _dim("DynamicDim", f"sh{i}", 1, 5, None)]
    return _append_definition(graph, {"path": "x", "shape": dims}) + "/shape/1", "identical"


#: Mutations of input tensor i (one per tensor, so that they cannot hide each other).
TENSOR_MUTATIONS: dict[str, Mutation] = {
    "rank": _rank,
    "range": _range,
    "label": _label,
    "zero": _zero,
    "int32": _int32,
    "dtype": _dtype,
    "float": _float,
    "multiplier": _multiplier,
    "collision": _collision,
}
#: Mutations that add a bad explicit definition (any number of them may be combined).
DEFINITION_MUTATIONS: dict[str, Mutation] = {
    "unknown_path": _unknown_path,
    "min_max": _min_max,
    "opt": _opt,
    "shared": _shared,
}


@st.composite
def invalid_graph_documents(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """A fixture-form document with 1..n violations and, per violation, (kind, pointer, message fragment)."""
    graph = copy.deepcopy(draw(graph_documents()))
    n_inputs = len(graph["input_spec"]["tensor_data"])
    tensor_kinds = draw(st.lists(st.sampled_from(sorted(TENSOR_MUTATIONS)), max_size=n_inputs))
    definition_kinds = draw(st.lists(st.sampled_from(sorted(DEFINITION_MUTATIONS)), max_size=3))
    if not tensor_kinds and not definition_kinds:
        tensor_kinds = [draw(st.sampled_from(sorted(TENSOR_MUTATIONS)))]
    expected = []
    for i, kind in enumerate(tensor_kinds):
        pointer, fragment = TENSOR_MUTATIONS[kind](graph, i)
        expected.append((kind, pointer, fragment))
    for j, kind in enumerate(definition_kinds):
        pointer, fragment = DEFINITION_MUTATIONS[kind](graph, j)
        expected.append((kind, pointer, fragment))
    return {"aitune_version": "0.6.0", "graph": graph}, expected
