"""Model Navigator, NVIDIA's own Triton repository generator, as a peer oracle for the tensorrt_plan and
onnxruntime_onnx configs gen-repo writes (tests/planning/test_config_targets.py checks the same kind of configs against
Triton's documented rules; tests/planning/test_config.py against their snapshot).

For real models, the examples (mlp, text) and zoo models picked for what they exercise, gen-repo builds a repository
per target: ``onnx``, and ``tensorrt`` through TensorRT-RTX (its engines are not Triton plans, but to a config
generator a plan is a file). Model Navigator 0.14 (``triton-model-navigator``, scripts/setup --test) reads each
model.onnx with its own onnxruntime runner (names, dtypes, dims with -1 where symbolic), turns that into tensor specs
as its own package deployment does, and writes a config.pbtxt with ``model_repository.add_model`` for the same model
file (the .onnx, or the .plan built from it), the same max_batch_size and the same dynamic batching. Both configs are
parsed with protobuf text_format into ``ModelConfig`` and compared field by field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from tests.requirements import require

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "tests" / "zoo"
#: Zoo models, each for something the examples lack, and quick to export: int64 token inputs (gpt2), max_batch_size 0
#: because two towers batch independently (clip), a bool input (padding_mask_encoder), 4-D images (resnet), and a
#: per-item scalar, which Model Navigator refuses (unet).
ZOO_MODELS = ("gpt2", "clip", "padding_mask_encoder", "resnet", "unet")
TARGETS = {"onnx": "onnxruntime_onnx", "tensorrt": "tensorrt_plan"}
#: Triton's model_configuration.md: a model names its backend by ``platform`` or ``backend``; these pairs are the same.
PLATFORM_BACKEND = {"onnxruntime_onnx": "onnxruntime", "tensorrt_plan": "tensorrt"}

#: Fields gen-repo writes and Model Navigator leaves out, and why gen-repo writes them (docs/repository-layout.md).
#: ``platform`` is compared through PLATFORM_BACKEND: Model Navigator writes ``backend`` instead.
GEN_REPO_ONLY = {
    # Triton's default policy, written out so the config says which versions serve (publish adds versions).
    "version_policy",
    # model.onnx / model.plan, Triton's default names too: written so the config names the file the lock file hashes.
    "default_model_filename",
    # gen-repo warms a model up at its opt shape (the tensorrt target by default; here every model, by the zoo
    # manifest's `warmup: true`) so the first request does not pay for it; add_model writes only warmup it is given.
    "model_warmup",
    # onnx: one instance (count: 1) where Model Navigator's CPU runner path leaves instances to Triton; tensorrt: both
    # write KIND_GPU, and gen-repo adds the count and the optimization profile each instance uses (compared below).
    "instance_group",
    "platform",
}


def _entries(manifest: Path, names: tuple[str, ...] | None) -> dict[str, Any]:
    """A manifest document for ``names`` of ``manifest`` (all when None), its paths made absolute, no ensembles."""
    document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    models = [m for m in document["models"] if names is None or m["name"] in names]
    for model in models:
        model["spec"] = str(manifest.parent / model["spec"])
        if isinstance(model.get("samples"), str):
            model["samples"] = str(manifest.parent / model["samples"])
    return {"defaults": document.get("defaults", {}), "models": models}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{target: repository}``: the examples and the zoo models, built for each target with one cache."""
    for requirement in ("torch", "tensorrt_rtx", "model_navigator"):
        require(requirement)
    from generator.building.pipeline import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("peer")
    examples, zoo = _entries(ROOT / "examples" / "gen-repo.yaml", None), _entries(ZOO / "gen-repo.yaml", ZOO_MODELS)
    assert sorted(m["name"] for m in zoo["models"]) == sorted(ZOO_MODELS)
    manifest = base / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"defaults": zoo["defaults"], "models": examples["models"] + zoo["models"]}),
                        encoding="utf-8")
    repositories = {}
    for target in TARGETS:
        module = {"tensorrt_module": "tensorrt_rtx"} if target == "tensorrt" else {}
        options = BuildOptions(allow_code=True, allow_outside=True, target=target, cache_dir=base / "cache",
                               code_path=(str(ROOT), str(ZOO)), **module)  # type: ignore[arg-type]
        report = build_repository(manifest, options, output_dir=base / target)
        assert report.ok, report.to_dict()
        repositories[target] = base / target
    return repositories


def _parse(path: Path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(encoding="utf-8"), mc.ModelConfig())


#: Runs Model Navigator in a child process: importing it reroutes all of Python's logging to loguru (basicConfig with
#: force=True) and sets multiprocessing's start method, which must not leak into the rest of the suite.
#: Reads jobs (JSON) on stdin, prints {key: config.pbtxt path, or the error Model Navigator raised} as the last line.
DRIVER = """
import json
import sys
from pathlib import Path

import model_navigator.triton as nav
from model_navigator.exceptions import ModelNavigatorError
from model_navigator.runners.onnx import OnnxrtCPURunner
from model_navigator.triton import model_repository

results = {}
for job in json.load(sys.stdin):
    runner = OnnxrtCPURunner(model=Path(job["onnx"]), input_metadata=None, output_metadata=None)
    with runner:
        inputs, outputs = runner.get_onnx_input_metadata(), runner.get_onnx_output_metadata()
    batching = job["max_batch_size"] > 0
    # What Model Navigator's own deployment of a package does (model_repository._onnx_config_from_runtime_result and
    # _tensorrt_config_from_runtime_result): tensor specs from the runner's metadata, the batch axis left out when
    # batching; KIND_GPU instances for a TensorRT plan, none given for ONNX Runtime on CPU. (Its int64 -> int32 cast
    # for TensorRT applies only below TensorRT 9; gen-repo's plans take int64.)
    try:
        fields = {
            "batching": batching, "max_batch_size": job["max_batch_size"],
            "batcher": nav.DynamicBatcher(max_queue_delay_microseconds=job["max_queue_delay_microseconds"],
                                          preferred_batch_size=job["preferred_batch_size"] or None),
            "inputs": model_repository._input_tensor_from_metadata(inputs, batching),
            "outputs": model_repository._output_tensor_from_metadata(outputs, batching),
        }
        if job["target"] == "tensorrt":
            groups = [nav.InstanceGroup(kind=nav.DeviceKind.KIND_GPU)]
            config = nav.TensorRTModelConfig(instance_groups=groups, **fields)
        else:
            config = nav.ONNXModelConfig(**fields)
        folder = model_repository.add_model(job["out"], job["name"], Path(job["model"]), config)
    except ModelNavigatorError as error:
        results[job["key"]] = f"{type(error).__name__}: {error}"
        continue
    model = Path(job["model"])
    assert (folder / "1" / model.name).read_bytes() == model.read_bytes(), "add_model deployed another file"
    results[job["key"]] = str(folder / "config.pbtxt")
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def navigator(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``{"<target>/<model>": Model Navigator's config.pbtxt path, or its error}`` for every built model."""
    out = tmp_path_factory.mktemp("navigator")
    jobs = []
    for target, repository in built.items():
        for name in _models(repository):
            ours = _parse(repository / name / "config.pbtxt")
            assert ours.platform == TARGETS[target]
            jobs.append({
                "key": f"{target}/{name}", "target": target, "name": ours.name, "out": str(out / target),
                # The plan is built from the onnx target's model.onnx: the same export, from the same build cache.
                "onnx": str(built["onnx"] / name / "1" / "model.onnx"),
                "model": str(repository / name / "1" / ("model.plan" if target == "tensorrt" else "model.onnx")),
                "max_batch_size": ours.max_batch_size,
                "max_queue_delay_microseconds": ours.dynamic_batching.max_queue_delay_microseconds,
                "preferred_batch_size": list(ours.dynamic_batching.preferred_batch_size),
            })
    run = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(jobs), capture_output=True, text=True,
                         check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    results: dict[str, str] = json.loads(run.stdout.splitlines()[-1])
    assert sorted(results) == sorted(job["key"] for job in jobs)
    return results


def _tensors(tensors: Any) -> dict[str, tuple[str, list[int], list[int] | None]]:
    return {t.name: (mc.DataType.Name(t.data_type), list(t.dims), list(t.reshape.shape) if t.HasField("reshape")
                     else None) for t in tensors}


def differences(ours: mc.ModelConfig, theirs: mc.ModelConfig) -> list[str]:
    """Every field both generators should agree on where they do not, and any field only one of them writes that
    GEN_REPO_ONLY does not justify."""
    problems = []
    kind = ours.platform or ours.backend
    their_kind = theirs.platform or theirs.backend
    if their_kind not in (kind, PLATFORM_BACKEND.get(kind)):
        problems.append(f"backend: ours {kind!r}, Model Navigator's {their_kind!r}")
    for field in ("name", "max_batch_size"):
        if getattr(ours, field) != getattr(theirs, field):
            problems.append(f"{field}: ours {getattr(ours, field)!r}, Model Navigator's {getattr(theirs, field)!r}")
    for what in ("input", "output"):
        mine, other = _tensors(getattr(ours, what)), _tensors(getattr(theirs, what))
        if mine != other:
            problems.append(f"{what}: ours {mine}, Model Navigator's {other}")
    # Whether to batch dynamically is each generator's own call (Model Navigator is given only max_batch_size and our
    # queue delay and preferred sizes, which it must then write as we do).
    if ours.HasField("dynamic_batching") != theirs.HasField("dynamic_batching"):
        problems.append(f"dynamic_batching: ours {ours.HasField('dynamic_batching')}, Model Navigator's "
                        f"{theirs.HasField('dynamic_batching')}")
    elif ours.dynamic_batching != theirs.dynamic_batching:
        problems.append(f"dynamic_batching: ours {ours.dynamic_batching}, Model Navigator's {theirs.dynamic_batching}")
    kinds = [mc.ModelInstanceGroup.Kind.Name(g.kind) for g in ours.instance_group]
    their_kinds = [mc.ModelInstanceGroup.Kind.Name(g.kind) for g in theirs.instance_group]
    if their_kinds and kinds != their_kinds:
        problems.append(f"instance_group kinds: ours {kinds}, Model Navigator's {their_kinds}")
    written = {f.name for f, _ in ours.ListFields()}
    their_written = {f.name for f, _ in theirs.ListFields()}
    compared = {"name", "max_batch_size", "input", "output", "dynamic_batching"}
    unexplained = sorted(written - their_written - compared - GEN_REPO_ONLY)
    if unexplained:
        problems.append(f"only gen-repo writes {unexplained}")
    theirs_only = sorted(their_written - written - {"backend"})
    if theirs_only:
        problems.append(f"only Model Navigator writes {theirs_only}")
    return problems


def _models(repository: Path) -> list[str]:
    return sorted(p.parent.name for p in repository.glob("*/config.pbtxt"))


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_model_navigator_writes_what_gen_repo_writes_for_the_same_model(
        built: dict[str, Path], navigator: dict[str, str], target: str) -> None:
    names = [name for name in _models(built[target]) if name != "unet"]  # unet's per-item scalar: the next test
    assert sorted([*names, "unet"]) == sorted(["mlp", "text", *ZOO_MODELS])
    found, seen_only_ours = {}, set()
    for name in names:
        ours, theirs = _parse(built[target] / name / "config.pbtxt"), _parse(Path(navigator[f"{target}/{name}"]))
        found[name] = differences(ours, theirs)
        seen_only_ours |= {f.name for f, _ in ours.ListFields()} - {f.name for f, _ in theirs.ListFields()}
    assert found == {name: [] for name in names}
    # Every justification in GEN_REPO_ONLY is still needed: a field Model Navigator learns to write leaves the list.
    assert seen_only_ours == GEN_REPO_ONLY - ({"instance_group"} if target == "tensorrt" else set())
    # What the comparison covered: both batching cases, several data types, variable dims.
    configs = [_parse(built[target] / name / "config.pbtxt") for name in names]
    assert {c.max_batch_size > 0 for c in configs} == {True, False}
    assert {mc.DataType.Name(t.data_type) for c in configs for t in c.input} >= {"TYPE_FP32", "TYPE_INT64",
                                                                                 "TYPE_BOOL"}
    assert any(-1 in t.dims for c in configs for t in [*c.input, *c.output])
    if target == "tensorrt":
        # gen-repo's instances each name the plan's one optimization profile (the tensorrt_backend README).
        assert all(list(g.profile) == ["0"] for c in configs for g in c.instance_group)


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_per_item_scalar_is_what_model_navigator_refuses_and_gen_repo_reshapes(
        built: dict[str, Path], navigator: dict[str, str], target: str) -> None:
    """unet's timestep is [b] in torch: one scalar per batch item. Without the batch axis its dims are empty, which
    Model Navigator refuses; gen-repo serves it as dims [1] with an empty reshape (Triton's model_configuration.md,
    "Reshape"), so a request carries [b, 1]."""
    ours = _parse(built[target] / "unet" / "config.pbtxt")
    timestep = next(t for t in ours.input if t.name.endswith("timestep"))
    assert list(timestep.dims) == [1] and timestep.HasField("reshape") and list(timestep.reshape.shape) == []
    assert navigator[f"{target}/unet"] == "ModelNavigatorWrongParameterError: Empty shape is not supported."


def test_the_comparison_catches_a_field_that_disagrees() -> None:
    """The comparison is not vacuous: each planted disagreement is named."""
    text = (ROOT / "tests" / "golden" / "configs" / "targets" / "mlp_onnx" / "config.pbtxt").read_text(encoding="utf-8")
    ours = text_format.Parse(text, mc.ModelConfig())
    theirs = text_format.Parse(text, mc.ModelConfig())
    theirs.ClearField("platform")
    theirs.backend = "onnxruntime"
    assert differences(ours, theirs) == []
    for edit, expected in [
        (lambda c: setattr(c, "backend", "pytorch"), "backend: ours 'onnxruntime_onnx'"),
        (lambda c: setattr(c, "max_batch_size", 4), "max_batch_size: ours 8, Model Navigator's 4"),
        (lambda c: c.input[0].dims.__setitem__(0, -1), "input: ours"),
        (lambda c: setattr(c.output[0], "data_type", mc.TYPE_FP16), "output: ours"),
        (lambda c: c.ClearField("dynamic_batching"), "dynamic_batching: ours True, Model Navigator's False"),
        (lambda c: c.instance_group[0].__setattr__("kind", mc.ModelInstanceGroup.KIND_GPU), "instance_group kinds"),
        (lambda c: setattr(c.response_cache, "enable", True), "only Model Navigator writes ['response_cache']"),
    ]:
        planted = mc.ModelConfig()
        planted.CopyFrom(theirs)
        edit(planted)
        found = differences(ours, planted)
        assert len(found) == 1 and found[0].startswith(expected), (expected, found)
    stray = mc.ModelConfig()
    stray.CopyFrom(ours)
    stray.optimization.priority = mc.ModelOptimizationPolicy.PRIORITY_MAX
    assert differences(stray, theirs) == ["only gen-repo writes ['optimization']"]
