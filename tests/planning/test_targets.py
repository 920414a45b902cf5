"""``target: auto``: tensorrt where TensorRT builds, except for a model with a tensor TensorRT cannot carry."""

from __future__ import annotations

import json
import shutil

import pytest

from generator.manifest.loading import load_manifest
from generator.planning.plan import plan_model
from generator.planning.targets import auto_target
from tests.manifest_helpers import AITUNE, FIXTURE_FILES, REPO, write_manifest

ZOO_SPECS = sorted((REPO / "tests" / "zoo" / "specs").glob("*.graphspec.json"))


def _models(tmp_path):
    """Every recorded AITune fixture and zoo architecture as a `target: auto` model."""
    for name in FIXTURE_FILES:
        shutil.copy(AITUNE / name, tmp_path / name)
    for path in ZOO_SPECS:
        shutil.copy(path, tmp_path / path.name)
    names = [*FIXTURE_FILES, *(p.name for p in ZOO_SPECS)]
    entries = [{"name": f"m{i}", "spec": name} for i, name in enumerate(names)]
    return load_manifest(write_manifest(tmp_path, {"defaults": {"target": "auto"}, "models": entries})).models


def test_recorded_models_get_tensorrt_where_it_builds_and_onnx_elsewhere(tmp_path):
    for model in _models(tmp_path):
        assert auto_target(model, tensorrt_builds=False) == ("onnx", None)
        assert auto_target(model, tensorrt_builds=True) == ("tensorrt", None), model.name  # fp32, fp16, int64 only


@pytest.mark.parametrize("dtype", ["torch.float64", "torch.int16", "torch.uint32"])
def test_a_tensor_tensorrt_cannot_carry_makes_auto_onnx_which_plans(tmp_path, dtype):
    """AITune's mlp recording with its input (or output) in a dtype TensorRT lacks: onnx serves it, and says why."""
    document = json.loads((AITUNE / "mlp.graphspec.json").read_text(encoding="utf-8"))
    tensor = document["graph"]["input_spec"]["tensor_data"][0]
    tensor["dtype"] = dtype
    (tmp_path / "mlp.json").write_text(json.dumps(document), encoding="utf-8")
    manifest = write_manifest(tmp_path, {"models": [{"name": "wide", "spec": "mlp.json", "target": "auto"}]})
    model = load_manifest(manifest).models[0]
    target, note = auto_target(model, tensorrt_builds=True)
    assert target == "onnx"
    assert note == (f"target auto -> onnx for model 'wide': its input {tensor['access_path']!r} is {dtype}, which "
                    "TensorRT does not carry")
    plan = plan_model(model, manifest, lambda m: auto_target(m, tensorrt_builds=True)[0])
    assert plan.target == "onnx" and plan.config.platform == "onnxruntime_onnx"
    assert "target auto resolved to onnx" in plan.decisions
    assert plan.inputs[0].dtype == dtype  # served as recorded, not converted
