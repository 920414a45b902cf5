"""Triton ensemble wiring: the rules Triton applies when it loads an ensemble, and one more, on plain data.

The one more: a producer's shape range fits its consumer's. :func:`wiring_problems` returns every violation with an
abstract :data:`Location` that the planner turns into a JSON pointer and lint into line and column.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Location",
    "Step",
    "StepModel",
    "WiringTensor",
    "Wiring",
    "WiringProblem",
    "dims_compatible",
    "step_order",
    "wiring_problems",
]

#: Where a problem is: ``("max_batch_size",)``, ``("input", i)``, ``("output", i)``, ``("step", j)``,
#: ``("step", j, "model_name")``, ``("step", j, "input_map", key)`` or ``("step", j, "output_map", key)``.
Location = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class WiringTensor:
    """One input or output as a config declares it; shapes (request-side, full) when a contract gives them."""

    name: str
    data_type: str
    dims: tuple[int, ...]
    optional: bool = False
    min_shape: tuple[int, ...] | None = None
    max_shape: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class StepModel:
    """A model a step runs: its batching and its inputs and outputs."""

    name: str
    max_batch_size: int
    inputs: tuple[WiringTensor, ...]
    outputs: tuple[WiringTensor, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """One step: the model and its maps (step tensor name -> ensemble tensor name)."""

    model_name: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Wiring:
    """An ensemble as its config states it."""

    name: str
    max_batch_size: int
    inputs: tuple[WiringTensor, ...]
    outputs: tuple[WiringTensor, ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class WiringProblem:
    """One violation: where, what, and the lint rule it belongs to."""

    where: Location
    message: str
    rule: str


@dataclass(frozen=True, slots=True)
class _Use:
    """One appearance of an ensemble tensor: who, its declaration, whether that side batches, where."""

    who: str
    io: WiringTensor
    batching: bool
    where: Location
    produces: bool


def dims_compatible(a: Sequence[int], a_batching: bool, b: Sequence[int], b_batching: bool) -> bool:
    """Triton's ``ValidateTensorConsistency`` for dims: equal with ``-1`` as a wildcard, as dims or as full shapes."""

    def same(x: Sequence[int], y: Sequence[int]) -> bool:
        return len(x) == len(y) and all(p == q or -1 in (p, q) for p, q in zip(x, y, strict=True))

    full_a = [-1, *a] if a_batching else list(a)
    full_b = [-1, *b] if b_batching else list(b)
    return same(a, b) or same(full_a, full_b)


def step_order(wiring: Wiring) -> list[int]:
    """Indices of the steps in an order that runs each after its inputs exist (steps that never run are left out).

    The order of passes over the steps in index order, each pass running every step whose inputs exist by then (the
    steps a pass runs are in index order, and a step made ready by a later step waits for the next pass), computed
    from each tensor's consumers: every step and every map entry is touched a bounded number of times (a heap of
    the pass's ready steps), so the cost grows with steps and tensors, not with their product.
    """
    steps = wiring.steps
    ready = {io.name for io in wiring.inputs}
    waiting: list[int] = []  # per step, how many of its distinct input tensors do not exist yet
    consumers: dict[str, list[int]] = {}
    for j, step in enumerate(steps):
        missing = set(step.input_map.values()) - ready
        waiting.append(len(missing))
        for tensor in missing:
            consumers.setdefault(tensor, []).append(j)
    this_pass = [j for j, count in enumerate(waiting) if count == 0]  # ascending: already a heap
    order: list[int] = []
    while this_pass:
        next_pass: list[int] = []
        while this_pass:
            j = heapq.heappop(this_pass)
            order.append(j)
            for tensor in steps[j].output_map.values():
                if tensor in ready:
                    continue
                ready.add(tensor)
                for c in consumers.pop(tensor, ()):
                    waiting[c] -= 1
                    if waiting[c] == 0:  # a later step still comes in this pass, an earlier one in the next
                        heapq.heappush(this_pass, c) if c > j else next_pass.append(c)
        heapq.heapify(next_pass)
        this_pass = next_pass
    return order


def wiring_problems(wiring: Wiring, models: Mapping[str, StepModel]) -> list[WiringProblem]:
    """Every way ``wiring`` breaks Triton's ensemble rules (and the shape-range rule), in a stable order.

    ``models`` are the models the steps may name (a missing name is a problem of its own).
    """
    problems: list[WiringProblem] = []
    uses: dict[str, list[_Use]] = {}
    batching = wiring.max_batch_size > 0

    def use(tensor: str, item: _Use) -> None:
        uses.setdefault(tensor, []).append(item)

    for i, io in enumerate(wiring.inputs):
        use(io.name, _Use(f"ensemble input {io.name!r}", io, batching, ("input", i), True))
    for i, io in enumerate(wiring.outputs):
        use(io.name, _Use(f"ensemble output {io.name!r}", io, batching, ("output", i), False))
    if not wiring.steps:
        problems.append(WiringProblem((), f"ensemble {wiring.name!r} has no step", "ensemble-config"))
    for j, step in enumerate(wiring.steps):
        problems += _step_problems(wiring, j, step, models.get(step.model_name), use)
    problems += _producer_problems(uses)
    problems += _consistency_problems(uses, wiring.max_batch_size)
    problems += _flow_problems(wiring, uses)
    return problems


def _step_problems(
    wiring: Wiring, j: int, step: Step, model: StepModel | None, add: Callable[[str, _Use], None]
) -> list[WiringProblem]:
    out: list[WiringProblem] = []
    label = f"step {j} ({step.model_name!r})"
    if step.model_name == wiring.name:
        out.append(WiringProblem(("step", j, "model_name"), f"{label} runs the ensemble itself", "ensemble-config"))
        model = None
    elif model is None:
        out.append(WiringProblem(("step", j, "model_name"), f"{label}: no model {step.model_name!r} to run",
                                 "ensemble-model-missing"))
    for kind, mapping in (("input_map", step.input_map), ("output_map", step.output_map)):
        if not mapping:
            out.append(WiringProblem(("step", j), f"{label} has an empty {kind}", "ensemble-config"))
    if model is None:
        for key, tensor in step.input_map.items():
            add(tensor, _Use(f"{label} input {key!r}", WiringTensor(key, "", ()), False, ("step", j, "input_map", key),
                             False))
        for key, tensor in step.output_map.items():
            add(tensor, _Use(f"{label} output {key!r}", WiringTensor(key, "", ()), False,
                             ("step", j, "output_map", key), True))
        return out
    step_batching = model.max_batch_size > 0
    if step_batching and model.max_batch_size < wiring.max_batch_size:
        out.append(WiringProblem(("step", j, "model_name"),
                                 f"ensemble max_batch_size {wiring.max_batch_size} is above the "
                                 f"max_batch_size {model.max_batch_size} of {label}", "ensemble-batch-size"))
    inputs = {io.name: io for io in model.inputs}
    outputs = {io.name: io for io in model.outputs}
    for kind, mapping, known, produces in (("input_map", step.input_map, inputs, False),
                                           ("output_map", step.output_map, outputs, True)):
        what = "input" if kind == "input_map" else "output"
        for key, tensor in mapping.items():
            where = ("step", j, kind, key)
            if key not in known:
                names = ", ".join(repr(n) for n in known) or "none"
                out.append(WiringProblem(where, f"{label} has no {what} {key!r} (its {what}s: {names})",
                                         "ensemble-map-name"))
                continue
            add(tensor, _Use(f"{label} {what} {key!r}", known[key], step_batching, where, produces))
    for io in model.inputs:
        if io.name not in step.input_map and not io.optional:
            out.append(WiringProblem(("step", j), f"{label}: input {io.name!r} is not mapped to an ensemble tensor",
                                     "ensemble-input-unmapped"))
    return out


def _producer_problems(uses: Mapping[str, list[_Use]]) -> list[WiringProblem]:
    out = []
    for tensor, items in uses.items():
        producers = [u for u in items if u.produces]
        for extra in producers[1:]:
            out.append(WiringProblem(extra.where, f"ensemble tensor {tensor!r} is produced twice: by "
                                     f"{producers[0].who} and by {extra.who}", "ensemble-tensor-producers"))
    return out


def _consistency_problems(uses: Mapping[str, list[_Use]], max_batch_size: int) -> list[WiringProblem]:
    out = []
    for tensor, items in uses.items():
        known = [u for u in items if u.io.data_type]
        if not known:
            continue
        first = next((u for u in known if u.produces), known[0])
        for other in known:
            if other is first:
                continue
            if other.io.data_type != first.io.data_type:
                out.append(WiringProblem(other.where, f"ensemble tensor {tensor!r}: {other.who} is "
                                         f"{other.io.data_type}, {first.who} is {first.io.data_type}",
                                         "ensemble-data-type"))
            elif not dims_compatible(other.io.dims, other.batching, first.io.dims, first.batching):
                out.append(WiringProblem(other.where, f"ensemble tensor {tensor!r}: {other.who} has dims "
                                         f"{list(other.io.dims)}, {first.who} has {list(first.io.dims)}",
                                         "ensemble-dims"))
            elif first.produces and not other.produces:
                out += _range_problems(tensor, first, other, max_batch_size)
    return out


def _range_problems(tensor: str, producer: _Use, consumer: _Use, max_batch_size: int) -> list[WiringProblem]:
    """Beyond Triton: the producer's shapes must fit the consumer's range on every axis (full request shapes).

    In a batching ensemble a batching producer makes at most the ensemble's max_batch_size items.
    """
    low, high = producer.io.min_shape, producer.io.max_shape
    accept_low, accept_high = consumer.io.min_shape, consumer.io.max_shape
    if low is None or high is None or accept_low is None or accept_high is None:
        return []
    if not len(low) == len(high) == len(accept_low) == len(accept_high) or not high:
        return []
    if max_batch_size > 0 and producer.batching and consumer.batching:
        high = (min(high[0], max_batch_size) if high[0] >= 0 else max_batch_size, *high[1:])
    # A max of -1 has no upper bound (a size the data decides, or a -1 dim known only from a config).
    bad = [axis for axis in range(len(low)) if low[axis] < accept_low[axis] or
           (accept_high[axis] >= 0 and (high[axis] < 0 or high[axis] > accept_high[axis]))]
    if not bad:
        return []
    axes = "; ".join(f"axis {a}: {_span(low[a], high[a])} produced, {_span(accept_low[a], accept_high[a])} accepted"
                     for a in bad)
    return [WiringProblem(consumer.where, f"ensemble tensor {tensor!r}: {producer.who} makes shapes "
                          f"{list(low)}..{list(high)}, which {consumer.who} does not accept ({axes})",
                          "ensemble-shape-range")]


def _span(low: int, high: int) -> str:
    return f"{low}..{high}" if high >= 0 else f"{low}.. (no upper bound)"


def _flow_problems(wiring: Wiring, uses: Mapping[str, list[_Use]]) -> list[WiringProblem]:
    out = []
    ran = set(step_order(wiring))
    ready = {io.name for io in wiring.inputs}
    for j in sorted(ran):
        ready.update(wiring.steps[j].output_map.values())
    consumed = {t for step in wiring.steps for t in step.input_map.values()}
    produced_by_steps = {t for step in wiring.steps for t in step.output_map.values()}
    for i, io in enumerate(wiring.inputs):
        if io.name not in consumed:
            out.append(WiringProblem(("input", i), f"ensemble input {io.name!r} is not used by any step",
                                     "ensemble-flow"))
    for i, io in enumerate(wiring.outputs):
        if io.name not in produced_by_steps:
            out.append(WiringProblem(("output", i), f"ensemble output {io.name!r} is not written by any step",
                                     "ensemble-flow"))
    outputs = {io.name for io in wiring.outputs}
    for j, step in enumerate(wiring.steps):
        if j in ran:
            continue
        waiting = sorted(t for t in step.input_map.values() if t not in ready)
        why = "; ".join(f"{t!r} is " + ("produced only by steps that wait themselves (a cycle)"
                                        if t in produced_by_steps else "neither an ensemble input nor a step output")
                        for t in waiting)
        out.append(WiringProblem(("step", j), f"step {j} ({step.model_name!r}) never runs: {why}", "ensemble-flow"))
    for tensor, items in uses.items():
        if tensor in outputs or tensor in consumed:
            continue
        producer = next((u for u in items if u.produces), None)
        if producer is not None and producer.where[0] == "step":
            out.append(WiringProblem(producer.where, f"ensemble tensor {tensor!r} from {producer.who} is never "
                                     "used (Triton refuses unused ensemble tensors): make it an ensemble output "
                                     "or leave it out of the output_map", "ensemble-flow"))
    return out
