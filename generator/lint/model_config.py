"""Model configuration rules: inputs and outputs, batch I/O, instance groups, response cache, metrics, warmup.

Platform-dependent rules read the platform as Triton infers it (:class:`~generator.lint.folders.Resolved`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from generator.lint.findings import ConfigFile
from generator.lint.folders import Resolved
from generator.lint.layout import dims_element_count
from generator.triton.config_rules import group_refusals, instance_groups_of
from generator.triton.proto import model_config_pb2 as mc

__all__ = ["TENSORRT_PLAN", "check_model_config", "profile_index"]

INT32_MAX = 2**31 - 1
TENSORRT_PLAN = "tensorrt_plan"
#: std::stoi's accepted prefix (GetProfileIndex): leading whitespace, a sign, digits.
_STOI = re.compile(r"^[ \t\n\v\f\r]*([+-]?\d+)")


def check_model_config(cf: ConfigFile, resolved: Resolved, fills: frozenset[str] = frozenset()) -> None:
    """Every rule of this area on one parsed config (no file system access).

    ``fills`` is what the backend's auto-complete fills in (:func:`generator.lint.backends.auto_complete_fills`):
    with ``tensors``, a missing data_type or dims is the backend's to fill, and Triton checks them after it did.
    """
    config = cf.config
    if config.max_batch_size < 0:
        cf.add("max-batch-size", f"max_batch_size is {config.max_batch_size}; it must be >= 0", ("max_batch_size",))
    _check_tensors(cf, resolved, "tensors" in fills)
    _check_batch_io(cf)
    if resolved.platform != "ensemble":
        _check_instance_groups(cf, resolved.platform)
    _check_response_cache(cf)
    _check_metrics(cf)
    _check_warmup(cf)


# ---------------------------------------------------------------------------- inputs and outputs
def _check_tensors(cf: ConfigFile, resolved: Resolved, filled: bool) -> None:
    config, platform = cf.config, resolved.platform
    # (the onnxruntime backend refuses any optional input on a batching model: optional-input-onnxruntime's finding)
    batching_scheduler = resolved.backend != "onnxruntime" and (
        config.HasField("dynamic_batching") or config.HasField("sequence_batching"))
    for kind, tensors in (("input", config.input), ("output", config.output)):
        seen: dict[str, int] = {}
        for index, io in enumerate(tensors):
            label = f"{kind} '{io.name}'" if io.name else f"{kind} #{index}"
            if not io.name:
                cf.add("tensor-name", f"{label} must specify 'name'", (kind, index))
            elif io.name in seen:
                consequence = ("counts both as required, so no request can succeed" if kind == "input"
                               else "keeps one of them")
                cf.add("tensor-duplicate-name", f"{label} is defined twice ({kind}s #{seen[io.name]} and #{index}); "
                       f"Triton loads it but {consequence}", (kind, index, "name"))
            else:
                seen[io.name] = index
            if io.data_type == mc.TYPE_INVALID and not filled:
                cf.add("tensor-data-type", f"{label} must specify 'data_type'", (kind, index, "name"))
            _check_dims(cf, kind, index, label, io, filled)
            if kind == "input":
                if io.format in (mc.ModelInput.FORMAT_NCHW, mc.ModelInput.FORMAT_NHWC) and len(io.dims) != 3:
                    cf.add("tensor-format", f"{label} has format {mc.ModelInput.Format.Name(io.format)}, which "
                           f"requires 3 dims (got {len(io.dims)})", (kind, index, "format"))
                if io.optional and batching_scheduler and config.max_batch_size > 0:
                    cf.add("optional-input-batching", f"{label} is optional on a batching model: the batcher never "
                           "batches a request that sends it with one that omits it", (kind, index, "optional"))
            if io.is_shape_tensor and platform != TENSORRT_PLAN:
                cf.add("shape-tensor-platform", f"{label} is a shape tensor, which only the TensorRT platform "
                       f"supports (platform is '{platform}')", (kind, index, "is_shape_tensor"))
            if io.is_non_linear_format_io:
                if platform != TENSORRT_PLAN:
                    cf.add("non-linear-format", f"{label} is a non-linear format tensor, which only the TensorRT "
                           f"platform supports (platform is '{platform}')", (kind, index, "is_non_linear_format_io"))
                elif len(io.dims) != 3:
                    cf.add("non-linear-format", f"{label} is a non-linear format tensor and needs 3 dims (got "
                           f"{len(io.dims)})", (kind, index, "dims"))


def _chunks(shape: Iterable[int]) -> list[int]:
    """Element counts of the static runs between -1 dims (Triton compares these for variable-size reshapes)."""
    out, current = [], 1
    for dim in shape:
        if dim == -1:
            out.append(current)
            current = 1
        else:
            current *= dim
    out.append(current)
    return out


def _count_text(count: int) -> str:
    return "variable size" if count == -1 else f"{count} elements"


def _check_dims(cf: ConfigFile, kind: str, index: int, label: str, io: Any, filled: bool) -> None:
    dims = list(io.dims)
    if not dims and not filled:
        cf.add("dims-empty", f"{label} must specify 'dims' (use dims: [ 1 ] with reshape: {{ shape: [ ] }} for a "
               "scalar)", (kind, index, "name"))
    bad_dims = False
    for k, dim in enumerate(dims):
        if dim < 1 and dim != -1:
            bad_dims = True
            cf.add("dims-invalid", f"{label} dims[{k}] is {dim}; each dim must be >= 1, or -1 for a variable size",
                   (kind, index, "dims", "#", k))
        elif dim > INT32_MAX:
            cf.add("dims-int32", f"{label} dims[{k}] is {dim}, above the int32 range ({INT32_MAX}); Triton loads it, "
                   "but TensorRT and most backends cannot serve it", (kind, index, "dims", "#", k))
    if not io.HasField("reshape"):
        return
    shape = list(io.reshape.shape)
    where = (kind, index, "reshape", 0, "shape")
    if not shape and cf.config.max_batch_size == 0:
        cf.add("reshape-scalar-nobatch", f"{label} has an empty reshape on a model with max_batch_size 0: scalar "
               "tensors need the batch axis", (kind, index, "reshape"))
        return
    for k, dim in enumerate(shape):
        if dim < 1 and dim != -1:
            bad_dims = True
            cf.add("dims-invalid", f"{label} reshape[{k}] is {dim}; each dim must be >= 1, or -1 for a variable size",
                   (*where, "#", k))
    if bad_dims or not dims:
        return
    dims_size, reshape_size = dims_element_count(dims), dims_element_count(shape)
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        if not shape:
            message = f"{label} has an empty (scalar) reshape, which needs dims [ 1 ], not {dims}"
        else:
            message = (f"{label} dims {dims} ({_count_text(dims_size)}) and reshape {shape} "
                       f"({_count_text(reshape_size)}) have different element counts")
        cf.add("reshape-size", message, where if shape else (kind, index, "reshape"))
    elif dims_size == -1 and len(_chunks(dims)) != len(_chunks(shape)):
        cf.add("reshape-size", f"{label} dims {dims} and reshape {shape} have different numbers of -1 dims", where)
    elif dims_size == -1 and _chunks(dims) != _chunks(shape):
        cf.add("reshape-size", f"{label} dims {dims} and reshape {shape} do not match: the static runs between -1 dims "
               f"must have equal element counts ({_chunks(dims)} vs {_chunks(shape)})", where)


def _check_batch_io(cf: ConfigFile) -> None:
    config = cf.config
    inputs = {io.name for io in config.input}
    outputs = {io.name for io in config.output}
    kinds = {"batch_input": mc.BatchInput.Kind, "batch_output": mc.BatchOutput.Kind}
    for kind in ("batch_input", "batch_output"):
        for index, entry in enumerate(getattr(config, kind)):
            if entry.kind not in kinds[kind].values():
                cf.add("batch-io", f"{kind} #{index} kind {entry.kind} is not a kind Triton knows",
                       (kind, index, "kind"))
            if len(entry.source_input) != 1:
                cf.add("batch-io", f"{kind} #{index} expects 1 source_input, got {len(entry.source_input)}",
                       (kind, index, "source_input") if entry.source_input else (kind, index))
            for name in entry.source_input:
                if name not in inputs:
                    cf.add("batch-io", f"{kind} #{index} source_input '{name}' is not an input",
                           (kind, index, "source_input"))
    for index, bi in enumerate(config.batch_input):
        if bi.data_type not in (mc.TYPE_INT32, mc.TYPE_FP32):
            cf.add("batch-io", f"batch_input #{index} data_type must be TYPE_INT32 or TYPE_FP32",
                   ("batch_input", index, "data_type"))
    for index, bo in enumerate(config.batch_output):
        seen: set[str] = set()
        for name in bo.target_name:
            if name not in outputs:
                cf.add("batch-io", f"batch_output #{index} target_name '{name}' is not an output",
                       ("batch_output", index, "target_name"))
            elif name in seen:
                cf.add("batch-io", f"batch_output #{index} names target output '{name}' twice",
                       ("batch_output", index, "target_name"))
            seen.add(name)


# ---------------------------------------------------------------------------- instance groups
def profile_index(profile: str) -> int | None:
    """GetProfileIndex: std::stoi reads leading digits ("1abc" is 1); None when it cannot read any."""
    match = _STOI.match(profile)
    return int(match.group(1)) if match else None


def _check_instance_groups(cf: ConfigFile, platform: str) -> None:
    for refusal in group_refusals(instance_groups_of(cf.config)):
        cf.refuse(refusal)
    for index, group in enumerate(cf.config.instance_group):
        label = f"instance_group #{index}" + (f" '{group.name}'" if group.name else "")
        base = ("instance_group", index)
        if group.count < 0:
            cf.add("instance-group-count", f"{label} count is {group.count}; Triton replaces a count below 1 with its "
                   "default (1, or 2 on CPU for some backends)", (*base, "count"))
        if group.profile and platform != TENSORRT_PLAN:
            cf.add("instance-group-profile", f"{label} sets 'profile', which only the TensorRT platform supports "
                   f"(platform is '{platform}')", (*base, "profile"))
            continue
        for k, profile in enumerate(group.profile):
            value = profile_index(profile)
            if value is not None and not -INT32_MAX - 1 <= value <= INT32_MAX:
                # Core and the backend catch only std::invalid_argument from stoi: the server aborts.
                cf.add("instance-group-profile", f"{label} profile {profile!r} is past the int32 range: Triton aborts "
                       "loading it (terminate called after throwing an instance of 'std::out_of_range', what(): "
                       "stoi; seen on 2.51)", (*base, "profile", "#", k))
            elif value is None or value < 0:
                cf.add("instance-group-profile", f"{label} profile {profile!r} is not a non-negative integer",
                       (*base, "profile", "#", k))


# ---------------------------------------------------------------------------- response cache, metrics
def _check_response_cache(cf: ConfigFile) -> None:
    config = cf.config
    if not config.response_cache.enable:
        return
    if config.HasField("sequence_batching"):
        cf.add("response-cache", "response_cache is enabled with sequence_batching; Triton does not support that",
               ("response_cache",))
    elif config.model_transaction_policy.decoupled:
        cf.add("response-cache", "response_cache is enabled on a decoupled model; Triton does not support that",
               ("response_cache",))


def _check_metrics(cf: ConfigFile) -> None:
    """ValidateModelMetrics (model_metrics, since Triton 2.52): stops at the first problem of each metric control."""
    for index, control in enumerate(cf.config.model_metrics.metric_control):
        base = ("model_metrics", 0, "metric_control", index)
        label = f"model_metrics metric_control #{index}"
        if not control.HasField("metric_identifier"):
            cf.add("model-metrics", f"{label} must specify 'metric_identifier'", base)
        elif not control.metric_identifier.family:
            cf.add("model-metrics", f"{label} metric_identifier must specify a non-empty 'family'",
                   (*base, "metric_identifier"))
        elif not control.HasField("histogram_options"):
            cf.add("model-metrics", f"{label} must specify 'histogram_options'", base)
        elif not control.histogram_options.buckets:
            cf.add("model-metrics", f"{label} histogram_options must specify non-empty 'buckets'",
                   (*base, "histogram_options"))


# ---------------------------------------------------------------------------- warmup
def _check_warmup(cf: ConfigFile) -> None:
    config = cf.config
    inputs = {io.name: io for io in config.input}
    control_inputs = {ci.name for ci in config.sequence_batching.control_input}
    mbs = config.max_batch_size
    for index, warmup in enumerate(config.model_warmup):
        if warmup.batch_size == 0:
            continue  # Triton skips the sample
        label = f"model_warmup #{index}" + (f" '{warmup.name}'" if warmup.name else "")
        base = ("model_warmup", index)
        if warmup.batch_size > max(mbs, 1):
            limit = f"max_batch_size {mbs}" if mbs > 0 else "1 (max_batch_size 0)"
            cf.add("warmup-batch-size", f"{label} batch_size {warmup.batch_size} is above {limit}",
                   (*base, "batch_size"))
        missing = sorted(name for name, io in inputs.items() if name not in warmup.inputs and not io.optional)
        if missing:
            cf.add("warmup-input-missing", f"{label} does not give required input(s) {', '.join(missing)}; the warmup "
                   "request fails", (*base, "name") if warmup.name else base)
        for name in sorted(warmup.inputs):
            sample = warmup.inputs[name]
            where = cf.entry((*base, "inputs"), name)
            dims = list(sample.dims)
            if -1 in dims:
                cf.add("warmup-dims", f"{label} input '{name}' dims {dims} contain -1; warmup dims must be fully "
                       "specified", (*where, "value", 0, "dims"))
            if not sample.WhichOneof("input_data_type"):
                cf.add("warmup-input-data", f"{label} input '{name}' sets none of zero_data, random_data, "
                       "input_data_file", (*where, "key"))
            io = inputs.get(name)
            if io is None:
                if name not in control_inputs:
                    known = ", ".join(sorted(inputs)) or "(none)"
                    cf.add("warmup-input-unknown", f"{label} input '{name}' is not an input of the model; inputs are "
                           f"{known}", (*where, "key"))
                continue
            if -1 not in dims and (len(dims) != len(io.dims)
                                   or any(c not in (-1, w) for c, w in zip(io.dims, dims, strict=False))):
                cf.add("warmup-dims", f"{label} input '{name}' dims {dims} do not fit the input's dims "
                       f"{list(io.dims)} (warmup dims leave out the batch axis)", (*where, "value", 0, "dims"))
            if sample.data_type != io.data_type:
                cf.add("warmup-data-type", f"{label} input '{name}' has data_type "
                       f"{mc.DataType.Name(sample.data_type)}, "
                       f"the input is {mc.DataType.Name(io.data_type)}", (*where, "value", 0, "data_type"))
