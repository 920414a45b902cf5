"""An oracle for the tensorrt_plan and onnxruntime_onnx configs that does not come from gen-repo: each golden config
of tests/golden/configs/targets/ is checked field by field against the rules Triton documents for those backends.

Sources (read for these rules): Triton's model_configuration.md (batching, instance groups, warmup, CUDA graphs),
model_config.proto (cc_model_filenames, graph_spec, profile), the tensorrt_backend README (plans, KIND_GPU,
optimization profiles) and the onnxruntime_backend README ("ONNX Runtime with TensorRT optimization": the
accelerator names and the parameter keys Triton maps to TensorRT EP options, trt_profile_* as
``input1:dim1xdim2,...``). test_config.py compares the same configs with their snapshot; this module does not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

GOLDEN = Path(__file__).parents[1] / "golden" / "configs" / "targets"
CONFIGS = sorted(p.parent.name for p in GOLDEN.glob("*/config.pbtxt"))

#: onnxruntime_backend README, "Parameter mapping between ONNX Runtime and Triton ONNXRuntime Backend".
ORT_TENSORRT_KEYS = {
    "precision_mode", "max_workspace_size_bytes", "int8_calibration_table_name", "int8_use_native_calibration_table",
    "trt_max_partition_iterations", "trt_min_subgraph_size", "trt_dla_enable", "trt_dla_core",
    "trt_engine_cache_enable", "trt_engine_cache_path", "trt_engine_cache_prefix", "trt_dump_subgraphs",
    "trt_force_sequential_engine_build", "trt_context_memory_sharing_enable", "trt_layer_norm_fp32_fallback",
    "trt_timing_cache_enable", "trt_timing_cache_path", "trt_force_timing_cache", "trt_detailed_build_log",
    "trt_build_heuristics_enable", "trt_sparsity_enable", "trt_builder_optimization_level", "trt_auxiliary_streams",
    "trt_tactic_sources", "trt_extra_plugin_lib_paths", "trt_profile_min_shapes", "trt_profile_max_shapes",
    "trt_profile_opt_shapes", "trt_cuda_graph_enable", "trt_dump_ep_context_model", "trt_ep_context_file_path",
    "trt_ep_context_embed_mode",
}
PROFILE_SHAPES = re.compile(r"^(?:[^:,]+:\d+(?:x\d+)*)(?:,[^:,]+:\d+(?:x\d+)*)*$")


def _load(name: str) -> mc.ModelConfig:
    return text_format.Parse((GOLDEN / name / "config.pbtxt").read_text(encoding="utf-8"), mc.ModelConfig())


def _fits(shape: list[int], dims: list[int]) -> bool:
    """A concrete shape (no batch axis) fits config dims: same rank, fixed dims equal, variable ones positive."""
    return len(shape) == len(dims) and all(s > 0 and d in (-1, s) for s, d in zip(shape, dims, strict=True))


def _common_problems(config: mc.ModelConfig, folder: str) -> list[str]:
    """model_configuration.md: name, batching, preferred sizes and warmup samples."""
    problems = []
    if config.name != folder:
        problems.append(f"name {config.name!r} is not the folder {folder!r}")
    if config.max_batch_size < 0:
        problems.append("max_batch_size < 0")
    inputs = {t.name: list(t.dims) for t in config.input}
    if not inputs or not config.output:
        problems.append("a model needs inputs and outputs")
    for tensor in [*config.input, *config.output]:
        if tensor.data_type == mc.TYPE_INVALID or any(d == 0 or d < -1 for d in tensor.dims) or not tensor.dims:
            problems.append(f"{tensor.name}: invalid data type or dims")
    if config.HasField("dynamic_batching"):
        if config.max_batch_size == 0:
            problems.append("dynamic batching without max_batch_size")
        if any(not 0 < b <= config.max_batch_size for b in config.dynamic_batching.preferred_batch_size):
            problems.append("a preferred batch size outside 1..max_batch_size")
    for warmup in config.model_warmup:
        if config.max_batch_size and not 1 <= warmup.batch_size <= config.max_batch_size:
            problems.append(f"warmup {warmup.name}: batch_size {warmup.batch_size} outside 1..max_batch_size")
        if set(warmup.inputs) != set(inputs):
            problems.append(f"warmup {warmup.name}: inputs {sorted(warmup.inputs)} are not the model's")
        types = {t.name: t.data_type for t in config.input}
        for key, sample in warmup.inputs.items():
            sources = [sample.zero_data, sample.random_data, bool(sample.input_data_file)]
            if sources.count(True) != 1:
                problems.append(f"warmup {warmup.name}/{key}: needs exactly one data source")
            if key in inputs and (sample.data_type != types[key] or not _fits(list(sample.dims), inputs[key])):
                problems.append(f"warmup {warmup.name}/{key}: type or dims do not fit the input")
    return problems


def _tensorrt_problems(config: mc.ModelConfig) -> list[str]:
    """tensorrt_backend README and model_config.proto: plans, GPU instances, profiles, CUDA graphs."""
    problems = []
    if not config.default_model_filename.endswith(".plan"):
        problems.append("default_model_filename is not a .plan")
    for capability, filename in config.cc_model_filenames.items():
        if not re.fullmatch(r"\d+\.\d+", capability) or not filename.endswith(".plan"):
            problems.append(f"cc_model_filenames {capability!r}: {filename!r}")
    for group in config.instance_group:
        if group.kind != mc.ModelInstanceGroup.KIND_GPU:
            problems.append("a TensorRT plan runs on GPU instances only (KIND_GPU)")
        if any(not p.isdigit() for p in group.profile):
            problems.append(f"instance_group profile {list(group.profile)}: not optimization profile indices")
    inputs = {t.name: list(t.dims) for t in config.input}
    for spec in config.optimization.cuda.graph_spec:
        if config.max_batch_size and not 1 <= spec.batch_size <= config.max_batch_size:
            problems.append(f"graph_spec batch_size {spec.batch_size} outside 1..max_batch_size")
        if set(spec.input) - set(inputs):
            problems.append(f"graph_spec names unknown inputs {sorted(set(spec.input) - set(inputs))}")
        for key, shape in spec.input.items():
            if key in inputs and not _fits(list(shape.dim), inputs[key]):
                problems.append(f"graph_spec {key}: {list(shape.dim)} does not fit dims {inputs[key]}")
    if config.optimization.HasField("execution_accelerators"):
        problems.append("execution accelerators are ONNX Runtime's, not the TensorRT backend's")
    return problems


def _profile(value: str) -> dict[str, list[int]]:
    return {name: [int(d) for d in dims.split("x")] for name, dims in (p.split(":") for p in value.split(","))}


def _onnxruntime_problems(config: mc.ModelConfig) -> list[str]:
    """onnxruntime_backend README: ONNX files, accelerators by name, TensorRT EP parameters and profile shapes."""
    problems = []
    if not config.default_model_filename.endswith(".onnx"):
        problems.append("default_model_filename is not a .onnx")
    if config.cc_model_filenames:
        problems.append("cc_model_filenames are for TensorRT plans")
    if any(group.profile for group in config.instance_group):
        problems.append("instance_group profiles are TensorRT optimization profiles")
    if config.optimization.cuda.graph_spec or config.optimization.cuda.graphs:
        problems.append("optimization.cuda graphs are the TensorRT backend's (ORT has trt_cuda_graph_enable)")
    accelerators = config.optimization.execution_accelerators
    if any(a.name != "openvino" for a in accelerators.cpu_execution_accelerator):
        problems.append("the only CPU accelerator is openvino")
    gpu_kinds = {mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_AUTO}
    if accelerators.gpu_execution_accelerator and any(g.kind not in gpu_kinds for g in config.instance_group):
        problems.append("a GPU accelerator on CPU instances")
    inputs = {t.name: list(t.dims) for t in config.input}
    batch = [1] if config.max_batch_size else []
    for accelerator in accelerators.gpu_execution_accelerator:
        if accelerator.name not in ("tensorrt", "cuda"):
            problems.append(f"unknown GPU accelerator {accelerator.name!r}")
            continue
        if accelerator.name != "tensorrt":
            continue
        unknown = set(accelerator.parameters) - ORT_TENSORRT_KEYS
        if unknown:
            problems.append(f"parameters Triton does not map to the TensorRT EP: {sorted(unknown)}")
        kinds = [k for k in ("min", "opt", "max") if f"trt_profile_{k}_shapes" in accelerator.parameters]
        if kinds and len(kinds) != 3:
            problems.append("trt_profile_min/opt/max_shapes come together")
            continue
        shapes = {}
        for kind in kinds:
            value = accelerator.parameters[f"trt_profile_{kind}_shapes"]
            if not PROFILE_SHAPES.match(value):
                problems.append(f"trt_profile_{kind}_shapes {value!r} is not input:dim1xdim2,...")
                continue
            shapes[kind] = _profile(value)
            if set(shapes[kind]) != set(inputs):
                problems.append(f"trt_profile_{kind}_shapes names {sorted(shapes[kind])}, not the inputs")
                continue
            for name, shape in shapes[kind].items():
                if config.max_batch_size and not 1 <= shape[0] <= config.max_batch_size:
                    problems.append(f"trt_profile_{kind}_shapes {name}: batch {shape[0]} outside max_batch_size")
                if not _fits(shape[len(batch):], inputs[name]) or len(shape) != len(batch) + len(inputs[name]):
                    problems.append(f"trt_profile_{kind}_shapes {name}: {shape} does not fit dims {inputs[name]}")
        if len(shapes) == 3:
            for name in inputs:
                low, opt, high = shapes["min"][name], shapes["opt"][name], shapes["max"][name]
                if not all(a <= b <= c for a, b, c in zip(low, opt, high, strict=True)):
                    problems.append(f"{name}: profile not min <= opt <= max")
    return problems


def problems_of(config: mc.ModelConfig, folder: str) -> list[str]:
    """Every documented rule the config breaks, for its platform."""
    problems = _common_problems(config, folder)
    if config.platform == "tensorrt_plan":
        return problems + _tensorrt_problems(config)
    if config.platform == "onnxruntime_onnx":
        return problems + _onnxruntime_problems(config)
    return [*problems, f"platform {config.platform!r} is neither tensorrt_plan nor onnxruntime_onnx"]


def test_the_target_goldens_cover_both_platforms() -> None:
    platforms = sorted({_load(name).platform for name in CONFIGS})
    assert platforms == ["onnxruntime_onnx", "tensorrt_plan"]


@pytest.mark.parametrize("name", CONFIGS)
def test_golden_target_config_keeps_the_backends_documented_rules(name: str) -> None:
    assert problems_of(_load(name), name) == []


@pytest.mark.parametrize(("name", "edit", "expected"), [
    ("mlp_trt", lambda c: c.instance_group[0].__setattr__("kind", mc.ModelInstanceGroup.KIND_CPU), "KIND_GPU"),
    ("mlp_trt", lambda c: c.instance_group[0].profile.append("first"), "optimization profile indices"),
    ("mlp_trt", lambda c: c.optimization.cuda.graph_spec[0].input["input_x"].dim.append(2), "does not fit"),
    ("mlp_trt", lambda c: c.model_warmup[0].__setattr__("batch_size", 9), "outside 1..max_batch_size"),
    ("mlp_trt", lambda c: c.cc_model_filenames.__setitem__("sm86", "x.plan"), "cc_model_filenames"),
    ("text_onnx_trt", lambda c: c.optimization.execution_accelerators.gpu_execution_accelerator[0].parameters
     .__setitem__("trt_profile_opt_shapes", "input_input_ids:8x256,input_attention_mask:8x128"), "min <= opt <= max"),
    ("text_onnx_trt", lambda c: c.optimization.execution_accelerators.gpu_execution_accelerator[0].parameters
     .__setitem__("trt_fp16", "1"), "does not map"),
    ("text_onnx_trt", lambda c: c.instance_group[0].profile.append("0"), "TensorRT optimization profiles"),
    ("mlp_onnx", lambda c: c.__setattr__("default_model_filename", "model.plan"), "not a .onnx"),
])
def test_the_oracle_catches_a_broken_field(name: str, edit, expected: str) -> None:  # type: ignore[no-untyped-def]
    config = _load(name)
    edit(config)
    assert any(expected in problem for problem in problems_of(config, name)), problems_of(config, name)
