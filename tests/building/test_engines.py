"""The zoo BERT built with two sequence buckets, for real (generator/building/engines.py, export/tensorrt.py,
reference.py): a TensorRT-RTX plan holding both optimization profiles, a config whose instance groups list both, a
contract recording them and reference cases at each profile's min, opt and max, which smoke serves and checks on the
python target (the CPU Triton has no TensorRT backend; tests/serving/test_tensorrt_profiles.py serves the plan
where a GPU is)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from generator.building.pipeline import build_repository
from generator.contracts.reference_data import read_reference
from generator.planning.config import parse_config
from generator.planning.options import BuildOptions
from tests.lint_cases import lint_repository
from tests.planning.test_profiles import TWO
from tests.requirements import require, require_module

ZOO = Path(__file__).resolve().parents[1] / "zoo"
#: Each reference case of a profile and the request shape of its inputs (batch, sequence).
PROFILE_CASES = {"short.min": [1, 6], "short.opt": [4, 8], "short.max": [4, 12],
                 "long.min": [1, 13], "long.opt": [2, 16], "long.max": [4, 20]}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """bert_trt (tensorrt, TensorRT-RTX) and bert_py (python), both with the two buckets, built in one run."""
    require_module("tensorrt_rtx")
    require_module("torch")
    root = tmp_path_factory.mktemp("profiles")
    shutil.copyfile(ZOO / "specs" / "bert.graphspec.json", root / "bert.graphspec.json")
    shutil.copyfile(ZOO / "samples" / "bert.npz", root / "bert.npz")
    shutil.copyfile(ZOO / "zoo_models.py", root / "zoo_models.py")
    model = {"spec": "bert.graphspec.json", "source": {"factory": "zoo_models:make_bert"}, "samples": "bert.npz",
             "profiles": TWO}
    manifest = root / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({
        "defaults": {"export": {"exporter": "torchscript"}},  # the faster exporter: the export is not under test
        "models": [{"name": "bert_trt", "target": "tensorrt", **model},
                   {"name": "bert_py", "target": "python", **model}],
    }, sort_keys=False))
    report = build_repository(manifest, BuildOptions(allow_code=True, tensorrt_module="tensorrt_rtx",
                                                     cache_dir=root / "cache"))
    return SimpleNamespace(repo=root / "model_repository", report=report)


def test_the_plan_holds_both_profiles_and_every_group_lists_them(built: SimpleNamespace) -> None:
    trt = next(m for m in built.report.models if m.name == "bert_trt")
    assert trt.status == "built", trt
    # build_engine read each profile back from the builder config and compared it with the plan (TensorRT-RTX
    # cannot deserialize an engine without a GPU, so the builder side is what shows the profiles here).
    assert ("model.plan: 2 optimization profiles, 0 'short', 1 'long': the builder config holds each input's "
            "min/opt/max as planned (read back)") in trt.notes
    config = parse_config((built.repo / "bert_trt" / "config.pbtxt").read_text())
    assert config.platform == "tensorrt_plan"
    assert [list(g.profile) for g in config.instance_group] == [["0", "1"]]
    assert list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    assert (built.repo / "bert_trt" / "1" / "model.plan").stat().st_size > 0
    assert not [f for f in lint_repository(built.repo) if "profile" in f.rule]


@pytest.mark.parametrize("name", ["bert_trt", "bert_py"])
def test_contract_and_reference_cases_cover_each_profile(built: SimpleNamespace, name: str) -> None:
    gen_repo = built.repo / name / "1" / "gen_repo"
    contract = json.loads((gen_repo / "contract.json").read_text())
    assert [(p["index"], p["name"]) for p in contract["optimization_profiles"]] == [(0, "short"), (1, "long")]
    cases = {case.name: case for case in read_reference(gen_repo)}
    assert list(cases) == ["min", "opt", "max", *PROFILE_CASES, "sample_a", "sample_b"]
    for case, shape in PROFILE_CASES.items():
        assert {list(array.shape) == shape for array in cases[case].inputs.values()} == {True}, case
        assert cases[case].outputs["output_last_hidden_state"].shape[:2] == tuple(shape)


@pytest.mark.triton
def test_smoke_sends_every_profile_case_and_checks_its_outputs(built: SimpleNamespace) -> None:
    require("tritonserver")
    from generator.serving.smoke_results import SmokeOptions
    from generator.serving.smoke_session import smoke_session

    report = smoke_session(str(built.repo), url=None, protocol="grpc", models=["bert_py"],
                           options=SmokeOptions(burst=8, concurrency=4))
    checks = report.for_model("bert_py")
    assert report.exit_code == 0, [str(r) for r in report.results]
    served = [case["case"] for case in checks["inference"].details["cases"]]
    assert all(case in served for case in PROFILE_CASES), served
    compared = {record["case"] for record in checks["reference"].details["comparisons"]}
    assert set(PROFILE_CASES) <= compared


def test_the_profiles_are_part_of_the_cache_key(tmp_path: Path) -> None:
    """A build is cached by content: other profiles (or another AITune file's content) are another entry."""
    from generator.building.pipeline import model_cache_key
    from generator.building.results import tool_versions
    from generator.repository.cache import BuildCache
    from tests.manifest_helpers import plan_for
    from tests.planning.test_profiles import AITUNE_FILE, BERT

    def key(folder: str, profiles: object) -> str:
        model = plan_for(tmp_path / folder, {"models": [{"name": "bert", "spec": BERT, "target": "tensorrt",
                                                         "profiles": profiles}]}).models[0]
        return model_cache_key(BuildCache(tmp_path / "cache"), model, BuildOptions(), tool_versions())

    later = [TWO[0], {**TWO[1], "axes": {**TWO[1]["axes"], "input_input_ids:1": {"min": 13, "opt": 18, "max": 20}}}]
    assert key("a", TWO) == key("b", TWO)
    assert key("a", TWO) != key("c", later)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "p.json").write_text(json.dumps(AITUNE_FILE))
    first = key("d", {"aitune": "p.json"})
    (tmp_path / "d" / "p.json").write_text(json.dumps([AITUNE_FILE[0], {**AITUNE_FILE[1], **{
        name: [[1, 13], [4, 18], [4, 20]] for name in AITUNE_FILE[1]}}]))
    assert key("d", {"aitune": "p.json"}) != first  # the same path, other content
