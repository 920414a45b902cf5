"""Every problem with a model's source (a .pt2 file, an ONNX file, a factory) names the manifest and the JSON
pointer of that source entry (``/models/<i>/source/<kind>``), not the spec file: that entry is what the user fixes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from generator.build import BuildFailed, BuildOptions, build_repository
from generator.errors import GenRepoError, Problem
from generator.planning import plan_build


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


def test_a_broken_pt2_file_points_at_the_manifest_entry(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    pytest.importorskip("torch")
    manifest = _manifest(tmp_path, aitune_fixture_dir, {"pt2": "broken.pt2"})
    (tmp_path / "broken.pt2").write_bytes(b"PK\x03\x04 not really a torch.export archive")
    problems = [p for p in _build_problems(manifest, tmp_path) if p.pointer.startswith("/models/1")]
    assert [(p.file, p.pointer) for p in problems] == [(str(manifest), "/models/1/source/pt2")]
    assert f"{tmp_path / 'broken.pt2'}: cannot load torch.export archive" in problems[0].message


def test_a_broken_onnx_file_points_at_the_manifest_entry(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    pytest.importorskip("onnx")
    manifest = _manifest(tmp_path, aitune_fixture_dir, {"onnx": "broken.onnx"})
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07 this is no ONNX protobuf \xff\xff")
    problems = [p for p in _build_problems(manifest, tmp_path) if p.pointer.startswith("/models/1")]
    assert [(p.file, p.pointer) for p in problems] == [(str(manifest), "/models/1/source/onnx")]
    assert f"{tmp_path / 'broken.onnx'}: not a readable ONNX file" in problems[0].message
    # The first model's empty ONNX file is reported at its own entry, never at the spec file.
    spec = str(tmp_path / "mlp.graphspec.json")
    assert all(p.file != spec for p in _build_problems(manifest, tmp_path))


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
