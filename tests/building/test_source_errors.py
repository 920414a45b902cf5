"""Every problem with a model's source (a .pt2 file, an ONNX file, a factory) names the manifest and the JSON
pointer of that source entry (``/models/<i>/source/<kind>``), not the spec file: that entry is what the user fixes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from generator.building.pipeline import BuildFailed, BuildOptions, build_repository
from generator.errors import GenRepoError, Problem
from generator.planning.targets import plan_build
from tests.requirements import require


def _manifest(folder: Path, aitune_fixture_dir: Path, source: dict[str, str]) -> Path:
    """Two models: a valid-looking first one and the one under test at index 1 (so the index is checked too)."""
    shutil.copy(aitune_fixture_dir / "mlp.graphspec.json", folder / "mlp.graphspec.json")
    (folder / "ok.onnx").write_bytes(b"")
    manifest = folder / "gen-repo.yaml"
    models = [{"name": "first", "spec": "mlp.graphspec.json", "source": {"onnx": "ok.onnx"}},
              {"name": "second", "spec": "mlp.graphspec.json", "source": source}]
    manifest.write_text(yaml.safe_dump({"models": models}, sort_keys=False), encoding="utf-8")
    return manifest


def _build_problems(manifest: Path, tmp_path: Path) -> list[Problem]:
    """Every problem of a --keep-going build (each model fails on its own)."""
    options = BuildOptions(allow_code=True, target="onnx", keep_going=True, cache_dir=tmp_path / "cache",
                           code_path=(str(manifest.parent),))
    try:
        report = build_repository(manifest, options, output_dir=tmp_path / "out")
    except BuildFailed as failed:
        return list(failed.problems)
    return [p for m in report.models for p in m.problems]


def test_a_missing_pt2_file_points_at_the_manifest_entry(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    manifest = _manifest(tmp_path, aitune_fixture_dir, {"pt2": "missing.pt2"})
    with pytest.raises(GenRepoError) as refused:
        plan_build(manifest, BuildOptions())
    (problem,) = [p for p in refused.value.problems if p.pointer.startswith("/models/1")]
    assert (problem.file, problem.pointer) == (str(manifest), "/models/1/source/pt2")
    assert "'missing.pt2' not found" in problem.message


@pytest.mark.parametrize(("kind", "needs", "content", "message"), [
    ("pt2", "torch", b"PK\x03\x04 not really a torch.export archive", "cannot load torch.export archive"),
    ("onnx", "onnx", b"\x08\x07 this is no ONNX protobuf \xff\xff", "not a readable ONNX file"),
])
def test_a_broken_source_file_points_at_the_manifest_entry(tmp_path: Path, aitune_fixture_dir: Path, kind: str,
                                                           needs: str, content: bytes, message: str) -> None:
    require(needs)
    manifest = _manifest(tmp_path, aitune_fixture_dir, {kind: f"broken.{kind}"})
    (tmp_path / f"broken.{kind}").write_bytes(content)
    every = _build_problems(manifest, tmp_path)
    problems = [p for p in every if p.pointer.startswith("/models/1")]
    assert [(p.file, p.pointer) for p in problems] == [(str(manifest), f"/models/1/source/{kind}")]
    assert f"{tmp_path / f'broken.{kind}'}: {message}" in problems[0].message
    # The first model's empty ONNX file is reported at its own entry too: no problem names the spec file.
    assert {p.pointer for p in every if p.pointer.startswith("/models/0")} == {"/models/0/source/onnx"}
    assert all(p.file == str(manifest) for p in every)


def test_a_factory_that_raises_points_at_the_manifest_entry(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    module = "gen_repo_raising_factory"
    (tmp_path / f"{module}.py").write_text("def make():\n    raise RuntimeError('no weights here')\n")
    manifest = _manifest(tmp_path, aitune_fixture_dir, {"factory": f"{module}:make"})
    try:
        problems = [p for p in _build_problems(manifest, tmp_path) if p.pointer.startswith("/models/1")]
    finally:
        sys.modules.pop(module, None)
    assert [(p.file, p.pointer) for p in problems] == [(str(manifest), "/models/1/source/factory")]
    assert "RuntimeError: no weights here" in problems[0].message
