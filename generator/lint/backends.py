"""Platform and backend as Triton core infers them, and what each backend needs on disk (ONNX graphs included).

:func:`resolve` ports core's AutoCompleteBackendFields (Triton 2.51), so every per-backend rule runs however the backend
was named. onnx is imported only for a repository holding an ONNX model.
"""

from __future__ import annotations

import os
import re
from pathlib import Path as FsPath
from typing import Any

from generator.bounded import read_bytes
from generator.confinement import MODEL_DIRECTORY_VARIABLE, relative_path_problem
from generator.dtypes import DTYPES
from generator.lint.findings import ConfigFile, Finding, folder_finding
from generator.lint.folders import ModelFolder, Resolved
from generator.triton.proto import model_config_pb2 as mc

__all__ = [
    "ENSEMBLE",
    "NO_AUTO_COMPLETE",
    "PLATFORM_BACKEND",
    "auto_complete_fills",
    "backend_refused",
    "check_model_files",
    "check_platform",
    "resolve",
]

ENSEMBLE = "ensemble"
TENSORRT_PLAN = "tensorrt_plan"
ONNX_PLATFORM = "onnxruntime_onnx"
PYTORCH_PLATFORM = "pytorch_libtorch"
SAVEDMODEL, GRAPHDEF = "tensorflow_savedmodel", "tensorflow_graphdef"
PYTHON_FILE = "model.py"
#: Platform -> the backend Triton 2.51 pairs it with (core GetBackendTypeFromPlatform). Newer names (``libtorch``,
#: ``torch_aoti``) are refused by 2.51 as unknown platforms and by newer cores as a platform/backend mismatch.
PLATFORM_BACKEND: dict[str, str] = {
    TENSORRT_PLAN: "tensorrt",
    SAVEDMODEL: "tensorflow",
    GRAPHDEF: "tensorflow",
    ONNX_PLATFORM: "onnxruntime",
    PYTORCH_PLATFORM: "pytorch",
}
#: Backends core knows by name (GetBackendType): with one of these, the platform must be one of its own.
BACKEND_PLATFORM: dict[str, tuple[str, ...]] = {
    "tensorrt": (TENSORRT_PLAN,),
    "tensorflow": (SAVEDMODEL, GRAPHDEF),
    "onnxruntime": (ONNX_PLATFORM,),
    "pytorch": (PYTORCH_PLATFORM,),
}
#: Backends whose model file lint checks (the file each loads when default_model_filename is not set).
BACKEND_MODEL_FILE = {
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "python": PYTHON_FILE,
}
#: Backend or platform -> why a model of it without config.pbtxt is refused even with auto-complete on (Triton 2.51):
#: the backend fills in nothing. The words are Triton's refusal.
NO_AUTO_COMPLETE: dict[str, str] = {
    "pytorch": "the pytorch backend skips auto-complete (libtorch.cc AutoCompleteConfig), so the model has no inputs "
               "('model configuration must contain at least one input')",
    GRAPHDEF: "the tensorflow backend fills in no config for a GraphDef model ('model configuration is not provided')",
}
#: What a backend's auto-complete fills into a config that lacks it (Triton 2.51, auto-complete on), by backend (or
#: platform: a TensorFlow SavedModel; a GraphDef fills nothing): ``io``, every input and output when the config lists
#: none; ``tensors``, a listed input's or output's missing data_type and dims too (Triton's QA L0_model_config
#: autofill_noplatform_success: incomplete_input, incomplete_output). The onnxruntime backend fills inputs and outputs
#: only when the config lists none (onnxruntime.cc AutoCompleteConfig); a python model fills what its model.py's
#: auto_complete_config does, so everything when it defines one.
AUTO_COMPLETE_FILLS: dict[str, frozenset[str]] = {
    "tensorrt": frozenset({"io", "tensors"}),
    "openvino": frozenset({"io", "tensors"}),
    SAVEDMODEL: frozenset({"io", "tensors"}),
    "onnxruntime": frozenset({"io"}),
}
_AUTO_COMPLETE_DEF = re.compile(rb"^[ \t]*def[ \t]+auto_complete_config\b", re.MULTILINE)
#: ONNX TensorProto element type -> config data type (from :mod:`generator.dtypes`).
ONNX_DATA_TYPES = {d.onnx: d.triton for d in DTYPES}
EXECUTION_ENV_PATH = "EXECUTION_ENV_PATH"


# ---------------------------------------------------------------------------- inference (AutoCompleteBackendFields)
class _Inference:
    """The fields AutoCompleteBackendFields fills, and the words for where each inferred value came from."""

    def __init__(self, config: mc.ModelConfig, folder: FsPath) -> None:
        self.platform, self.backend = config.platform, config.backend
        self.default = config.default_model_filename
        self.runtime = config.runtime
        subdirs = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        # Triton inspects only the first sub-folder in name order (std::set<std::string>), whatever it is.
        self.first = subdirs[0] if subdirs else ""
        self.version_path = folder / self.first
        self.contents = set(os.listdir(self.version_path)) if self.first else set()
        self.how: list[str] = []

    def has_file(self, name: str, *, is_dir: bool | None = None) -> bool:
        """``name`` is in the first sub-folder (a folder or not, when ``is_dir`` says)."""
        if not self.first or self.default or name not in self.contents:
            return False
        return is_dir is None or (self.version_path / name).is_dir() == is_dir

    def set_platform(self, platform: str, why: str) -> None:
        self.platform = platform
        self.how.append(f"platform '{platform}' {why}")

    def set_backend(self, backend: str, why: str) -> None:
        self.backend = backend
        self.how.append(f"backend '{backend}' {why}")

    def file_reason(self, name: str) -> str:
        return f"from '{self.first}/{name}'"

    def result(self, failure: str = "") -> Resolved:
        return Resolved(self.platform, self.backend, self.default, "; ".join(self.how), failure)


def resolve(config: mc.ModelConfig, folder: FsPath, model_name: str) -> Resolved:
    """Platform, backend and default model file name as Triton 2.51's AutoCompleteBackendFields leaves them."""
    i = _Inference(config, folder)
    # TensorFlow: only the platform says which of its two formats.
    if not i.platform and (not i.backend or i.backend == "tensorflow"):
        if i.default == "model.savedmodel":
            i.set_platform(SAVEDMODEL, "from default_model_filename")
        elif i.default == "model.graphdef":
            i.set_platform(GRAPHDEF, "from default_model_filename")
        else:  # both checked, in this order: a graphdef file wins over a savedmodel folder
            if i.has_file("model.savedmodel", is_dir=True):
                i.set_platform(SAVEDMODEL, i.file_reason("model.savedmodel"))
            if i.has_file("model.graphdef", is_dir=False):
                i.set_platform(GRAPHDEF, i.file_reason("model.graphdef"))
    if i.platform in (SAVEDMODEL, GRAPHDEF):
        if not i.backend:
            i.set_backend("tensorflow", "from the platform")
        i.default = i.default or ("model.savedmodel" if i.platform == SAVEDMODEL else "model.graphdef")
        return i.result()
    for backend, platform, file_name, file_is_dir in (
        ("tensorrt", TENSORRT_PLAN, "model.plan", False),
        ("onnxruntime", ONNX_PLATFORM, "model.onnx", None),  # an ONNX model may be a folder (external data)
        ("openvino", "", "model.xml", None),
        ("pytorch", PYTORCH_PLATFORM, "model.pt", False),
        ("python", "", PYTHON_FILE, None),
    ):
        if not i.backend:
            if platform and i.platform == platform:
                i.set_backend(backend, "from the platform")
            elif i.default == file_name:
                i.set_backend(backend, "from default_model_filename")
            elif not i.platform and i.has_file(file_name, is_dir=file_is_dir):
                i.set_backend(backend, i.file_reason(file_name))
        if i.backend == backend:
            if platform and not i.platform:
                i.set_platform(platform, "from the backend")
            if not i.default and not (backend == "pytorch" and i.runtime == PYTHON_FILE):
                i.default = file_name
            return i.result()
    if not i.backend and not i.platform and not i.default:
        if "." not in model_name:
            where = f" (Triton looks only in '{i.first}/', the first sub-folder by name)" if i.first else ""
            return i.result(f"Could not determine backend for model '{model_name}': no platform or backend, no "
                            f"known model file{where}, and the folder name is not of the form '<name>.<backend>'")
        backend = model_name.split(".", 1)[1]
        i.set_backend(backend, f"from the folder name '{model_name}' (Triton's <name>.<backend> convention)")
        i.default = f"model.{backend}"
    return i.result()


def auto_complete_fills(folder: ModelFolder, auto_complete: bool) -> frozenset[str]:
    """What the backend's auto-complete fills into ``folder``'s config (:data:`AUTO_COMPLETE_FILLS`).

    Empty when the server runs with auto-complete off. A python model's model.py is read as text, never run: it
    fills what it fills when it defines ``auto_complete_config``.
    """
    resolved = folder.resolved
    if not auto_complete or resolved is None:
        return frozenset()
    fills = AUTO_COMPLETE_FILLS.get(resolved.backend) or AUTO_COMPLETE_FILLS.get(resolved.platform)
    if fills is not None:
        return fills
    filename = resolved.default_model_filename
    if resolved.backend != "python" or not filename or relative_path_problem(filename):
        return frozenset()
    for version in folder.loaded:
        try:
            if _AUTO_COMPLETE_DEF.search(read_bytes(folder.path / str(version) / filename)):
                return frozenset({"io", "tensors"})
        except OSError:  # missing or unreadable: model-file-missing's, or the stub's, to say
            continue
    return frozenset()


def backend_refused(resolved: Resolved) -> bool:
    """Triton refuses the platform/backend pair itself (so no backend-specific rule applies)."""
    platform, backend = resolved.platform, resolved.backend
    if resolved.failure or (not backend) != (platform == ENSEMBLE):
        return True  # nothing inferred; a backend-less model that is no ensemble; an ensemble with a backend
    return backend in BACKEND_PLATFORM and platform not in BACKEND_PLATFORM[backend]


def check_platform(cf: ConfigFile, resolved: Resolved) -> None:
    """ValidateModelConfig on the resolved platform and backend (ensembles: :mod:`generator.lint.ensembles`)."""
    platform, backend = resolved.platform, resolved.backend
    name_path = ("name",) if cf.config.name else ()
    if resolved.failure:
        cf.add("platform-missing", resolved.failure, name_path)
    elif not backend and platform != ENSEMBLE:
        if not platform:
            cf.add("platform-missing", f"neither 'platform' nor 'backend' is set and default_model_filename "
                   f"'{resolved.default_model_filename}' names no model file Triton knows; Triton refuses it "
                   "('unexpected platform type')", ("default_model_filename",))
        else:
            cf.add("platform-unknown", f"platform '{platform}' is not a Triton platform "
                   f"({', '.join(sorted((*PLATFORM_BACKEND, ENSEMBLE)))}) and no backend is named", ("platform",))
    elif backend in BACKEND_PLATFORM and platform not in BACKEND_PLATFORM[backend]:
        where = ("backend",) if cf.config.backend else ("platform",)
        cf.add("platform-backend-mismatch", f"platform '{platform}' and backend '{backend}' do not pair: backend "
               f"'{backend}' serves {' or '.join(repr(p) for p in BACKEND_PLATFORM[backend])}", where)


# ---------------------------------------------------------------------------- files each backend loads
def _expected_model_file(resolved: Resolved) -> str | None:
    """File (or folder) each version folder must hold; None when no rule applies (ensemble, custom backend)."""
    if resolved.backend == "tensorflow" or resolved.backend in BACKEND_MODEL_FILE:
        return resolved.default_model_filename or BACKEND_MODEL_FILE.get(resolved.backend)
    return None


def check_model_files(folder: ModelFolder) -> list[Finding]:
    """Each loaded version's model file for its backend; python-backend specifics; ONNX graphs against the config."""
    cf, resolved = folder.cf, folder.resolved
    if cf is None or resolved is None or backend_refused(resolved):
        return []
    config = cf.config
    findings: list[Finding] = []
    expected = _expected_model_file(resolved)
    if expected is not None and relative_path_problem(expected):
        expected = None  # path-escape's finding
    if resolved.backend == "python":
        _check_python(cf, folder, resolved)
    cc_files = sorted(set(config.cc_model_filenames.values()))
    for version in folder.loaded:
        version_dir = folder.path / str(version)
        if not version_dir.is_dir():
            continue  # version-folder-prefix
        rel = f"{folder.name}/{version}"
        if expected is not None and not (version_dir / expected).exists():
            if cc_files and all((version_dir / f).exists() for f in cc_files):
                findings.append(folder_finding(
                    "default-model-file-fallback", folder.show(str(version)),
                    f"'{expected}' is missing; only GPUs listed in cc_model_filenames can load this version"))
            else:
                source = "default_model_filename" if config.default_model_filename else f"backend '{resolved.backend}'"
                inferred = f"; {resolved.how}" if resolved.how else ""
                findings.append(folder_finding(
                    "model-file-missing", folder.show(str(version)),
                    f"version {version} has no '{expected}' (expected by {source}{inferred})"))
        for cc, filename in sorted(config.cc_model_filenames.items()):
            if not relative_path_problem(filename) and not (version_dir / filename).exists():
                cf.add("cc-model-file-missing", f"cc_model_filenames maps compute capability {cc} to '{filename}', "
                       f"which is missing in version {version}", cf.entry(("cc_model_filenames",), cc, "value"))
        onnx_file = version_dir / (expected if resolved.backend == "onnxruntime" and expected else "model.onnx")
        if resolved.backend in ("onnxruntime", "python") and onnx_file.is_file():
            _check_onnx(cf, onnx_file, f"{rel}/{onnx_file.name}", controls=resolved.backend == "onnxruntime",
                        filled="io" in folder.fills and resolved.backend == "onnxruntime")
    return findings


def _check_python(cf: ConfigFile, folder: ModelFolder, resolved: Resolved) -> None:
    """The python backend's stub: a model file whose name ends in '.py'; an execution environment that exists."""
    filename = resolved.default_model_filename
    if filename and not filename.endswith(".py"):
        cf.add("python-model-file", f"the python backend loads '{filename}', but its stub refuses a model file whose "
               "name does not end in '.py'", ("default_model_filename",) if cf.config.default_model_filename else
               ("name",))
    if EXECUTION_ENV_PATH in cf.config.parameters:
        value = cf.config.parameters[EXECUTION_ENV_PATH].string_value
        rest = value[len(MODEL_DIRECTORY_VARIABLE):].lstrip("/")
        inside = value.startswith(MODEL_DIRECTORY_VARIABLE) and not relative_path_problem(rest)  # else path-escape's
        if inside and not (folder.path / rest).exists():
            cf.add("python-execution-env", f"{EXECUTION_ENV_PATH} '{value}' does not exist in the model folder; the "
                   "python backend refuses the model", cf.entry(("parameters",), EXECUTION_ENV_PATH, "value"))


# ---------------------------------------------------------------------------- ONNX agreement
def _check_onnx(cf: ConfigFile, onnx_path: FsPath, onnx_rel: str, *, controls: bool, filled: bool) -> None:
    """The graph's inputs and outputs against the config (and its control tensors, with ``controls``).

    With ``controls`` (the onnxruntime backend) the sequence batcher's control tensors are checked too: that backend
    feeds them as graph inputs. With ``filled``, its auto-complete lists every graph input when the config lists
    none.
    """
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
    # Graph inputs Triton feeds besides the config's inputs: control tensors, implicit states, batch inputs.
    fed = {ci.name for ci in config.sequence_batching.control_input} | {
        s.input_name for s in config.sequence_batching.state} | {t for bi in config.batch_input for t in bi.target_name}
    for kind, tensors in (("input", config.input), ("output", config.output)):
        graph_tensors = graph_io[kind]
        configured = {io.name for io in tensors} | (fed if kind == "input" else set())
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
                    (kind, index, "name"),
                )
                continue
            _compare_onnx_tensor(cf, kind, index, io, value_info, batching, onnx_rel)
        # Every graph input must be fed; a renamed one is already reported above with the graph's names.
        if kind == "input" and configured <= set(graph_tensors) and not (filled and not tensors):
            for name in unlisted:
                cf.add(
                    "onnx-io-name",
                    f"graph input '{name}' of {onnx_rel} is not in the config; Triton must feed every graph input",
                    ("input",) if len(config.input) else (),
                )
    if controls:
        _check_onnx_controls(cf, graph_io["input"], onnx_rel)


#: A boolean control's value list -> the config data type core gives its tensor (GetBooleanSequenceControlProperties).
_CONTROL_VALUE_TYPES = {"int32_false_true": "TYPE_INT32", "fp32_false_true": "TYPE_FP32",
                        "bool_false_true": "TYPE_BOOL"}


def _check_onnx_controls(cf: ConfigFile, graph_inputs: dict[str, Any], onnx_rel: str) -> None:
    """The onnxruntime backend's ValidateBooleanSequenceControl and ValidateTypedSequenceControl.

    Each START, END, READY and CORRID tensor is a graph input of dims [1] (after the batch axis) and of the control's
    data type.
    """
    Control = mc.ModelSequenceBatching.Control  # noqa: N806 (the proto's nested class)
    batching = cf.config.max_batch_size > 0
    for i, ci in enumerate(cf.config.sequence_batching.control_input):
        for control in ci.control:
            if not ci.name or control.kind not in Control.Kind.values():
                continue
            if control.kind == Control.CONTROL_SEQUENCE_CORRID:
                data_type = mc.DataType.Name(control.data_type) if control.data_type else ""
            else:
                data_type = next((t for field, t in _CONTROL_VALUE_TYPES.items() if getattr(control, field)), "")
            where = ("sequence_batching", 0, "control_input", i, "name")
            label = f"control tensor '{ci.name}' ({Control.Kind.Name(control.kind)})"
            value_info = graph_inputs.get(ci.name)
            if value_info is None:
                cf.add("backend-sequence-control", f"{label} is not a graph input of {onnx_rel}; the onnxruntime "
                       "backend refuses a control the model does not provide", where)
                continue
            tensor_type = value_info.type.tensor_type
            graph_type = ONNX_DATA_TYPES.get(tensor_type.elem_type, f"ONNX element type {tensor_type.elem_type}")
            if data_type and graph_type != data_type:
                cf.add("backend-sequence-control", f"{label} is {data_type} in the config but {graph_type} in "
                       f"{onnx_rel}; the onnxruntime backend refuses it", where)
            if tensor_type.HasField("shape"):
                dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim][batching:]
                if dims != [1]:
                    cf.add("backend-sequence-control", f"{label} has dims {dims} in {onnx_rel}"
                           f"{' after the batch axis' if batching else ''}; the onnxruntime backend needs [1]", where)


def _compare_onnx_tensor(
    cf: ConfigFile, kind: str, index: int, io: Any, value_info: Any, batching: bool, onnx_rel: str
) -> None:
    label = f"{kind} '{io.name}'"
    tensor_type = value_info.type.tensor_type
    graph_type = ONNX_DATA_TYPES.get(tensor_type.elem_type, f"ONNX element type {tensor_type.elem_type}")
    config_type = mc.DataType.Name(io.data_type)
    if io.data_type != mc.TYPE_INVALID and graph_type != config_type:
        cf.add(
            "onnx-data-type",
            f"{label} is {config_type} in the config but {graph_type} in {onnx_rel}",
            (kind, index, "data_type"),
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
            (kind, index, shape_name),
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
        where = (kind, index, shape_name, "#", k) if shape_name == "dims" else (kind, index, "reshape")
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
