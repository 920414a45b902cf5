"""``gen-repo plan`` and ``gen-repo config`` end to end through the CLI (generator/cli/plan.py, cli/config.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from generator.cli import main
from tests.manifest_helpers import AITUNE, EXAMPLES_MANIFEST, batch_graph, write_manifest


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_plan_text_says_which_case_applied():
    result = _run("plan", str(EXAMPLES_MANIFEST), "--target", "python")
    assert result.exit_code == 0, result.output
    assert "model 'mlp' version 1: target python, max_batch_size 32 (batching)" in result.output
    assert "batch ranges agree" in result.output
    assert "input  input_x TYPE_FP32 dims [16]" in result.output


def test_plan_says_what_target_auto_became_on_this_machine():
    # No TensorRT with a GPU here: auto resolves to onnx, as `gen-repo build` does, and the plan says so.
    result = _run("plan", str(EXAMPLES_MANIFEST))
    assert result.exit_code == 0, result.output
    assert "model 'mlp' version 1: target onnx" in result.output
    assert "target auto resolved to onnx" in result.output


def test_plan_json(tmp_path):
    document = {"models": [{"name": "s", "spec": str(AITUNE / "stacked_cfg.graphspec.json")}]}
    result = _run("plan", str(write_manifest(tmp_path, document)), "--json", "--allow-outside")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (model,) = data["models"]
    assert data["ok"] is True and model["max_batch_size"] == 0 and model["batching"] is False
    assert any("multiplier 2" in d for d in model["decisions"])
    assert model["inputs"][0]["dims"] == [-1, 4, 8, 8]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen-repo.yaml"]  # nothing written


def test_config_writes_layout_and_is_byte_identical(tmp_path):
    out = tmp_path / "repo"
    result = _run("config", str(EXAMPLES_MANIFEST), "-o", str(out), "--target", "python")
    assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [".gen-repo-output", "mlp/1/gen_repo/contract.json", "mlp/config.pbtxt",
                     "text/1/gen_repo/contract.json", "text/config.pbtxt"]
    first = {f: (out / f).read_bytes() for f in files}
    golden = Path(__file__).parents[1] / "golden" / "configs" / "examples"
    assert first["mlp/config.pbtxt"] == (golden / "mlp" / "config.pbtxt").read_bytes()
    config = text_format.Parse(first["text/config.pbtxt"].decode(), model_config_pb2.ModelConfig())
    assert config.name == "text"
    (out / "unrelated.txt").write_text("kept")
    assert _run("config", str(EXAMPLES_MANIFEST), "-o", str(out), "--target", "python").exit_code == 0
    assert {f: (out / f).read_bytes() for f in files} == first
    assert (out / "unrelated.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # no staging folder left behind


def test_config_rewrites_an_ensembles_folder_too(tmp_path):
    """A second `gen-repo config` into the same folder swaps in every folder it wrote, the ensemble's included."""
    zoo = Path(__file__).parents[1] / "zoo" / "gen-repo.yaml"
    out = tmp_path / "repo"
    for _ in range(2):
        result = _run("config", str(zoo), "-o", str(out))
        assert result.exit_code == 0, result.output
        assert (out / "bert_classifier" / "config.pbtxt").is_file()
        assert (out / "bert_classifier" / "1" / "gen_repo" / "contract.json").is_file()
        (out / "bert_classifier" / "config.pbtxt").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_config_default_output_is_next_to_the_manifest(tmp_path):
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "mlp.json")
    manifest = write_manifest(tmp_path, {"output": "served", "models": [{"spec": "mlp.json"}]})
    assert _run("config", str(manifest)).exit_code == 0
    assert (tmp_path / "served" / "mlp_0" / "config.pbtxt").is_file()


def _bad_cases(tmp_path: Path) -> dict[str, tuple[dict, str]]:
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "mlp.json")
    good = {"name": "good", "spec": "mlp.json"}
    return {
        "unknown key": ({"models": [good, {"name": "b", "spec": "mlp.json", "colour": 1}]},
                        "/models/1: Additional properties are not allowed ('colour' was unexpected)"),
        "missing file": ({"models": [good, {"name": "b", "spec": "nope.json"}]},
                         "/models/1/spec: spec file 'nope.json' not found"),
        "conflict": ({"models": [good, {"name": "b", "spec": "mlp.json", "dynamic_batching": {
            "preserve_ordering": True, "priority_levels": 2, "default_priority_level": 1}}]},
                     "/models/1/dynamic_batching/preserve_ordering: preserve_ordering cannot be combined"),
        "plan problem": ({"models": [good, {"name": "b", "spec": batch_graph(), "max_batch_size": 64}]},
                         "/models/1/max_batch_size: max_batch_size 64 exceeds"),
        "name": ({"models": [good, {"name": "a/b", "spec": "mlp.json"}]}, "/models/1/name: model name 'a/b'"),
    }


@pytest.mark.parametrize("case", ["unknown key", "missing file", "conflict", "plan problem", "name"])
@pytest.mark.parametrize("command", ["plan", "config"])
def test_bad_manifests_exit_2_and_write_nothing(tmp_path, case, command):
    document, expected = _bad_cases(tmp_path)[case]
    manifest = write_manifest(tmp_path, document)
    before = sorted(p.name for p in tmp_path.iterdir())
    # config into folders that do not exist yet: the staging needs them, and they go when nothing is written.
    args = [command, str(manifest)] + (["-o", str(tmp_path / "new" / "out")] if command == "config" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"error: {manifest}: {expected}" in result.stderr
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no staging folder


def test_plan_prints_a_refused_models_errors_once(tmp_path):
    """stdout shows the plan (the refused model named), stderr every reason, once: a terminal shows each once."""
    document, expected = _bad_cases(tmp_path)["plan problem"]
    manifest = write_manifest(tmp_path, document)
    result = CliRunner().invoke(main, ["plan", str(manifest)])
    assert result.exit_code == 2, result.output
    assert "model 'b' (/models/1): refused, nothing would be built (1 error(s) below)" in result.stdout
    assert result.stdout.count(expected) == 0 and result.stderr.count(expected) == 1


def test_config_makes_nothing_where_a_refused_output_leads(tmp_path):
    """`output: ../elsewhere` without --allow-outside: refused as `plan` refuses it, and nothing left there."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(AITUNE / "mlp.graphspec.json", project / "mlp.json")
    manifest = write_manifest(project, {"output": "../elsewhere/repo", "models": [{"name": "a", "spec": "mlp.json"},
                                                                                 {"name": "b", "spec": "nope.json"}]})
    result = CliRunner().invoke(main, ["config", str(manifest)])
    assert result.exit_code == 2, result.output
    assert f"error: {manifest}: /output: path '../elsewhere/repo' leads outside" in result.stderr
    assert "refused: 'b'" in result.stderr  # as `gen-repo plan` reports it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]
    # Where that output leads cannot hold a folder (a file is in the way): making the staging folder there first
    # would fail with an OSError; the manifest's problem is reported instead.
    (project / "blocked").write_text("a file, not a folder")
    manifest = write_manifest(project, {"output": "blocked/repo", "models": [{"name": "a", "spec": "mlp.json"}]})
    result = CliRunner().invoke(main, ["config", str(manifest)])
    assert result.exit_code == 2, result.output
    assert f"error: {manifest}: /output: path 'blocked/repo' cannot be used" in result.stderr
    assert "Traceback" not in result.output and (project / "blocked").read_text() == "a file, not a folder"


def test_errors_as_json(tmp_path):
    manifest = write_manifest(tmp_path, {"models": [{"spec": "nope.json"}]})
    result = CliRunner().invoke(main, ["plan", str(manifest), "--json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["errors"][0]["pointer"] == "/models/0/spec"


def test_warmup_reads_build_data_but_config_alone_warms_up_with_zeros_and_random_bytes(tmp_path):
    # `plan` shows what `build` writes: warmup from the build's data files; `config` writes no data files, so its
    # configs cannot name any.
    document = {"defaults": {"warmup": True}, "models": [
        {"name": "s", "spec": str(AITUNE / "mlp.graphspec.json"), "target": "python"}]}
    manifest = str(write_manifest(tmp_path, document))
    planned = json.loads(_run("plan", manifest, "--json", "--allow-outside").output)
    (model,) = planned["models"]
    assert any(d.startswith("warmup at the opt shape") and "in warmup/1/" in d for d in model["decisions"]), model
    out = tmp_path / "repo"
    assert _run("config", manifest, "-o", str(out), "--allow-outside").exit_code == 0
    config = text_format.Parse((out / "s" / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    (entry,) = config.model_warmup[0].inputs.values()
    assert entry.random_data and not entry.input_data_file
    assert not (out / "s" / "warmup").exists()


STREAMING = Path(__file__).resolve().parents[1] / "data" / "post_input" / "streaming.graphspec.json"


def test_validate_and_plan_say_that_an_input_changed_by_the_call_is_lost(tmp_path):
    """AITune main's post_input_spec (tests/data/post_input, recorded as AITune main records it): the call grows
    state["history"] and counts state["chunks"]; Triton serves statelessly, and both commands say so. The input
    overwritten in place with the same shape (state["last"]) leaves no trace in the metadata and is not named."""
    said = ("the call changes its inputs (post_input_spec): 'state[\"history\"]' a torch.float32 [1..4, 5..9, 8] "
            "tensor -> a torch.float32 [1..4, 8..15, 8] tensor; 'state[\"chunks\"]' 0 -> 1; Triton serves the model "
            "statelessly, so the change is lost: a request's inputs are dropped after the call (return what the "
            "next call needs as an output and send it back as an input)")
    validated = _run("validate", "--json", str(STREAMING))
    assert validated.exit_code == 0, validated.output
    (graph,) = json.loads(validated.output)["graphs"]
    assert said in graph["triton"]["decisions"]
    shutil.copy(STREAMING, tmp_path / "streaming.graphspec.json")
    manifest = write_manifest(tmp_path, {"models": [{"name": "s", "spec": "streaming.graphspec.json"}]})
    planned = _run("plan", "--json", str(manifest))
    assert planned.exit_code == 0, planned.output
    (model,) = json.loads(planned.output)["models"]
    assert said in model["decisions"]
    assert not any("state[\\\"last\\\"]" in d or "'state[\"last\"]'" in d for d in model["decisions"])
    # The same recording without a change after the call: nothing said.
    document = json.loads(STREAMING.read_text(encoding="utf-8"))
    document["graph"]["post_input_spec"] = document["graph"]["input_spec"]
    (tmp_path / "streaming.graphspec.json").write_text(json.dumps(document), encoding="utf-8")
    planned = _run("plan", "--json", str(manifest))
    assert not any("post_input_spec" in d for d in json.loads(planned.output)["models"][0]["decisions"])


def test_plan_says_where_a_spec_path_was_looked_for_and_what_to_write(tmp_path, monkeypatch):
    """A new manifest pointed at an existing spec with the path typed from the current folder (issue 38): one error
    names the folder, the path tried and the manifest-relative path with --allow-outside; that path then plans."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples" / "specs").mkdir(parents=True)
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "examples" / "specs" / "mlp.json")
    manifest = write_manifest(tmp_path / "mine", {"models": [{"name": "m", "spec": "examples/specs/mlp.json"}]})
    result = CliRunner().invoke(main, ["plan", "mine/gen-repo.yaml"])
    assert result.exit_code == 2
    assert (f"error: mine/gen-repo.yaml: /models/0/spec: spec file 'examples/specs/mlp.json' not found: paths in a "
            f"manifest are relative to its folder {tmp_path / 'mine'}, so it was looked for at "
            f"{tmp_path / 'mine' / 'examples' / 'specs' / 'mlp.json'}; 'examples/specs/mlp.json' exists relative to "
            f"the current folder {tmp_path}: from the manifest it is '../examples/specs/mlp.json', outside the "
            f"manifest's folder: write that and pass --allow-outside, or move the file under {tmp_path / 'mine'}"
            ) in result.output
    manifest.write_text(manifest.read_text().replace("examples/specs", "../examples/specs"))
    assert CliRunner().invoke(main, ["plan", "--allow-outside", "mine/gen-repo.yaml"]).exit_code == 0


def test_plan_shows_the_output_folder_build_would_write_with_o(tmp_path):
    """`plan -o DIR` plans for the folder `build -o DIR` writes (README's quickstart plans what it then builds)."""
    default = _run("plan", str(EXAMPLES_MANIFEST), "--target", "python")
    assert default.output.splitlines()[1] == f"output:   {EXAMPLES_MANIFEST.parent.resolve() / 'model_repository'}"
    given = _run("plan", str(EXAMPLES_MANIFEST), "--target", "python", "-o", str(tmp_path / "served"))
    assert given.exit_code == 0, given.output
    assert given.output.splitlines()[1] == f"output:   {tmp_path / 'served'}"
    assert given.output.splitlines()[2:] == default.output.splitlines()[2:]  # only the folder differs
    as_json = json.loads(_run("plan", str(EXAMPLES_MANIFEST), "--json", "-o", str(tmp_path / "served")).output)
    assert as_json["output"] == str(tmp_path / "served")
