"""``gen-repo init``: a starter manifest that ``gen-repo plan`` accepts unchanged, never written over a file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.manifest.entries import OPTION_KEYS
from generator.manifest.starter import OPTION_COMMENTS
from generator.naming import model_name_problems
from generator.specs.schema import load_graphspecs


@pytest.fixture
def specs(tmp_path: Path, aitune_fixture_dir: Path) -> list[Path]:
    """Every AITune fixture and the tune report, copied into a project folder (the manifest is written there)."""
    folder = tmp_path / "project" / "specs"
    shutil.copytree(aitune_fixture_dir, folder, ignore=shutil.ignore_patterns("*.md"))
    return sorted(folder.glob("*.json"))


def _init(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["init", *args])
    return result.exit_code, result.output


def _plan(manifest: Path) -> dict:
    result = CliRunner().invoke(main, ["plan", "--json", "--target", "onnx", str(manifest)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_init_round_trips_through_plan_for_every_fixture_and_tune_report(specs: list[Path]) -> None:
    manifest = specs[0].parent.parent / "gen-repo.yaml"
    code, output = _init([*map(str, specs), "-o", str(manifest)])
    assert code == 0, output
    graphs = [g for spec in specs for g in load_graphspecs(spec)]
    plan = _plan(manifest)
    names = [m["name"] for m in plan["models"]]
    assert len(names) == len(graphs) == 13 and plan["refused"] == []
    assert len({n.lower() for n in names}) == len(names)  # unique, as Triton folders on any file system
    assert all(model_name_problems(name) == [] for name in names)
    assert "mlp_0" in names and "nested_dict_0_2" in names  # file stem / tune report module + graph name
    assert f"wrote {manifest}: 13 model(s)" in output


@pytest.mark.parametrize("index", range(9))
def test_init_round_trips_one_file_at_a_time(specs: list[Path], index: int) -> None:
    spec = specs[index]
    manifest = spec.parent / f"{spec.name}.yaml"
    assert _init([str(spec), "-o", str(manifest)])[0] == 0
    plan = _plan(manifest)
    assert len(plan["models"]) == len(load_graphspecs(spec))
    assert all(m["source"] is None for m in plan["models"])  # no source yet: the header says how to add one


def test_every_option_is_a_comment_and_each_literal_default_changes_nothing(specs: list[Path]) -> None:
    assert set(OPTION_COMMENTS) == set(OPTION_KEYS) - {"target"}
    manifest = specs[0].parent.parent / "gen-repo.yaml"
    assert _init([*map(str, specs), "-o", str(manifest)])[0] == 0
    text = manifest.read_text(encoding="utf-8")
    for key in OPTION_COMMENTS:
        assert re.search(rf"^  # {key}:", text, re.MULTILINE), key
    before = _plan(manifest)
    uncommented = text
    for key, (default, _) in OPTION_COMMENTS.items():
        if default is not None:
            uncommented = uncommented.replace(f"  # {key}: {default}  #", f"  {key}: {default}  #", 1)
    assert uncommented.count("\n  # ") == text.count("\n  # ") - sum(d is not None for d, _ in OPTION_COMMENTS.values())
    configs_before = _configs(manifest, manifest.parent / "before")
    manifest.write_text(uncommented, encoding="utf-8")
    after = _plan(manifest)
    # The same plan (decisions aside: a non-batching model notes that an explicit dynamic_batching is ignored) and
    # byte-equal configs.
    assert _without_decisions(after["models"]) == _without_decisions(before["models"])
    assert _configs(manifest, manifest.parent / "after") == configs_before


def _without_decisions(models: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "decisions"} for m in models]


def _configs(manifest: Path, out: Path) -> dict[str, bytes]:
    result = CliRunner().invoke(main, ["config", "--target", "onnx", str(manifest), "-o", str(out)])
    assert result.exit_code == 0, result.output
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert any(name.endswith("config.pbtxt") for name in files)
    return files


def test_init_never_overwrites(specs: list[Path]) -> None:
    manifest = specs[0].parent / "gen-repo.yaml"
    manifest.write_text("keep me\n", encoding="utf-8")
    code, output = _init([str(specs[0]), "-o", str(manifest)])
    assert code == 2 and "Traceback" not in output
    assert f"error: {manifest}: /: already exists; gen-repo init never overwrites a file" in output
    assert manifest.read_text(encoding="utf-8") == "keep me\n"


def test_invalid_spec_is_reported_and_nothing_written(specs: list[Path]) -> None:
    bad = specs[0].parent / "bad.json"
    bad.write_text('{"graph": {"name": 0}}', encoding="utf-8")
    manifest = specs[0].parent / "gen-repo.yaml"
    code, output = _init([str(specs[0]), str(bad), "-o", str(manifest)])
    assert code == 2
    assert f"error: {bad}: /graph/name: 0 is not of type 'string'" in output
    assert not manifest.exists() and not [p for p in manifest.parent.iterdir() if p.name.startswith(".")]


def test_spec_outside_the_manifest_folder_is_refused(specs: list[Path], tmp_path: Path) -> None:
    manifest = tmp_path / "elsewhere" / "gen-repo.yaml"
    manifest.parent.mkdir()
    code, output = _init([str(specs[0]), "-o", str(manifest)])
    assert code == 2 and f"error: {specs[0]}: /: is outside {manifest.parent}" in output
    assert "or pass --allow-outside to refer to it with '..'" in output
    assert not manifest.exists()


def test_spec_paths_are_relative_to_the_manifest_wherever_init_runs(specs: list[Path], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an unrelated folder with -o into another one: the paths written are the manifest's, not the
    current folder's, so `plan FILE` works from anywhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = Path("..", "project", "specs", specs[0].name)
    (tmp_path / "project" / "sub").mkdir()  # the OS resolves "sub/.." only through a folder that exists
    manifest = Path("..", "project", "sub", "..", "gen-repo.yaml")
    code, output = _init([str(spec), "-o", str(manifest)])
    assert (code, output.strip()) == (0, f"wrote {manifest}: 1 model(s); next: gen-repo plan {manifest}")
    assert f'    spec: "specs/{specs[0].name}"' in (tmp_path / "project" / "gen-repo.yaml").read_text().splitlines()
    monkeypatch.chdir(tmp_path)
    assert len(_plan(tmp_path / "project" / "gen-repo.yaml")["models"]) == 1


def test_allow_outside_writes_dot_dot_paths_that_plan_takes_with_the_same_flag(specs: list[Path],
                                                                              tmp_path: Path) -> None:
    manifest = tmp_path / "manifests" / "gen-repo.yaml"
    manifest.parent.mkdir()
    code, output = _init([str(specs[0]), "-o", str(manifest), "--allow-outside"])
    assert (code, output.strip()) == (0, f"wrote {manifest}: 1 model(s); next: gen-repo plan --allow-outside "
                                         f"{manifest}")
    text = manifest.read_text()
    assert f'    spec: "../project/specs/{specs[0].name}"' in text.splitlines()
    assert "plan, config and build need --allow-outside" in text
    plan = CliRunner().invoke(main, ["plan", "--json", "--target", "onnx", "--allow-outside", str(manifest)])
    assert plan.exit_code == 0, plan.output
    assert len(json.loads(plan.output)["models"]) == 1
    refused = CliRunner().invoke(main, ["plan", str(manifest)])
    assert refused.exit_code == 2
    assert f"path '../project/specs/{specs[0].name}' leads outside the manifest's folder" in refused.output
    assert "(--allow-outside)" in refused.output


def test_names_are_made_triton_safe_and_unique(specs: list[Path]) -> None:
    """Graph names with spaces and slashes, and the same graph twice: sanitised, then numbered."""
    document = json.loads(specs[0].read_text(encoding="utf-8"))
    document["graph"]["name"] = "my model/v1"
    odd = specs[0].parent / "odd.graphspec.json"
    odd.write_text(json.dumps(document), encoding="utf-8")
    twin = specs[0].parent / "twin.graphspec.json"
    twin.write_text(json.dumps(document), encoding="utf-8")
    manifest = specs[0].parent / "gen-repo.yaml"
    assert _init([str(odd), str(twin), "-o", str(manifest)])[0] == 0
    assert [m["name"] for m in _plan(manifest)["models"]] == ["my_model_v1", "my_model_v1_2"]
