"""generator.building.pipeline: every source kind, nested/multi-output/int64/bool/static models, cache, TensorRT layer.

One project (tests/build_helpers.py) is built once per module into a shared repository; the tests read it. The cache
folder is shared by the module's builds, so later builds only export what changed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import yaml

from generator.building.pipeline import BuildFailed, BuildOptions, build_repository, factory_fingerprint, plan_build
from generator.contracts.reference_data import read_reference
from generator.errors import GenRepoError
from generator.planning.targets import preflight, tensorrt_available
from generator.repository.cache import BuildCache
from generator.repository.lock import read_lock
from generator.repository.verify import verify_repository
from tests.build_helpers import (
    factory_calls,
    load_module,
    make_project,
    nested_inputs,
    record,
    tree_digest,
    write_manifest,
)
from tests.lint_cases import lint_repository
from tests.requirements import missing

MODULE = "zoo_build_models"
ALL = ("mlp", "two", "nested", "static", "frompt2", "fromonnx")


def _rtx_missing() -> str | None:
    trt, why = tensorrt_available("tensorrt_rtx")
    return None if trt is not None else why


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the whole module."""
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> SimpleNamespace:
    """The project built once (cold cache): factory, .pt2 and ONNX sources, nested, two-output and static models."""
    root = tmp_path_factory.mktemp("zoo")
    manifest = make_project(root, MODULE, ALL)
    report = build_repository(manifest, BuildOptions(allow_code=True, cache_dir=cache_dir))
    return SimpleNamespace(root=root, manifest=manifest, repo=root / "model_repository", report=report,
                           calls=factory_calls(root))


def _status(report, name: str) -> str:
    return next(m.status for m in report.models if m.name == name)


def _onnx_inputs(path: Path) -> list[tuple[str, int, list]]:
    model = onnx.load(str(path))
    return [
        (i.name, i.type.tensor_type.elem_type, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim])
        for i in model.graph.input
    ]


def test_every_source_kind_builds(zoo: SimpleNamespace) -> None:
    assert zoo.report.ok and zoo.report.committed
    assert [m.status for m in zoo.report.models] == ["built"] * len(ALL)
    lock = read_lock(zoo.repo)
    assert {name: entry["source"] for name, entry in lock["models"].items()} == {
        "mlp": "factory", "two": "factory", "nested": "factory", "static": "factory", "frompt2": "pt2",
        "fromonnx": "onnx",
    }
    assert sorted(zoo.calls) == ["mlp", "nested", "static", "two"]  # each factory called once, pt2/onnx need none
    assert verify_repository(zoo.repo) == []


def test_target_files(zoo: SimpleNamespace) -> None:
    reference = {"1/gen_repo/contract.json", "1/gen_repo/request.schema.json", "1/gen_repo/reference.json",
                 "1/gen_repo/reference.npz", "config.pbtxt"}
    for name in ("two", "static", "fromonnx"):  # onnx target
        assert set(tree_digest(zoo.repo / name)) == reference | {"1/model.onnx"}
        assert 'platform: "onnxruntime_onnx"' in (zoo.repo / name / "config.pbtxt").read_text()
    for name in ("mlp", "nested", "frompt2"):  # python target
        assert set(tree_digest(zoo.repo / name)) == reference | {"1/model.onnx", "1/model.py"}
        assert 'backend: "python"' in (zoo.repo / name / "config.pbtxt").read_text()
    # self-contained ONNX (no external .data) that loads on its own
    assert not list(zoo.repo.rglob("*.data"))


def test_nested_inputs_flattened_by_semantic_path_in_signature_order(zoo: SimpleNamespace) -> None:
    inputs = _onnx_inputs(zoo.repo / "nested" / "1" / "model.onnx")
    assert [(name, elem) for name, elem, _ in inputs] == [
        ("input_x", onnx.TensorProto.FLOAT),
        ("input_extras_mask", onnx.TensorProto.BOOL),
        ("input_extras_scale", onnx.TensorProto.FLOAT),
        ("input_extras_pair_0", onnx.TensorProto.FLOAT),
        ("input_extras_pair_1", onnx.TensorProto.FLOAT),
    ]
    outputs = [o.name for o in onnx.load(str(zoo.repo / "nested" / "1" / "model.onnx")).graph.output]
    assert outputs == ["output_logits", "output_aux_0"]
    # The reference outputs are the nested module's own outputs for the re-nested inputs (mode "sum" is a constant).
    zoo_module = load_module(zoo.root / f"{MODULE}.py", "_check_nested")
    model = zoo_module._seeded(zoo_module.Nested, 2)  # what make_nested returns, without counting a call
    import torch

    for case in read_reference(zoo.repo / "nested" / "1" / "gen_repo"):
        arrays = {k: torch.from_numpy(v) for k, v in case.inputs.items()}
        extras = {"mask": arrays["input_extras_mask"], "scale": arrays["input_extras_scale"],
                  "pair": (arrays["input_extras_pair_0"], arrays["input_extras_pair_1"]), "mode": "sum"}
        with torch.no_grad():
            out = model(arrays["input_x"], extras)
        np.testing.assert_allclose(case.outputs["output_logits"], out["logits"].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(case.outputs["output_aux_0"], out["aux"][0].numpy(), rtol=1e-5, atol=1e-6)


def test_inputs_recorded_out_of_signature_order_are_planned_in_signature_order(zoo: SimpleNamespace) -> None:
    from generator.specs.graphspec import GraphSpec

    zoo_module = load_module(zoo.root / f"{MODULE}.py", "_check_order")
    calls = []
    for b, s in ((1, 4), (4, 8)):
        values = nested_inputs(b, s)
        calls.append((b, {"extras": values["extras"], "x": values["x"]}))  # kwargs in another order
    document = record("nested", zoo_module.Nested().eval(), ["x", "extras"], calls)
    assert GraphSpec.from_dict(document["graph"]).input_tensor_names()[-1] == "input_x"  # recorded order
    (zoo.root / "specs" / "nested_kw.graphspec.json").write_text(json.dumps(document))
    manifest = write_manifest(zoo.root, "order.yaml", [
        {"name": "nested", "spec": "specs/nested_kw.graphspec.json", "source": {"factory": f"{MODULE}:make_nested"}}
    ])
    plan, _ = plan_build(manifest, BuildOptions(allow_code=True, target="onnx"))
    assert next(t.name for t in plan.models[0].inputs) == "input_x"


def test_multiple_outputs_with_int64_and_bool_inputs(zoo: SimpleNamespace) -> None:
    inputs = _onnx_inputs(zoo.repo / "two" / "1" / "model.onnx")
    assert [(n, e) for n, e, _ in inputs] == [("input_ids", onnx.TensorProto.INT64),
                                             ("input_mask", onnx.TensorProto.BOOL)]
    config = (zoo.repo / "two" / "config.pbtxt").read_text()
    assert "TYPE_INT64" in config and "TYPE_BOOL" in config
    assert "output_0" in config and "output_1" in config
    cases = read_reference(zoo.repo / "two" / "1" / "gen_repo")
    assert [c.name for c in cases] == ["min", "opt", "max"]
    assert all(set(c.outputs) == {"output_0", "output_1"} for c in cases)
    assert cases[0].inputs["input_ids"].dtype == np.int64 and cases[0].inputs["input_mask"].dtype == np.bool_


def test_static_shape_model_does_not_batch(zoo: SimpleNamespace) -> None:
    contract = json.loads((zoo.repo / "static" / "1" / "gen_repo" / "contract.json").read_text())
    assert contract["max_batch_size"] == 0
    assert contract["inputs"][0]["dims"] == [3, 16] and contract["inputs"][0]["max_shape"] == [3, 16]
    assert "max_batch_size" not in (zoo.repo / "static" / "config.pbtxt").read_text()  # 0: protobuf leaves it out
    assert _onnx_inputs(zoo.repo / "static" / "1" / "model.onnx")[0][2] == [3, 16]  # static axes stay static
    assert [c.batch_size for c in read_reference(zoo.repo / "static" / "1" / "gen_repo")] == [None, None, None]


def test_onnx_files_hold_no_absolute_paths(zoo: SimpleNamespace) -> None:
    for path in zoo.repo.rglob("model.onnx"):
        data = path.read_bytes()
        assert str(zoo.root).encode() not in data, path
        assert str(Path(__file__).resolve().parents[2]).encode() not in data, path  # the checkout's path
    lock_text = (zoo.repo / "gen-repo.lock.json").read_text()
    assert str(zoo.root) not in lock_text


def test_lint_passes(zoo: SimpleNamespace) -> None:
    findings = lint_repository(zoo.repo)
    assert [f for f in findings if f.severity == "error"] == [], [str(f) for f in findings]


def test_second_build_is_a_cache_hit_and_exports_nothing(zoo: SimpleNamespace, cache_dir: Path) -> None:
    before = tree_digest(zoo.repo)
    events = []
    report = build_repository(zoo.manifest, BuildOptions(allow_code=True, cache_dir=cache_dir),
                              progress=events.append)
    assert [m.status for m in report.models] == ["cached"] * len(ALL)
    assert factory_calls(zoo.root) == zoo.calls  # no factory was called again (nothing imported or exported)
    assert not [e for e in events if e.stage in ("source", "export")]
    assert tree_digest(zoo.repo) == before  # byte-identical, lock file included


def test_auto_target_never_picks_tensorrt_rtx(zoo: SimpleNamespace) -> None:
    plan, notes = plan_build(zoo.manifest, BuildOptions(target="auto", tensorrt_module="tensorrt_rtx"))
    trt, why = tensorrt_available("tensorrt")
    expected = "tensorrt" if trt is not None else "onnx"
    assert {m.target for m in plan.models} == {expected}
    assert len(notes) == 1 and notes[0].startswith(f"target auto -> {expected}")
    if trt is None:
        assert why in notes[0]


def test_factory_refused_without_allow_code_before_anything_runs(zoo: SimpleNamespace, tmp_path: Path) -> None:
    with pytest.raises(GenRepoError) as raised:
        build_repository(zoo.manifest, BuildOptions(cache_dir=tmp_path / "cache"), output_dir=tmp_path / "out")
    assert len(raised.value.problems) == 4  # the four factory models, all at once
    assert all("--allow-code" in p.message and p.pointer.endswith("/source/factory") for p in raised.value.problems)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    assert raised.value.exit_code == 2


def test_compute_capabilities_need_standard_tensorrt(zoo: SimpleNamespace) -> None:
    if _rtx_missing():
        raise missing("tensorrt_rtx", f"tensorrt_rtx is not installed: {_rtx_missing()}")
    manifest = write_manifest(zoo.root, "cc.yaml", [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, "target": "tensorrt",
         "compute_capabilities": ["8.9", "9.0"]},
    ])
    options = BuildOptions(tensorrt_module="tensorrt_rtx")
    plan, _ = plan_build(manifest, options)
    with pytest.raises(GenRepoError, match="one plan per compute capability needs standard TensorRT"):
        preflight(plan, options)


# --------------------------------------------------------------------------------------------------------------------
# TensorRT: for real with TensorRT-RTX on a CPU (its engines are not Triton plans), and gpu tests for real TensorRT
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rtx_build(zoo: SimpleNamespace, cache_dir: Path) -> SimpleNamespace:
    """The MLP (factory) built for the tensorrt target with tensorrt_rtx."""
    if _rtx_missing():
        raise missing("tensorrt_rtx", f"tensorrt_rtx is not installed: {_rtx_missing()}")
    manifest = write_manifest(zoo.root, "rtx.yaml", [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"}},
    ])
    options = BuildOptions(allow_code=True, cache_dir=cache_dir, target="tensorrt", tensorrt_module="tensorrt_rtx")
    output = zoo.root / "rtx_repository"
    report = build_repository(manifest, options, output_dir=output)
    return SimpleNamespace(manifest=manifest, options=options, repo=output, report=report)


def test_tensorrt_rtx_builds_an_engine_and_labels_it(rtx_build: SimpleNamespace, cache_dir: Path) -> None:
    import tensorrt_rtx

    report = rtx_build.report
    assert report.ok, report.to_dict()
    files = set(tree_digest(rtx_build.repo / "mlp"))
    assert "1/model.plan" in files and "1/model.onnx" not in files
    assert (rtx_build.repo / "mlp" / "1" / "model.plan").stat().st_size > 1000
    notes = report.models[0].notes
    assert any("NOT a Triton tensorrt_plan" in n for n in notes)
    entry = read_lock(rtx_build.repo)["models"]["mlp"]
    assert entry["tensorrt"] == {
        "module": "tensorrt_rtx", "version": tensorrt_rtx.__version__, "triton_plan": False,
        "engines": {"model.plan": {"compute_capability": None}},
    }
    # The timing cache lives in the cache folder.
    timing = BuildCache(cache_dir).timing_cache_path(f"tensorrt_rtx-{tensorrt_rtx.__version__}", "cpu")
    assert timing.is_file()
    assert any(timing.relative_to(cache_dir).as_posix() in n for n in notes)


def test_tensorrt_rtx_rebuild_reads_the_timing_cache(rtx_build: SimpleNamespace) -> None:
    report = build_repository(rtx_build.manifest, BuildOptions(**{**_fields(rtx_build.options), "use_cache": False}),
                              output_dir=rtx_build.repo)
    notes = " ".join(report.models[0].notes)
    # Standard TensorRT reuses it ("reused"); TensorRT-RTX reads the file but its timing caches are no-ops, which the
    # build reports instead of claiming a reuse.
    assert "timing cache reused" in notes or "was not accepted" in notes, notes


def test_an_ensemble_of_tensorrt_steps_takes_its_reference_from_the_torch_pipeline(
    rtx_build: SimpleNamespace, zoo: SimpleNamespace
) -> None:
    """TensorRT steps keep only their engines, so nothing can chain them on a CPU: with a torch pipeline for the
    whole ensemble its outputs are the reference; without one the ensemble fails, saying what to add."""
    import yaml

    document = yaml.safe_load(rtx_build.manifest.read_text())
    step = {"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}
    document["ensembles"] = [{"name": "pipe", "steps": [step], "source": {"factory": f"{MODULE}:make_mlp"}},
                             {"name": "bare", "steps": [step]}]
    manifest = zoo.root / "rtx_ensemble.yaml"
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
    options = BuildOptions(**{**_fields(rtx_build.options), "keep_going": True})
    report = build_repository(manifest, options, output_dir=zoo.root / "rtx_ensemble_repository")
    by_name = {m.name: m for m in report.models}
    assert by_name["mlp"].status == "cached" and by_name["pipe"].status == "built", report.to_dict()
    assert any(n.startswith(f"reference outputs: the torch pipeline {MODULE}:make_mlp") for n in by_name["pipe"].notes)
    (problem,) = by_name["bare"].problems
    assert by_name["bare"].status == "failed" and "keep no model.onnx to chain" in problem.message
    assert problem.pointer == "/ensembles/1"
    cases = read_reference(zoo.root / "rtx_ensemble_repository" / "pipe" / "1" / "gen_repo")
    assert [(c.name, c.outputs["y"].shape[1:]) for c in cases] == [("min", (4,)), ("opt", (4,)), ("max", (4,))]
    # The values are the torch pipeline's: recomputed here from the same factory's model on the stored inputs.
    import torch

    zoo_module = load_module(zoo.root / f"{MODULE}.py", "_check_pipe")
    model = zoo_module._seeded(zoo_module.MLP, 0)  # what make_mlp returns, without counting a call
    for case in cases:
        with torch.no_grad():
            want = model(torch.from_numpy(case.inputs["x"])).numpy()
        np.testing.assert_allclose(case.outputs["y"], want, rtol=1e-5, atol=1e-6, err_msg=case.name)


def test_verify_catches_a_modified_engine(rtx_build: SimpleNamespace, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(rtx_build.repo, copy)
    plan_file = copy / "mlp" / "1" / "model.plan"
    data = bytearray(plan_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    plan_file.write_bytes(bytes(data))
    problems = verify_repository(copy)
    assert len(problems) == 1 and problems[0].file.endswith("mlp/1/model.plan")


def _fields(options: BuildOptions) -> dict:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def _standard_tensorrt_with_gpu() -> str | None:
    trt, why = tensorrt_available("tensorrt")
    return None if trt is not None else why


@pytest.mark.gpu
def test_tensorrt_plan_on_gpu_records_compute_capability_and_reuses_timing_cache(
    zoo: SimpleNamespace, cache_dir: Path
) -> None:
    why = _standard_tensorrt_with_gpu()
    if why:
        raise missing("tensorrt_gpu", f"needs standard TensorRT and an NVIDIA GPU: {why}")
    from generator.gpu import current_gpu, detect_gpus

    gpu = current_gpu(detect_gpus())
    manifest = write_manifest(zoo.root, "gpu.yaml", [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, "target": "tensorrt"},
    ])
    options = BuildOptions(cache_dir=cache_dir)
    output = zoo.root / "gpu_repository"
    build_repository(manifest, options, output_dir=output)
    entry = read_lock(output)["models"]["mlp"]["tensorrt"]
    assert entry["triton_plan"] is True
    assert entry["engines"] == {"model.plan": {"compute_capability": gpu.compute_capability if gpu else None}}
    again = build_repository(manifest, BuildOptions(cache_dir=cache_dir, use_cache=False), output_dir=output)
    assert any("timing cache reused" in n for n in again.models[0].notes)


@pytest.mark.gpu
def test_one_plan_per_compute_capability(zoo: SimpleNamespace, cache_dir: Path) -> None:
    why = _standard_tensorrt_with_gpu()
    if why:
        raise missing("tensorrt_gpu", f"needs standard TensorRT and NVIDIA GPUs: {why}")
    from generator.gpu import detect_gpus

    capabilities = sorted({g.compute_capability for g in detect_gpus() if g.compute_capability})
    if len(capabilities) < 2:
        raise missing("gpu_two_capabilities", f"this machine has {capabilities}")
    manifest = write_manifest(zoo.root, "multi_cc.yaml", [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, "target": "tensorrt",
         "compute_capabilities": capabilities},
    ])
    output = zoo.root / "multi_cc_repository"
    build_repository(manifest, BuildOptions(cache_dir=cache_dir), output_dir=output)
    engines = read_lock(output)["models"]["mlp"]["tensorrt"]["engines"]
    assert sorted(v["compute_capability"] for v in engines.values()) == capabilities
    for filename in engines:
        assert (output / "mlp" / "1" / filename).stat().st_size > 0
    assert "cc_model_filenames" in (output / "mlp" / "config.pbtxt").read_text()


# ---- factory fingerprint (cache key) -------------------------------------------------------------------------------
def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_factory_fingerprint_covers_the_whole_package_and_imports_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    package = tmp_path / "fp_pkg_whole"
    _write(package / "__init__.py", f"open({str(marker)!r}, 'w').close()\n")
    _write(package / "models.py", "from .sub.helpers import width\ndef make(): return width\n")
    _write(package / "sub" / "__init__.py", "")
    _write(package / "sub" / "helpers.py", "width = 16\n")
    _write(package / "data" / "notes.txt", "not code\n")
    spec = "fp_pkg_whole.models:make"
    first = factory_fingerprint(spec, [str(tmp_path)])
    assert not first.startswith("unresolved") and not marker.exists()

    _write(package / "data" / "notes.txt", "still not code\n")
    _write(package / "__pycache__" / "stale.py", "x = 1\n")
    assert factory_fingerprint(spec, [str(tmp_path)]) == first
    _write(package / "sub" / "helpers.py", "width = 32\n")  # a module the factory imports, two levels down
    second = factory_fingerprint(spec, [str(tmp_path)])
    assert second != first
    _write(package / "extra.py", "")  # a new module counts too
    assert factory_fingerprint(spec, [str(tmp_path)]) != second
    assert not marker.exists()


def test_factory_fingerprint_of_a_top_level_module_covers_its_folder(tmp_path: Path) -> None:
    _write(tmp_path / "fp_top_factory.py", "import fp_top_helpers\ndef make(): return fp_top_helpers.width\n")
    _write(tmp_path / "fp_top_helpers.py", "width = 16\n")
    _write(tmp_path / "fp_top_lib" / "__init__.py", "")
    _write(tmp_path / "fp_top_lib" / "layers.py", "depth = 2\n")
    _write(tmp_path / "notes" / "draft.py", "unused = 1\n")  # not a package: not importable as one
    spec = "fp_top_factory:make"
    first = factory_fingerprint(spec, [str(tmp_path)])
    _write(tmp_path / "notes" / "draft.py", "unused = 2\n")
    assert factory_fingerprint(spec, [str(tmp_path)]) == first
    _write(tmp_path / "fp_top_helpers.py", "width = 32\n")
    second = factory_fingerprint(spec, [str(tmp_path)])
    assert second != first
    _write(tmp_path / "fp_top_lib" / "layers.py", "depth = 3\n")
    assert factory_fingerprint(spec, [str(tmp_path)]) != second


def test_factory_fingerprint_of_an_unknown_module_says_so(tmp_path: Path) -> None:
    assert factory_fingerprint("fp_no_such_module:make", [str(tmp_path)]) == "unresolved:fp_no_such_module:make"


def test_factories_resolve_from_the_working_folder_then_the_manifest_folder_then_code_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generator.building.factories import import_factory
    from generator.building.pipeline import factory_search_path
    from generator.errors import GenRepoError, Problem

    work, project = tmp_path / "work", tmp_path / "project"
    (work / "workpkg").mkdir(parents=True)
    (work / "workpkg" / "__init__.py").write_text("")
    (work / "workpkg" / "models.py").write_text("def make():\n    return 'working folder'\n")
    (project / "lib").mkdir(parents=True)
    (project / "lib" / "libmodels.py").write_text("def make():\n    return 'code_path'\n")
    (project / "projmodels.py").write_text("def make():\n    return 'manifest folder'\n")
    shutil.copyfile(Path(__file__).parents[2] / "examples" / "specs" / "mlp.graphspec.json", project / "mlp.json")
    manifest = project / "gen-repo.yaml"
    manifest.write_text("code_path: [lib]\nmodels:\n  - {name: m, spec: mlp.json}\n")
    monkeypatch.chdir(work)
    plan, _ = plan_build(manifest, BuildOptions())
    search = factory_search_path(plan, BuildOptions(code_path=("/elsewhere",)))
    assert search == (str(work.resolve()), str(project.resolve()), str((project / "lib").resolve()), "/elsewhere")
    options = BuildOptions(allow_code=True, code_path=search)
    where = Problem(str(manifest), "/models/0/source/factory", "")
    for spec, found in (("workpkg.models:make", "working folder"), ("projmodels:make", "manifest folder"),
                        ("libmodels:make", "code_path")):
        assert import_factory(spec, options, where) == found
    with pytest.raises(GenRepoError) as info:
        import_factory("nowhere_at_all:make", options, where)
    (problem,) = info.value.problems
    assert problem.pointer == "/models/0/source/factory" and "ModuleNotFoundError" in problem.message
    manifest.write_text("code_path: [missing, ../work]\nmodels:\n  - {name: m, spec: mlp.json}\n")
    with pytest.raises(GenRepoError) as info:
        plan_build(manifest, BuildOptions())
    assert [p.pointer for p in info.value.problems] == ["/code_path/0", "/code_path/1"]


def test_assumed_batch_multipliers_are_in_the_build_report(zoo: SimpleNamespace, cache_dir: Path) -> None:
    # A recording whose smallest batch was 2: it could be a stacked batch (2 x 1..8), which AITune's JSON cannot tell.
    document = json.loads((zoo.root / "specs" / "mlp.graphspec.json").read_text())
    for meta in ("input_spec", "output_spec"):
        document["graph"][meta]["tensor_data"][0]["min_shape"][0] = 2
        document["graph"][meta]["tensor_data"][0].pop("batch_axis_multipliers", None)  # as AITune writes it
    (zoo.root / "specs" / "mlp_from2.graphspec.json").write_text(json.dumps(document))
    manifest = write_manifest(zoo.root, "assumed.yaml", [
        {"name": "mlp2", "spec": "specs/mlp_from2.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"},
         "target": "python"}])
    report = build_repository(manifest, BuildOptions(allow_code=True, cache_dir=cache_dir),
                              output_dir=zoo.root / "assumed_repository")
    (model,) = report.models
    assert model.status == "built"
    assert any(n.startswith("assumed: batch multipliers of 'input_x', 'output' inferred against the narrowest "
                            "batch range 2..16") for n in model.notes), model.notes


def test_manifest_values_beyond_an_index_table_are_refused_at_the_reference_stage(zoo: SimpleNamespace,
                                                                                  cache_dir: Path) -> None:
    # "two" embeds its int64 ids in a 20-row table: the graph shows it, so ids 0..30 cannot all be served.
    manifest = write_manifest(zoo.root, "values.yaml", [
        {"name": "two", "spec": "specs/two.graphspec.json", "source": {"factory": f"{MODULE}:make_two"},
         "target": "onnx", "inputs": {"ids": {"value_range": [0, 30]}}}])
    with pytest.raises(BuildFailed) as info:
        build_repository(manifest, BuildOptions(allow_code=True, cache_dir=cache_dir),
                         output_dir=zoo.root / "values_repository")
    (model,) = info.value.report.models
    (problem,) = model.problems
    assert model.stage == "reference" and problem.pointer == "/models/0/inputs"
    assert problem.message.startswith("model 'two', stage reference: input 'input_ids': the manifest's values 0..30 "
                                      "go beyond 0..19, "
                                      "the index into the 20-row table")
    fine = write_manifest(zoo.root, "values_ok.yaml", [
        {"name": "two", "spec": "specs/two.graphspec.json", "source": {"factory": f"{MODULE}:make_two"},
         "target": "onnx", "inputs": {"input_ids": {"values": [3, 5]}}}])
    report = build_repository(fine, BuildOptions(allow_code=True, cache_dir=cache_dir),
                              output_dir=zoo.root / "values_ok_repository")
    assert report.ok
    contract = json.loads((zoo.root / "values_ok_repository/two/1/gen_repo/contract.json").read_text())
    assert contract["inputs"][0]["values"] == [3, 5] and contract["inputs"][0]["source"] == "manifest"
    from generator.contracts.reference_data import read_reference

    for case in read_reference(zoo.root / "values_ok_repository/two/1/gen_repo"):
        assert set(np.unique(case.inputs["input_ids"])) <= {3, 5}


# --------------------------------------------------------------------------------------------------------------------
# Warmup from the build's data
# --------------------------------------------------------------------------------------------------------------------
def test_warmup_data_files_are_locked_verified_and_lint_clean(warmup_example_repository: Path) -> None:
    from generator.planning.config import parse_config

    repo = warmup_example_repository
    lock = read_lock(repo)
    for name in ("mlp", "text"):
        config = parse_config((repo / name / "config.pbtxt").read_text())
        named = sorted(e.input_data_file for e in config.model_warmup[0].inputs.values())
        assert named and all(f.startswith("1/") for f in named), named
        assert sorted(p.relative_to(repo / name / "warmup").as_posix()
                      for p in (repo / name / "warmup").rglob("*") if p.is_file()) == named
        assert {f"{name}/warmup/{f}" for f in named} <= set(lock["artifacts"])
        assert not (repo / name / "1" / "warmup").exists()  # moved beside the config, not left in the version
    assert verify_repository(repo) == []
    assert lint_repository(repo) == []


@pytest.mark.triton
def test_triton_reads_the_warmup_data_at_load(warmup_example_repository: Path, triton_server_factory,
                                              tmp_path: Path) -> None:
    """The real Triton loads the repository warming up from its files, and refuses a copy whose file is short."""
    from generator.serving.smoke import run_smoke

    short = tmp_path / "repo"
    shutil.copytree(warmup_example_repository, short)
    victim = short / "text" / "warmup" / "1" / "input_input_ids"
    victim.write_bytes(victim.read_bytes()[:-8])
    server = triton_server_factory(warmup_example_repository)
    assert run_smoke(server.grpc_url, "grpc", warmup_example_repository).exit_code == 0
    # Explicit model control: the server starts, and smoke loads each model and reports its load error.
    report = run_smoke(triton_server_factory(short, model_control="explicit").grpc_url, "grpc", short)
    ready = {r.model: r for r in report.results if r.check == "ready"}
    assert ready["mlp"].status == "passed"
    assert ready["text"].status == "failed" and "warmup setting expects 128 bytes" in ready["text"].message, \
        ready["text"].message


def test_the_cache_key_follows_the_contract_text_not_only_its_data(tmp_path, monkeypatch):
    """A cached contract.json written by an earlier renderer is never reused: the key holds the rendered text."""
    import generator.building.pipeline as build_module
    from generator.building.results import tool_versions
    from generator.planning.model_files import contract_text
    from tests.manifest_helpers import EXAMPLES_MANIFEST

    plan, _ = plan_build(EXAMPLES_MANIFEST, BuildOptions(target="python"))
    cache = BuildCache(tmp_path / "cache")
    model = plan.models[0]
    key = build_module.model_cache_key(cache, model, BuildOptions(), tool_versions())
    assert key == build_module.model_cache_key(cache, model, BuildOptions(), tool_versions())
    monkeypatch.setattr(build_module, "contract_text", lambda m: contract_text(m).replace("\n", "\n "))
    assert build_module.model_cache_key(cache, model, BuildOptions(), tool_versions()) != key


def test_a_cache_entry_with_recomputed_metadata_is_rebuilt_not_served(zoo: SimpleNamespace, cache_dir: Path,
                                                                      tmp_path: Path) -> None:
    """Issue 21: someone who can write the cache changes an entry's model.onnx and recomputes its manifest's
    sha256 and size. The entry's MAC (keyed by a secret outside the cache) no longer verifies: the model is built
    again, and the smuggled bytes never reach the repository (so ``verify`` cannot vouch for them)."""
    cache = tmp_path / "cache"
    shutil.copytree(cache_dir, cache)
    key = read_lock(zoo.repo)["models"]["fromonnx"]["cache_key"]
    files = cache / key[:2] / key / "files"
    smuggled = b"smuggled" * 64
    (files / "model.onnx").write_bytes(smuggled)
    manifest_path = files.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["model.onnx"] = {"sha256": hashlib.sha256(smuggled).hexdigest(), "size": len(smuggled)}
    manifest_path.write_text(json.dumps(manifest))
    only = write_manifest(zoo.root, "only-fromonnx.yaml",
                          [e for e in yaml.safe_load(zoo.manifest.read_text())["models"] if e["name"] == "fromonnx"])
    report = build_repository(only, BuildOptions(allow_code=True, cache_dir=cache), output_dir=tmp_path / "out")
    assert [(m.name, m.status) for m in report.models] == [("fromonnx", "built")]
    built = (tmp_path / "out" / "fromonnx" / "1" / "model.onnx").read_bytes()
    assert built != smuggled and built == (zoo.repo / "fromonnx" / "1" / "model.onnx").read_bytes()
    assert verify_repository(tmp_path / "out") == []


def test_a_tuned_block_builds_its_settings_and_a_rebuild_is_byte_identical(example_repository: Path,
                                                                           tuned_example_repository: SimpleNamespace,
                                                                           tmp_path: Path) -> None:
    from generator.planning.config import parse_config
    from generator.triton.proto import model_config_pb2

    tuned = tuned_example_repository
    config = parse_config((tuned.repo / "text" / "config.pbtxt").read_text())
    assert [(g.kind, g.count) for g in config.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_CPU, 3)]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert list(config.dynamic_batching.preferred_batch_size) == []
    # The untuned model's config is the example's own.
    mlp = "mlp/config.pbtxt"
    assert (tuned.repo / mlp).read_bytes() == (example_repository / mlp).read_bytes()
    report = build_repository(tuned.manifest, BuildOptions(allow_code=True, target="python", cache_dir=tuned.cache),
                              output_dir=tmp_path / "rebuild")
    assert report.ok, report.to_dict()
    assert tree_digest(tmp_path / "rebuild") == tree_digest(tuned.repo)
