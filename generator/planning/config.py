"""Triton ``ModelConfig`` protobuf messages from a model's plan and options, and their deterministic pbtxt text.

Merged in order: template, plan, options, then the raw ``pbtxt`` fragment (:mod:`generator.planning.fragments`); the
result is checked against Triton's rules, so a fragment cannot produce a config the server would refuse.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format

from generator.dtypes import by_triton
from generator.errors import Problem
from generator.gpu import compute_capability_key
from generator.manifest.options import tuned_settings_digest
from generator.naming import WARMUP_FOLDER, model_name_problems
from generator.planning.fragments import fragment_kind, fragment_refusals
from generator.resources import resource_dir
from generator.triton.config_rules import (
    REFUSED_KINDS,
    batching_refusals,
    dynamic_batching_of,
    group_refusals,
    instance_groups_of,
    preferred_refusals,
)
from generator.triton.proto import ConfigTextError, model_config_pb2, parse_model_config

if TYPE_CHECKING:
    from generator.planning.profiles import OptimizationProfile
    from generator.planning.tensors import TensorPlan

__all__ = [
    "DEFAULT_CPU_INSTANCE_COUNT",
    "DEFAULT_QUEUE_DELAY_US",
    "ConfigBuild",
    "ConfigRequest",
    "PicklesModelConfig",
    "base_config",
    "build_model_config",
    "config_problems",
    "fragment_kind",
    "parse_config",
    "plan_filenames",
    "render_config",
    "warmup_data_file",
]

ModelConfig = model_config_pb2.ModelConfig

#: gen-repo's default dynamic-batching queue delay: long enough to gather a few concurrent requests, short enough
#: not to matter for latency (Triton's own default is 0, which rarely forms batches). A measured grid (python target,
#: CPU Triton) found 0 or 500 us best, within the noise of each other: 100 us stays, between them (docs/manifest.md).
DEFAULT_QUEUE_DELAY_US = 100
#: Instances per group when a KIND_CPU group names no count. Triton's guidance tunes instances after dynamic batching;
#: on a multi-core CPU a second instance runs one batch while the other's requests are read and answered, and a
#: measured grid (python target, CPU Triton, three models) found 2 instances best on all three (1: 0.49-0.79 of best).
#: Triton's own auto-complete gives KIND_CPU groups of the onnxruntime backend count 2 for the same reason
#: (model_config_utils.cc SetDefaultInstanceCount). Other kinds keep Triton's 1 (per GPU for KIND_GPU).
DEFAULT_CPU_INSTANCE_COUNT = 2
#: Targets and their template file.
_TEMPLATES = {"tensorrt": "tensorrt.pbtxt", "onnx": "onnx.pbtxt", "python": "python.pbtxt"}


#: Default instance group kind per target.
_DEFAULT_KIND = {"tensorrt": "KIND_GPU", "onnx": "KIND_AUTO", "python": "KIND_CPU"}
_INT32_MAX = 2**31 - 1
#: Enum numbers by name, looked up once (``EnumTypeWrapper.Value`` is a Python call per tensor of every config).
_DATA_TYPES = dict(model_config_pb2.DataType.items())
_INSTANCE_KINDS = dict(model_config_pb2.ModelInstanceGroup.Kind.items())


@dataclass(frozen=True, slots=True)
class ConfigRequest:
    """What :func:`build_model_config` needs: the plan's decisions plus the model's merged options.

    ``option_pointer(key, *rest)`` names where an option was set (the model entry or ``/defaults``), for problems.
    """

    name: str
    target: str
    max_batch_size: int
    opt_batch: int
    inputs: Sequence[TensorPlan]
    outputs: Sequence[TensorPlan]
    options: Mapping[str, Any]
    file: str
    model_pointer: str
    option_pointer: Callable[..., str]
    own_options: frozenset[str] = frozenset()
    #: The version folder the build writes, and whether warmup reads the build's data files (``warmup_data_file``)
    #: rather than zeros and random bytes (``gen-repo config`` writes no data, so it cannot point at any).
    version: int = 1
    warmup_data: bool = False
    #: The manifest's optimization profiles (empty: the one profile of the inputs' own range).
    profiles: Sequence[OptimizationProfile] = ()
    #: The model's ``tuned:`` block (``gen-repo tune``), applied over ``options``; ``tuned_pointer(*rest)`` locates
    #: its keys (``/models/<i>/tuned/...``).
    tuned: Mapping[str, Any] | None = None
    tuned_pointer: Callable[..., str] | None = None


def warmup_data_file(version: int, input_name: str) -> str:
    """``input_data_file`` of one warmup input, relative to ``<model>/warmup/``: one folder per model version.

    Per version because a publish uploads a new version (and its warmup data) while Triton may still load the
    previous config: files an older config names are never overwritten.
    """
    return f"{version}/{input_name}"


class PicklesModelConfig:
    """Mixin for a frozen dataclass with a ``config`` ModelConfig: pickles it as the message's bytes.

    For build workers and Ray tasks: tritonclient's generated ``model_config_pb2`` classes cannot be pickled (their
    module is imported under a name pickle cannot find again).
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuild from the other fields and the config's deterministic bytes."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                  if f.name != "config"}
        config = getattr(self, "config").SerializeToString(deterministic=True)  # noqa: B009 (a mixin's field)
        return (_unpickle_with_config, (type(self), fields, config))


def _unpickle_with_config(cls: type, fields: dict[str, Any], config: bytes) -> Any:
    return cls(**fields, config=ModelConfig.FromString(config))


@dataclass(slots=True)
class ConfigBuild:
    """The built message, the sentences explaining option decisions, and problems (empty when usable)."""

    config: model_config_pb2.ModelConfig
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@functools.cache
def _template(target: str) -> model_config_pb2.ModelConfig:
    text = (resource_dir("templates") / "config" / _TEMPLATES[target]).read_text(encoding="utf-8")
    return parse_model_config(text, _TEMPLATES[target])


def base_config(target: str) -> model_config_pb2.ModelConfig:
    """Return a fresh copy of the target's base fragment (``templates/config/<target>.pbtxt``)."""
    config = ModelConfig()
    config.MergeFrom(_template(target))
    return config


def parse_config(text: str, where: str = "pbtxt") -> model_config_pb2.ModelConfig:
    """Parse pbtxt text into a ModelConfig (raises :class:`~generator.triton.proto.ConfigTextError`)."""
    return parse_model_config(text, where)


def render_config(model_config: model_config_pb2.ModelConfig) -> str:
    """``config.pbtxt`` text: protobuf text_format, deterministic (map entries sorted by key)."""
    return text_format.MessageToString(model_config)


def build_model_config(request: ConfigRequest) -> ConfigBuild:
    """Build the ModelConfig for one planned model; see the module docstring for the merge order."""
    r = request
    build = ConfigBuild(base_config(r.target))
    config = build.config
    config.name = r.name
    config.max_batch_size = r.max_batch_size
    for tensor in r.inputs:
        _add_io(config.input.add(), tensor)
    for tensor in r.outputs:
        _add_io(config.output.add(), tensor)

    _target_option_problems(r, build)
    _dynamic_batching(r, build)
    _instance_groups(r, build)
    _version_policy(r, config)
    _warmup(r, build)
    if r.options.get("response_cache"):
        config.response_cache.enable = True
    if r.options.get("parameters"):
        for key, value in sorted(r.options["parameters"].items()):
            config.parameters[key].string_value = value
    if r.target == "tensorrt":
        _tensorrt(r, build)
    elif r.target == "onnx" and r.options.get("onnx_tensorrt_accelerator"):
        _onnx_accelerator(r, build)
    _tuned_note(r, build)
    _merge_fragment(r, build)
    _confine_paths(r, build)
    if not build.problems:
        build.problems.extend(
            Problem(r.file, r.model_pointer, message) for message in config_problems(config, r.name)
        )
    return build


def _add_io(io: Any, tensor: TensorPlan) -> None:
    io.name = tensor.name
    io.data_type = _DATA_TYPES[tensor.data_type]
    io.dims.extend(tensor.dims)
    if tensor.reshape is not None:
        io.reshape.SetInParent()
        io.reshape.shape.extend(tensor.reshape)


def _target_option_problems(r: ConfigRequest, build: ConfigBuild) -> None:
    for key, target in (("cuda_graphs", "tensorrt"), ("compute_capabilities", "tensorrt"),
                        (CONTEXT_ALLOCATION, "tensorrt"), ("onnx_tensorrt_accelerator", "onnx")):
        if r.options.get(key) and r.target != target:
            build.problems.append(
                Problem(r.file, r.option_pointer(key), f"{key} applies to the {target} target only; this model's "
                        f"target is {r.target}")
            )


def _tuned(r: ConfigRequest, key: str) -> Any:
    """The ``tuned:`` block's ``key`` (None when the model was not tuned or tuning left it)."""
    return (r.tuned or {}).get(key)


def _where(r: ConfigRequest, tuned: bool, key: str, *rest: str | int) -> str:
    """Pointer of ``key`` where its value came from: the ``tuned:`` block, else the option."""
    if tuned and r.tuned_pointer is not None:
        return str(r.tuned_pointer(key, *rest))
    return str(r.option_pointer(key, *rest))


def _dynamic_batching(r: ConfigRequest, build: ConfigBuild) -> None:
    option = r.options.get("dynamic_batching", True)
    tuned: Mapping[str, Any] = _tuned(r, "dynamic_batching") or {}
    if tuned and (r.max_batch_size == 0 or option is False):
        build.problems.append(
            Problem(r.file, _where(r, True, "dynamic_batching"), "tuned dynamic_batching, but this model's dynamic "
                    "batcher is off (" + ("max_batch_size 0" if r.max_batch_size == 0 else "dynamic_batching: false")
                    + "); tune the repository again or remove the tuned dynamic_batching")
        )
        return
    if r.max_batch_size == 0:
        if "dynamic_batching" in r.own_options and option is not False:
            build.problems.append(
                Problem(r.file, r.option_pointer("dynamic_batching"), "dynamic_batching is set but this model does "
                        "not batch (max_batch_size 0; see the batching decision); remove it or force batching")
            )
        elif option is not False and "dynamic_batching" in r.options:
            build.notes.append("dynamic batching off: max_batch_size is 0 (the defaults' dynamic_batching is ignored)")
        else:
            build.notes.append("dynamic batching off: max_batch_size is 0")
        return
    if option is False:
        build.notes.append("dynamic batching off (manifest dynamic_batching: false)")
        return
    settings: Mapping[str, Any] = {**(option if isinstance(option, Mapping) else {}), **tuned}
    dyn = build.config.dynamic_batching
    dyn.SetInParent()
    default_preferred, default_origin = _default_preferred(r)
    # An empty list is an answer (no preferred sizes), not a fallback to the default.
    preferred = list(settings.get("preferred_batch_size", default_preferred))
    build.problems += [
        Problem(r.file, _where(r, "preferred_batch_size" in tuned, "dynamic_batching", *refusal.where), refusal.message)
        for refusal in preferred_refusals(preferred, r.max_batch_size, ("preferred_batch_size",))]
    dyn.preferred_batch_size.extend(preferred)
    delay = int(settings.get("max_queue_delay_microseconds", DEFAULT_QUEUE_DELAY_US))
    dyn.max_queue_delay_microseconds = delay
    if settings.get("preserve_ordering"):
        dyn.preserve_ordering = True
    if "priority_levels" in settings:
        dyn.priority_levels = int(settings["priority_levels"])
    if "default_priority_level" in settings:
        dyn.default_priority_level = int(settings["default_priority_level"])
    if "default_queue_policy" in settings:
        _queue_policy(dyn.default_queue_policy, settings["default_queue_policy"])
    if settings.get("priority_queue_policy"):
        for level, policy in sorted(settings["priority_queue_policy"].items(), key=lambda kv: int(kv[0])):
            _queue_policy(dyn.priority_queue_policy[int(level)], policy)
    origin = ("tuned" if "preferred_batch_size" in tuned else "manifest" if "preferred_batch_size" in settings
              else default_origin)
    delay_origin = ("tuned" if "max_queue_delay_microseconds" in tuned else "manifest"
                    if "max_queue_delay_microseconds" in settings else "gen-repo default")
    build.notes.append(
        f"dynamic batching on: preferred_batch_size {preferred} ({origin}), max_queue_delay_microseconds {delay} "
        f"({delay_origin})"
    )


#: Why the profiles' opt batches are the preferred sizes (Triton's docs/user_guide/batcher.md, "Preferred Batch Sizes").
_PROFILES_PREFERRED = ("the optimization profiles' opt batches: Triton's batcher guide makes this exception for "
                       "TensorRT models with profiles for different batch sizes")
#: Why CUDA graphs' batch sizes are preferred: a batch of another size runs without a graph.
_GRAPHS_PREFERRED = "the batch sizes the CUDA graphs are captured at (a batch of another size runs without a graph)"
#: Why none by default (the batcher guide: preferred sizes only where a batch size performs notably better). Triton
#: serves an empty list as [max_batch_size] (model_config_utils.cc NormalizeModelConfig).
_NONE_PREFERRED = ("none: Triton's batcher guide sets preferred sizes only where one batch size performs notably "
                   "better (TensorRT profiles, CUDA graphs); Triton then prefers max_batch_size alone "
                   "(NormalizeModelConfig), so a batch grows to what the queue delay gathers instead of leaving at "
                   "the opt batch")


def _default_preferred(r: ConfigRequest) -> tuple[list[int], str]:
    """The preferred batch sizes when neither the manifest nor tuning sets them, and why.

    A TensorRT plan with several optimization profiles prefers each profile's opt batch; CUDA graphs prefer the batch
    sizes they are captured at (the profiles' opt batches, else opt and max batch); every other model none.
    """
    opt_batches = sorted({p.inputs[0].opt_shape[0] for p in r.profiles})
    if r.target == "tensorrt" and len(r.profiles) > 1:
        return opt_batches, _PROFILES_PREFERRED
    if r.target == "tensorrt" and r.options.get("cuda_graphs"):
        return opt_batches or sorted({r.opt_batch, r.max_batch_size}), _GRAPHS_PREFERRED
    return [], _NONE_PREFERRED


def _queue_policy(message: Any, policy: Mapping[str, Any]) -> None:
    message.SetInParent()
    if "timeout_action" in policy:
        message.timeout_action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value(policy["timeout_action"])
    if "default_timeout_microseconds" in policy:
        message.default_timeout_microseconds = int(policy["default_timeout_microseconds"])
    if "allow_timeout_override" in policy:
        message.allow_timeout_override = bool(policy["allow_timeout_override"])
    if "max_queue_size" in policy:
        message.max_queue_size = int(policy["max_queue_size"])


def _instance_groups(r: ConfigRequest, build: ConfigBuild) -> None:
    tuned = _tuned(r, "instance_group") is not None
    groups = _tuned(r, "instance_group") or r.options.get("instance_group")
    if not groups:
        kind = _DEFAULT_KIND[r.target]
        if r.target == "onnx" and r.options.get("onnx_tensorrt_accelerator"):
            kind = "KIND_GPU"  # the TensorRT execution provider needs a GPU instance
        groups = [{"kind": kind}]
    counted = False
    for g, group in enumerate(groups):
        message = build.config.instance_group.add()
        if "name" in group:
            message.name = group["name"]
        kind = group.get("kind", _DEFAULT_KIND[r.target])
        message.kind = _INSTANCE_KINDS[kind]
        counted |= "count" not in group and kind == "KIND_CPU"
        message.count = int(group.get("count", DEFAULT_CPU_INSTANCE_COUNT if kind == "KIND_CPU" else 1))
        message.gpus.extend(group.get("gpus", []))
        if r.target == "tensorrt":
            if kind in REFUSED_KINDS["tensorrt"][0]:
                build.problems.append(
                    Problem(r.file, _where(r, tuned, "instance_group", g, "kind"),
                            f"the tensorrt target runs on a GPU; instance group kind {kind} cannot serve a plan")
                )
            # Triton gives a profile an execution context only where a group lists it, and hands a request to any
            # instance whatever its shape: every group lists every profile.
            message.profile.extend(str(k) for k in range(max(len(r.profiles), 1)))
        elif r.target == "onnx" and r.options.get("onnx_tensorrt_accelerator") and kind == "KIND_CPU":
            build.problems.append(
                Problem(r.file, _where(r, tuned, "instance_group", g, "kind"),
                        "onnx_tensorrt_accelerator needs GPU instances; kind KIND_CPU cannot use it")
            )
    if counted:
        build.notes.append(
            f"KIND_CPU instances: {DEFAULT_CPU_INSTANCE_COUNT} where the manifest gives no count (Triton tunes "
            "instances after dynamic batching: on a multi-core CPU a second instance executes while the first's "
            "requests are read and answered; Triton's auto-complete does the same for onnxruntime CPU groups)"
        )
    if r.target == "tensorrt" and len(r.profiles) > 1:
        build.notes.append(
            f"every instance group lists optimization profiles {', '.join(str(k) for k in range(len(r.profiles)))}: "
            "Triton's TensorRT backend gives a profile an execution context only where the group lists it (with "
            "none listed only profile 0 serves, Triton server issue #8629), and the scheduler hands a request to any "
            "instance whatever its shape, so every group lists every profile (server PR #1987; one group per "
            "profile would fail the requests that reach the other group's instances)"
        )


def _tuned_note(r: ConfigRequest, build: ConfigBuild) -> None:
    """Say which settings came from ``gen-repo tune``, when, on what machine and engine, at what throughput."""
    if not r.tuned:
        return
    settings = []
    if (groups := _tuned(r, "instance_group")) is not None:
        settings.append("instance_group " + ", ".join(
            f"{group.get('kind', _DEFAULT_KIND[r.target])} x{build.config.instance_group[g].count}"
            for g, group in enumerate(groups)))
    for key, value in sorted((_tuned(r, "dynamic_batching") or {}).items()):
        settings.append(f"{key} {value}")
    measured: Mapping[str, Any] = r.tuned["measured"]
    where = r.tuned_pointer() if r.tuned_pointer else r.model_pointer
    at = f" at concurrency {list(measured['concurrency'])}" if "concurrency" in measured else ""
    version = f", gen-repo {measured['gen_repo']}" if "gen_repo" in measured else ""
    said = (f"tuned ({where}): {'; '.join(settings) or 'nothing'}, over the model's own options; ")
    digest = measured.get("settings_digest")
    if digest != tuned_settings_digest(r.tuned):  # edited by hand, or a block that does not say what it measured
        why = ("these settings were edited after they were measured (measured/settings_digest is of other settings)"
               if digest else "the block does not record which settings its figures belong to (measured/"
               "settings_digest: written by an older gen-repo)")
        build.notes.append(f"{said}not measured: {why}; the figures of {measured['at']} are not shown; run gen-repo "
                           "tune again to measure them")
        return
    figures = []
    if "throughput" in measured:
        noise = f" (noise {measured['noise']:.0%})" if "noise" in measured else ""
        figures.append(f"{measured['throughput']:g} inferences/s{noise}")
    if measured.get("p99_ms") is not None:
        figures.append(f"p99 {measured['p99_ms']:g} ms")
    build.notes.append(
        f"{said}measured {measured['at']} on {measured['hardware']} with the {measured['engine']} engine{at}"
        + (f": {', '.join(figures)}" if figures else "") + version
    )


def _version_policy(r: ConfigRequest, config: model_config_pb2.ModelConfig) -> None:
    policy = r.options.get("version_policy")
    if not policy:
        return
    config.ClearField("version_policy")
    if "latest" in policy:
        config.version_policy.latest.num_versions = int(policy["latest"])
    elif "all" in policy:
        config.version_policy.all.SetInParent()
    else:
        config.version_policy.specific.versions.extend(int(v) for v in policy["specific"])


def _item_dims(tensor: TensorPlan, shape: Sequence[int]) -> list[int]:
    """Dims of one request item at ``shape`` (batch axis dropped; ``[1]`` for a per-item scalar)."""
    if tensor.batch_axis is None:
        return list(shape)
    return list(shape[1:]) or [1]


def _warmup(r: ConfigRequest, build: ConfigBuild) -> None:
    enabled = r.options.get("warmup", r.target == "tensorrt")
    if not enabled:
        return
    warmup = build.config.model_warmup.add()
    batch = r.opt_batch if r.max_batch_size > 0 else 1
    warmup.name = "opt_shape"
    # Triton sends `batch_size` requests of one item each, executed together: the opt batch.
    warmup.batch_size = batch
    for tensor in r.inputs:
        entry = warmup.inputs[tensor.name]
        entry.data_type = _DATA_TYPES[tensor.data_type]
        entry.dims.extend(_item_dims(tensor, tensor.opt_shape))
        if r.warmup_data:
            entry.input_data_file = warmup_data_file(r.version, tensor.name)
        elif (dtype := by_triton(tensor.data_type)) is not None and dtype.floating:
            # Integers and booleans get zeros: random bytes could be token ids beyond a table or non-0/1 booleans
            # that fail the load.
            entry.random_data = True
        else:
            entry.zero_data = True
    if r.warmup_data:
        # Real data: zeros or random bytes can be invalid input (token ids beyond a table, a timestep outside its
        # range) that takes a path the model never serves, or fails the load.
        build.notes.append(f"warmup at the opt shape with batch size {batch}: the opt reference case's first item "
                           f"(a sample where one fits), in {WARMUP_FOLDER}/{r.version}/")
    else:
        build.notes.append(f"warmup at the opt shape with batch size {batch}")


def plan_filenames(compute_capabilities: Iterable[str], stem: str = "model") -> dict[str, str]:
    """Name one plan per compute capability for Triton's ``cc_model_filenames``: ``model.sm_<major><minor>.plan``.

    ``{"8.9": "model.sm_89.plan", "9.0": "model.sm_90.plan"}`` (the ``sm_XY`` tag is nvcc's architecture name, so the
    file says which GPUs it runs on): one entry per distinct capability, ordered by capability (deterministic).
    Raises ValueError on a malformed capability.
    """
    keys = sorted(set(compute_capabilities), key=compute_capability_key)
    return {cc: "{}.sm_{}{}.plan".format(stem, *compute_capability_key(cc)) for cc in keys}


#: Triton's TensorRT backend parameter (src/model_state.cc ParseParameters; tensorrt_backend PR #108, r25.05 on).
CONTEXT_ALLOCATION = "execution_context_allocation_strategy"


def _context_allocation(r: ConfigRequest, build: ConfigBuild) -> None:
    strategy = r.options[CONTEXT_ALLOCATION]
    given = (r.options.get("parameters") or {}).get(CONTEXT_ALLOCATION)
    if given is not None and given != strategy:
        build.problems.append(
            Problem(r.file, r.option_pointer("parameters", CONTEXT_ALLOCATION), f"parameters sets {CONTEXT_ALLOCATION} "
                    f"{given!r}, the option {CONTEXT_ALLOCATION} says {strategy!r}; keep one of them")
        )
        return
    build.config.parameters[CONTEXT_ALLOCATION].string_value = strategy
    build.notes.append(f"{CONTEXT_ALLOCATION} {strategy} (a TensorRT backend parameter since Triton 25.05; older "
                       "backends ignore it): " + ("each execution context reallocates its memory when its profile is "
                       "first used" if strategy == "ON_PROFILE_CHANGE" else "memory for the largest profile, "
                       "allocated at load"))


def _tensorrt(r: ConfigRequest, build: ConfigBuild) -> None:
    config = build.config
    if CONTEXT_ALLOCATION in r.options:
        _context_allocation(r, build)
    for cc, filename in plan_filenames(r.options.get("compute_capabilities") or []).items():
        config.cc_model_filenames[cc] = filename
    if r.options.get("cuda_graphs"):
        cuda = config.optimization.cuda
        cuda.graphs = True
        if r.max_batch_size == 0:
            sizes = [0]
        elif config.HasField("dynamic_batching") and config.dynamic_batching.preferred_batch_size:
            sizes = list(config.dynamic_batching.preferred_batch_size)
        else:
            sizes = [r.opt_batch]
        for size in sizes:
            spec = cuda.graph_spec.add()
            spec.batch_size = size
            for tensor in r.inputs:
                spec.input[tensor.name].dim.extend(_item_dims(tensor, tensor.opt_shape))
        build.notes.append(f"CUDA graphs captured at the opt shape for batch sizes {sizes}")


def _shape_list(tensors: Sequence[TensorPlan], which: str) -> str:
    return ",".join(f"{t.name}:{'x'.join(str(d) for d in getattr(t, which))}" for t in tensors)


def _onnx_accelerator(r: ConfigRequest, build: ConfigBuild) -> None:
    accelerator = build.config.optimization.execution_accelerators.gpu_execution_accelerator.add()
    accelerator.name = "tensorrt"
    accelerator.parameters["trt_profile_min_shapes"] = _shape_list(r.inputs, "min_shape")
    accelerator.parameters["trt_profile_opt_shapes"] = _shape_list(r.inputs, "opt_shape")
    accelerator.parameters["trt_profile_max_shapes"] = _shape_list(r.inputs, "max_shape")
    build.notes.append("ONNX Runtime TensorRT accelerator with the spec's min/opt/max profile shapes")


def _merge_fragment(r: ConfigRequest, build: ConfigBuild) -> None:
    text = r.options.get("pbtxt")
    if not text:
        return
    where = r.option_pointer("pbtxt")
    try:
        fragment = parse_config(text)
    except ConfigTextError as error:
        build.problems.append(Problem(r.file, where, f"pbtxt fragment does not parse as a ModelConfig: "
                                                     f"{error.line}:{error.column} : {error.reason}"))
        return
    refused = [Problem(r.file, where, message)
               for message in fragment_refusals(fragment, fragment_kind(r.target, r.max_batch_size), r.target)]
    if refused:
        build.problems.extend(refused)
        return
    build.config.MergeFrom(fragment)
    build.notes.append("raw pbtxt fragment merged last (repeated fields append, map entries replace by key)")


def _confine_paths(r: ConfigRequest, build: ConfigBuild) -> None:
    """Refuse config values naming a path that leaves the model's folder (:mod:`generator.confinement`).

    Located where the manifest gives the value: its ``parameters`` entry, else the pbtxt fragment (the only other
    way a manifest names such a field), else the model entry.
    """
    from generator.confinement import config_path_escapes

    parameters = r.options.get("parameters") or {}
    for escape in config_path_escapes(build.config):
        if escape.parameter is not None and parameters.get(escape.parameter) == escape.value:
            where = r.option_pointer("parameters", escape.parameter)
        elif r.options.get("pbtxt"):
            where = r.option_pointer("pbtxt")
        else:
            where = r.model_pointer
        build.problems.append(Problem(r.file, where, escape.message))


# -- Triton's rules --------------------------------------------------------------------------------------------------
def config_problems(config: model_config_pb2.ModelConfig, folder_name: str | None = None) -> list[str]:
    """Why Triton would refuse ``config`` (or serve something else than meant); empty when it is fine.

    Mirrors the checks of Triton's ``model_config_utils.cc`` and the TensorRT backend that a generated config can
    violate: name = folder, I/O dims and reshape, batching limits, dynamic batching, instance profiles, warmup.
    """
    # Repeated fields are read once each with [:]: iterating a upb container directly ends in a formatted
    # IndexError, a measurable part of a config's cost (bench/bench_config_gen.py).
    out: list[str] = []
    name = config.name
    if folder_name is not None and name != folder_name:
        out.append(f"config name {name!r} differs from the model folder {folder_name!r}")
    out.extend(model_name_problems(name))
    mbs = config.max_batch_size
    if mbs < 0:
        out.append("max_batch_size must be >= 0")
    platform = config.platform
    if not platform and not config.backend:
        out.append("config names neither platform nor backend")
    if not config.HasField("version_policy"):
        out.append("config has no version_policy (it must be complete without auto-complete)")
    inputs, outputs = config.input[:], config.output[:]
    input_names = [io.name for io in inputs]
    for kind, ios, names in (("input", inputs, input_names), ("output", outputs, [io.name for io in outputs])):
        if len(set(names)) != len(names):
            for duplicate in sorted({n for n in names if names.count(n) > 1}):
                out.append(f"{kind} name {duplicate!r} is used more than once")
        for io, io_name in zip(ios, names, strict=True):
            _io_problems(kind, io, io_name, mbs, out)
    if not inputs or not outputs:
        out.append("config needs at least one input and one output")
    if config.HasField("dynamic_batching"):  # Triton's rules, as lint applies them (generator.triton.config_rules)
        refusals = preferred_refusals(config.dynamic_batching.preferred_batch_size[:], mbs, ())
        out += [r.message for r in (*refusals, *batching_refusals(dynamic_batching_of(config)))]
    out += [r.message for r in group_refusals(instance_groups_of(config))]
    if platform == "tensorrt_plan":
        _profile_list_problems(config, out)
    for warmup in config.model_warmup[:]:
        if mbs == 0 and warmup.batch_size != 1:
            out.append(f"warmup {warmup.name!r}: batch_size must be 1 when max_batch_size is 0")
        elif mbs > 0 and not 1 <= warmup.batch_size <= mbs:
            out.append(f"warmup {warmup.name!r}: batch_size {warmup.batch_size} is outside 1..{mbs}")
        entries = warmup.inputs
        for input_name in entries:  # not .items(): that is a Python-level view over the upb map
            if input_name not in input_names:
                out.append(f"warmup {warmup.name!r} names unknown input {input_name!r}")
            dims = entries[input_name].dims[:]
            if dims and min(dims) < 1:
                out.append(f"warmup {warmup.name!r} input {input_name!r}: dims {dims} are not fully specified")
    return out


def _profile_list_problems(config: model_config_pb2.ModelConfig, out: list[str]) -> None:
    """Every instance group lists the same optimization profiles, "0" to "N-1" (see :func:`_instance_groups`)."""
    lists = [group.profile[:] for group in config.instance_group[:]]
    for g, listed in enumerate(lists):
        expected = [str(k) for k in range(max(len(listed), 1))]
        if listed != expected:
            out.append(f"instance_group {g} lists optimization profiles {listed}, not {expected}: Triton serves a "
                       "profile only where a group lists it")
        elif listed != lists[0]:
            out.append(f"instance_group {g} lists optimization profiles {listed}, instance_group 0 {lists[0]}: "
                       "Triton hands a request to any instance whatever its shape, so every group lists every profile")


def _io_problems(kind: str, io: Any, name: str, mbs: int, out: list[str]) -> None:
    """Append why Triton would refuse one input or output (this runs for every tensor of every config: kept lean)."""
    dims = io.dims[:]
    if not name:
        out.append(f"{kind} without a name")
    if io.data_type == model_config_pb2.TYPE_INVALID:
        out.append(f"{kind} {name!r} has no data_type")
    if not dims:
        out.append(f"{kind} {name!r} has empty dims (a scalar needs dims [1] with an empty reshape)")
    elif min(dims) < -1 or max(dims) > _INT32_MAX or 0 in dims:
        out.append(f"{kind} {name!r} dims {dims} must be -1 or 1..{_INT32_MAX}")
    if mbs == 0 and io.HasField("reshape") and not io.reshape.shape:
        out.append(f"{kind} {name!r} has an empty reshape, which Triton refuses for a non-batching model "
                   "(max_batch_size 0)")
