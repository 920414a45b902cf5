"""ONNX -> TensorRT engine with its optimization profiles: a thin layer over the TensorRT Python builder API.

Takes the TensorRT module as ``trt`` (standard TensorRT or TensorRT-RTX); an option a module lacks is reported in
:attr:`BuildResult.skipped_flags`. No ``trt.Runtime`` is created here (see :mod:`generator.gpu`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from generator.atomic_write import write_atomically
from generator.errors import EXIT_FAILED, GenRepoError, Problem, json_pointer
from generator.gpu import GpuInfo, current_gpu, detect_gpus

if TYPE_CHECKING:
    from generator.planning.options import BuildOptions

__all__ = [
    "EngineOptions",
    "BuildResult",
    "ProfileShapes",
    "TensorRTBuildError",
    "build_engine",
    "make_logger",
    "profile_problems",
    "profile_shapes",
]

#: Precisions a build may allow. fp32 needs no flag; the others map to ``trt.BuilderFlag`` members.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
_PRECISION_FLAGS = {"tf32": "TF32", "fp16": "FP16", "bf16": "BF16"}
#: ``EngineOptions.hardware_compatibility`` values; all but "none" name a ``trt.HardwareCompatibilityLevel`` member.
HARDWARE_COMPATIBILITY_LEVELS = ("none", "ampere_plus", "same_compute_capability")
_SEVERITY_ORDER = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")


class TensorRTBuildError(GenRepoError):
    """TensorRT could not parse the model or build the engine (a failed stage, not bad input: exit code 1)."""

    exit_code = EXIT_FAILED


# -- Options and profiles (plain data) -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How to build one engine.

    ``precision``: the precisions TensorRT may use (default ``("fp32", "tf32")``, its own; without ``tf32`` the TF32
    flag is cleared). ``workspace_bytes`` caps the WORKSPACE pool; ``timing_cache_path`` is read and written;
    ``exclude_lean_runtime`` (with ``version_compatible``) leaves the lean runtime to the loading side.
    """

    precision: tuple[str, ...] = ("fp32", "tf32")
    workspace_bytes: int | None = None
    builder_optimization_level: int | None = None
    timing_cache_path: Path | None = None
    hardware_compatibility: str = "none"
    version_compatible: bool = False
    exclude_lean_runtime: bool = False

    def problems(self) -> list[str]:
        """Return what is wrong with these options, as messages (empty when valid)."""
        out = []
        unknown = [p for p in self.precision if p not in PRECISIONS]
        if unknown:
            out.append(f"precision: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(PRECISIONS)}")
        if self.workspace_bytes is not None and (isinstance(self.workspace_bytes, bool) or self.workspace_bytes <= 0):
            out.append(f"workspace_bytes must be a positive integer, got {self.workspace_bytes!r}")
        level = self.builder_optimization_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5):
            out.append(f"builder_optimization_level must be an integer from 0 to 5, got {level!r}")
        if self.hardware_compatibility not in HARDWARE_COMPATIBILITY_LEVELS:
            out.append(
                f"hardware_compatibility: unknown {self.hardware_compatibility!r}; "
                f"choose from {', '.join(HARDWARE_COMPATIBILITY_LEVELS)}"
            )
        if self.exclude_lean_runtime and not self.version_compatible:
            out.append("exclude_lean_runtime needs version_compatible")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for build-cache keys and reports); the timing cache path is a location, not an option."""
        data = asdict(self)
        data["precision"] = list(self.precision)
        data.pop("timing_cache_path")
        return data


@dataclass(frozen=True, slots=True)
class ProfileShapes:
    """Min/opt/max shape of one network input in the optimization profile."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    @staticmethod
    def from_data(item: Any) -> ProfileShapes:
        """Read one input's shapes from plain data.

        Takes a ProfileShapes, a mapping (``name`` and ``min``/``opt``/``max`` or ``min_shape``/...), or an object
        with ``.name``, ``.min_shape``, ``.opt_shape``, ``.max_shape`` (a TensorPlan of :mod:`generator.planning.plan`).
        """
        if isinstance(item, ProfileShapes):
            return item

        def get(key: str) -> Any:
            if isinstance(item, Mapping):
                return item[key] if key in item else item[f"{key}_shape"]
            return getattr(item, f"{key}_shape") if hasattr(item, f"{key}_shape") else getattr(item, key)

        return ProfileShapes(
            str(get("name") if isinstance(item, Mapping) else item.name),
            tuple(int(d) for d in get("min")),
            tuple(int(d) for d in get("opt")),
            tuple(int(d) for d in get("max")),
        )


def profile_shapes(items: Iterable[Any]) -> list[ProfileShapes]:
    """:meth:`ProfileShapes.from_data` for each item."""
    return [ProfileShapes.from_data(item) for item in items]


def profile_problems(
    profiles: Sequence[ProfileShapes], network_inputs: Mapping[str, Sequence[int]]
) -> list[tuple[str, str]]:
    """Check a profile against the network's input shapes (-1 is a dynamic axis); ``(input name, message)`` pairs.

    Finds an input the profile misses, a profile entry for no input, a duplicate, a wrong rank, a negative size and
    ``not min <= opt <= max``. A static axis the profile contradicts is left to TensorRT, whose error names it.
    """
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for profile in profiles:
        if profile.name in seen:
            out.append((profile.name, "appears twice in the optimization profile"))
            continue
        seen.add(profile.name)
        if profile.name not in network_inputs:
            out.append((profile.name, f"is not an input of the network (inputs: {', '.join(network_inputs)})"))
            continue
        rank = len(network_inputs[profile.name])
        shapes = {"min": profile.min, "opt": profile.opt, "max": profile.max}
        wrong_rank = [f"{k} {list(v)}" for k, v in shapes.items() if len(v) != rank]
        if wrong_rank:
            out.append((profile.name, f"has rank {rank} in the network but the profile gives {', '.join(wrong_rank)}"))
            continue
        if any(d < 0 for shape in shapes.values() for d in shape):
            out.append((profile.name, f"profile sizes must not be negative: {_describe(profile)}"))
            continue
        bad_axes = [i for i in range(rank) if not profile.min[i] <= profile.opt[i] <= profile.max[i]]
        if bad_axes:
            axes = ", ".join(map(str, bad_axes))
            out.append((profile.name, f"profile must satisfy min <= opt <= max (axis {axes}): {_describe(profile)}"))
    for name in network_inputs:
        if name not in seen:
            out.append((name, "network input is not covered by the optimization profile"))
    return out


def _describe(profile: ProfileShapes) -> str:
    return f"min={list(profile.min)} opt={list(profile.opt)} max={list(profile.max)}"


# -- Naming ----------------------------------------------------------------------------------------------------------
def module_flavor(trt: Any) -> str:
    """``"tensorrt"`` or ``"tensorrt_rtx"``: the top-level name of the module passed in."""
    return str(getattr(trt, "__name__", "tensorrt")).split(".")[0]


# -- Logger ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LogMessage:
    """One message TensorRT logged."""

    severity: str
    message: str

    def __str__(self) -> str:
        return f"[{self.severity}] {self.message}"


def make_logger(trt: Any, min_severity: str = "INFO", sink: Callable[[LogMessage], None] | None = None) -> Any:
    """Make a ``trt.ILogger`` subclass instance that keeps messages at ``min_severity`` or worse in ``.messages``.

    Each kept message also goes to ``sink`` (e.g. a progress display). Reuse one per process where possible:
    standard TensorRT warns when builders get different loggers.
    """
    limit = _SEVERITY_ORDER.index(min_severity)

    class CapturingLogger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[LogMessage] = []

        def log(self, severity: Any, msg: str) -> None:
            name = getattr(severity, "name", str(severity).rsplit(".", 1)[-1])
            rank = _SEVERITY_ORDER.index(name) if name in _SEVERITY_ORDER else 0
            if rank <= limit:
                message = LogMessage(name, str(msg))
                self.messages.append(message)
                if sink is not None:
                    sink(message)

    return CapturingLogger()


# -- Build -----------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class BuildResult:
    """A built engine and what went into it.

    ``applied_flags``: the builder settings made (``"TF32"``, ``"builder_optimization_level=5"``...); ``skipped_flags``:
    each requested setting the module lacks or ignored, with the reason; ``notes``: TensorRT's Python warnings; ``log``:
    its warnings and errors during the build.
    """

    plan_bytes: bytes = field(repr=False)
    trt_version: str
    flavor: str
    compute_capability: str | None
    applied_flags: list[str]
    skipped_flags: dict[str, str]
    timing_cache_written: bool
    timing_cache_loaded: bool
    notes: list[str]
    log: list[str]
    build_seconds: float
    #: Each optimization profile as the builder config holds it (read back with ``IOptimizationProfile.get_shape``
    #: after it was added), in TensorRT's profile order: per network input ``{name, min, opt, max}``.
    profiles: list[list[dict[str, Any]]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """JSON-ready description without the plan bytes."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "plan_bytes"}
        data["plan_size"] = len(self.plan_bytes)
        return data


class _Recorder:
    """Collects what was applied and skipped, and TensorRT's log lines since a mark."""

    def __init__(self, trt: Any, logger: Any) -> None:
        self.trt = trt
        self.logger = logger
        self.applied: list[str] = []
        self.skipped: dict[str, str] = {}

    @property
    def messages(self) -> list[LogMessage]:
        return list(getattr(self.logger, "messages", []))

    def mark(self) -> int:
        return len(self.messages)

    def since(self, mark: int, worst: str = "WARNING") -> list[str]:
        limit = _SEVERITY_ORDER.index(worst)
        return [str(m) for m in self.messages[mark:] if _SEVERITY_ORDER.index(m.severity) <= limit]

    def lacks(self, name: str, what: str) -> None:
        self.skipped[name] = f"{module_flavor(self.trt)} {self.trt.__version__} has no {what}"

    def ignored(self, name: str, mark: int) -> None:
        said = "; ".join(self.since(mark)) or "no message"
        self.skipped[name] = f"{module_flavor(self.trt)} {self.trt.__version__} did not take it ({said})"


def _set_flag(config: Any, rec: _Recorder, name: str, on: bool) -> None:
    flag = getattr(rec.trt.BuilderFlag, name, None)
    if flag is None:
        if on:
            rec.lacks(name, f"trt.BuilderFlag.{name}")
        return
    mark = rec.mark()
    if on:
        config.set_flag(flag)
    else:
        config.clear_flag(flag)
    if bool(config.get_flag(flag)) != on:
        rec.ignored(name, mark)
    else:
        rec.applied.append(name if on else f"{name} cleared")


def _apply_options(config: Any, options: EngineOptions, rec: _Recorder) -> None:
    trt = rec.trt
    for precision, flag_name in _PRECISION_FLAGS.items():
        if precision in options.precision:
            _set_flag(config, rec, flag_name, True)
        elif flag_name == "TF32":
            # TF32 is on by default in TensorRT; leaving it out of ``precision`` means exact fp32 math.
            _set_flag(config, rec, flag_name, False)
    if options.workspace_bytes is not None:
        if hasattr(trt, "MemoryPoolType") and hasattr(config, "set_memory_pool_limit"):
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_bytes)
            rec.applied.append(f"WORKSPACE={options.workspace_bytes}")
        else:
            rec.lacks("WORKSPACE", "IBuilderConfig.set_memory_pool_limit")
    if options.builder_optimization_level is not None:
        name = "builder_optimization_level"
        if hasattr(config, name):
            mark = rec.mark()
            config.builder_optimization_level = options.builder_optimization_level
            if config.builder_optimization_level == options.builder_optimization_level:
                rec.applied.append(f"{name}={options.builder_optimization_level}")
            else:
                rec.ignored(name, mark)
        else:
            rec.lacks(name, f"IBuilderConfig.{name}")
    if options.hardware_compatibility != "none":
        name = "hardware_compatibility_level"
        member = options.hardware_compatibility.upper()
        level = getattr(getattr(trt, "HardwareCompatibilityLevel", None), member, None)
        if level is None or not hasattr(config, name):
            rec.lacks(name, f"trt.HardwareCompatibilityLevel.{member}")
        else:
            mark = rec.mark()
            config.hardware_compatibility_level = level
            # TensorRT-RTX has the setter but logs "unsupported" and keeps NONE: read it back.
            if config.hardware_compatibility_level == level:
                rec.applied.append(f"{name}={member}")
            else:
                rec.ignored(name, mark)
    if options.version_compatible:
        _set_flag(config, rec, "VERSION_COMPATIBLE", True)
    if options.exclude_lean_runtime:
        _set_flag(config, rec, "EXCLUDE_LEAN_RUNTIME", True)


def _network_flags(trt: Any) -> int:
    # TensorRT < 10 needs EXPLICIT_BATCH for ONNX; 10 deprecates it (implicit) and TensorRT-RTX does not have it.
    flag = getattr(getattr(trt, "NetworkDefinitionCreationFlag", None), "EXPLICIT_BATCH", None)
    major = str(trt.__version__).split(".")[0]
    if flag is not None and module_flavor(trt) == "tensorrt" and major.isdigit() and int(major) < 10:
        return 1 << int(flag)
    return 0


def _network_inputs(network: Any, file: str) -> dict[str, tuple[int, ...]]:
    inputs = {}
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        if getattr(tensor, "is_shape_tensor", False):
            raise GenRepoError([Problem(file, "", f"input {tensor.name!r} is a shape tensor (not supported)")])
        inputs[str(tensor.name)] = tuple(int(d) for d in tensor.shape)
    return inputs


def _parser_error_text(error: Any) -> str:
    text = str(error)
    node_name = getattr(error, "node_name", None)
    if callable(node_name) and node_name() and node_name() not in text:
        text = f"node {node_name()!r}: {text}"
    return text


def _load_timing_cache(config: Any, path: Path, rec: _Recorder, notes: list[str]) -> tuple[Any, bool]:
    """Create the config's timing cache from ``path`` (empty when absent); ``(cache, loaded from the file)``."""
    data = path.read_bytes() if path.is_file() else b""
    mark = rec.mark()
    cache = config.create_timing_cache(data)
    accepted = cache is not None and bool(config.set_timing_cache(cache, False))
    # TensorRT refuses a cache from another version or GPU (set_timing_cache is False); TensorRT-RTX instead logs
    # "Failed to deserialize timing cache" and carries on with an empty one. Either way the file was not used.
    complaints = [line for line in rec.since(mark) if "timing cache" in line.lower()]
    if accepted and not (data and complaints):
        return cache, bool(data)
    said = "; ".join(complaints or rec.since(mark)) or "no message"
    notes.append(f"timing cache {path.name} was not accepted, starting a new one ({said})")
    cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, True)
    return cache, False


def build_engine(
    trt: Any,
    onnx_path: Path | str,
    profiles: Sequence[Sequence[Any]],
    options: EngineOptions | None = None,
    logger: Any = None,
    gpu: GpuInfo | Literal["detect"] | None = "detect",
) -> BuildResult:
    """Parse ``onnx_path`` with ``trt``'s OnnxParser and build a serialized engine with these optimization profiles.

    ``profiles``: one per optimization profile, in order, each min/opt/max for every network input
    (:class:`ProfileShapes` or what :meth:`ProfileShapes.from_data` takes). ``logger``: a :func:`make_logger` logger to
    reuse. ``gpu``: the GPU built for ("detect": CUDA's device 0; None: no GPU). Raises :class:`GenRepoError` for bad
    options or profiles (all at once, before building) and :class:`TensorRTBuildError` when TensorRT cannot parse or
    build, with its parser errors and log lines.
    """
    options = options or EngineOptions()
    path = Path(onnx_path)
    file = str(onnx_path)
    option_problems = options.problems()
    if option_problems:
        raise GenRepoError(Problem(file, "/build_options", message) for message in option_problems)
    if not path.is_file():
        raise GenRepoError([Problem(file, "", "ONNX file not found")])
    flavor = module_flavor(trt)
    if isinstance(gpu, str):
        gpu = current_gpu(detect_gpus())
    if flavor == "tensorrt" and gpu is None:
        # Standard TensorRT's builder needs CUDA; failing here is clearer than its CUDA initialisation errors.
        raise TensorRTBuildError([Problem(file, "", "standard TensorRT needs an NVIDIA GPU to build; none was found")])
    wanted = [profile_shapes(profile) for profile in profiles]
    logger = logger if logger is not None else make_logger(trt)
    rec = _Recorder(trt, logger)
    start_mark = rec.mark()
    notes: list[str] = []
    builder = network = parser = config = cache = None
    made: list[Any] = []  # the profile objects, kept until the build is done
    started = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            builder = trt.Builder(logger)
            if builder is None:
                raise TensorRTBuildError([Problem(file, "", _failure("could not create a builder", rec, start_mark))])
            network = builder.create_network(_network_flags(trt))
            parser = trt.OnnxParser(network, logger)
            if not parser.parse_from_file(str(path)):
                errors = [_parser_error_text(parser.get_error(i)) for i in range(parser.num_errors)]
                raise TensorRTBuildError([Problem(file, "", f"ONNX parser: {message}") for message in errors])
            if network.num_outputs == 0:
                # Bytes that happen to decode as an empty protobuf "parse" into an empty network.
                raise TensorRTBuildError(
                    [Problem(file, "", "ONNX parser: the model has no outputs (not an ONNX model?)")]
                )

            inputs = _network_inputs(network, file)
            problems = [Problem(file, json_pointer(["optimization_profiles", k, name]), f"optimization profile {k}: "
                                f"input {name!r}: {message}")
                        for k, shapes in enumerate(wanted) for name, message in profile_problems(shapes, inputs)]
            if not wanted:
                problems.append(Problem(file, "/optimization_profiles", "no optimization profile given"))
            if problems:
                raise GenRepoError(problems)

            config = builder.create_builder_config()
            _apply_options(config, options, rec)
            read_back = [_add_profile(builder, config, k, shapes, inputs, rec, file, made)
                         for k, shapes in enumerate(wanted)]
            if config.num_optimization_profiles != len(wanted):
                raise TensorRTBuildError([Problem(file, "/optimization_profiles", f"the builder config holds "
                                                  f"{config.num_optimization_profiles} optimization profiles, "
                                                  f"{len(wanted)} were added")])

            loaded = False
            cache_path = options.timing_cache_path
            if cache_path is not None:
                if hasattr(config, "create_timing_cache"):
                    cache, loaded = _load_timing_cache(config, Path(cache_path), rec, notes)
                else:
                    rec.lacks("timing_cache", "IBuilderConfig.create_timing_cache")

            mark = rec.mark()
            serialized = builder.build_serialized_network(network, config)
            if serialized is None:
                raise TensorRTBuildError([Problem(file, "", _failure("build_serialized_network failed", rec, mark))])
            plan = bytes(memoryview(serialized))
            del serialized

            written = False
            if cache is not None and cache_path is not None:
                # Other builds may read or save it at the same time; the cache folder may be shared by the users
                # of one machine, so it is readable by them (0o644), whatever the umask.
                path = Path(cache_path)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(path, bytes(memoryview(config.get_timing_cache().serialize())), mode=0o644,
                                 durable=True)
                written = True
        for warning in caught:
            text = f"{warning.category.__name__}: {warning.message}"
            if text not in notes:
                notes.append(text)
    finally:
        # Release explicitly in dependency order (parser and profile before the network, everything before the
        # builder) rather than leaving it to garbage collection: TensorRT-RTX has segfaulted at interpreter exit
        # when parser/network objects outlived each other in the wrong order (two parsers on one network).
        parser = cache = None
        made.clear()
        network = config = None
        builder = None
    return BuildResult(
        plan_bytes=plan,
        trt_version=str(trt.__version__),
        flavor=flavor,
        compute_capability=None if gpu is None else gpu.compute_capability,
        applied_flags=rec.applied,
        skipped_flags=rec.skipped,
        timing_cache_written=written,
        timing_cache_loaded=loaded,
        notes=notes,
        log=rec.since(start_mark),
        build_seconds=round(time.perf_counter() - started, 3),
        profiles=read_back,
    )


def _add_profile(
    builder: Any, config: Any, index: int, shapes: Sequence[ProfileShapes], inputs: Mapping[str, Sequence[int]],
    rec: _Recorder, file: str, made: list[Any],
) -> list[dict[str, Any]]:
    """Add optimization profile ``index`` to ``config``; what the config holds, read back (it must be what was set)."""
    profile = builder.create_optimization_profile()
    made.append(profile)
    by_name = {p.name: p for p in shapes}
    for name in inputs:  # network order, so the profile is the same whatever order the caller used
        profile.set_shape(name, by_name[name].min, by_name[name].opt, by_name[name].max)
    mark = rec.mark()
    added = config.add_optimization_profile(profile)
    if added != index:
        refused = "refused" if added < 0 else f"gave index {added} to"
        raise TensorRTBuildError([Problem(file, f"/optimization_profiles/{index}",
                                          _failure(f"TensorRT {refused} optimization profile {index}", rec, mark))])
    held = []
    for name in inputs:
        low, opt, high = (tuple(int(d) for d in dims) for dims in profile.get_shape(name))
        want = by_name[name]
        if (low, opt, high) != (want.min, want.opt, want.max):
            raise TensorRTBuildError([Problem(file, json_pointer(["optimization_profiles", index, name]),
                                              f"optimization profile {index} holds {name!r} at min={list(low)} "
                                              f"opt={list(opt)} max={list(high)}, not {_describe(want)} as set")])
        held.append({"name": name, "min": list(low), "opt": list(opt), "max": list(high)})
    return held


def _failure(what: str, rec: _Recorder, mark: int) -> str:
    lines = rec.since(mark) or ["(TensorRT logged no warning or error)"]
    return f"{what}: " + "\n  ".join(lines)


def tensorrt_build_options(options: BuildOptions, timing_cache: Path | None) -> EngineOptions:
    """The :class:`EngineOptions` of this layer from gen-repo's (``--workspace-mib``, ``--precision``, ...)."""
    values = dict(options.tensorrt)
    if "precision" in values:
        values["precision"] = tuple(values["precision"])
    return EngineOptions(**values, timing_cache_path=timing_cache)


def engine_bytes(module_name: str, onnx_path: str, profiles: Any, trt_options: Any) -> tuple[bytes, dict[str, Any]]:
    """Build one engine in this process and return its bytes and summary (also run by Ray workers)."""
    from generator.gpu import import_tensorrt

    trt = import_tensorrt(module_name)
    result = build_engine(trt, onnx_path, profiles, trt_options)
    return result.plan_bytes, result.summary()
