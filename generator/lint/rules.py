"""The one table of lint rules: each rule's severity and area, the Triton checks it ports, and what holds it.

A check names the Triton source, its refusal's words and the lint case the real Triton refuses and loads.
docs/lint-rules.md is generated from this table (:func:`generator.lint.rules_doc.rules_markdown`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AREAS", "ERROR", "NOT_PORTED", "RULES", "RULE_TABLE", "WARNING", "Rule", "TritonCheck", "rule",
]

ERROR = "error"
WARNING = "warning"

#: Areas of Triton's rules: one module of :mod:`generator.lint` each.
AREAS = {
    "layout": "Repository layout and the files a config names (layout.py)",
    "backends": "Platform and backend inference, model files, runtimes, ONNX agreement (backends.py); what each "
                "backend takes in a config: data types, control tensors, instance kinds (backend_config.py)",
    "model_config": "Model configuration: inputs and outputs, batch I/O, instance groups, warmup, metrics "
                    "(model_config.py)",
    "batching": "Dynamic and sequence batching (batching.py)",
    "ensembles": "Ensembles: scheduling, steps across repositories, versions, dependencies, wiring (ensembles.py)",
    "rate_limiter": "Rate limiter resources across models, with --rate-limit=execution_count (rate_limiter.py)",
    "environment": "What the target machine has: GPUs and installed backends (environment.py)",
    "tensorrt": "TensorRT plans: the optimization profiles instance groups list, against each other and the plan's "
                "(tensorrt.py)",
}

MCU = "src/model_config_utils.cc"
MRM = "src/model_repository_manager/model_repository_manager.cc"
LIFECYCLE = "src/model_repository_manager/model_lifecycle.cc"
ENSEMBLE_UTILS = "src/ensemble_scheduler/ensemble_utils.cc"
LOCAL_FS = "src/filesystem/implementations/local.h"
BACKEND_MODEL = "src/backend_model.cc"
INSTANCE = "src/backend_model_instance.cc"
SEQUENCE = "src/sequence_batch_scheduler/sequence_batch_scheduler.cc"
PYTHON_STUB = "python_backend: src/pb_stub.cc"
TRT_MODEL = "tensorrt_backend: src/model_state.cc"
NO_TENSORRT = "the CPU server has no TensorRT backend"
NO_ONNXRUNTIME = "the CPU server has no onnxruntime backend"
NO_PYTORCH = "the CPU server has no pytorch backend"
NO_TENSORFLOW = "the CPU server has no tensorflow backend"
NO_OPENVINO = "the CPU server has no openvino backend"
LIBTORCH = "pytorch_backend: src/libtorch.cc"
ONNXRUNTIME = "onnxruntime_backend: src/onnxruntime.cc"
RATE_LIMITER = "src/rate_limiter.cc"
METRICS_252 = ("model_metrics is newer than Triton 2.51 (2.52+); 2.51 refuses the field itself "
               "('failed to read text proto')")


@dataclass(frozen=True, slots=True)
class TritonCheck:
    """One place Triton refuses a model, and the test case that holds it."""

    source: str  #: file in triton-inference-server/core (or ``backend: file``)
    function: str
    message: str  #: words of Triton's refusal the server test matches
    case: str  #: the id of the lint case (a flagged repository and its accepted neighbour) that holds the check
    server: str = ""  #: why the case is not loaded into the CPU test server ("" when it is)


@dataclass(frozen=True, slots=True)
class Rule:
    """One lint rule: id, severity, area, what it checks, and what holds it."""

    id: str
    severity: str
    area: str
    summary: str
    checks: tuple[TritonCheck, ...] = ()
    cases: tuple[str, ...] = ()  #: cases Triton loads though lint flags them (or that no server runs)
    tests: tuple[str, ...] = ()  #: other tests holding the rule, as pytest node ids (shown in docs/lint-rules.md)
    server: str = ""  #: why ``cases`` are not loaded into the CPU test server ("" when they are)
    #: for an error beyond Triton whose ``cases`` load: the Triton source file and function that load them
    loaded_by: tuple[str, str] | None = None


def _c(source: str, function: str, message: str, case: str, server: str = "") -> TritonCheck:
    return TritonCheck(source, function, message, case, server)


RULE_TABLE: tuple[Rule, ...] = (
    # ------------------------------------------------------------------------------------------------ layout
    Rule("repository-missing", ERROR, "layout", "the repository path is not a directory",
         tests=("tests/lint/test_run.py::test_missing_repository_is_one_error",)),
    Rule("repository-empty", WARNING, "layout", "the repository holds no model folders",
         tests=("tests/lint/test_run.py::test_bad_case_reports_exactly_the_planted_defect",)),
    Rule("model-duplicate", ERROR, "layout", "a model folder name found in more than one repository",
         checks=(_c(MRM, "ModelRepositoryManager::Poll", "not unique across all model repositories",
                    "model-duplicate"),)),
    Rule("model-folder-hidden", WARNING, "layout",
         "a hidden folder (.name) in a repository: Triton's model-control none/poll modes load it as a model",
         tests=("tests/lint/test_run.py::test_hidden_folders_are_models_to_triton",
                "tests/lint/test_triton.py::test_a_hidden_folder_stops_triton_in_model_control_none")),
    Rule("config-missing", WARNING, "layout",
         "model folder without config.pbtxt, on a server with auto-complete on (Triton's default) and a backend that "
         "fills a config in (python, onnxruntime, tensorrt, openvino, a TensorFlow SavedModel)",
         cases=("config-missing",)),
    Rule("config-required", ERROR, "layout",
         "model folder without config.pbtxt where Triton needs one: auto-complete is off (lint "
         "--disable-auto-complete-config, as the server's), or the backend fills none in (pytorch, a TensorFlow "
         "GraphDef)",
         checks=(_c(MRM, "ModelRepositoryManager::InitializeModelInfo (auto-complete off: ReadTextProto)",
                    "config.pbtxt: No such file or directory", "config-required"),
                 _c(LIBTORCH, "ModelState::AutoCompleteConfig (skipped), ModelInstanceState::ValidateInputs",
                    "model configuration must contain at least one input, none were specified",
                    "config-required-pytorch", server=NO_PYTORCH),
                 _c("src/model.cc", "Model::Init", "model configuration is not provided for model",
                    "config-required-graphdef", server=NO_TENSORFLOW))),
    Rule("config-parse", ERROR, "layout", "config.pbtxt does not parse as ModelConfig (protobuf text format)",
         checks=(_c(MRM, "ModelRepositoryManager::InitializeModelInfo (ReadTextProto)",
                    "failed to read text proto from", "config-parse"),)),
    Rule("config-unreadable", ERROR, "layout",
         "beyond Triton: config.pbtxt is not a regular file, or larger than gen-repo's config_bytes limit",
         tests=("tests/lint/test_run.py::test_a_huge_or_special_config_is_unreadable_not_parsed",)),
    Rule("config-name-mismatch", ERROR, "layout", "config 'name' differs from the model folder name",
         checks=(_c(MRM, "ModelRepositoryManager::InitializeModelInfo", "directory name must equal model name",
                    "config-name-mismatch"),)),
    Rule("version-missing", ERROR, "layout", "no numeric version folder, so Triton serves no version",
         checks=(_c(LIFECYCLE, "ModelLifeCycle::AsyncLoad",
                    "at least one version must be available under the version policy", "version-missing"),)),
    Rule("version-policy", ERROR, "layout", "version_policy selects no version folder that exists",
         checks=(_c(LIFECYCLE, "ModelLifeCycle::AsyncLoad (VersionsToLoad)",
                    "at least one version must be available under the version policy", "version-policy-none"),)),
    Rule("version-policy-missing", WARNING, "layout",
         "version_policy lists a version whose folder does not exist (Triton logs it and loads the others)",
         cases=("version-policy-partial",)),
    Rule("version-leading-zero", WARNING, "layout",
         "a version folder with leading zeros ('02'): Triton ignores it and loads the others, a tool reading it as a "
         "number takes it for version 2, gen-repo's verify and publish refuse it",
         cases=("version-leading-zero",)),
    Rule("version-folder-name", ERROR, "layout",
         "beyond Triton: a folder that reads as a version but is not exactly its name ('+1', ' 1', '1\\n', non-ASCII "
         "digits, past int64; generator/naming.py version_folder); Triton loads version 1 from '1' or skips it, "
         "gen-repo's verify and publish refuse it",
         cases=("version-folder-name",),
         tests=("tests/lint/test_run.py::test_folders_that_are_not_exactly_a_version_are_flagged",)),
    Rule("version-non-numeric", WARNING, "layout", "non-numeric folder in a model folder (Triton ignores it)",
         cases=("version-non-numeric",)),
    Rule("version-folder-prefix", ERROR, "layout",
         "a folder like '1abc' that Triton reads as version 1 (std::stoll), then loads from a '1/' that is missing",
         checks=(_c(LIFECYCLE, "VersionsToLoad", "(no refusal: the python backend waits for 1/model.py)",
                    "version-folder-prefix", server="the load never finishes in 2.51 (python backend)"),)),
    Rule("warmup-data-file", ERROR, "layout",
         "a warmup input_data_file missing from <model>/warmup/ or shorter than its dims",
         checks=(_c(INSTANCE, "TritonModelInstance::GenerateWarmupData", "failed to open text file for read",
                    "warmup-data-file-missing"),
                 _c(INSTANCE, "TritonModelInstance::GenerateWarmupData", "warmup setting expects 16 bytes",
                    "warmup-data-file-short"))),
    Rule("warmup-data-file-long", WARNING, "layout",
         "a warmup input_data_file longer than its dims (Triton reads only the start)",
         cases=("warmup-data-file-long",)),
    Rule("initial-state-file", ERROR, "layout",
         "a sequence state's initial_state data_file missing from <model>/initial_state/ or shorter than its dims",
         checks=(_c(SEQUENCE, "SequenceBatchScheduler::GenerateInitialStateData", "failed to open text file for read",
                    "initial-state-file-missing"),
                 _c(SEQUENCE, "SequenceBatchScheduler::GenerateInitialStateData", "initial_state setting expects 16 "
                    "bytes", "initial-state-file-short"))),
    Rule("label-file-missing", ERROR, "layout", "an output's label_filename is missing from the model folder",
         checks=(_c("src/model.cc", "Model::Init (LabelProvider::AddLabels)", "failed to open text file for read",
                    "label-file-missing"),)),
    Rule("batch-strategy-path", ERROR, "layout", "parameter TRITON_BATCH_STRATEGY_PATH with sequence batching",
         checks=(_c(BACKEND_MODEL, "TritonModel::Create",
                    "TRITON_BATCH_STRATEGY_PATH cannot be specified with sequence batcher",
                    "batch-strategy-sequence"),)),
    Rule("path-escape", ERROR, "layout",
         "a file, folder or library a config names leaves the model's folder, or cannot be shown to stay in it "
         "(generator/confinement.py; beyond Triton where 2.51 follows it, e.g. a model.py outside the repository)",
         checks=(_c(BACKEND_MODEL, "TritonModel::GetBackendLibraryProperties", "escapes backend directory",
                    "runtime-escape"),
                 _c(BACKEND_MODEL, "TritonModel::Create", "Batching library path not found",
                    "batch-strategy-relative"),
                 _c(BACKEND_MODEL, "TritonModel::Create", "Batching library path not found",
                    "batch-strategy-missing")),
         tests=("tests/test_confinement.py::test_lint_reports_each_escape_at_its_line",
                "tests/lint/test_run.py::test_warmup_data_file_short_or_outside_the_warmup_folder")),
    Rule("symlink", ERROR, "layout",
         "beyond Triton: a model folder, or a folder or file anywhere in one (version folders, warmup/, gen_repo/ and "
         "what they hold), is a symlink; Triton follows it wherever it leads on the server (its local file system "
         "stats through links and uses paths in place), e.g. to a model.py outside the repository",
         cases=("symlink-version-folder",),
         tests=("tests/lint/test_run.py::test_a_symlink_at_any_level_of_a_model_folder_is_an_error",),
         loaded_by=(LOCAL_FS, "LocalFileSystem::IsDirectory (stat follows links), GetDirectorySubdirs; "
                              "LocalizePath uses the path in place")),
    Rule("repository-is-a-model", ERROR, "layout",
         "the folder given is a model folder (it holds config.pbtxt), not a repository",
         tests=("tests/lint/test_run.py::test_cli_on_a_model_folder_says_a_repository_folder_is_expected",)),
    # ------------------------------------------------------------------------------------------------ backends
    Rule("platform-missing", ERROR, "backends",
         "no platform or backend, and Triton cannot infer one from the model files or a <name>.<backend> folder",
         checks=(_c(MCU, "AutoCompleteBackendFields", "Could not determine backend for model", "platform-missing"),
                 _c(MCU, "ValidateModelConfig", "unexpected platform type '' for", "platform-missing-default-file"))),
    Rule("platform-unknown", ERROR, "backends", "a platform Triton does not know, with no backend named",
         checks=(_c(MCU, "ValidateModelConfig", "unexpected platform type 'foo'", "platform-unknown"),
                 _c(MCU, "ValidateModelConfig", "unexpected platform type 'libtorch'", "platform-unknown-libtorch"))),
    Rule("platform-backend-mismatch", ERROR, "backends", "'platform' and 'backend' name different backends",
         checks=(_c(MCU, "ValidateModelConfig", "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, "
                    "tensorrt", "platform-backend-mismatch"),
                 _c(MCU, "ValidateModelConfig", "unexpected 'platform' and 'backend' pair, got:, tensorflow",
                    "platform-backend-tensorflow"))),
    Rule("model-file-missing", ERROR, "backends", "a version folder lacks the model file its backend loads",
         checks=(_c("python_backend: src/python_be.cc", "ModelInstanceState::SetupStubProcess",
                    "(no refusal: the stub waits for the missing file)", "model-file-missing",
                    server="the load never finishes in 2.51 (python backend)"),),
         tests=("tests/lint/test_run.py::test_bad_case_reports_exactly_the_planted_defect",)),
    Rule("python-model-file", ERROR, "backends", "a python-backend model file whose name does not end in '.py'",
         checks=(_c(PYTHON_STUB, "Stub::StubSetup", "Model name must end with '.py'", "python-model-file"),)),
    Rule("python-execution-env", ERROR, "backends",
         "a python-backend EXECUTION_ENV_PATH under $$TRITON_MODEL_DIRECTORY that does not exist",
         checks=(_c("python_backend: src/python_be.cc", "ModelState (EXECUTION_ENV_PATH)",
                    "Failed to get the canonical path for", "python-execution-env"),)),
    Rule("cc-model-file-missing", ERROR, "backends", "a file named in cc_model_filenames is missing",
         checks=(_c("tensorrt_backend: src/model_state.cc", "ModelState::LoadPlan", "(TensorRT backend)",
                    "cc-model-file-missing", server=NO_TENSORRT),)),
    Rule("default-model-file-fallback", WARNING, "backends",
         "only cc_model_filenames exist; GPUs not listed have no plan",
         tests=("tests/lint/test_run.py::test_bad_case_reports_exactly_the_planted_defect",)),
    Rule("onnx-skipped", WARNING, "backends", "the onnx package is not installed, so ONNX graphs were not checked",
         tests=("tests/lint/test_run.py::test_onnx_checks_are_skipped_with_a_warning_without_onnx",)),
    Rule("onnx-load", ERROR, "backends", "model.onnx cannot be read as an ONNX model",
         checks=(_c("onnxruntime_backend: src/onnxruntime.cc", "ModelState::LoadModel", "(onnxruntime backend)",
                    "onnx-load", server=NO_ONNXRUNTIME),)),
    Rule("onnx-io-name", ERROR, "backends",
         "config and ONNX graph disagree on input/output names or counts (with auto-complete on, a config that lists "
         "no inputs gets the graph's)",
         checks=(_c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-io-name-inferred", server=NO_ONNXRUNTIME),
                 _c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-input-missing-inferred", server=NO_ONNXRUNTIME))),
    Rule("onnx-data-type", ERROR, "backends", "config data_type differs from the ONNX element type",
         checks=(_c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-data-type", server=NO_ONNXRUNTIME),)),
    Rule("onnx-rank", ERROR, "backends",
         "config rank (with the batch axis when max_batch_size > 0) differs from the ONNX rank",
         checks=(_c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-rank-inferred", server=NO_ONNXRUNTIME),)),
    Rule("onnx-dim", ERROR, "backends", "a static config dim differs from the ONNX graph's (or a fixed batch axis)",
         checks=(_c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-dim-inferred", server=NO_ONNXRUNTIME),
                 _c("onnxruntime_backend: src/onnxruntime.cc", "ModelInstanceState::ValidateInputs",
                    "(onnxruntime backend)", "onnx-batch-inferred", server=NO_ONNXRUNTIME))),
    Rule("onnx-dim-dynamic", WARNING, "backends", "config says -1 where the ONNX graph fixes the size",
         tests=("tests/lint/test_run.py::test_bad_case_reports_exactly_the_planted_defect",)),
    Rule("backend-data-type", ERROR, "backends",
         "a data type the backend refuses: pytorch's TYPE_UINT16/32/64 and TYPE_BF16 (inputs, outputs, states), a "
         "CORRID control torch has no type for, TYPE_STRING beyond a 1-D list; onnxruntime 2.51's TYPE_BF16",
         checks=(_c(LIBTORCH, "ModelInstanceState::ValidateInputs",
                    "unsupported datatype TYPE_UINT32 for input", "backend-data-type-pytorch-input",
                    server=NO_PYTORCH),
                 _c(LIBTORCH, "ModelInstanceState::ValidateOutputs",
                    "unsupported datatype TYPE_UINT64 for output", "backend-data-type-pytorch-output",
                    server=NO_PYTORCH),
                 _c(LIBTORCH, "ModelInstanceState::ValidateTypedSequenceControl",
                    "input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch.",
                    "backend-data-type-pytorch-corrid", server=NO_PYTORCH),
                 _c(LIBTORCH, "ModelInstanceState::ValidateInputs",
                    "Triton only supports 1 dimensional List of String as input", "backend-data-type-pytorch-string",
                    server=NO_PYTORCH),
                 _c(ONNXRUNTIME, "ModelInstanceState::ValidateInputs (ModelConfigDataTypeToOnnxDataType)",
                    "unsupported datatype TYPE_BF16 for input", "backend-data-type-onnx-bf16",
                    server=NO_ONNXRUNTIME))),
    Rule("backend-sequence-control", ERROR, "backends",
         "a sequence control tensor the backend refuses: pytorch's not named <name>__<index>; onnxruntime's not a "
         "graph input of dims [1] and the control's data type",
         checks=(_c(LIBTORCH, "ModelInstanceState::ValidateBooleanSequenceControl",
                    "does not follow <name>__<index> naming convention", "backend-control-name-pytorch",
                    server=NO_PYTORCH),
                 _c(ONNXRUNTIME, "ModelInstanceState::ValidateBooleanSequenceControl",
                    "in model has dims [2] but dims [1] is expected", "backend-control-dims-onnx",
                    server=NO_ONNXRUNTIME),
                 _c(ONNXRUNTIME, "ModelInstanceState::ValidateBooleanSequenceControl",
                    "but the model configuration specifies data-type TYPE_INT32",
                    "backend-control-type-onnx", server=NO_ONNXRUNTIME),
                 _c(ONNXRUNTIME, "ModelInstanceState::ValidateBooleanSequenceControl",
                    "but model does not provide that input", "backend-control-missing-onnx",
                    server=NO_ONNXRUNTIME))),
    Rule("backend-io-required", ERROR, "backends",
         "a pytorch config without inputs or outputs (the pytorch backend fills none in)",
         checks=(_c(LIBTORCH, "ModelInstanceState::ValidateInputs",
                    "model configuration must contain at least one input, none were specified",
                    "backend-io-required-pytorch", server=NO_PYTORCH),)),
    Rule("optional-input-onnxruntime", ERROR, "backends",
         "an optional input on an onnxruntime model with max_batch_size > 0 (the python backend loads it)",
         checks=(_c(ONNXRUNTIME, "ModelInstanceState::ValidateInputs",
                    "is not supported for models that support batching", "optional-input-onnxruntime",
                    server=NO_ONNXRUNTIME),)),
    Rule("instance-kind-backend", ERROR, "backends",
         "an instance kind the backend cannot run: tensorrt only KIND_GPU, openvino only KIND_CPU (KIND_AUTO as core "
         "normalizes it, when --gpus is known)",
         checks=(_c("tensorrt_backend: src/instance_state.cc", "ModelInstanceState::ModelInstanceState",
                    "TensorRT backend supports only GPU device", "instance-kind-tensorrt-cpu", server=NO_TENSORRT),
                 _c("openvino_backend: src/openvino.cc", "ModelInstanceState::ModelInstanceState",
                    "Triton openVINO backend supports only CPU device", "instance-kind-openvino-gpu",
                    server=NO_OPENVINO))),
    # ------------------------------------------------------------------------------------------------ model_config
    Rule("max-batch-size", ERROR, "model_config", "max_batch_size is negative",
         checks=(_c(MCU, "ValidateModelConfig", "'max_batch_size' must be non-negative value", "max-batch-size"),)),
    Rule("tensor-name", ERROR, "model_config", "an input or output without a name",
         checks=(_c(MCU, "ValidateIOShape", "model input must specify 'name'", "tensor-name"),
                 _c(MCU, "ValidateIOShape", "model output must specify 'name'", "tensor-name-output"))),
    Rule("tensor-duplicate-name", WARNING, "model_config",
         "two inputs (or two outputs) share a name: Triton keeps one, and counts both inputs as required",
         cases=("tensor-duplicate-name",)),
    Rule("tensor-data-type", ERROR, "model_config",
         "an input or output without data_type (with auto-complete on, only where the backend fills none in: not "
         "tensorrt, openvino, a SavedModel, or a python model.py with auto_complete_config)",
         checks=(_c(MCU, "ValidateIOShape", "must specify 'data_type'", "tensor-data-type"),)),
    Rule("dims-empty", ERROR, "model_config",
         "an input or output without dims (empty shapes are not allowed; auto-complete as for tensor-data-type)",
         checks=(_c(MCU, "ValidateIOShape", "must specify 'dims'", "dims-empty"),)),
    Rule("dims-invalid", ERROR, "model_config", "a dim (or reshape dim) that is neither -1 nor >= 1",
         checks=(_c(MCU, "ValidateIOShape", "dimension must be integer >= 1, or -1", "dims-invalid"),
                 _c(MCU, "ValidateIOShape", "reshape dimensions must be integer >= 1, or -1", "dims-invalid-reshape"))),
    Rule("dims-int32", WARNING, "model_config",
         "a dim above the int32 range (TensorRT and most backends cannot serve it)",
         cases=("dims-int32",)),
    Rule("reshape-size", ERROR, "model_config", "reshape has a different element count than dims",
         checks=(_c(MCU, "ValidateIOShape", "has different size for dims and reshape", "reshape-size"),
                 _c(MCU, "ValidateIOShape", "has different number of variable-size dimensions for dims and reshape",
                    "reshape-size-variable-count"),
                 _c(MCU, "ValidateIOShape", "has different size for dims and reshape", "reshape-size-variable"))),
    Rule("reshape-scalar-nobatch", ERROR, "model_config", "empty (scalar) reshape on a model with max_batch_size 0",
         checks=(_c(MCU, "ValidateIOShape", "cannot have empty reshape for non-batching model",
                    "reshape-scalar-nobatch"),)),
    Rule("tensor-format", ERROR, "model_config", "FORMAT_NCHW/FORMAT_NHWC input without exactly 3 dims",
         checks=(_c(MCU, "ValidateModelInput", "model input NHWC/NCHW require 3 dims", "tensor-format"),)),
    Rule("shape-tensor-platform", ERROR, "model_config", "is_shape_tensor on a model whose platform is not TensorRT",
         checks=(_c(MCU, "ValidateModelInput", "shape tensors are only supported for TensorRT platform",
                    "shape-tensor-input"),
                 _c(MCU, "ValidateModelOutput", "shape tensors are only supported for TensorRT platform",
                    "shape-tensor-output"))),
    Rule("non-linear-format", ERROR, "model_config",
         "is_non_linear_format_io on a platform that is not TensorRT, or without exactly 3 dims",
         checks=(_c(MCU, "ValidateNonLinearFormatIO", "Non-linear IO format is only supported for the TensorRT "
                    "platform", "non-linear-platform"),
                 _c(MCU, "ValidateNonLinearFormatIO", "Non-linear IO format input requires 3 dims",
                    "non-linear-dims"))),
    Rule("optional-input-batching", WARNING, "model_config",
         "optional input on a batching scheduler (requests with and without it are never batched together)",
         cases=("optional-input-batching",)),
    Rule("batch-io", ERROR, "model_config", "batch_input/batch_output naming unknown tensors, wrong sources or types",
         checks=(_c(MCU, "ValidateBatchIO", "unknown batch input kind", "batch-input-kind"),
                 _c(MCU, "ValidateBatchIO", "expects 1 source input, got 2", "batch-input-sources"),
                 _c(MCU, "ValidateBatchIO", "batch input data type must be TYPE_INT32 or TYPE_FP32",
                    "batch-input-data-type"),
                 _c(MCU, "ValidateBatchIO", "unknown source input name 'nope'", "batch-input-source-unknown"),
                 _c(MCU, "ValidateBatchIO", "unknown target output name 'nope'", "batch-output-target-unknown"),
                 _c(MCU, "ValidateBatchIO", "target output name 'y' can only be specified once",
                    "batch-output-target-twice"))),
    Rule("instance-group-count", WARNING, "model_config",
         "instance group count below 0 (Triton uses its default count)", cases=("instance-group-count",)),
    Rule("instance-group-gpus", ERROR, "model_config", "gpus on a KIND_CPU/KIND_MODEL group, or a negative gpu id",
         checks=(_c(MCU, "ValidateInstanceGroup", "has kind KIND_CPU but specifies one or more GPUs",
                    "instance-group-cpu-gpus"),
                 _c(MCU, "ValidateInstanceGroup", "has kind KIND_MODEL but specifies one or more GPUs",
                    "instance-group-model-gpus"),
                 _c(MCU, "ValidateInstanceGroup", "specifies invalid or unsupported gpu id -1",
                    "instance-group-negative-gpu"))),
    Rule("instance-group-profile", ERROR, "model_config",
         "profile on a non-TensorRT platform, or a profile that is not a non-negative integer (past int32 Triton "
         "aborts)",
         checks=(_c(MCU, "ValidateInstanceGroup", "specifies profile field which is only supported for TensorRT",
                    "instance-group-profile-platform"),
                 _c(MCU, "ValidateInstanceGroup", "specifies invalid profile -1", "instance-group-profile-negative"),
                 _c(MCU, "ValidateInstanceGroup (GetProfileIndex)", "unable to parse 'abc'",
                    "instance-group-profile-text"),
                 _c(MCU, "ValidateInstanceGroup (GetProfileIndex: stoi's std::out_of_range is not caught)",
                    "terminate called after throwing an instance of 'std::out_of_range'",
                    "instance-group-profile-int32",
                    server="tritonserver 2.51 aborts (SIGABRT) loading it; "
                           "tests/lint/test_triton.py::test_a_profile_past_int32_takes_triton_down"))),
    Rule("response-cache", ERROR, "model_config",
         "response cache with decoupled transactions or sequence batching, also on an ensemble Triton makes "
         "decoupled through a step (nested ensembles included)",
         checks=(_c(MCU, "ValidateModelConfig", "Response Cache does not currently support model",
                    "response-cache-decoupled"),
                 _c(MCU, "ValidateModelConfig", "with sequence batching scheduler", "response-cache-sequence"),
                 _c(ENSEMBLE_UTILS, "ValidateEnsembleConfig (sets the ensemble decoupled), then Model::Init's "
                    "ValidateModelConfig", "Response Cache does not currently support model",
                    "response-cache-ensemble-step"),
                 _c(ENSEMBLE_UTILS, "ValidateEnsembleConfig (an outer ensemble reads the inner one's loaded config)",
                    "Response Cache does not currently support model", "response-cache-nested-ensemble"))),
    Rule("model-metrics", ERROR, "model_config",
         "model_metrics (ModelConfig field 26): a metric control without identifier, family or histogram buckets",
         checks=(_c(MCU, "ValidateModelMetrics", "metric control must specify 'metric_identifier'",
                    "metrics-identifier", server=METRICS_252),
                 _c(MCU, "ValidateModelMetrics", "metric identifier must specify non-empty 'family'",
                    "metrics-family", server=METRICS_252),
                 _c(MCU, "ValidateModelMetrics", "metric control must specify 'histogram_options'",
                    "metrics-histogram", server=METRICS_252),
                 _c(MCU, "ValidateModelMetrics", "histogram options must specify non-empty 'buckets'",
                    "metrics-buckets", server=METRICS_252))),
    Rule("warmup-input-unknown", WARNING, "model_config",
         "a warmup input that is not a model input (Triton passes it as an extra tensor the model never declared)",
         cases=("warmup-input-unknown",)),
    Rule("warmup-input-missing", ERROR, "model_config", "a warmup sample without a required (non-optional) input",
         checks=(_c(INSTANCE, "TritonModelInstance::GenerateWarmupData (the warmup request)",
                    "expected 1 inputs but got 0 inputs", "warmup-input-missing"),)),
    Rule("warmup-dims", ERROR, "model_config", "warmup dims not fully specified or not matching the input's dims",
         checks=(_c(INSTANCE, "TritonModelInstance::GenerateWarmupData",
                    "warmup setting expects all variable-size dimensions are specified", "warmup-dims-variable"),
                 _c(INSTANCE, "TritonModelInstance::GenerateWarmupData (the warmup request)",
                    "unexpected shape for input 'x'", "warmup-dims"))),
    Rule("warmup-data-type", ERROR, "model_config", "warmup input data_type differs from the input's",
         checks=(_c(INSTANCE, "TritonModelInstance::GenerateWarmupData (the warmup request)",
                    "data-type is 'INT32', but model", "warmup-data-type"),)),
    Rule("warmup-input-data", ERROR, "model_config", "warmup input without zero_data, random_data or input_data_file",
         checks=(_c(INSTANCE, "TritonModelInstance::GenerateWarmupData", "to have input_data_type set",
                    "warmup-input-data"),)),
    Rule("warmup-batch-size", ERROR, "model_config",
         "warmup batch_size above max_batch_size (or above 1 without batching)",
         checks=(_c(INSTANCE, "TritonModelInstance::WarmUp (the warmup request)", "max allowed is 4",
                    "warmup-batch-size", server="tritonserver 2.51 crashes (SIGSEGV) loading it; "
                    "tests/lint/test_triton.py::test_an_oversized_warmup_batch_takes_triton_down"),)),
    # ------------------------------------------------------------------------------------------------ batching
    Rule("dynamic-batching-no-batch", WARNING, "batching",
         "dynamic_batching on a model with max_batch_size 0 (the batcher has no batch axis to fill)",
         cases=("dynamic-batching-no-batch",)),
    Rule("preferred-batch-size", ERROR, "batching", "preferred_batch_size outside 1..max_batch_size",
         checks=(_c(MCU, "ValidateModelConfig", "dynamic batching preferred size must be positive",
                    "preferred-batch-size-zero"),
                 _c(MCU, "ValidateModelConfig", "dynamic batching preferred size must be <= max batch size",
                    "preferred-batch-size"),
                 _c(MCU, "ValidateModelConfig", "sequence batching preferred batch size must be positive",
                    "preferred-batch-size-sequence-zero"),
                 _c(MCU, "ValidateModelConfig", "sequence batching preferred batch size must be <= max batch size",
                    "preferred-batch-size-sequence"))),
    Rule("priority-level", ERROR, "batching",
         "default_priority_level or a queue policy level outside 1..priority_levels",
         checks=(_c(MCU, "ValidateModelConfig", "default priority level must be in range [1, 2]", "priority-level"),
                 _c(MCU, "ValidateModelConfig", "priority queue policy must have priority level in range [1, 2]",
                    "priority-level-policy"))),
    Rule("preserve-ordering", ERROR, "batching", "preserve_ordering with priority_levels > 1 or a DELAY timeout action",
         checks=(_c(MCU, "ValidateModelConfig", "Only one priority level is allowed when 'preserve_ordering' is true",
                    "preserve-ordering-levels"),
                 _c(MCU, "ValidateModelConfig", "Queue policy can not have DELAY as timeout action when "
                    "'preserve_ordering' is true", "preserve-ordering-delay"),
                 _c(MCU, "ValidateModelConfig", "Queue policy can not have DELAY as timeout action when "
                    "'preserve_ordering' is true", "preserve-ordering-delay-priority"))),
    Rule("sequence-control", ERROR, "batching",
         "sequence batching control tensors: unnamed, one name for several control inputs, several tensors of one "
         "kind, a START/END/READY without exactly one two-value false/true list, a bad CORRID",
         checks=(_c(MCU, "GetBooleanSequenceControlProperties", "sequence batching control tensor must have a name",
                    "sequence-control-unnamed"),
                 _c(MCU, "GetBooleanSequenceControlProperties", "is specified for multiple control kinds",
                    "sequence-control-shared-name"),
                 _c(MCU, "GetBooleanSequenceControlProperties",
                    "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors",
                    "sequence-control-two-start"),
                 _c(MCU, "GetBooleanSequenceControlProperties",
                    "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors", "sequence-control-two-end"),
                 _c(MCU, "GetBooleanSequenceControlProperties", "must specify either 'int32_false_true', "
                    "'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_READY",
                    "sequence-control-ready-value"),
                 _c(MCU, "GetBooleanSequenceControlProperties", "specifies more than one from 'int32_false_true', "
                    "'fp32_false_true' and 'bool_false_true'", "sequence-control-two-values"),
                 _c(MCU, "GetBooleanSequenceControlProperties", "'fp32_false_true' must have exactly 2 entries",
                    "sequence-control-value-count"),
                 _c(MCU, "GetTypedSequenceControlProperties", "sequence batching must not specify either "
                    "'int32_false_true'", "sequence-control-corrid-value"),
                 _c(MCU, "ValidateModelConfig", "unexpected data type for control CONTROL_SEQUENCE_CORRID",
                    "sequence-control-corrid-type"))),
    Rule("sequence-slot-utilization", ERROR, "batching", "direct minimum_slot_utilization outside 0..1",
         checks=(_c(MCU, "ValidateModelConfig", "sequence batching minimum slot utilization must be in range",
                    "sequence-slot-utilization"),)),
    Rule("sequence-state", ERROR, "batching",
         "implicit state: several initial_state entries, or one without name, data, matching type or fixed dims",
         checks=(_c(SEQUENCE, "SequenceBatchScheduler::Create", "must contain exactly one or zero element",
                    "sequence-state-two-initial"),
                 _c(SEQUENCE, "GenerateInitialStateData", "does not match the state data type",
                    "sequence-state-data-type"),
                 _c(SEQUENCE, "GenerateInitialStateData", "Field 'name' must be set when using initial_state",
                    "sequence-state-unnamed"),
                 _c(SEQUENCE, "GenerateInitialStateData", "State input name 'si' specified more than once",
                    "sequence-state-twice"),
                 _c(SEQUENCE, "GenerateInitialStateData", "Number of dimensions in 'initial_state' doesn't match",
                    "sequence-state-rank"),
                 _c(SEQUENCE, "GenerateInitialStateData", "contains variable dimensions",
                    "sequence-state-variable"),
                 _c(SEQUENCE, "GenerateInitialStateData", "doesn't match 'state' dim description",
                    "sequence-state-dims"),
                 _c(SEQUENCE, "GenerateInitialStateData", "to have state_data set", "sequence-state-data"))),
    # ------------------------------------------------------------------------------------------------ ensembles
    Rule("ensemble-config", ERROR, "ensembles",
         "ensemble structure: platform/backend/scheduling pairing, steps and their maps, no instance groups, "
         "optimization or warmup",
         checks=(_c(MCU, "ValidateModelConfig", "must have platform type 'ensemble' and empty backend type",
                    "ensemble-backend"),
                 _c(MCU, "ValidateModelConfig", "ensemble scheduling must be set for ensemble",
                    "ensemble-no-scheduling"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "ensemble scheduling cannot be set for model",
                    "ensemble-scheduling-not-ensemble"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "instance group should not be specified for ensemble",
                    "ensemble-instance-group"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "model_warmup can not be specified for ensemble",
                    "ensemble-warmup"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "must specify 'step' for ensemble", "ensemble-no-step"),
                 _c(MCU, "BuildEnsembleGraph", "must specify 'model_name' in step 0", "ensemble-step-unnamed"),
                 _c(MCU, "BuildEnsembleGraph", "must specify 'input_map' in step 0", "ensemble-step-no-input-map"),
                 _c(MCU, "BuildEnsembleGraph", "must specify 'output_map' in step 0", "ensemble-step-no-output-map"))),
    Rule("ensemble-model-missing", ERROR, "ensembles",
         "an ensemble step names a model in none of the repositories (and not named as loaded elsewhere)",
         checks=(_c(MRM, "DependencyGraph::ConnectDependencyGraph",
                    "contains models that are not available or ambiguous", "ensemble-model-missing"),)),
    Rule("ensemble-step-version", ERROR, "ensembles",
         "a step's model_version that its model does not load (an omitted model_version means version 0; -1 is the "
         "latest)",
         checks=(_c(MRM, "ModelRepositoryManager::CheckNode", "whose required version 3 is not loaded",
                    "ensemble-step-version"),
                 _c(MRM, "ModelRepositoryManager::CheckNode", "whose required version 0 is not loaded",
                    "ensemble-step-version-omitted"))),
    Rule("ensemble-cycle", ERROR, "ensembles", "ensembles that step into each other, or an ensemble into itself",
         checks=(_c(MRM, "DependencyGraph::CircularDependencyCheck", "circular dependency between ensembles",
                    "ensemble-cycle"),
                 _c(MRM, "DependencyGraph::CircularDependencyCheck", "circular dependency between ensembles",
                    "ensemble-self"))),
    Rule("ensemble-map-name", ERROR, "ensembles",
         "an ensemble map names an input or output its step model does not have",
         checks=(_c(ENSEMBLE_UTILS, "ValidateTensorMapping", "is mapping to non-existing input",
                    "ensemble-map-input"),
                 _c(ENSEMBLE_UTILS, "ValidateTensorMapping", "is mapped from non-existing output",
                    "ensemble-map-output"))),
    Rule("ensemble-input-unmapped", ERROR, "ensembles", "a required input of an ensemble step is not mapped",
         checks=(_c(ENSEMBLE_UTILS, "ValidateTensorMapping", "is not mapped to any ensemble tensors",
                    "ensemble-input-unmapped"),)),
    Rule("ensemble-tensor-producers", ERROR, "ensembles", "an ensemble tensor written by two output maps",
         checks=(_c(MCU, "BuildEnsembleGraph", "can appear in an output map only once", "ensemble-two-producers"),)),
    Rule("ensemble-data-type", ERROR, "ensembles", "an ensemble tensor whose uses disagree on data_type",
         checks=(_c(ENSEMBLE_UTILS, "ValidateTensorConsistency", "inconsistent data type", "ensemble-data-type"),)),
    Rule("ensemble-dims", ERROR, "ensembles", "an ensemble tensor whose uses have incompatible dims (-1 matches any)",
         checks=(_c(ENSEMBLE_UTILS, "ValidateTensorConsistency", "inconsistent shape", "ensemble-dims"),)),
    Rule("ensemble-batch-size", ERROR, "ensembles", "ensemble max_batch_size above a batching step model's",
         checks=(_c(ENSEMBLE_UTILS, "ValidateEnsembleConfig", "which only allows maximum batch size to be",
                    "ensemble-batch-size"),)),
    Rule("ensemble-flow", ERROR, "ensembles",
         "an unused ensemble input or tensor, an output not connected or never written, a step that never runs",
         checks=(_c(MCU, "ValidateEnsembleSchedulingConfig", "is not used", "ensemble-input-unused"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "is not used", "ensemble-output-unconnected"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "is not written", "ensemble-output-not-written"),
                 _c(MCU, "ValidateEnsembleSchedulingConfig", "is unused in ensemble", "ensemble-tensor-unused"))),
    Rule("ensemble-decoupled", ERROR, "ensembles",
         "a step fed by tensors from different decoupled models (or from a decoupled model and anything else)",
         checks=(_c(ENSEMBLE_UTILS, "ValidateEnsembleConfig",
                    "receives inputs originated from different decoupled models", "ensemble-decoupled"),
                 _c(ENSEMBLE_UTILS, "ValidateEnsembleConfig (a nested ensemble made decoupled by its step)",
                    "receives inputs originated from different decoupled models", "ensemble-decoupled-nested"))),
    Rule("ensemble-step-batching", WARNING, "ensembles",
         "a non-batching step fed batched tensors in a batching ensemble: requests with batch > 1 fail",
         cases=("ensemble-step-batching",),
         tests=("tests/lint/test_triton.py::test_a_non_batching_step_in_a_batching_ensemble_fails_batched_requests",)),
    Rule("ensemble-shape-range", ERROR, "ensembles",
         "beyond Triton: a step output's shape range (gen-repo contract) outside its consumer's",
         tests=("tests/lint/test_run.py::test_ensemble_shape_ranges_come_from_the_steps_contracts",)),
    # ------------------------------------------------------------------------------------------------ rate limiter
    Rule("rate-limiter-resource", ERROR, "rate_limiter",
         "with --rate-limit=execution_count: a resource global in one instance group and device-specific in another "
         "(of any model), or needing more than --rate-limit-resource gives",
         checks=(_c(RATE_LIMITER, "ResourceManager::ValidateMaxResources",
                    "is present as both global and device-specific resource", "rate-limiter-scope"),
                 _c(RATE_LIMITER, "ResourceManager::ValidateMaxResources",
                    "is present as both global and device-specific resource", "rate-limiter-scope-one-model"),
                 _c(RATE_LIMITER, "ResourceManager::ParseAndValidateExplicitResources",
                    'Resource count for "limited" is limited to 3 which will prevent scheduling',
                    "rate-limiter-count"))),
    # ------------------------------------------------------------------------------------------------ environment
    Rule("environment-gpus", ERROR, "environment",
         "a KIND_GPU instance group on a machine without GPUs, or a gpu id the machine lacks (KIND_AUTO included)",
         checks=(_c(MCU, "ValidateInstanceGroup", "has kind KIND_GPU but no GPUs are available", "environment-no-gpu"),
                 _c(MCU, "ValidateInstanceGroup", "specifies invalid or unsupported gpu id 0", "environment-gpu-id"),
                 _c(MCU, "NormalizeInstanceGroup, ValidateInstanceGroup", "has kind KIND_CPU but specifies one or more "
                    "GPUs", "environment-auto-gpus"))),
    Rule("environment-backend", ERROR, "environment",
         "a backend that is not installed and not shipped in the model folder (--backends, --url)",
         checks=(_c(BACKEND_MODEL, "TritonModel::GetBackendRuntimeLibraryName",
                    "unable to find backend library for backend 'nosuch'", "environment-backend"),
                 _c(BACKEND_MODEL, "TritonModel::GetBackendRuntimeLibraryName",
                    "unable to find backend library for backend 'identity'", "environment-backend-from-name"))),
    # ------------------------------------------------------------------------------------------------ tensorrt
    Rule("tensorrt-profiles-unlisted", WARNING, "tensorrt",
         "a TensorRT plan holding several optimization profiles (gen-repo's contract says how many) whose instance "
         "groups list none, or not all: only the listed ones (profile 0 when none is) serve, the symptom of Triton "
         "server issue #8629",
         cases=("tensorrt-profiles-unlisted",),
         tests=("tests/lint/test_run.py::test_bad_case_reports_exactly_the_planted_defect",
                "tests/building/test_engines.py::test_the_plan_holds_both_profiles_and_every_group_lists_them")),
    Rule("instance-group-profile-range", ERROR, "tensorrt",
         "an instance group lists a profile index the plan lacks (gen-repo's contract says how many it holds); with "
         "--disable-auto-complete-config the backend refuses it in src/instance_state.cc InitOptimizationProfiles "
         "('Can not set the specified optimization profile')",
         checks=(_c(TRT_MODEL, "ModelState::GetProfileIndices (autofill)", "configuration specified invalid profile 2 "
                    ". Number of profiles supported by TensorRT engine: 2", "instance-group-profile-range",
                    server=NO_TENSORRT),)),
    Rule("instance-group-profile-sets", WARNING, "tensorrt",
         "instance groups of a TensorRT plan listing different profiles: Triton hands a request to any instance "
         "whatever its shape, so one only another group's profiles hold fails (server PR #1987: every group lists "
         "every profile)",
         cases=("instance-group-profile-sets",)),
)

#: Triton's refusals lint does not port: (source, check, why not). docs/lint-rules.md lists them.
NOT_PORTED: tuple[tuple[str, str, str], ...] = (
    (MCU, "ValidateModelConfig: 'must specify name', 'must specify version policy'",
     "unreachable from a repository: Triton fills both in first (the folder name, the latest version)"),
    (MCU, "ValidateInstanceGroup: KIND_GPU on a server built without GPU support",
     "a fact of the server build, not of the machine's GPUs (--gpus covers those)"),
    ("backend: src/backend_model_instance.cc", "BackendModelInstance: 'GPU instances not supported'",
     "a fact of how a backend was built (without GPU support, as Triton QA's identity backend), not of its name"),
    (MRM, "CreateAgentModelListWithLoadAction (model_repository_agents)",
     "a repository agent is a library installed on the server: an environment fact lint is not told"),
    (BACKEND_MODEL, "TritonModel::SetBatchingStrategy", "whether a TRITON_BATCH_STRATEGY_PATH library defines the "
     "five batching functions needs the library loaded"),
    (MRM, "ValidateModelName", "checks the names of load requests; a model folder's name holds no '/'"),
    (MCU, "GetElementCount (overflow)", "newer cores refuse dims whose product overflows int64; 2.51 loads them"),
    ("backends", "each backend's own auto-complete and model checks beyond its model file and ONNX I/O",
     "they read the model with the backend's runtime (TensorRT, ONNX Runtime, PyTorch, TensorFlow, OpenVINO)"),
    ("python_backend", "EXECUTION_ENV_PATH archive contents", "needs the archive unpacked and its Python run"),
)

#: Every rule: id -> (severity, what it checks). ``gen-repo lint --help`` and docs/lint-rules.md list these.
RULES: dict[str, tuple[str, str]] = {r.id: (r.severity, r.summary) for r in RULE_TABLE}
_BY_ID = {r.id: r for r in RULE_TABLE}


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError for an unknown id)."""
    return _BY_ID[rule_id]
