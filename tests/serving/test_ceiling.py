"""The ceiling (generator/serving/ceiling.py): onnxruntime measured for real on a built model; TensorRT says why not."""

from __future__ import annotations

import shutil
from pathlib import Path

import jsonschema
import pytest

from generator.client import ModelContract
from generator.contracts.served import FolderReader, read_served_model
from generator.resources import resource_dir
from generator.serving.ceiling import Ceiling, fraction, measure_ceiling
from tests.requirements import require


def _schema_validator() -> jsonschema.Draft202012Validator:
    import json

    schema = json.loads((resource_dir("schemas") / "report_perf.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def test_the_ceiling_runs_the_repositorys_own_model_as_its_instances_would(example_repository: Path) -> None:
    require("onnxruntime")
    ceiling = measure_ceiling(example_repository, "text", seconds=0.6)
    assert ceiling.skipped is None and ceiling.runtime == "onnxruntime", ceiling
    served = read_served_model(FolderReader(example_repository), "text")
    assert served.config is not None
    # One session per instance, one intra-op thread each (what the generated model.py sets by default).
    assert ceiling.sessions == sum(g.count for g in served.config.instance_group) and ceiling.threads == 1
    # Every batch size of the profile measured; the figure is the best of them.
    first = ModelContract.from_served(served).inputs[0]
    assert set(ceiling.per_batch) == {first.min_shape[0], first.opt_shape[0], first.max_shape[0]}  # type: ignore[index]
    assert ceiling.throughput == max(ceiling.per_batch.values()) > 0
    assert ceiling.batch_size is not None and ceiling.per_batch[ceiling.batch_size] == ceiling.throughput
    assert ceiling.cpu_s_per_item is not None and ceiling.cpu_s_per_item > 0
    assert fraction(ceiling.throughput / 4, ceiling) == 0.25
    # Sessions as a candidate's instance count would have them.
    assert measure_ceiling(example_repository, "text", seconds=0.3, sessions=3).sessions == 3
    _schema_validator().validate({"results": [], "ceilings": [ceiling.to_dict()]})


def test_a_model_onnxruntime_cannot_run_is_a_skip_with_the_reason(example_repository: Path, tmp_path: Path) -> None:
    require("onnxruntime")
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    served = read_served_model(FolderReader(repo), "mlp")
    onnx = repo / "mlp" / str(served.version) / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[:200])  # truncated: not a model any more
    ceiling = measure_ceiling(repo, "mlp", seconds=0.2)
    assert ceiling.throughput is None and ceiling.skipped is not None
    assert ceiling.skipped.startswith("onnxruntime failed: ") and "\n" not in ceiling.skipped
    assert fraction(100.0, ceiling) is None
    onnx.unlink()
    assert measure_ceiling(repo, "mlp", seconds=0.2).skipped == f"{onnx} is missing"


def test_the_tensorrt_path_skips_with_its_reason_where_there_is_no_gpu(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU for this process, whatever the machine has
    (tmp_path / "engine" / "1").mkdir(parents=True)
    (tmp_path / "engine" / "config.pbtxt").write_text(
        'name: "engine"\nplatform: "tensorrt_plan"\nmax_batch_size: 8\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [4]}]\noutput [{name: "y" data_type: TYPE_FP32 dims: [4]}]\n')
    (tmp_path / "engine" / "1" / "model.plan").write_bytes(b"not run without a GPU")
    ceiling = measure_ceiling(tmp_path, "engine")
    assert ceiling == Ceiling("engine", "tensorrt", sessions=1,
                              skipped="no GPU here: TensorRT's own execution of the plan needs one")
    assert "ceiling not measured (tensorrt): no GPU here" in ceiling.describe()
    _schema_validator().validate({"results": [], "ceilings": [ceiling.to_dict()]})
