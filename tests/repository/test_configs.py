"""plan_config_files: forked workers give exactly the files and the errors of one process (plan_build + config_files).

Manifests of real AITune recordings (tests/data/aitune, the zoo's recorded architectures) with the zoo's ensemble,
entries that cannot load, models that cannot be planned, an ensemble over a refused model, name clashes and a
``--target`` override; each compared field by field, file order included, with one process and with workers.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.errors import GenRepoError
from generator.manifest.loading import read_manifest
from generator.planning.model_files import config_files
from generator.planning.options import BuildOptions
from generator.planning.targets import plan_build
from generator.planning.workers import fork_pool
from generator.repository.configs import PlannedFiles, plan_config_files
from tests.manifest_helpers import AITUNE, FIXTURE_FILES, REPO, ZOO_REFUSED_SPECS, write_manifest

ZOO = REPO / "tests" / "zoo"
ZOO_SPECS = sorted(p.name for p in (ZOO / "specs").glob("*.graphspec.json") if p.name not in ZOO_REFUSED_SPECS)
ENSEMBLE = {"name": "bert_classifier", "steps": [
    {"model": "bert", "inputs": {"input_input_ids": "input_ids", "input_attention_mask": "attention_mask",
                                 "input_token_type_ids": "token_type_ids"},
     "outputs": {"output_pooler_output": "pooled"}},
    {"model": "head", "inputs": {"input_pooled": "pooled"}, "outputs": {"output": "logits"}},
]}


def _specs(folder: Path) -> None:
    (folder / "specs").mkdir(parents=True)
    for name in FIXTURE_FILES:
        shutil.copy(AITUNE / name, folder / "specs" / name)
    for name in ZOO_SPECS:
        shutil.copy(ZOO / "specs" / name, folder / "specs" / name)
    shutil.copy(AITUNE / "tune_report.json", folder / "specs" / "tune_report.json")
    shutil.copytree(ZOO / "samples", folder / "samples")
    (folder / "model.onnx").write_bytes(b"")  # a source file: planning checks that it exists, never reads it


def _zoo_entries(suffix: str) -> list[dict[str, Any]]:
    """The zoo's own manifest entries (overrides, value domains, sample files and factories, factory sources)."""
    entries = yaml.safe_load((ZOO / "gen-repo.yaml").read_text(encoding="utf-8"))["models"]
    return [{**entry, "name": f"{entry['name']}_{suffix}"} for entry in entries]


def _models(copies: int) -> list[dict[str, Any]]:
    """Every recorded spec ``copies`` times under distinct names, targets alternating; the zoo's bert and head once."""
    models: list[dict[str, Any]] = [{"name": "bert", "spec": "specs/bert.graphspec.json"},
                                    {"name": "head", "spec": "specs/head.graphspec.json"}]
    for copy in range(copies):
        for i, name in enumerate(FIXTURE_FILES + ZOO_SPECS):
            models.append({"name": f"{name.removesuffix('.graphspec.json').replace('.', '_')}_copy{copy}",
                           "spec": f"specs/{name}",
                           "target": ("onnx", "python", "auto")[(i + copy) % 3]})
    models.append({"spec": {"file": "specs/tune_report.json", "graph": 0}})  # a name derived from the graph
    models += _zoo_entries("zoo")
    models += [
        {"name": "widened", "spec": "specs/bert_partial_ranges.graphspec.json", "shapes": "widen", "version": 3},
        {"name": "renamed", "spec": "specs/mlp.graphspec.json", "tensor_names": {"input_x": "features"},
         "source": {"onnx": "model.onnx"}, "instance_group": [{"kind": "KIND_CPU", "count": 2}],
         "pbtxt": "model_transaction_policy { decoupled: false }"},
    ]
    return models


def _reference(manifest: Path, options: BuildOptions) -> PlannedFiles | tuple[list[Any], str]:
    """What plan_build and config_files give (gen-repo plan and build plan this way)."""
    try:
        plan, _ = plan_build(manifest, options, warmup_data=False)
    except GenRepoError as error:
        return [p.to_dict() for p in error.problems], error.summary
    names = tuple([m.name for m in plan.models] + [e.name for e in plan.ensembles])
    return PlannedFiles(plan.output_dir, names, config_files(plan), plan.refused)


def _outcome(manifest: Path, options: BuildOptions, jobs: int, scratch: Path) -> PlannedFiles | tuple[list[Any], str]:
    write_to = scratch / f"jobs{jobs}"
    write_to.mkdir()
    try:
        planned = plan_config_files(read_manifest(manifest, allow_outside=options.allow_outside), options, jobs=jobs,
                                    write_to=write_to)
    except GenRepoError as error:
        return [p.to_dict() for p in error.problems], error.summary
    written = {p.relative_to(write_to).as_posix(): p.read_text() for p in write_to.rglob("*") if p.is_file()}
    assert written == planned.files  # what the workers wrote is what came back
    return planned


def _same_with_workers(manifest: Path, options: BuildOptions) -> PlannedFiles | tuple[list[Any], str]:
    scratch = Path(tempfile.mkdtemp(dir=manifest.parent))
    one = _outcome(manifest, options, 1, scratch)
    two = _outcome(manifest, options, 2, scratch)
    shutil.rmtree(scratch)
    reference = _reference(manifest, options)
    assert one == reference and two == reference
    if isinstance(reference, PlannedFiles):
        assert list(one.files) == list(two.files) == list(reference.files)  # the same order of files, too
    return reference


def test_this_machine_forks_workers():
    """The comparisons below run the worker path, not the one-process fallback."""
    with fork_pool(2) as pool:
        assert pool is not None


def test_workers_write_what_one_process_writes_for_real_recordings_and_an_ensemble(tmp_path):
    _specs(tmp_path)
    manifest = write_manifest(tmp_path, {"defaults": {"dynamic_batching": {"max_queue_delay_microseconds": 100}},
                                         "models": _models(3), "ensembles": [ENSEMBLE]})
    planned = _same_with_workers(manifest, BuildOptions())
    assert isinstance(planned, PlannedFiles) and planned.names[-1] == "bert_classifier"
    assert len(planned.names) == len(_models(3)) + 1 and not planned.refused
    assert _same_with_workers(manifest, BuildOptions(target="python")) != planned  # --target changes the configs


def test_workers_refuse_what_one_process_refuses_all_at_once(tmp_path):
    _specs(tmp_path)
    models = _models(2)
    models[5]["spec"] = "specs/missing.graphspec.json"  # cannot load
    models[6]["batching"] = "none"  # an option conflict: cannot load
    models[6]["dynamic_batching"] = True
    models[0]["pbtxt"] = "max_batch_size: 4"  # bert cannot be planned: the ensemble over it is refused too
    models[9]["instance_group"] = [{"kind": "KIND_CPU", "gpus": [0]}]
    manifest = write_manifest(tmp_path, {"models": models, "ensembles": [ENSEMBLE]})
    problems, summary = _same_with_workers(manifest, BuildOptions())  # type: ignore[misc]
    assert "'bert'" in summary and "'bert_classifier'" in summary and "missing.graphspec.json" in str(problems)
    kept = _same_with_workers(manifest, BuildOptions(keep_going=True))
    assert isinstance(kept, PlannedFiles)
    assert [r.name for r in kept.refused] == [models[0]["name"], models[5]["name"], models[6]["name"],
                                              models[9]["name"], "bert_classifier"]
    assert "bert/config.pbtxt" not in kept.files and len(kept.names) == len(models) - 4


@pytest.mark.parametrize("clash", ["duplicate", "case", "ensemble"])
def test_workers_report_the_manifests_own_name_problems(tmp_path, clash):
    _specs(tmp_path)
    models = _models(1)
    document: dict[str, Any] = {"models": models, "ensembles": [ENSEMBLE]}
    if clash == "duplicate":
        models[4]["name"] = models[3]["name"]
    elif clash == "case":
        models[4]["name"] = models[3]["name"].upper()
    else:
        document["ensembles"] = [{**ENSEMBLE, "name": models[3]["name"]}]
    models[7]["spec"] = "specs/missing.graphspec.json"  # an entry problem beside the name problem
    models[9]["name"] = "../../escaped"  # workers write into scratch/jobsN: this would land in tmp_path
    manifest = write_manifest(tmp_path, document)
    for keep_going in (False, True):
        problems, _ = _same_with_workers(manifest, BuildOptions(keep_going=keep_going))  # type: ignore[misc]
        assert any(p["pointer"].endswith("/name") for p in problems)
        assert any(p["pointer"] == "/models/9/name" for p in problems)
    assert not list(tmp_path.rglob("escaped"))
