"""ONNX -> TensorRT engine through the real builder API.

On CPU machines the builder is TensorRT-RTX (``tensorrt_rtx``, optional extra ``trt-rtx``): its engines are not
Triton plans, but parse, profile, builder options, timing cache and build run for real. Tests marked ``gpu`` need
standard TensorRT and an NVIDIA GPU and skip with the reason elsewhere.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from generator.building.export.tensorrt import (
    EngineOptions,
    ProfileShapes,
    TensorRTBuildError,
    build_engine,
    make_logger,
    profile_problems,
    profile_shapes,
)
from generator.errors import GenRepoError
from generator.gpu import current_gpu, detect_gpus, import_tensorrt
from generator.specs.graphspec import GraphSpec
from tests.requirements import missing, require_module

EXAMPLES = ("mlp", "text")


def profiles_from_graph(graph: Any) -> list[ProfileShapes]:
    """One ProfileShapes per input of a GraphSpec, named as AITune names them, at its effective min/opt/max."""
    names = graph.input_tensor_names()
    out = []
    for name, (locator, tensor_spec) in zip(names, graph.input_spec.tensor_data, strict=True):
        lo, opt, hi = graph.get_effective_input_shapes(locator, tensor_spec)
        out.append(ProfileShapes(name, tuple(lo), tuple(opt), tuple(hi)))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Fixtures: the example specs and their models exported to ONNX
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trt_rtx() -> Any:
    return require_module("tensorrt_rtx")


def _graph(examples_dir: Path, name: str) -> GraphSpec:
    doc = json.loads((examples_dir / "specs" / f"{name}.graphspec.json").read_text())
    return GraphSpec.from_dict(doc["graph"])


def _dynamic_axes(names: list[str], specs: list[Any]) -> dict[str, dict[int, str]]:
    return {
        name: {axis: str(label) for axis, label in enumerate(spec.shape) if isinstance(label, str)}
        for name, spec in zip(names, specs, strict=True)
    }


@pytest.fixture(scope="module")
def example_onnx(examples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, GraphSpec]]:
    """``{"mlp": (model.onnx, graph), "text": ...}``: the example models exported with their spec's dynamic axes."""
    torch = require_module("torch")
    from examples.models import make_mlp, make_text

    folder = tmp_path_factory.mktemp("onnx")
    out = {}
    for name, factory in (("mlp", make_mlp), ("text", make_text)):
        graph = _graph(examples_dir, name)
        inputs = graph.input_tensor_names()
        outputs = graph.output_tensor_names()
        sample = tuple(
            torch.ones(spec.max_shape, dtype=getattr(torch, str(spec.dtype).split(".")[-1]))
            for spec in graph.input_spec.tensor_specs
        )
        axes = _dynamic_axes(inputs, graph.input_spec.tensor_specs)
        axes.update(_dynamic_axes(outputs, graph.output_spec.tensor_specs))
        path = folder / f"{name}.onnx"
        # The legacy exporter is enough here: what is under test is the TensorRT side, not the export.
        torch.onnx.export(
            factory(), sample, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes, dynamo=False
        )
        out[name] = (path, graph)
    return out


def _mlp_profile(lo: int = 1, opt: int = 4, hi: int = 8, width: int = 16) -> list[ProfileShapes]:
    return [ProfileShapes("input_x", (lo, width), (opt, width), (hi, width))]


# --------------------------------------------------------------------------------------------------------------------
# Plain data: no TensorRT needed
# --------------------------------------------------------------------------------------------------------------------
def test_profile_shapes_from_plain_data() -> None:
    expected = ProfileShapes("input_x", (1, 16), (4, 16), (8, 16))
    plan_like = types.SimpleNamespace(name="input_x", min_shape=[1, 16], opt_shape=[4, 16], max_shape=[8, 16])
    as_dict = {"name": "input_x", "min": [1, 16], "opt": [4, 16], "max": [8, 16]}
    as_shape_dict = {"name": "input_x", "min_shape": [1, 16], "opt_shape": [4, 16], "max_shape": [8, 16]}
    assert profile_shapes([expected, plan_like, as_dict, as_shape_dict]) == [expected] * 4


def test_profile_problems_reports_everything_at_once() -> None:
    network = {"a": (-1, 16), "b": (-1, -1), "c": (-1,)}
    profiles = [
        ProfileShapes("a", (8, 16), (4, 16), (1, 16)),  # min > opt > max
        ProfileShapes("b", (1,), (1,), (1,)),  # wrong rank
        ProfileShapes("x", (1,), (1,), (1,)),  # not an input
        ProfileShapes("b", (1, 1), (1, 1), (1, 1)),  # duplicate
    ]
    problems = dict(profile_problems(profiles, network))
    assert set(problems) == {"a", "b", "x", "c"}
    assert "min <= opt <= max" in problems["a"] and "axis 0" in problems["a"]
    assert "not covered" in problems["c"]
    assert "not an input" in problems["x"]
    assert profile_problems(_mlp_profile(), {"input_x": (-1, 16)}) == []


def test_build_options_problems() -> None:
    options = EngineOptions(
        precision=("fp32", "int4"),
        workspace_bytes=0,
        builder_optimization_level=7,
        hardware_compatibility="turing",
        exclude_lean_runtime=True,
    )
    text = "\n".join(options.problems())
    for word in ("int4", "workspace_bytes", "builder_optimization_level", "turing", "exclude_lean_runtime"):
        assert word in text
    assert EngineOptions().problems() == []
    assert "timing_cache_path" not in EngineOptions(timing_cache_path=Path("x")).to_dict()


def test_standard_tensorrt_without_gpu_stops_before_touching_it(tmp_path: Path) -> None:
    # Standard TensorRT cannot be imported here; a bare module of that name shows that the guard fires before any
    # builder API is used (a builder without a GPU fails deep in CUDA initialisation instead).
    fake = types.ModuleType("tensorrt")
    fake.__version__ = "10.0.0"  # type: ignore[attr-defined]
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not used")
    with pytest.raises(TensorRTBuildError, match="needs an NVIDIA GPU") as caught:
        build_engine(fake, model, [_mlp_profile()], gpu=None)
    assert caught.value.exit_code == 1


# --------------------------------------------------------------------------------------------------------------------
# Real builds with TensorRT-RTX
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", EXAMPLES)
def test_builds_engine_with_spec_profile(trt_rtx: Any, example_onnx: dict, name: str) -> None:
    path, graph = example_onnx[name]
    result = build_engine(trt_rtx, path, [profiles_from_graph(graph)])
    assert len(result.plan_bytes) > 1000
    assert result.flavor == "tensorrt_rtx"
    assert result.trt_version == trt_rtx.__version__
    expected_gpu = current_gpu(detect_gpus())
    assert result.compute_capability == (expected_gpu.compute_capability if expected_gpu else None)
    assert "TF32" in result.applied_flags  # default precision keeps TensorRT's TF32 default
    summary = result.summary()
    assert summary["plan_size"] == len(result.plan_bytes) and "plan_bytes" not in summary
    json.dumps(summary)


def test_build_accepts_tensor_plan_like_objects_in_any_order(trt_rtx: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["text"]
    plans = [
        types.SimpleNamespace(name=p.name, min_shape=list(p.min), opt_shape=list(p.opt), max_shape=list(p.max))
        for p in reversed(profiles_from_graph(graph))
    ]
    assert build_engine(trt_rtx, path, [plans]).plan_bytes


def test_same_input_builds_identical_engine(trt_rtx: Any, example_onnx: dict) -> None:
    path, _ = example_onnx["mlp"]
    first = build_engine(trt_rtx, path, [_mlp_profile()])
    assert first.plan_bytes == build_engine(trt_rtx, path, [_mlp_profile()]).plan_bytes


@pytest.mark.parametrize(
    ("profile", "words"),
    [
        (_mlp_profile(lo=8, opt=4, hi=1), ["input_x", "min <= opt <= max"]),
        (_mlp_profile(lo=1, opt=16, hi=8), ["input_x", "min <= opt <= max"]),
        ([ProfileShapes("input_x", (1,), (4,), (8,))], ["input_x", "rank 2", "min [1]"]),
        ([], ["input_x", "not covered"]),
        ([*_mlp_profile(), ProfileShapes("input_y", (1,), (1,), (1,))], ["input_y", "not an input"]),
    ],
    ids=["min>max", "opt>max", "wrong-rank", "missing-input", "unknown-input"],
)
def test_bad_profile_is_refused_before_building(
    trt_rtx: Any, example_onnx: dict, profile: list[ProfileShapes], words: list[str]
) -> None:
    path, _ = example_onnx["mlp"]
    with pytest.raises(GenRepoError) as caught:
        build_engine(trt_rtx, path, [profile])
    assert not isinstance(caught.value, TensorRTBuildError)
    assert caught.value.exit_code == 2
    for word in words:
        assert word in str(caught.value)
    assert all(problem.file == str(path) for problem in caught.value.problems)


def test_missing_input_of_two_is_named(trt_rtx: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["text"]
    only_ids = [p for p in profiles_from_graph(graph) if p.name == "input_input_ids"]
    with pytest.raises(GenRepoError, match=r"input_attention_mask.*not covered") as caught:
        build_engine(trt_rtx, path, [only_ids])
    assert [p.pointer for p in caught.value.problems] == ["/optimization_profiles/0/input_attention_mask"]


def _text_buckets(graph: GraphSpec) -> list[list[ProfileShapes]]:
    """The example text model (batch 1..16, seq 4..64) in two sequence buckets, as a plan gives them."""
    return [[ProfileShapes(p.name, (1, 4), (16, 16), (16, 16)) for p in profiles_from_graph(graph)],
            [ProfileShapes(p.name, (1, 17), (4, 48), (16, 64)) for p in profiles_from_graph(graph)]]


def test_builds_one_engine_with_several_profiles_in_order(trt_rtx: Any, example_onnx: dict) -> None:
    """TensorRT-RTX cannot load an engine without a GPU, so the builder config is what shows the profiles: its
    num_optimization_profiles, and each profile's get_shape read back after add_optimization_profile."""
    path, graph = example_onnx["text"]
    buckets = _text_buckets(graph)
    result = build_engine(trt_rtx, path, buckets)
    assert result.profiles == [[{"name": p.name, "min": list(p.min), "opt": list(p.opt), "max": list(p.max)}
                                for p in bucket] for bucket in buckets]
    assert json.loads(json.dumps(result.summary()))["profiles"] == result.profiles
    single = build_engine(trt_rtx, path, buckets[:1])
    assert len(single.profiles) == 1 and len(result.plan_bytes) > len(single.plan_bytes)  # one set of kernels each


def test_a_profile_missing_an_input_is_refused_before_building(trt_rtx: Any, example_onnx: dict) -> None:
    # TensorRT itself takes such a profile and fails only in build_serialized_network ("missing dimensions in
    # profile 1"); each profile is checked against the network first.
    path, graph = example_onnx["text"]
    short, long = _text_buckets(graph)
    with pytest.raises(GenRepoError) as caught:
        build_engine(trt_rtx, path, [short, long[:1]])
    assert not isinstance(caught.value, TensorRTBuildError)
    assert [(p.pointer, p.message) for p in caught.value.problems] == [
        ("/optimization_profiles/1/input_attention_mask", "optimization profile 1: input 'input_attention_mask': "
         "network input is not covered by the optimization profile")]
    with pytest.raises(GenRepoError, match="no optimization profile given"):
        build_engine(trt_rtx, path, [])


def test_profile_beyond_static_dim_fails_the_build_with_tensorrt_log(trt_rtx: Any, example_onnx: dict) -> None:
    path, _ = example_onnx["mlp"]
    with pytest.raises(TensorRTBuildError) as caught:
        build_engine(trt_rtx, path, [[ProfileShapes("input_x", (1, 16), (4, 17), (8, 17))]])
    message = str(caught.value)
    assert "build_serialized_network failed" in message
    assert "[ERROR]" in message and "input_x" in message  # TensorRT's own words, naming the tensor
    assert caught.value.exit_code == 1


def test_parser_errors_are_all_reported(trt_rtx: Any, tmp_path: Path) -> None:
    onnx = require_module("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input_x", TensorProto.FLOAT, ["b", 4])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["b", 4])
    nodes = [
        helper.make_node("FancyOp", ["input_x"], ["t"], domain="com.example", name="fancy_one"),
        helper.make_node("OtherOp", ["t"], ["output"], domain="com.example", name="fancy_two"),
    ]
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=opsets)
    path = tmp_path / "custom.onnx"
    onnx.save(model, str(path))
    with pytest.raises(TensorRTBuildError) as caught:
        build_engine(trt_rtx, path, [[ProfileShapes("input_x", (1, 4), (2, 4), (4, 4))]])
    messages = [p.message for p in caught.value.problems]
    assert len(messages) == 2
    assert "fancy_one" in messages[0] and "fancy_two" in messages[1]


def test_unreadable_model_fails_clearly(trt_rtx: Any, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.onnx"
    for content, words in ((b"garbage", "Failed to parse the ONNX model"), (b"this is not a protobuf", "no outputs")):
        garbage.write_bytes(content)
        with pytest.raises(TensorRTBuildError, match=f"ONNX parser: .*{words}") as caught:
            build_engine(trt_rtx, garbage, [_mlp_profile()])
        assert caught.value.exit_code == 1
    with pytest.raises(GenRepoError, match="ONNX file not found"):
        build_engine(trt_rtx, tmp_path / "absent.onnx", [_mlp_profile()])


def test_bad_options_refused_before_building(trt_rtx: Any, example_onnx: dict) -> None:
    path, _ = example_onnx["mlp"]
    with pytest.raises(GenRepoError, match="builder_optimization_level") as caught:
        build_engine(trt_rtx, path, [_mlp_profile()], EngineOptions(precision=("fp8",), builder_optimization_level=9))
    assert [p.pointer for p in caught.value.problems] == ["/build_options", "/build_options"]


def test_timing_cache_written_and_reused(trt_rtx: Any, example_onnx: dict, tmp_path: Path) -> None:
    path, graph = example_onnx["text"]
    cache = tmp_path / "cache" / "trt" / "timing.cache"  # folder created on demand
    options = EngineOptions(timing_cache_path=cache)
    first = build_engine(trt_rtx, path, [profiles_from_graph(graph)], options)
    assert first.timing_cache_written and not first.timing_cache_loaded
    assert cache.is_file() and cache.stat().st_size > 0
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no temporary file left behind

    second = build_engine(trt_rtx, path, [profiles_from_graph(graph)], options)
    assert second.timing_cache_written and cache.is_file()
    # The second build read the file: TensorRT either took it, or refused it and said so (TensorRT-RTX's timing
    # cache is a no-op that cannot read back its own output; it logs "Failed to deserialize timing cache").
    assert second.timing_cache_loaded or any(f"timing cache {cache.name} was not accepted" in n for n in second.notes)
    if second.flavor == "tensorrt_rtx":
        assert not second.timing_cache_loaded


def test_options_the_module_lacks_are_skipped_with_reasons(trt_rtx: Any, example_onnx: dict) -> None:
    path, _ = example_onnx["mlp"]
    options = EngineOptions(
        precision=("fp32", "tf32", "fp16", "bf16"),
        workspace_bytes=64 << 20,
        builder_optimization_level=1,
        hardware_compatibility="ampere_plus",
        version_compatible=True,
        exclude_lean_runtime=True,
    )
    result = build_engine(trt_rtx, path, [_mlp_profile()], options)
    requested = {
        "TF32": "TF32",
        "FP16": "FP16",
        "BF16": "BF16",
        "WORKSPACE": "WORKSPACE=67108864",
        "builder_optimization_level": "builder_optimization_level=1",
        "hardware_compatibility_level": "hardware_compatibility_level=AMPERE_PLUS",
        "VERSION_COMPATIBLE": "VERSION_COMPATIBLE",
        "EXCLUDE_LEAN_RUNTIME": "EXCLUDE_LEAN_RUNTIME",
    }
    for key, applied in requested.items():  # every request is either applied or skipped with a reason, never both
        assert (applied in result.applied_flags) != (key in result.skipped_flags), key
    for key, reason in result.skipped_flags.items():
        assert key in requested and trt_rtx.__version__ in reason
        assert ("did not take it" in reason) == _module_has(trt_rtx, key)
    # Measured on tensorrt_rtx 1.7: no FP16/BF16 flags, and the hardware-compatibility setter is ignored.
    for flag in ("FP16", "BF16"):
        if not hasattr(trt_rtx.BuilderFlag, flag):
            assert result.skipped_flags[flag].endswith(f"has no trt.BuilderFlag.{flag}")
    if result.flavor == "tensorrt_rtx" and "hardware_compatibility_level" in result.skipped_flags:
        assert "unsupported" in result.skipped_flags["hardware_compatibility_level"]


def _module_has(trt: Any, key: str) -> bool:
    if key == "hardware_compatibility_level":
        return hasattr(trt, "HardwareCompatibilityLevel")
    if key in ("WORKSPACE", "builder_optimization_level"):
        return True
    return hasattr(trt.BuilderFlag, key)


def test_tf32_left_out_clears_the_flag(trt_rtx: Any, example_onnx: dict) -> None:
    path, _ = example_onnx["mlp"]
    result = build_engine(trt_rtx, path, [_mlp_profile()], EngineOptions(precision=("fp32",)))
    assert "TF32 cleared" in result.applied_flags and "TF32" not in result.applied_flags


def test_logger_is_reusable_and_feeds_a_sink(trt_rtx: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["text"]
    seen: list[Any] = []
    logger = make_logger(trt_rtx, min_severity="WARNING", sink=seen.append)
    first = build_engine(trt_rtx, path, [profiles_from_graph(graph)], logger=logger)
    # The parser warns about int64 inputs; the warning reaches the sink, the logger and the result.
    assert any("input_input_ids" in m.message for m in seen)
    assert seen == logger.messages
    assert any("input_input_ids" in line for line in first.log)
    count = len(logger.messages)
    second = build_engine(trt_rtx, path, [profiles_from_graph(graph)], logger=logger)
    assert len(logger.messages) > count
    assert len(second.log) == len(logger.messages) - count  # the result only holds its own build's lines


# --------------------------------------------------------------------------------------------------------------------
# Real TensorRT on a GPU
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trt_gpu() -> Any:
    try:
        trt = import_tensorrt("tensorrt")
    except ImportError as error:
        raise missing("tensorrt_gpu", f"standard TensorRT is not importable here: {error}") from error
    gpu = current_gpu(detect_gpus())
    if gpu is None:
        raise missing("tensorrt_gpu", "no NVIDIA GPU found (nvidia-smi, /dev/nvidia*, CUDA_VISIBLE_DEVICES)")
    return trt


@pytest.mark.gpu
def test_gpu_fp16_applied_and_compute_capability_recorded(trt_gpu: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["mlp"]
    result = build_engine(trt_gpu, path, [profiles_from_graph(graph)], EngineOptions(precision=("fp32", "fp16")))
    gpu = current_gpu(detect_gpus())
    assert gpu is not None
    assert result.flavor == "tensorrt"
    assert result.compute_capability == gpu.compute_capability is not None
    if hasattr(trt_gpu.BuilderFlag, "FP16"):
        assert "FP16" in result.applied_flags


@pytest.mark.gpu
def test_gpu_engine_deserializes_with_the_spec_profile(trt_gpu: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["text"]
    profiles = profiles_from_graph(graph)
    logger = make_logger(trt_gpu)
    result = build_engine(trt_gpu, path, [profiles], logger=logger)
    runtime = trt_gpu.Runtime(logger)  # only here: a GPU is known to be present
    engine = runtime.deserialize_cuda_engine(result.plan_bytes)
    assert engine is not None, [str(m) for m in logger.messages]
    for profile in profiles:
        shapes = engine.get_tensor_profile_shape(profile.name, 0)
        assert [tuple(s) for s in shapes] == [profile.min, profile.opt, profile.max]
    del engine, runtime


@pytest.mark.gpu
def test_gpu_engine_deserializes_with_every_profile(trt_gpu: Any, example_onnx: dict) -> None:
    path, graph = example_onnx["text"]
    buckets = _text_buckets(graph)
    logger = make_logger(trt_gpu)
    result = build_engine(trt_gpu, path, buckets, logger=logger)
    runtime = trt_gpu.Runtime(logger)  # only here: a GPU is known to be present
    engine = runtime.deserialize_cuda_engine(result.plan_bytes)
    assert engine is not None, [str(m) for m in logger.messages]
    assert engine.num_optimization_profiles == 2
    for k, bucket in enumerate(buckets):
        for profile in bucket:
            shapes = engine.get_tensor_profile_shape(profile.name, k)
            assert [tuple(s) for s in shapes] == [profile.min, profile.opt, profile.max]
    del engine, runtime


@pytest.mark.gpu
def test_gpu_hardware_compatibility_applied(trt_gpu: Any, example_onnx: dict) -> None:
    gpu = current_gpu(detect_gpus())
    if gpu is None or gpu.compute_capability is None or float(gpu.compute_capability) < 8.0:
        raise missing("gpu_ampere", "hardware compatibility ampere_plus needs an Ampere or newer GPU")
    path, graph = example_onnx["mlp"]
    result = build_engine(trt_gpu, path, [profiles_from_graph(graph)],
                          EngineOptions(hardware_compatibility="ampere_plus"))
    assert "hardware_compatibility_level=AMPERE_PLUS" in result.applied_flags
