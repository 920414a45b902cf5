"""Dynamic and sequence batching rules, as Triton core validates them after normalizing the config."""

from __future__ import annotations

from typing import Any

from generator.lint.findings import ConfigFile
from generator.lint.locator import FieldPath
from generator.triton.config_rules import Location, batching_refusals, dynamic_batching_of, preferred_refusals
from generator.triton.proto import model_config_pb2 as mc

__all__ = ["check_batching"]

Control = mc.ModelSequenceBatching.Control
#: The control kinds that carry a false/true value pair, in the order Triton checks them.
BOOLEAN_CONTROLS = (Control.CONTROL_SEQUENCE_START, Control.CONTROL_SEQUENCE_END, Control.CONTROL_SEQUENCE_READY)
#: Data types Triton allows for a CONTROL_SEQUENCE_CORRID tensor.
CORRID_TYPES = (mc.TYPE_UINT64, mc.TYPE_INT64, mc.TYPE_UINT32, mc.TYPE_INT32, mc.TYPE_STRING)


def check_batching(cf: ConfigFile) -> None:
    """Every rule of this area on one parsed config."""
    if cf.config.HasField("dynamic_batching"):
        _check_dynamic(cf)
    if cf.config.HasField("sequence_batching"):
        _check_sequence(cf)


def _check_preferred(cf: ConfigFile, sizes: list[int], at: Location) -> None:
    for refusal in preferred_refusals(sizes, cf.config.max_batch_size, at):
        cf.refuse(refusal)


def _check_dynamic(cf: ConfigFile) -> None:
    config = cf.config
    db = config.dynamic_batching
    if config.max_batch_size == 0:
        cf.add("dynamic-batching-no-batch", "dynamic_batching is set but max_batch_size is 0: Triton loads it, but the "
               "model has no batch axis for the batcher to fill; set max_batch_size > 0 or remove dynamic_batching",
               ("dynamic_batching",))
    _check_preferred(cf, list(db.preferred_batch_size), ("dynamic_batching", "preferred_batch_size"))
    for refusal in batching_refusals(dynamic_batching_of(config)):
        cf.refuse(refusal)


def _check_sequence(cf: ConfigFile) -> None:
    sb = cf.config.sequence_batching
    _check_controls(cf)
    if sb.HasField("oldest"):
        _check_preferred(cf, list(sb.oldest.preferred_batch_size),
                         ("sequence_batching", "oldest", "preferred_batch_size"))
    if sb.HasField("direct") and not 0.0 <= sb.direct.minimum_slot_utilization <= 1.0:
        cf.add("sequence-slot-utilization", f"sequence_batching direct minimum_slot_utilization "
               f"{sb.direct.minimum_slot_utilization:g} is outside 0..1",
               ("sequence_batching", 0, "direct", 0, "minimum_slot_utilization"))
    _check_states(cf)


def _check_controls(cf: ConfigFile) -> None:
    """Control tensors: every problem Triton's per-kind passes would stop at, each once."""
    control_inputs = cf.config.sequence_batching.control_input
    seen: dict[str, int] = {}
    for i, ci in enumerate(control_inputs):
        where: FieldPath = ("sequence_batching", 0, "control_input", i)
        if not ci.name:
            cf.add("sequence-control", f"sequence_batching control_input #{i} must have a name", where)
        elif ci.name in seen:
            cf.add("sequence-control", f"control tensor '{ci.name}' is named by control_input #{seen[ci.name]} and "
                   f"#{i}; Triton refuses one tensor for several control inputs", (*where, "name"))
        else:
            seen[ci.name] = i
    for kind in (*BOOLEAN_CONTROLS, Control.CONTROL_SEQUENCE_CORRID):
        kind_name = Control.Kind.Name(kind)
        found: list[tuple[int, int]] = []
        for i, ci in enumerate(control_inputs):
            found += [(i, k) for k, c in enumerate(ci.control) if c.kind == kind]
        for i, k in found[1:]:
            cf.add("sequence-control", f"sequence_batching names several {kind_name} tensors ("
                   f"{', '.join(repr(control_inputs[j].name) for j, _ in found)}); Triton allows one",
                   ("sequence_batching", 0, "control_input", i, "control", k))
        for i, k in found:
            _check_control_value(cf, control_inputs[i].control[k], kind_name,
                                 ("sequence_batching", 0, "control_input", i, "control", k))


def _check_control_value(cf: ConfigFile, control: Any, kind: str, where: FieldPath) -> None:
    lists = {"int32_false_true": list(control.int32_false_true), "fp32_false_true": list(control.fp32_false_true),
             "bool_false_true": list(control.bool_false_true)}
    given = [name for name, values in lists.items() if values]
    if kind == "CONTROL_SEQUENCE_CORRID":
        if given:
            cf.add("sequence-control", f"{kind} must not set {', '.join(given)} (its data_type says the type)",
                   (*where, given[0]))
        elif control.data_type not in CORRID_TYPES:
            allowed = ", ".join(mc.DataType.Name(t) for t in CORRID_TYPES)
            cf.add("sequence-control", f"{kind} data_type {mc.DataType.Name(control.data_type)} is not one of "
                   f"{allowed}", (*where, "data_type") if control.data_type else where)
        return
    if not given:
        cf.add("sequence-control", f"{kind} control must set one of int32_false_true, fp32_false_true, "
               "bool_false_true", where)
    elif len(given) > 1:
        cf.add("sequence-control", f"{kind} control sets {' and '.join(given)}; Triton allows one of them",
               (*where, given[1]))
    elif len(lists[given[0]]) != 2:
        cf.add("sequence-control", f"{kind} control {given[0]} has {len(lists[given[0]])} entries; it needs exactly 2 "
               "(the false and the true value)", (*where, given[0]))


def _check_states(cf: ConfigFile) -> None:
    """Implicit state: SequenceBatchScheduler::Create and GenerateInitialStateData (one initial_state at most)."""
    with_initial: dict[str, int] = {}
    for s, state in enumerate(cf.config.sequence_batching.state):
        base: FieldPath = ("sequence_batching", 0, "state", s)
        label = f"sequence_batching state '{state.input_name}'"
        if len(state.initial_state) > 1:
            cf.add("sequence-state", f"{label} has {len(state.initial_state)} initial_state entries; Triton allows one",
                   (*base, "initial_state", 1))
            continue
        if not state.initial_state:
            continue
        initial = state.initial_state[0]
        where: FieldPath = (*base, "initial_state", 0)
        if initial.data_type != state.data_type:
            cf.add("sequence-state", f"{label} initial_state data_type {mc.DataType.Name(initial.data_type)} differs "
                   f"from the state's {mc.DataType.Name(state.data_type)}", (*where, "data_type"))
        elif not initial.name:
            cf.add("sequence-state", f"{label} initial_state must set 'name'", where)
        elif state.input_name in with_initial:
            cf.add("sequence-state", f"{label} has an initial_state, and so has state "
                   f"#{with_initial[state.input_name]} of the same input_name", (*base, "input_name"))
        elif len(initial.dims) != len(state.dims):
            cf.add("sequence-state", f"{label} initial_state dims {list(initial.dims)} have another rank than the "
                   f"state's {list(state.dims)}", (*where, "dims"))
        elif -1 in initial.dims:
            cf.add("sequence-state", f"{label} initial_state dims {list(initial.dims)} contain -1; they must be fixed",
                   (*where, "dims"))
        elif any(s_dim not in (-1, i_dim) for i_dim, s_dim in zip(initial.dims, state.dims, strict=True)):
            cf.add("sequence-state", f"{label} initial_state dims {list(initial.dims)} do not fit the state's dims "
                   f"{list(state.dims)}", (*where, "dims"))
        elif initial.WhichOneof("state_data") is None:
            cf.add("sequence-state", f"{label} initial_state sets neither zero_data nor data_file", where)
        with_initial.setdefault(state.input_name, s)
