"""Axes that must agree across a graph's inputs, and the one range the plan gives each group of them.

Batch axes, ``DynamicDim``s sharing a name and recorded axes that moved together are one dimension; a group whose
ranges differ is intersected (default) or widened (docs/manifest.md). GraphSpec's own answers are not changed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from generator.specs.graphspec import GraphSpec
from generator.specs.tensor_spec import BatchDim, DynamicDim

__all__ = ["POLICIES", "AxisGroup", "AxisMember", "ShapeResolution", "linked_axes", "resolve_shapes"]

#: The manifest's ``shapes:`` values; the first is the default.
POLICIES = ("intersect", "widen")

Shapes = tuple[list[int], list[int], list[int]]


@dataclass(frozen=True, slots=True)
class AxisMember:
    """One input axis in a group: its effective (AITune) sizes and, for batch axes, the multiplier dividing them."""

    input: int
    name: str
    axis: int
    low: int
    opt: int
    high: int
    multiplier: int = 1
    declared: bool = False

    def normalized(self) -> tuple[int, int, int]:
        """(low, opt, high) in batch units for batch axes (sizes divided by the multiplier), else as is."""
        k = self.multiplier
        return -(-self.low // k), max(self.opt // k, 1), self.high // k

    def describe(self) -> str:
        """``'input_ids' axis 0 1..8 (declared)``."""
        times = f" ({self.multiplier} x the batch)" if self.multiplier != 1 else ""
        return (f"{self.name!r} axis {self.axis} {self.low}..{self.high}{times} "
                f"({'declared' if self.declared else 'recorded'})")


@dataclass(frozen=True, slots=True)
class AxisGroup:
    """Axes that are one dimension: ``kind`` batch or dim, and what links them (for messages)."""

    kind: Literal["batch", "dim"]
    label: str
    members: tuple[AxisMember, ...]


@dataclass(frozen=True, slots=True)
class ShapeResolution:
    """Per input (input_spec order) the (min, opt, max) shapes to plan with, and what was decided.

    ``batch`` is the resolved batch range ``(low, opt, high)`` in batch units (None without batch axes);
    ``batch_declared`` whether a declared BatchDim took part; ``batch_narrowed`` whether the policy narrowed some
    input's batch range; ``problems`` are ``(input, axis, message)`` for groups without a common range.
    """

    shapes: tuple[Shapes, ...]
    groups: tuple[AxisGroup, ...]
    batch: tuple[int, int, int] | None
    batch_declared: bool
    batch_narrowed: bool
    notes: tuple[str, ...]
    problems: tuple[tuple[int, int, str], ...]


def linked_axes(graph: GraphSpec, names: Sequence[str], shapes: Sequence[Shapes] | None = None) -> list[AxisGroup]:
    """Every group of linked input axes (the batch group first, when there is one); ``names`` label the inputs.

    ``shapes``: the inputs' effective (AITune) shapes when the caller has them already.
    """
    parent: dict[object, object] = {}

    def find(node: object) -> object:
        root = node
        while (up := parent.get(root, root)) != root:
            root = up
        while node != root:  # path compression: every node on the way now points at the root
            parent[node], node = root, parent[node]
        return root

    def union(a: object, b: object) -> None:
        low, high = find(a), find(b)
        if low != high:
            parent[low] = high

    # Member fields per input axis; AxisMembers are made only for axes that end up in a group.
    members: dict[tuple[int, int], tuple[int, str, int, int, int, int, int, bool]] = {}
    labels: dict[object, str] = {}
    for j, (locator, spec) in enumerate(graph.input_spec.tensor_data):
        low, opt, high = shapes[j] if shapes is not None else graph.get_effective_input_shapes(locator, spec)
        definition = graph.get_shape_definition(locator)
        recorded = spec.get_batch_axis_multipliers()
        if definition is not None:
            batch = {a: recorded.get(a, 1) for a, d in enumerate(definition) if isinstance(d, BatchDim)}
            dims = {a: d.name for a, d in enumerate(definition) if isinstance(d, DynamicDim)
                    and not isinstance(d, BatchDim)}
        else:
            batch, dims = recorded, {}
        declared = definition is not None
        for axis in range(len(low)):
            members[(j, axis)] = (j, names[j], axis, low[axis], opt[axis], high[axis], batch.get(axis, 1), declared)
        for axis in batch:
            union((j, axis), "batch")
        labels["batch"] = "the batch axes"
        for axis, name in dims.items():
            union((j, axis), ("name", name))
            labels[("name", name)] = f"DynamicDim {name!r}"
        seen: set[object] = set()
        for axis, label in enumerate(spec.shape):
            if axis in batch or not (isinstance(label, str) and label.startswith("dim")):
                continue
            key = ("recorded", spec.min_shape[axis], spec.max_shape[axis])
            if key not in seen:  # one axis per input: two axes of one image recorded alike are not one dimension
                seen.add(key)
                union((j, axis), key)
                labels.setdefault(key, f"the axis recorded over {key[1]}..{key[2]}")
    groups: dict[object, list[tuple[int, int]]] = {}
    for ident in members:
        if ident in parent:  # an axis never linked to anything is in no group
            groups.setdefault(find(ident), []).append(ident)
    linked_labels: dict[object, list[object]] = {}
    for label_key in labels:
        linked_labels.setdefault(find(label_key), []).append(label_key)
    out = []
    for root, grouped in groups.items():
        linked = linked_labels.get(root, [])
        is_batch = "batch" in linked
        if len(grouped) < 2 and not is_batch:
            continue
        label = "the batch axes" if is_batch else " / ".join(labels[key] for key in linked)
        group_members = sorted((AxisMember(*members[ident]) for ident in grouped), key=_order)
        out.append(AxisGroup("batch" if is_batch else "dim", label, tuple(group_members)))
    out.sort(key=lambda g: (g.kind != "batch", _order(g.members[0])))
    return out


def _what(group: AxisGroup) -> str:
    return f"{group.label} must agree ({', '.join(m.describe() for m in group.members)})"


def _order(member: AxisMember) -> tuple[int, int]:
    return member.input, member.axis


def resolve_shapes(graph: GraphSpec, names: Sequence[str], policy: str = "intersect") -> ShapeResolution:
    """Plan shapes for every input: AITune's effective shapes with each linked group given one range."""
    shapes: list[Shapes] = [
        graph.get_effective_input_shapes(locator, spec) for locator, spec in graph.input_spec.tensor_data
    ]
    notes: list[str] = []
    problems: list[tuple[int, int, str]] = []
    batch: tuple[int, int, int] | None = None
    batch_declared = batch_narrowed = False
    groups = linked_axes(graph, names, shapes)
    for group in groups:
        ranges = [m.normalized() for m in group.members]
        declared = [m for m in group.members if m.declared]
        if group.kind == "batch":
            batch_declared = bool(declared)
        agree = len({(lo, hi) for lo, _, hi in ranges}) == 1
        if agree and len({r[1] for r in ranges}) == 1 and group.kind != "batch":
            continue  # one range and one opt: nothing to change or say (the common case, kept cheap)
        # Described only for a note or a problem: most groups agree and need neither.
        what = functools.partial(_what, group)
        if agree:
            low, high = ranges[0][0], ranges[0][2]
        else:
            basis = declared if policy == "widen" and declared else list(group.members)
            low = max(m.normalized()[0] for m in basis)
            high = min(m.normalized()[2] for m in basis)
            if low > high:
                first = group.members[0]
                problems.append((first.input, first.axis, f"{what()}, but they have no common range; fix the ranges "
                                                          "(the manifest's dynamic_shapes can)"))
                continue
        # One opt for the group (a declared one wins), so the opt case is one call every input agrees on.
        opts = [m.normalized()[1] for m in (declared or group.members)]
        opt = min(max(min(opts), low), high)
        if not agree or len({r[1] for r in ranges}) > 1:
            for m in group.members:
                k = m.multiplier
                shapes[m.input][0][m.axis], shapes[m.input][1][m.axis], shapes[m.input][2][m.axis] = (
                    low * k, opt * k, high * k)
        if group.kind == "batch":
            batch = (low, opt, high)
            batch_narrowed = any(r[2] > high for r in ranges)
        if agree:
            if len({r[1] for r in ranges}) > 1:
                notes.append(f"shapes: {what().replace(' must agree', ' share one range')}; their opt sizes differ, "
                             f"so all take opt {opt}")
            continue
        if policy == "widen" and declared:
            notes.append(f"shapes: widen: {what()}; recorded-only tensors take the declared range {low}..{high} "
                         f"(opt {opt})")
        else:
            note = f"shapes: intersect: {what()}; using their common range {low}..{high} (opt {opt}) for all, so " \
                   "every case is valid for every input"
            if group.kind == "batch":
                note += " and batching keeps working"
            if declared and len(declared) < len(group.members):
                note += "; shapes: widen would give the recorded-only tensors the declared range instead"
            notes.append(note)
    return ShapeResolution(tuple(shapes), tuple(groups), batch, batch_declared, batch_narrowed, tuple(notes),
                           tuple(problems))
