"""What a backend accepts in a config beyond core's rules, checked when Triton creates the model's instances.

pytorch, onnxruntime, tensorrt and openvino each refuse data types, control tensors or instance kinds their runtime
cannot take (Triton 2.51); docs/lint-rules.md lists each rule with its Triton source.
"""

from __future__ import annotations

from generator.dtypes import BACKEND_DATA_TYPES, DTYPES
from generator.lint.backends import ENSEMBLE, backend_refused
from generator.lint.batching import BOOLEAN_CONTROLS, Control
from generator.lint.environment import Environment, normalized_kind
from generator.lint.findings import ConfigFile
from generator.lint.folders import Resolved
from generator.lint.locator import FieldPath
from generator.triton.config_rules import REFUSED_KINDS
from generator.triton.proto import model_config_pb2 as mc

__all__ = ["check_backend_config"]

Kind = mc.ModelInstanceGroup.Kind
STRING = "TYPE_STRING"


def check_backend_config(cf: ConfigFile, resolved: Resolved, environment: Environment) -> None:
    """Every rule of this module on one parsed config whose platform and backend Triton accepts."""
    if resolved.platform == ENSEMBLE or backend_refused(resolved):
        return
    backend = resolved.backend
    if backend in BACKEND_DATA_TYPES:
        _check_data_types(cf, backend)
    if backend == "pytorch":
        _check_pytorch(cf)
    elif backend == "onnxruntime":
        for index, io in enumerate(cf.config.input):
            if io.optional and cf.config.max_batch_size > 0:
                cf.add("optional-input-onnxruntime", f"input '{io.name}' is optional on a model with max_batch_size "
                       f"{cf.config.max_batch_size}; the onnxruntime backend refuses optional inputs on a model that "
                       "batches (the python backend loads it)", ("input", index, "optional"))
    if backend in REFUSED_KINDS:
        _check_instance_kinds(cf, backend, environment)


def _typed_fields(config: mc.ModelConfig) -> list[tuple[str, int, FieldPath]]:
    """Every data type a backend reads from the config: (label, data type, where), inputs, outputs and states."""
    fields: list[tuple[str, int, FieldPath]] = []
    for kind, tensors in (("input", config.input), ("output", config.output)):
        fields += [(f"{kind} '{io.name}'", io.data_type, (kind, i, "data_type")) for i, io in enumerate(tensors)]
    fields += [(f"sequence_batching state '{state.input_name}'", state.data_type,
                ("sequence_batching", 0, "state", s, "data_type"))
               for s, state in enumerate(config.sequence_batching.state)]
    return fields


def _check_data_types(cf: ConfigFile, backend: str) -> None:
    allowed = BACKEND_DATA_TYPES[backend] | ({STRING} if backend == "pytorch" else set())
    for label, data_type, where in _typed_fields(cf.config):
        name = mc.DataType.Name(data_type)
        if data_type != mc.TYPE_INVALID and name not in allowed:  # TYPE_INVALID: tensor-data-type's finding
            cf.add("backend-data-type", f"{label} is {name}, which the {backend} backend refuses ('unsupported "
                   f"datatype'); it takes {', '.join(d.triton for d in DTYPES if d.triton in allowed)}", where)


def _index_name(name: str) -> bool:
    """The pytorch backend's ``<name>__<index>``: the text after the first ``__`` is digits (or nothing)."""
    _, sep, index = name.partition("__")
    return bool(sep) and all(c in "0123456789" for c in index)


def _check_pytorch(cf: ConfigFile) -> None:
    config = cf.config
    batching = config.max_batch_size > 0
    for kind, tensors in (("input", config.input), ("output", config.output)):
        if not tensors:
            cf.add("backend-io-required", f"the config lists no {kind}s; the pytorch backend fills in none, and "
                   f"refuses a model without {kind}s ('model configuration must contain at least one {kind}')",
                   ("name",) if config.name else ())
        for i, io in enumerate(tensors):
            dims = list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)
            if io.data_type == mc.TYPE_STRING and len(dims) + batching > 1:
                cf.add("backend-data-type", f"{kind} '{io.name}' is TYPE_STRING with {len(dims) + batching} dims"
                       f"{' (the batch axis counted)' if batching else ''}; the pytorch backend takes strings only "
                       "as a 1-D list", (kind, i, "reshape" if io.HasField("reshape") else "dims"))
    for s, state in enumerate(config.sequence_batching.state):
        # The input side is checked with no dims at all: a batching model refuses any string state.
        if state.data_type == mc.TYPE_STRING and (batching or len(state.dims) > 1):
            cf.add("backend-data-type", f"sequence_batching state '{state.input_name}' is TYPE_STRING; the pytorch "
                   "backend takes string states only as a 1-D list on a model that does not batch",
                   ("sequence_batching", 0, "state", s, "data_type"))
    torch_types = BACKEND_DATA_TYPES["pytorch"]
    for i, ci in enumerate(config.sequence_batching.control_input):
        for k, control in enumerate(ci.control):
            if control.kind not in (*BOOLEAN_CONTROLS, Control.CONTROL_SEQUENCE_CORRID) or not ci.name:
                continue
            kind_name = Control.Kind.Name(control.kind)
            where: FieldPath = ("sequence_batching", 0, "control_input", i)
            if not _index_name(ci.name):
                cf.add("backend-sequence-control", f"control tensor '{ci.name}' ({kind_name}) does not follow the "
                       "pytorch backend's <name>__<index> naming (e.g. 'START__2'); the backend refuses it",
                       (*where, "name"))
            elif control.kind == Control.CONTROL_SEQUENCE_CORRID and control.data_type \
                    and mc.DataType.Name(control.data_type) not in torch_types:
                cf.add("backend-data-type", f"control tensor '{ci.name}' (CONTROL_SEQUENCE_CORRID) is "
                       f"{mc.DataType.Name(control.data_type)}, which torch has no tensors of; the pytorch backend "
                       f"refuses it (use TYPE_INT64 or TYPE_INT32)", (*where, "control", k, "data_type"))


def _check_instance_kinds(cf: ConfigFile, backend: str, environment: Environment) -> None:
    refused, words = REFUSED_KINDS[backend]
    for index, group in enumerate(cf.config.instance_group):
        kind = normalized_kind(group, environment.gpus)
        if kind is None or Kind.Name(kind) not in refused:
            continue  # KIND_AUTO with an unknown GPU count: undecided
        label = f"instance_group #{index}" + (f" '{group.name}'" if group.name else "")
        how = "" if kind == group.kind else (f" (KIND_AUTO, which Triton makes {Kind.Name(kind)} on a machine with "
                                             f"{environment.gpus or 'no'} GPU(s), {environment.source or '--gpus'})")
        cf.add("instance-kind-backend", f"{label} has kind {Kind.Name(kind)}{how}; the {backend} backend refuses it "
               f"('{words}')", ("instance_group", index, "kind"))
