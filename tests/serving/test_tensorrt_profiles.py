"""A TensorRT plan with two optimization profiles served by Triton's TensorRT backend (``gpu``: standard TensorRT,
an NVIDIA GPU and a tritonserver with its TensorRT backend; skipped with the reason elsewhere).

The zoo BERT with two sequence buckets, built as gen-repo builds it: smoke sends each profile's min, opt and max case
and compares every output with torch's reference (generator/serving/smoke.py). Then the layout of Triton server issue
#8629, the same plan with the instance group's profile list removed: lint warns, and Triton cannot serve what the
contract promises (tests/building/test_engines.py holds the same build on a CPU with TensorRT-RTX).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from generator.building.pipeline import build_repository
from generator.planning.options import BuildOptions
from generator.serving.smoke_results import SmokeOptions
from generator.serving.smoke_session import smoke_session
from tests.building.test_engines import PROFILE_CASES, ZOO
from tests.lint_cases import lint_repository
from tests.planning.test_profiles import TWO
from tests.requirements import require

pytestmark = [pytest.mark.gpu, pytest.mark.triton]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("tensorrt_gpu")
    require("triton_tensorrt_backend")
    root = tmp_path_factory.mktemp("trt-profiles")
    for source, name in ((ZOO / "specs" / "bert.graphspec.json", "bert.graphspec.json"),
                         (ZOO / "samples" / "bert.npz", "bert.npz"), (ZOO / "zoo_models.py", "zoo_models.py")):
        shutil.copyfile(source, root / name)
    (root / "gen-repo.yaml").write_text(yaml.safe_dump({"models": [{
        "name": "bert", "spec": "bert.graphspec.json", "source": {"factory": "zoo_models:make_bert"},
        "samples": "bert.npz", "target": "tensorrt", "profiles": TWO}]}, sort_keys=False))
    report = build_repository(root / "gen-repo.yaml", BuildOptions(allow_code=True, cache_dir=root / "cache"))
    assert [m.status for m in report.models] == ["built"], report
    return root / "model_repository"


def test_triton_serves_every_profile_case_with_the_reference_outputs(repository: Path) -> None:
    report = smoke_session(str(repository), url=None, protocol="grpc", models=["bert"],
                           options=SmokeOptions(burst=16, concurrency=4))
    checks = report.for_model("bert")
    assert report.exit_code == 0, [str(r) for r in report.results]
    served = [case["case"] for case in checks["inference"].details["cases"]]
    assert set(PROFILE_CASES) <= set(served), served
    assert set(PROFILE_CASES) <= {r["case"] for r in checks["reference"].details["comparisons"]}


def test_the_8629_layout_is_flagged_and_fails_on_triton(repository: Path, tmp_path: Path) -> None:
    broken = tmp_path / "repo"
    shutil.copytree(repository / "bert", broken / "bert")
    config = broken / "bert" / "config.pbtxt"
    config.write_text(re.sub(r'\n\s*profile: "\d+"', "", config.read_text()))
    assert [f.rule for f in lint_repository(broken)] == ["tensorrt-profiles-unlisted"]
    report = smoke_session(str(broken), url=None, protocol="grpc", models=["bert"], options=SmokeOptions(burst=4))
    assert report.exit_code != 0, [str(r) for r in report.results]
