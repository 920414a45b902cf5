"""``gen-repo lint``: check any Triton model repository against Triton's own rules, as findings with file:line.

The rules follow what Triton checks when it loads a model (core ``model_config_utils.cc`` ValidateModelConfig,
ValidateIOShape, ValidateInstanceGroup; ``model_lifecycle.cc`` version folders; ``backend_model_instance.cc`` warmup)
plus what the backends expect on disk (the model file per platform/backend) and, for ONNX models, that the graph's
inputs and outputs agree with the config. Every rule has an id (see :data:`RULES`); findings are errors (Triton would
refuse the model, or a request could never succeed) or warnings (Triton loads it, but probably not as meant).

Files gen-repo adds (``gen-repo.lock.json`` at the root, ``gen_repo/`` inside version folders) are not flagged:
Triton ignores files at the repository root and every backend ignores extra files in a version folder.
onnx is imported lazily, only when a repository holds an ONNX model.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format

from generator.bounded import UnreadableFileError, read_bytes, read_text
from generator.config import WARMUP_FOLDER
from generator.confinement import config_path_escapes, relative_path_problem
from generator.dtypes import DTYPES, by_triton
from generator.ensemble import Location, Step, StepModel, TensorIO, Wiring, wiring_problems

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2 as mc
else:  # the same module, without tritonclient.grpc's grpc and numpy imports (see generator.triton_proto)
    from generator.triton_proto import model_config_pb2 as mc

__all__ = ["RULES", "Finding", "PbtxtLocator", "format_finding", "lint_repository"]

ERROR = "error"
WARNING = "warning"
INT32_MAX = 2**31 - 1

#: Every rule: id -> (severity, what it checks). The README and ``gen-repo lint --help`` list these.
RULES: dict[str, tuple[str, str]] = {
    "repository-missing": (ERROR, "the repository path is not a directory"),
    "repository-empty": (WARNING, "the repository holds no model folders"),
    "config-missing": (WARNING, "model folder without config.pbtxt (loads only with auto-complete)"),
    "config-parse": (ERROR, "config.pbtxt does not parse as ModelConfig (protobuf text format)"),
    "config-unreadable": (ERROR, "config.pbtxt is not a regular file, or larger than the config_bytes limit"),
    "config-name-mismatch": (ERROR, "config 'name' differs from the model folder name"),
    "platform-missing": (WARNING, "neither 'platform' nor 'backend' set (loads only with auto-complete)"),
    "platform-unknown": (ERROR, "'platform' is not one Triton knows and no custom backend is named"),
    "platform-backend-mismatch": (ERROR, "'platform' and 'backend' name different backends"),
    "version-missing": (ERROR, "no numeric version folder, so Triton serves no version"),
    "version-leading-zero": (ERROR, "version folder with leading zeros (Triton ignores it)"),
    "version-non-numeric": (WARNING, "non-numeric folder in a model folder (Triton ignores it)"),
    "version-policy": (ERROR, "version_policy names a version whose folder does not exist"),
    "model-file-missing": (ERROR, "a version folder lacks the model file its platform/backend loads"),
    "cc-model-file-missing": (ERROR, "a file named in cc_model_filenames is missing"),
    "default-model-file-fallback": (WARNING, "only cc_model_filenames exist; GPUs not listed have no plan"),
    "max-batch-size": (ERROR, "max_batch_size is negative"),
    "tensor-name": (ERROR, "an input or output without a name"),
    "tensor-duplicate-name": (ERROR, "two inputs (or two outputs) share a name"),
    "tensor-data-type": (ERROR, "an input or output without data_type"),
    "dims-empty": (ERROR, "an input or output without dims (empty shapes are not allowed)"),
    "dims-invalid": (ERROR, "a dim (or reshape dim) that is neither -1 nor >= 1"),
    "dims-int32": (ERROR, "a dim above the int32 range"),
    "reshape-size": (ERROR, "reshape has a different element count than dims"),
    "reshape-scalar-nobatch": (ERROR, "empty (scalar) reshape on a model with max_batch_size 0"),
    "tensor-format": (ERROR, "FORMAT_NCHW/FORMAT_NHWC input without exactly 3 dims"),
    "shape-tensor-platform": (ERROR, "is_shape_tensor on a model that is not TensorRT"),
    "optional-input-batching": (
        WARNING,
        "optional input on a batching scheduler (requests with and without it are never batched together)",
    ),
    "dynamic-batching-no-batch": (ERROR, "dynamic_batching on a model with max_batch_size 0"),
    "preferred-batch-size": (ERROR, "preferred_batch_size outside 1..max_batch_size"),
    "priority-level": (ERROR, "default_priority_level or a queue policy level outside 1..priority_levels"),
    "preserve-ordering": (ERROR, "preserve_ordering with priority_levels > 1 or a DELAY timeout action"),
    "response-cache": (ERROR, "response cache with decoupled transactions or sequence batching"),
    "instance-group-count": (ERROR, "instance group count below 0"),
    "instance-group-gpus": (ERROR, "gpus on a KIND_CPU/KIND_MODEL group, or a negative gpu id"),
    "instance-group-profile": (ERROR, "profile on a non-TensorRT model, or not a non-negative integer"),
    "warmup-input-unknown": (ERROR, "a warmup input that is not a model input"),
    "warmup-dims": (ERROR, "warmup dims not fully specified or not matching the input's static dims"),
    "warmup-data-type": (ERROR, "warmup input data_type differs from the input's"),
    "warmup-input-data": (ERROR, "warmup input without zero_data, random_data or input_data_file"),
    "warmup-batch-size": (ERROR, "warmup batch_size above max_batch_size (or above 1 without batching)"),
    "warmup-data-file": (ERROR, "a warmup input_data_file missing or shorter than its dims"),
    "warmup-data-file-long": (WARNING, "a warmup input_data_file longer than its dims (Triton reads only the start)"),
    "batch-io": (ERROR, "batch_input/batch_output naming unknown tensors or the wrong number of sources"),
    "ensemble-config": (ERROR, "ensemble structure: platform/scheduling pairing, steps, no instance groups"),
    "ensemble-model-missing": (WARNING, "an ensemble step names a model that is not in this repository"),
    "ensemble-map-name": (ERROR, "an ensemble map names an input or output its step model does not have"),
    "ensemble-input-unmapped": (ERROR, "a required input of an ensemble step is not mapped"),
    "ensemble-tensor-producers": (ERROR, "an ensemble tensor produced twice (two output maps, or an ensemble input)"),
    "ensemble-data-type": (ERROR, "an ensemble tensor whose uses disagree on data_type"),
    "ensemble-dims": (ERROR, "an ensemble tensor whose uses have incompatible dims (-1 matches any size)"),
    "ensemble-batch-size": (ERROR, "ensemble max_batch_size above a batching step model's"),
    "ensemble-flow": (ERROR, "an unused ensemble input or tensor, an output never written, or a step that never runs"),
    "ensemble-shape-range": (ERROR, "a step output's shape range (gen-repo contract) outside its consumer's"),
    "path-escape": (ERROR, "a file, folder or library named by the config leaves the model's folder (confinement.py)"),
    "onnx-skipped": (WARNING, "the onnx package is not installed, so ONNX graphs were not checked"),
    "onnx-load": (ERROR, "model.onnx cannot be read as an ONNX model"),
    "onnx-io-name": (ERROR, "config and ONNX graph disagree on input/output names"),
    "onnx-data-type": (ERROR, "config data_type differs from the ONNX element type"),
    "onnx-rank": (ERROR, "config rank (with the batch axis when max_batch_size > 0) differs from the ONNX rank"),
    "onnx-dim": (ERROR, "a static config dim differs from the ONNX graph's static dim (or a fixed batch axis)"),
    "onnx-dim-dynamic": (WARNING, "config says -1 where the ONNX graph fixes the size"),
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding: ``file`` relative to the repository (posix), 1-based ``line``/``column`` or None for a folder."""

    severity: str
    file: str
    line: int | None
    column: int | None
    rule: str
    message: str

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Deterministic order: file, position, rule, message."""
        return (self.file, self.line or 0, self.column or 0, self.rule, self.message)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``gen-repo lint --json``)."""
        return {
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "message": self.message,
        }

    def __str__(self) -> str:
        return format_finding(self)


def format_finding(finding: Finding) -> str:
    """``file:line:column: severity: message [rule]`` (position parts left out when unknown)."""
    where = finding.file
    if finding.line is not None:
        where += f":{finding.line}"
        if finding.column is not None:
            where += f":{finding.column}"
    return f"{where}: {finding.severity}: {finding.message} [{finding.rule}]"


# ---------------------------------------------------------------------------- field positions in pbtxt

FieldPath = tuple[str | int, ...]

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+) |
    (?P<nl>\n) |
    (?P<comment>\#[^\n]*) |
    (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<word>[A-Za-z0-9_.+\-]+) |
    (?P<punct>[{}\[\]<>:,;/])
    """,
    re.VERBOSE,
)


class PbtxtLocator:
    """Index of field positions (1-based line and column) in one pbtxt document."""

    def __init__(self, text: str) -> None:
        self._tokens: list[tuple[str, int, int]] = []
        line, line_start = 1, 0
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup
            if kind == "nl":
                line, line_start = line + 1, match.end()
            elif kind in ("string", "word", "punct"):
                self._tokens.append((match.group(), line, match.start() - line_start + 1))
        self.positions: dict[FieldPath, tuple[int, int]] = {}
        self.values: dict[FieldPath, str] = {}
        self._i = 0
        with contextlib.suppress(IndexError):  # truncated text: keep what was indexed so far
            self._fields(())

    # ------------------------------------------------------------------ lookup
    def find(self, path: FieldPath) -> tuple[int, int] | None:
        """Position of ``path`` or of its nearest recorded ancestor; None when nothing on the path is recorded."""
        parts = tuple(path)
        while parts:
            if parts in self.positions:
                return self.positions[parts]
            parts = parts[:-1]
        return None

    # ------------------------------------------------------------------ parser
    def _peek(self) -> str:
        return self._tokens[self._i][0] if self._i < len(self._tokens) else ""

    def _record(self, path: FieldPath, token_index: int) -> None:
        if path not in self.positions:
            _, line, column = self._tokens[token_index]
            self.positions[path] = (line, column)

    def _scalar(self, path: FieldPath) -> None:
        self._record(path, self._i)
        self.values.setdefault(path, self._tokens[self._i][0].strip("\"'"))

    def map_entry(self, prefix: FieldPath, key: str) -> FieldPath:
        """Path of the entry whose ``key`` is ``key`` in map field ``prefix`` (``prefix`` itself when not found)."""
        k = 0
        while (*prefix, k) in self.positions:
            if self.values.get((*prefix, k, "key", "#", 0)) == key:
                return (*prefix, k)
            k += 1
        return prefix

    def _fields(self, prefix: FieldPath) -> None:
        message_counts: dict[str, int] = defaultdict(int)
        scalar_counts: dict[str, int] = defaultdict(int)
        while self._i < len(self._tokens) and self._peek() not in ("}", ">"):
            name_index = self._i
            name = self._peek()
            if name == "[":  # extension or Any type URL: [pkg.Type] -- skip to the closing bracket
                while self._peek() != "]":
                    self._i += 1
                name = self._tokens[name_index + 1][0]
            self._i += 1
            if self._peek() == ":":
                self._i += 1
            self._record((*prefix, name), name_index)
            token = self._peek()
            if token in ("{", "<"):
                self._message(prefix, name, message_counts, self._i)
            elif token == "[":
                self._i += 1
                while self._peek() != "]":
                    if self._peek() in ("{", "<"):
                        self._message(prefix, name, message_counts, self._i)
                    else:
                        self._scalar((*prefix, name, "#", scalar_counts[name]))
                        scalar_counts[name] += 1
                        self._i += 1
                    if self._peek() == ",":
                        self._i += 1
                self._i += 1
            else:
                self._scalar((*prefix, name, "#", scalar_counts[name]))
                scalar_counts[name] += 1
                self._i += 1
                while self._peek()[:1] in ('"', "'") and self._i < len(self._tokens):  # adjacent strings concatenate
                    self._i += 1
            if self._peek() in (",", ";"):
                self._i += 1

    def _message(self, prefix: FieldPath, name: str, counts: dict[str, int], open_index: int) -> None:
        index = counts[name]
        counts[name] += 1
        path = (*prefix, name, index)
        self._record(path, open_index)
        self._i += 1
        self._fields(path)
        self._i += 1  # the closing brace


# ---------------------------------------------------------------------------- model files per platform / backend
#: Platform -> backend, as Triton's GetBackendTypeFromPlatform pairs them (None: ensemble, no backend).
PLATFORM_BACKEND: dict[str, str | None] = {
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "libtorch": "pytorch",
    "torch_aoti": "pytorch",
    "ensemble": None,
}
PLATFORM_MODEL_FILE = {
    "tensorrt_plan": "model.plan",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
    "libtorch": "model.pt",
    "torch_aoti": "model.pt2",
}
BACKEND_MODEL_FILE = {
    "tensorrt": "model.plan",
    "tensorflow": "model.savedmodel",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "python": "model.py",
}
#: Folders Triton skips inside a model folder (model_lifecycle.cc VersionsToLoad).
SKIPPED_MODEL_SUBDIRS = frozenset({WARMUP_FOLDER, "initial_state", "configs"})

#: ONNX TensorProto element type -> config data type (from :mod:`generator.dtypes`).
ONNX_DATA_TYPES = {d.onnx: d.triton for d in DTYPES}


def expected_model_file(config: mc.ModelConfig) -> str | None:
    """File (or folder) each version folder must hold for this config; None when no rule applies (ensemble, custom)."""
    if config.default_model_filename:
        return config.default_model_filename
    if config.backend == "python":
        return "model.py"
    if config.platform in PLATFORM_MODEL_FILE:
        return PLATFORM_MODEL_FILE[config.platform]
    return BACKEND_MODEL_FILE.get(config.backend)


def _is_tensorrt(config: mc.ModelConfig) -> bool:
    return config.platform == "tensorrt_plan" or config.backend == "tensorrt"


def _uses_onnx(config: mc.ModelConfig) -> bool:
    # The platform decides the model file when both are set (a mismatch is its own finding).
    return config.platform == "onnxruntime_onnx" or (config.backend == "onnxruntime" and not config.platform)


# ---------------------------------------------------------------------------- one config file
@dataclass
class _ConfigFile:
    """A parsed config and what findings about it need: its repository-relative name and field positions."""

    rel: str
    config: mc.ModelConfig
    locator: PbtxtLocator
    findings: list[Finding] = field(default_factory=list)

    def add(self, rule: str, message: str, path: Sequence[str | int] = (), severity: str | None = None) -> None:
        position = self.locator.find(tuple(path)) if path else None
        line, column = position if position else (1, 1)
        self.findings.append(Finding(severity or RULES[rule][0], self.rel, line, column, rule, message))


def _io_path(kind: str, index: int, *rest: str | int) -> tuple[str | int, ...]:
    return (kind, index, *rest)


def _element_count(shape: Iterable[int]) -> int:
    """Element count, or -1 when a dim is -1 (Triton's WILDCARD_SIZE)."""
    count = 1
    for dim in shape:
        if dim == -1:
            return -1
        count *= dim
    return count


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


def _check_tensors(cf: _ConfigFile) -> None:
    config = cf.config
    batching_scheduler = config.HasField("dynamic_batching") or config.HasField("sequence_batching")
    for kind, tensors in (("input", config.input), ("output", config.output)):
        seen: dict[str, int] = {}
        for index, io in enumerate(tensors):
            label = f"{kind} '{io.name}'" if io.name else f"{kind} #{index}"
            if not io.name:
                cf.add("tensor-name", f"{label} must specify 'name'", _io_path(kind, index))
            elif io.name in seen:
                cf.add(
                    "tensor-duplicate-name",
                    f"{label} is defined twice ({kind}s #{seen[io.name]} and #{index}); names must be unique",
                    _io_path(kind, index, "name"),
                )
            else:
                seen[io.name] = index
            if io.data_type == mc.TYPE_INVALID:
                cf.add("tensor-data-type", f"{label} must specify 'data_type'", _io_path(kind, index, "name"))
            _check_dims(cf, kind, index, label, io)
            if kind == "input":
                if io.format in (mc.ModelInput.FORMAT_NCHW, mc.ModelInput.FORMAT_NHWC) and len(io.dims) != 3:
                    cf.add(
                        "tensor-format",
                        f"{label} has format {mc.ModelInput.Format.Name(io.format)}, which requires 3 dims "
                        f"(got {len(io.dims)})",
                        _io_path(kind, index, "format"),
                    )
                if io.optional and batching_scheduler and config.max_batch_size > 0:
                    cf.add(
                        "optional-input-batching",
                        f"{label} is optional on a batching model: the batcher never batches a request that sends "
                        "it with one that omits it",
                        _io_path(kind, index, "optional"),
                    )
            if io.is_shape_tensor and not _is_tensorrt(config):
                cf.add(
                    "shape-tensor-platform",
                    f"{label} is a shape tensor, which only the TensorRT platform supports",
                    _io_path(kind, index, "is_shape_tensor"),
                )


def _check_dims(cf: _ConfigFile, kind: str, index: int, label: str, io: Any) -> None:
    max_batch_size = cf.config.max_batch_size
    dims = list(io.dims)
    if not dims:
        cf.add(
            "dims-empty",
            f"{label} must specify 'dims' (use dims: [ 1 ] with reshape: {{ shape: [ ] }} for a scalar)",
            _io_path(kind, index, "name"),
        )
    bad_dims = False
    for k, dim in enumerate(dims):
        if dim < 1 and dim != -1:
            bad_dims = True
            cf.add(
                "dims-invalid",
                f"{label} dims[{k}] is {dim}; each dim must be >= 1, or -1 for a variable size",
                _io_path(kind, index, "dims", "#", k),
            )
        elif dim > INT32_MAX:
            cf.add(
                "dims-int32",
                f"{label} dims[{k}] is {dim}, above the int32 range ({INT32_MAX})",
                _io_path(kind, index, "dims", "#", k),
            )
    if not io.HasField("reshape"):
        return
    shape = list(io.reshape.shape)
    where = _io_path(kind, index, "reshape", 0, "shape")
    if not shape and max_batch_size == 0:
        cf.add(
            "reshape-scalar-nobatch",
            f"{label} has an empty reshape on a model with max_batch_size 0: scalar tensors need the batch axis",
            _io_path(kind, index, "reshape"),
        )
        return
    for k, dim in enumerate(shape):
        if dim < 1 and dim != -1:
            bad_dims = True
            cf.add(
                "dims-invalid",
                f"{label} reshape[{k}] is {dim}; each dim must be >= 1, or -1 for a variable size",
                (*where, "#", k),
            )
    if bad_dims or not dims:
        return
    dims_size, reshape_size = _element_count(dims), _element_count(shape)
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        if not shape:
            message = f"{label} has an empty (scalar) reshape, which needs dims [ 1 ], not {dims}"
        else:
            message = (
                f"{label} dims {dims} ({_count_text(dims_size)}) and reshape {shape} ({_count_text(reshape_size)})"
            )
            message += " have different element counts"
        cf.add("reshape-size", message, (*where,) if shape else _io_path(kind, index, "reshape"))
    elif dims_size == -1 and _chunks(dims) != _chunks(shape):
        cf.add(
            "reshape-size",
            f"{label} dims {dims} and reshape {shape} do not match: the static runs between "
            f"-1 dims must have equal element counts ({_chunks(dims)} vs {_chunks(shape)})",
            where,
        )


def _count_text(count: int) -> str:
    return "variable size" if count == -1 else f"{count} elements"


def _check_batching(cf: _ConfigFile) -> None:
    config = cf.config
    mbs = config.max_batch_size
    if mbs < 0:
        cf.add("max-batch-size", f"max_batch_size is {mbs}; it must be >= 0", ("max_batch_size",))
    if config.HasField("dynamic_batching"):
        db = config.dynamic_batching
        if mbs == 0:
            cf.add(
                "dynamic-batching-no-batch",
                "dynamic_batching is set but max_batch_size is 0: the model has no "
                "batch axis for the batcher to fill; set max_batch_size > 0 or remove dynamic_batching",
                ("dynamic_batching",),
            )
        base = ("dynamic_batching", 0, "preferred_batch_size")
        for k, size in enumerate(db.preferred_batch_size):
            if size < 1 or size > mbs:
                cf.add(
                    "preferred-batch-size",
                    f"dynamic_batching preferred_batch_size {size} is outside 1..max_batch_size ({mbs})",
                    (*base, "#", k),
                )
        levels = db.priority_levels
        if levels != 0:
            if not 1 <= db.default_priority_level <= levels:
                cf.add(
                    "priority-level",
                    f"default_priority_level {db.default_priority_level} is outside 1..{levels} "
                    f"(priority_levels {levels})",
                    ("dynamic_batching", 0, "default_priority_level"),
                )
            for level in sorted(db.priority_queue_policy):
                if not 1 <= level <= levels:
                    where = cf.locator.map_entry(("dynamic_batching", 0, "priority_queue_policy"), str(level))
                    cf.add(
                        "priority-level", f"priority_queue_policy level {level} is outside 1..{levels}", (*where, "key")
                    )
        if db.preserve_ordering:
            if levels > 1:
                cf.add(
                    "preserve-ordering",
                    f"preserve_ordering is true with priority_levels {levels}; Triton allows "
                    "only one priority level when preserving order",
                    ("dynamic_batching", 0, "preserve_ordering"),
                )
            policies = [db.default_queue_policy, *db.priority_queue_policy.values()]
            if any(
                p.default_timeout_microseconds != 0 and p.timeout_action == mc.ModelQueuePolicy.DELAY for p in policies
            ):
                cf.add(
                    "preserve-ordering",
                    "a queue policy uses timeout_action DELAY while preserve_ordering is true",
                    ("dynamic_batching", 0, "preserve_ordering"),
                )
    if config.HasField("sequence_batching") and config.sequence_batching.HasField("oldest"):
        seq_base: FieldPath = ("sequence_batching", 0, "oldest", 0, "preferred_batch_size")
        for k, size in enumerate(config.sequence_batching.oldest.preferred_batch_size):
            if size < 1 or size > mbs:
                cf.add(
                    "preferred-batch-size",
                    f"sequence_batching preferred_batch_size {size} is outside 1..max_batch_size ({mbs})",
                    (*seq_base, "#", k),
                )
    if config.response_cache.enable:
        if config.model_transaction_policy.decoupled:
            cf.add(
                "response-cache",
                "response_cache is enabled on a decoupled model; Triton does not support that",
                ("response_cache",),
            )
        if config.HasField("sequence_batching"):
            cf.add(
                "response-cache",
                "response_cache is enabled with sequence_batching; Triton does not support that",
                ("response_cache",),
            )


def _check_instance_groups(cf: _ConfigFile) -> None:
    config = cf.config
    for index, group in enumerate(config.instance_group):
        label = f"instance_group #{index}" + (f" '{group.name}'" if group.name else "")
        base = ("instance_group", index)
        if group.count < 0:
            cf.add(
                "instance-group-count",
                f"{label} count is {group.count}; it must be >= 1 (or unset for the default)",
                (*base, "count"),
            )
        if group.kind in (mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_MODEL) and group.gpus:
            kind = mc.ModelInstanceGroup.Kind.Name(group.kind)
            cf.add("instance-group-gpus", f"{label} has kind {kind} but lists gpus {list(group.gpus)}", (*base, "gpus"))
        for k, gpu in enumerate(group.gpus):
            if gpu < 0:
                cf.add("instance-group-gpus", f"{label} lists gpu id {gpu}; GPU ids are >= 0", (*base, "gpus", "#", k))
        if group.profile and not _is_tensorrt(config):
            cf.add(
                "instance-group-profile",
                f"{label} sets 'profile', which only TensorRT models support",
                (*base, "profile"),
            )
        elif group.profile:
            for k, profile in enumerate(group.profile):
                if not profile.isdigit():
                    cf.add(
                        "instance-group-profile",
                        f"{label} profile {profile!r} is not a non-negative integer",
                        (*base, "profile", "#", k),
                    )


def _check_warmup(cf: _ConfigFile) -> None:
    config = cf.config
    inputs = {io.name: io for io in config.input}
    control_inputs = {ci.name for ci in config.sequence_batching.control_input}
    mbs = config.max_batch_size
    for index, warmup in enumerate(config.model_warmup):
        label = f"model_warmup #{index}" + (f" '{warmup.name}'" if warmup.name else "")
        base = ("model_warmup", index)
        limit = mbs if mbs > 0 else 1
        if warmup.batch_size > limit:
            cf.add(
                "warmup-batch-size",
                f"{label} batch_size {warmup.batch_size} is above "
                f"{'max_batch_size ' + str(mbs) if mbs > 0 else '1 (max_batch_size 0)'}",
                (*base, "batch_size"),
            )
        for name in sorted(warmup.inputs):
            sample = warmup.inputs[name]
            where = cf.locator.map_entry((*base, "inputs"), name)
            io = inputs.get(name)
            if io is None:
                if name not in control_inputs:
                    known = ", ".join(sorted(inputs)) or "(none)"
                    cf.add(
                        "warmup-input-unknown",
                        f"{label} input '{name}' is not an input of the model; inputs are {known}",
                        (*where, "key"),
                    )
                continue
            if not sample.WhichOneof("input_data_type"):
                cf.add(
                    "warmup-input-data",
                    f"{label} input '{name}' sets none of zero_data, random_data, input_data_file",
                    (*where, "key"),
                )
            dims = list(sample.dims)
            if -1 in dims:
                cf.add(
                    "warmup-dims",
                    f"{label} input '{name}' dims {dims} contain -1; warmup dims must be fully specified",
                    (*where, "value", 0, "dims"),
                )
            elif len(dims) != len(io.dims) or any(c not in (-1, w) for c, w in zip(io.dims, dims, strict=False)):
                cf.add(
                    "warmup-dims",
                    f"{label} input '{name}' dims {dims} do not fit the input's dims "
                    f"{list(io.dims)} (warmup dims leave out the batch axis)",
                    (*where, "value", 0, "dims"),
                )
            if sample.data_type != io.data_type:
                cf.add(
                    "warmup-data-type",
                    f"{label} input '{name}' has data_type "
                    f"{mc.DataType.Name(sample.data_type)}, the input is {mc.DataType.Name(io.data_type)}",
                    (*where, "value", 0, "data_type"),
                )


def _check_batch_io(cf: _ConfigFile) -> None:
    config = cf.config
    inputs = {io.name for io in config.input}
    outputs = {io.name for io in config.output}
    # batch_input and batch_output share the source_input rules; each adds its own.
    for kind in ("batch_input", "batch_output"):
        for index, entry in enumerate(getattr(config, kind)):
            if len(entry.source_input) != 1:
                cf.add(
                    "batch-io",
                    f"{kind} #{index} expects 1 source_input, got {len(entry.source_input)}",
                    (kind, index),
                )
            for name in entry.source_input:
                if name not in inputs:
                    cf.add(
                        "batch-io",
                        f"{kind} #{index} source_input '{name}' is not an input",
                        (kind, index, "source_input"),
                    )
    for index, bi in enumerate(config.batch_input):
        if bi.data_type not in (mc.TYPE_INT32, mc.TYPE_FP32):
            cf.add(
                "batch-io",
                f"batch_input #{index} data_type must be TYPE_INT32 or TYPE_FP32",
                ("batch_input", index, "data_type"),
            )
    for index, bo in enumerate(config.batch_output):
        for name in bo.target_name:
            if name not in outputs:
                cf.add(
                    "batch-io",
                    f"batch_output #{index} target_name '{name}' is not an output",
                    ("batch_output", index, "target_name"),
                )


def _check_platform(cf: _ConfigFile) -> None:
    config = cf.config
    platform, backend = config.platform, config.backend
    if not platform and not backend:
        cf.add(
            "platform-missing",
            "neither 'platform' nor 'backend' is set; only a server with auto-complete can "
            "guess them from the model file",
            ("name",) if config.name else (),
        )
        return
    if platform == "ensemble":
        if backend:
            cf.add(
                "ensemble-config", f"ensemble model sets backend '{backend}'; ensembles have no backend", ("backend",)
            )
        return
    if platform and platform not in PLATFORM_BACKEND and (not backend or backend in BACKEND_MODEL_FILE):
        cf.add(
            "platform-unknown",
            f"platform '{platform}' is not a Triton platform "
            f"({', '.join(sorted(PLATFORM_BACKEND))}); custom backends are named with 'backend'",
            ("platform",),
        )
        return
    known_backends = {"tensorrt", "tensorflow", "onnxruntime", "pytorch"}
    if platform and backend in known_backends and PLATFORM_BACKEND.get(platform) != backend:
        cf.add(
            "platform-backend-mismatch",
            f"platform '{platform}' belongs to backend '{PLATFORM_BACKEND.get(platform)}', not '{backend}'",
            ("backend",),
        )


def _check_ensemble(cf: _ConfigFile, models_in_repo: set[str] | None) -> None:
    config = cf.config
    is_ensemble = config.platform == "ensemble"
    if config.HasField("ensemble_scheduling") and not is_ensemble:
        cf.add("ensemble-config", "ensemble_scheduling is set but platform is not 'ensemble'", ("ensemble_scheduling",))
        return
    if not is_ensemble:
        return
    if not config.HasField("ensemble_scheduling"):
        cf.add("ensemble-config", "platform 'ensemble' needs ensemble_scheduling", ("platform",))
        return
    for field_name in ("instance_group", "model_warmup"):
        if len(getattr(config, field_name)):
            cf.add("ensemble-config", f"an ensemble cannot set {field_name}", (field_name,))
    if config.HasField("optimization"):
        cf.add("ensemble-config", "an ensemble cannot set optimization", ("optimization",))
    steps = config.ensemble_scheduling.step
    if not steps:
        cf.add("ensemble-config", "ensemble_scheduling has no step", ("ensemble_scheduling",))
    for index, step in enumerate(steps):
        where = ("ensemble_scheduling", 0, "step", index)
        if not step.model_name:
            cf.add("ensemble-config", f"ensemble step #{index} must specify model_name", where)
            continue
        if not step.input_map or not step.output_map:
            cf.add(
                "ensemble-config",
                f"ensemble step #{index} ('{step.model_name}') needs input_map and output_map",
                (*where, "model_name"),
            )
        if models_in_repo is not None and step.model_name not in models_in_repo:
            cf.add(
                "ensemble-model-missing",
                f"ensemble step #{index} uses model '{step.model_name}', which is not in this repository",
                (*where, "model_name"),
            )


def check_config(
    config: mc.ModelConfig, text: str, rel: str, model_name: str, models_in_repo: set[str] | None = None
) -> list[Finding]:
    """Triton's rules for one parsed config (no file system checks); findings located in ``text``."""
    cf = _ConfigFile(rel, config, PbtxtLocator(text))
    if config.name and config.name != model_name:
        cf.add(
            "config-name-mismatch",
            f"config name '{config.name}' differs from the model folder '{model_name}'; Triton requires them to match",
            ("name",),
        )
    _check_platform(cf)
    _check_batching(cf)
    _check_tensors(cf)
    _check_batch_io(cf)
    _check_instance_groups(cf)
    _check_warmup(cf)
    _check_ensemble(cf, models_in_repo)
    for escape in config_path_escapes(config):
        cf.add("path-escape", escape.message, escape.locate(cf.locator.map_entry))
    return cf.findings


def parse_config_text(text: str, rel: str) -> tuple[mc.ModelConfig | None, list[Finding]]:
    """Parse pbtxt as ModelConfig; a syntax error becomes a ``config-parse`` finding with line and column."""
    try:
        return text_format.Parse(text, mc.ModelConfig()), []
    except text_format.ParseError as error:
        message = re.sub(r"^\d+:\d+ : ", "", str(error))
        line, column = error.GetLine(), error.GetColumn()
        return None, [
            Finding(ERROR, rel, line or 1, column or 1, "config-parse", f"not a valid ModelConfig: {message}")
        ]


# ---------------------------------------------------------------------------- ONNX agreement
def _check_onnx(cf: _ConfigFile, onnx_path: FsPath, onnx_rel: str) -> None:
    try:
        import onnx  # lazily: only repositories with ONNX models pay for it
    except ImportError:
        cf.add(
            "onnx-skipped",
            f"onnx is not installed, so {onnx_rel} was not compared with the config (pip install 'gen-repo[export]')",
            ("name",),
        )
        return

    try:
        model = onnx.load_model_from_string(read_bytes(onnx_path, "onnx_bytes"))
    except Exception as error:  # onnx raises DecodeError, OSError, ValueError...: all mean "not readable"
        cf.add("onnx-load", f"{onnx_rel} cannot be read as ONNX: {type(error).__name__}: {error}", ("name",))
        return
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    graph_io = {
        "input": {vi.name: vi for vi in graph.input if vi.name not in initializers},
        "output": {vi.name: vi for vi in graph.output},
    }
    config = cf.config
    batching = config.max_batch_size > 0
    for kind, tensors in (("input", config.input), ("output", config.output)):
        graph_tensors = graph_io[kind]
        configured = {io.name for io in tensors}
        unlisted = sorted(set(graph_tensors) - configured)
        for index, io in enumerate(tensors):
            label = f"{kind} '{io.name}'"
            value_info = graph_tensors.get(io.name)
            if value_info is None:
                hint = f" (not in the config: {', '.join(unlisted)})" if unlisted and kind == "input" else ""
                cf.add(
                    "onnx-io-name",
                    f"{label} is not a graph {kind} of {onnx_rel}; graph {kind}s are "
                    f"{', '.join(sorted(graph_tensors)) or '(none)'}{hint}",
                    _io_path(kind, index, "name"),
                )
                continue
            _compare_onnx_tensor(cf, kind, index, io, value_info, batching, onnx_rel)
        # Every graph input must be fed; a renamed one is already reported above with the graph's names.
        if kind == "input" and configured <= set(graph_tensors):
            for name in unlisted:
                cf.add(
                    "onnx-io-name",
                    f"graph input '{name}' of {onnx_rel} is not in the config; Triton must feed every graph input",
                    ("input",) if len(config.input) else (),
                )


def _compare_onnx_tensor(
    cf: _ConfigFile, kind: str, index: int, io: Any, value_info: Any, batching: bool, onnx_rel: str
) -> None:
    label = f"{kind} '{io.name}'"
    tensor_type = value_info.type.tensor_type
    graph_type = ONNX_DATA_TYPES.get(tensor_type.elem_type, f"ONNX element type {tensor_type.elem_type}")
    config_type = mc.DataType.Name(io.data_type)
    if io.data_type != mc.TYPE_INVALID and graph_type != config_type:
        cf.add(
            "onnx-data-type",
            f"{label} is {config_type} in the config but {graph_type} in {onnx_rel}",
            _io_path(kind, index, "data_type"),
        )
    if not tensor_type.HasField("shape"):
        return  # rank unknown in the graph: nothing to compare
    graph_dims: list[int | None] = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
    config_dims = list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)
    shape_name = "reshape" if io.HasField("reshape") else "dims"
    full: list[int] = ([-1] if batching else []) + config_dims
    if len(full) != len(graph_dims):
        batch_note = " plus the batch axis (max_batch_size > 0)" if batching else ""
        cf.add(
            "onnx-rank",
            f"{label} has rank {len(full)} in the config ({shape_name} {config_dims}{batch_note}) "
            f"but rank {len(graph_dims)} in {onnx_rel}",
            _io_path(kind, index, shape_name),
        )
        return
    for axis, (want, have) in enumerate(zip(full, graph_dims, strict=True)):
        if batching and axis == 0:
            mbs = cf.config.max_batch_size
            # The batcher forms any batch from 1 to max_batch_size, so a fixed batch axis only works when both are 1.
            if have is not None and have != 0 and (mbs > 1 or have != 1):
                cf.add(
                    "onnx-dim",
                    f"{label} batch axis is fixed at {have} in {onnx_rel}, but max_batch_size {mbs} "
                    f"sends batches of 1..{mbs}: the graph's axis 0 must be dynamic",
                    ("max_batch_size",),
                )
            continue
        k = axis - 1 if batching else axis
        where = _io_path(kind, index, shape_name, "#", k) if shape_name == "dims" else _io_path(kind, index, "reshape")
        if have is None or have == 0:
            continue
        if want == -1:
            cf.add(
                "onnx-dim-dynamic",
                f"{label} {shape_name}[{k}] is -1 in the config but {have} in {onnx_rel}; "
                f"requests with another size will fail",
                where,
            )
        elif want != have:
            cf.add("onnx-dim", f"{label} {shape_name}[{k}] is {want} in the config but {have} in {onnx_rel}", where)


# ---------------------------------------------------------------------------- repository walk
def lint_repository(path: str | FsPath) -> list[Finding]:
    """Lint a Triton model repository; findings sorted by file, line, column, rule."""
    root = FsPath(path)
    findings: list[Finding] = []
    if not root.is_dir():
        return [Finding(ERROR, str(path), None, None, "repository-missing", f"{path} is not a directory")]
    model_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not model_dirs:
        findings.append(Finding(WARNING, ".", None, None, "repository-empty", "no model folders in the repository"))
    models = {p.name for p in model_dirs}
    parsed: dict[str, _Parsed] = {}
    for model_dir in model_dirs:
        findings.extend(_lint_model(model_dir, models, parsed))
    findings.extend(_ensemble_wiring(parsed))
    return sorted(findings, key=Finding.sort_key)


#: A model's parsed config, its field positions and its folder, kept by :func:`_lint_model` for the ensemble pass.
_Parsed = tuple[mc.ModelConfig, "PbtxtLocator", FsPath]


def _ensemble_wiring(configs: Mapping[str, _Parsed]) -> list[Finding]:
    """Every ensemble's wiring against its step models' configs (:mod:`generator.ensemble`'s rules).

    Shape ranges come from a step's ``gen_repo/contract.json`` where gen-repo wrote one. Structure problems
    (``ensemble-config``, ``ensemble-model-missing``) are :func:`_check_ensemble`'s findings, not repeated here.
    """
    findings: list[Finding] = []
    for name, (config, locator, _) in sorted(configs.items()):
        if config.platform != "ensemble" or not config.HasField("ensemble_scheduling"):
            continue
        steps = config.ensemble_scheduling.step
        models = {s.model_name: _step_model(configs[s.model_name][0], configs[s.model_name][2])
                  for s in steps if s.model_name in configs}
        wiring = Wiring(name, config.max_batch_size, tuple(_wiring_io(io) for io in config.input),
                        tuple(_wiring_io(io) for io in config.output),
                        tuple(Step(s.model_name, dict(s.input_map), dict(s.output_map)) for s in steps))
        cf = _ConfigFile(f"{name}/config.pbtxt", config, locator)
        for problem in wiring_problems(wiring, models):
            if problem.rule not in ("ensemble-config", "ensemble-model-missing"):
                cf.add(problem.rule, problem.message, _wiring_path(cf.locator, problem.where))
        findings.extend(cf.findings)
    return findings


def _wiring_io(io: mc.ModelInput | mc.ModelOutput, shapes: Mapping[str, Any] | None = None) -> TensorIO:
    """A config tensor for the wiring rules (Triton compares an ensemble's reshape when it has one)."""
    dims = io.reshape.shape if io.HasField("reshape") and not shapes else io.dims
    entry = (shapes or {}).get(io.name) or {}
    low, high = entry.get("min_shape"), entry.get("max_shape")
    return TensorIO(io.name, mc.DataType.Name(io.data_type), tuple(dims), bool(getattr(io, "optional", False)),
                    tuple(low) if isinstance(low, list) else None, tuple(high) if isinstance(high, list) else None)


def _step_model(config: mc.ModelConfig, model_dir: FsPath) -> StepModel:
    """A step model from its config, with shape ranges from its newest gen-repo contract when there is one."""
    shapes: dict[str, Any] = {}
    versions = sorted((int(p.name), p) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit())
    if versions:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            contract = json.loads(read_text(versions[-1][1] / "gen_repo" / "contract.json"))
            shapes = {t["name"]: t for t in (*contract["inputs"], *contract["outputs"])}
    return StepModel(config.name or model_dir.name, config.max_batch_size,
                     tuple(_wiring_io(io, shapes) for io in config.input),
                     tuple(_wiring_io(io, shapes) for io in config.output))


def _wiring_path(locator: PbtxtLocator, where: Location) -> FieldPath:
    """The config field a wiring location points at."""
    if not where:
        return ("ensemble_scheduling",)
    head = where[0]
    if head in ("input", "output"):
        return (str(head), where[1], "name")
    if head == "max_batch_size":
        return ("max_batch_size",)
    step: FieldPath = ("ensemble_scheduling", 0, "step", where[1])
    if len(where) == 2:
        return step
    if where[2] == "model_name":
        return (*step, "model_name")
    return (*locator.map_entry((*step, str(where[2])), str(where[3])), "key")


def _read_config(path: FsPath, rel: str, findings: list[Finding]) -> str | None:
    """A config's text (undecodable bytes replaced), or None with a finding: not a regular file, or too large."""
    try:
        return read_bytes(path, "config_bytes").decode("utf-8", errors="replace")
    except OSError as error:  # generator.bounded.UnreadableFileError, or an I/O error
        message = error.problems[0].message if isinstance(error, UnreadableFileError) else str(error)
        findings.append(Finding(ERROR, rel, None, None, "config-unreadable", message))
        return None


def _lint_model(model_dir: FsPath, models: set[str], parsed: dict[str, _Parsed]) -> list[Finding]:
    """One model folder's findings; its parsed config goes into ``parsed`` (the ensemble pass reads it)."""
    name = model_dir.name
    findings: list[Finding] = []
    config_path = model_dir / "config.pbtxt"
    config: mc.ModelConfig | None = None
    cf: _ConfigFile | None = None
    if not config_path.exists() and not config_path.is_symlink():  # a FIFO or a device is there: unreadable
        findings.append(
            Finding(
                WARNING,
                name,
                None,
                None,
                "config-missing",
                f"model '{name}' has no config.pbtxt; only a server with auto-complete can load it",
            )
        )
    else:
        rel = f"{name}/config.pbtxt"
        text = _read_config(config_path, rel, findings)
        config, parse_findings = parse_config_text(text, rel) if text is not None else (None, [])
        findings.extend(parse_findings)
        if config is not None and text is not None:
            findings.extend(check_config(config, text, rel, name, models))
            cf = _ConfigFile(rel, config, PbtxtLocator(text))
            parsed[name] = (config, cf.locator, model_dir)
    configs_dir = model_dir / "configs"
    if configs_dir.is_dir():  # --model-config-name alternatives: same rules, same folder name
        for alt in sorted(configs_dir.glob("*.pbtxt")):
            rel = f"{name}/configs/{alt.name}"
            alt_text = _read_config(alt, rel, findings)
            if alt_text is None:
                continue
            alt_config, parse_findings = parse_config_text(alt_text, rel)
            findings.extend(parse_findings)
            if alt_config is not None:
                findings.extend(check_config(alt_config, alt_text, rel, name, models))

    versions: dict[int, FsPath] = {}
    for sub in sorted(p for p in model_dir.iterdir() if p.is_dir()):
        if sub.name in SKIPPED_MODEL_SUBDIRS:
            continue
        rel_sub = f"{name}/{sub.name}"
        if sub.name.isdigit() and len(sub.name) > 1 and sub.name.startswith("0"):
            findings.append(
                Finding(
                    ERROR,
                    rel_sub,
                    None,
                    None,
                    "version-leading-zero",
                    f"version folder '{sub.name}' has leading zeros; Triton ignores it (name it '{int(sub.name)}')",
                )
            )
        elif sub.name.isdigit():
            versions[int(sub.name)] = sub
        else:
            findings.append(
                Finding(
                    WARNING,
                    rel_sub,
                    None,
                    None,
                    "version-non-numeric",
                    f"folder '{sub.name}' in model '{name}' is not a numeric version; Triton ignores it",
                )
            )
    if not versions:
        findings.append(
            Finding(
                ERROR,
                name,
                None,
                None,
                "version-missing",
                f"model '{name}' has no numeric version folder (e.g. '1'), so Triton has nothing to serve",
            )
        )
    if cf is not None and config is not None:
        _check_versions(cf, config, versions)
        _check_warmup_files(cf, model_dir)
        findings.extend(cf.findings)
    return findings


def _check_warmup_files(cf: _ConfigFile, model_dir: FsPath) -> None:
    """Warmup ``input_data_file``s as Triton reads them: ``<model>/warmup/<file>``, at least ``dims`` elements.

    Triton refuses to load a model whose file is missing or short ("warmup setting expects N bytes") and reads
    only the first N bytes of a longer one.
    """
    folder = model_dir / WARMUP_FOLDER
    for index, warmup in enumerate(cf.config.model_warmup):
        label = f"model_warmup #{index}" + (f" '{warmup.name}'" if warmup.name else "")
        for name in sorted(warmup.inputs):
            sample = warmup.inputs[name]
            if not sample.input_data_file:
                continue
            where = (*cf.locator.map_entry(("model_warmup", index, "inputs"), name), "value", 0, "input_data_file")
            path = folder / sample.input_data_file
            if relative_path_problem(sample.input_data_file):
                continue  # path-escape's finding (check_config)
            if not path.is_file():
                cf.add("warmup-data-file", f"{label} input '{name}': input_data_file "
                       f"'{WARMUP_FOLDER}/{sample.input_data_file}' is missing", where)
                continue
            dtype = by_triton(mc.DataType.Name(sample.data_type))
            count = _element_count(sample.dims)
            if dtype is None or dtype.byte_size is None or count < 0:
                continue  # strings vary in size; bad dims are warmup-dims' finding
            need, have = count * dtype.byte_size, path.stat().st_size
            if have != need:
                cf.add("warmup-data-file" if have < need else "warmup-data-file-long",
                       f"{label} input '{name}': '{WARMUP_FOLDER}/{sample.input_data_file}' holds {have} bytes; dims "
                       f"{list(sample.dims)} of {dtype.triton} need {need}", where)


def _check_versions(cf: _ConfigFile, config: mc.ModelConfig, versions: dict[int, FsPath]) -> None:
    model_name = cf.rel.split("/")[0]
    if config.version_policy.HasField("specific"):
        for k, version in enumerate(config.version_policy.specific.versions):
            if version not in versions:
                cf.add(
                    "version-policy",
                    f"version_policy lists version {version}, but folder '{model_name}/{version}' does not exist",
                    ("version_policy", 0, "specific", 0, "versions", "#", k),
                )
    expected = expected_model_file(config)
    cc_files = sorted(set(config.cc_model_filenames.values()))
    for version, folder in sorted(versions.items()):
        rel_folder = f"{model_name}/{version}"
        if expected is not None and not (folder / expected).exists():
            if cc_files and all((folder / f).exists() for f in cc_files):
                cf.findings.append(
                    Finding(
                        WARNING,
                        rel_folder,
                        None,
                        None,
                        "default-model-file-fallback",
                        f"'{expected}' is missing; only GPUs listed in cc_model_filenames can load this version",
                    )
                )
            else:
                what = config.platform or config.backend
                source = "default_model_filename" if config.default_model_filename else what
                cf.findings.append(
                    Finding(
                        ERROR,
                        rel_folder,
                        None,
                        None,
                        "model-file-missing",
                        f"version {version} has no '{expected}' (expected by {source})",
                    )
                )
        for cc, filename in sorted(config.cc_model_filenames.items()):
            if not (folder / filename).exists():
                where = cf.locator.map_entry(("cc_model_filenames",), cc)
                cf.add(
                    "cc-model-file-missing",
                    f"cc_model_filenames maps compute capability {cc} to '{filename}', "
                    f"which is missing in version {version}",
                    (*where, "value"),
                )
        onnx_file = folder / (expected if _uses_onnx(config) and expected else "model.onnx")
        if (_uses_onnx(config) or config.backend == "python") and onnx_file.is_file():
            _check_onnx(cf, onnx_file, f"{rel_folder}/{onnx_file.name}")
