"""``gen-repo validate``: exit codes, tables, error lists and --json (click runner and one real process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.cli.validate import FEW_FILES
from tests.manifest_helpers import FIXTURES


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def bad_specs(tmp_path: Path, aitune_fixture_dir: Path) -> list[Path]:
    text = json.loads((aitune_fixture_dir / "text.graphspec.json").read_text())
    text["graph"]["input_spec"]["tensor_data"][0]["min_shape"] = [1]
    text["graph"]["input_spec"]["tensor_data"][1]["shape"][1] = "dim0"
    first = tmp_path / "bad_text.json"
    first.write_text(json.dumps(text))
    second = tmp_path / "bad.yaml"
    second.write_text("graph:\n  name: 0\n")
    return [first, second]


def test_valid_specs_exit_0_with_a_table_per_graph(runner: CliRunner, aitune_fixture_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths: the tables' titles (and where rich wraps them) must not depend on where the checkout lives.
    monkeypatch.chdir(aitune_fixture_dir)
    files = [f"{name}.graphspec.json" for name in FIXTURES] + ["tune_report.json"]
    result = runner.invoke(main, ["validate", "--verbose", *files])  # 9 files: tables only when asked
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "13 graph(s) in 9 file(s) valid" in result.output
    # stacked_cfg: the table shows the inputs, shapes, batch ranges and both max batch sizes, plus assumptions.
    assert "input_latents" in result.output and "[2, 4, 8, 8]" in result.output
    assert "axis 0: 2..8 (x2)" in result.output
    assert "max batch size: 8  normalized max batch size: 4  min batch size: 1" in result.output
    assert "assumed: input 'input_latents' axis 0: batch multiplier 2 inferred" in result.output
    # static_single_bs: no batch axis, min batch size unknown.
    assert "max batch size: 1  normalized max batch size: 1  min batch size: -" in result.output
    # tune report graphs are titled with their module.
    assert "module 'nested_dict'" in result.output
    assert "input_extras_pair_1" in result.output
    assert "torch.float16" in result.output


def test_many_files_one_line_each(runner: CliRunner, aitune_fixture_dir: Path) -> None:
    """Beyond FEW_FILES files: one line per file (graphs, Triton max_batch_size, verdict), no tables."""
    files = [str(aitune_fixture_dir / f"{name}.graphspec.json") for name in FIXTURES]
    files.append(str(aitune_fixture_dir / "tune_report.json"))
    assert len(files) > FEW_FILES
    result = runner.invoke(main, ["validate", *files])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:-1] == [line for line in lines if line.endswith(": valid")] and len(lines) == len(files) + 1
    assert f"{aitune_fixture_dir / 'mlp.graphspec.json'}: 1 graph(s), max_batch_size 8: valid" in lines
    assert f"{aitune_fixture_dir / 'static_single_bs.graphspec.json'}: 1 graph(s), max_batch_size 0 (no batching)" \
           ": valid" in lines
    assert any(line.startswith(f"{aitune_fixture_dir / 'tune_report.json'}: 5 graph(s), ") for line in lines)
    assert lines[-1] == "13 graph(s) in 9 file(s) valid"
    assert "input_latents" not in result.output  # no tables


def test_many_files_with_errors_one_line_each_then_every_error(
    runner: CliRunner, aitune_fixture_dir: Path, bad_specs: list[Path]
) -> None:
    files = [str(aitune_fixture_dir / f"{name}.graphspec.json") for name in FIXTURES] + list(map(str, bad_specs))
    result = runner.invoke(main, ["validate", *files])
    assert result.exit_code == 2
    assert f"{bad_specs[1]}: 0 graph(s), max_batch_size -: 3 error(s)" in result.output
    assert f"error: {bad_specs[1]}: /graph/name: 0 is not of type 'string'" in result.output  # errors in full
    assert f"{aitune_fixture_dir / 'mlp.graphspec.json'}: 1 graph(s), max_batch_size 8: valid" in result.output


def test_many_files_json_is_the_same_document_one_line_per_graph(runner: CliRunner, aitune_fixture_dir: Path) -> None:
    files = [str(aitune_fixture_dir / f"{name}.graphspec.json") for name in FIXTURES]
    files.append(str(aitune_fixture_dir / "tune_report.json"))
    many = runner.invoke(main, ["validate", "--json", *files])
    assert many.exit_code == 0
    assert many.output.count("\n") == 13 + 5  # {, "graphs": [, 13 graphs, ], "ok", }
    # The same JSON as the indented form, graph for graph (verbose indents whatever the count).
    verbose = runner.invoke(main, ["validate", "--json", "--verbose", *files])
    assert json.loads(many.output) == json.loads(verbose.output)
    assert verbose.output.count("\n") > 200


def test_hundreds_of_files(runner: CliRunner, tmp_path: Path, aitune_fixture_dir: Path,
                           bad_specs: list[Path]) -> None:
    """One line per file, in the order given, errors in full."""
    files = []
    for i in range(200):
        name = ("mlp", "text", "stacked_cfg")[i % 3]
        files.append(tmp_path / f"{i:03d}_{name}.graphspec.json")
        shutil.copy(aitune_fixture_dir / f"{name}.graphspec.json", files[-1])
    files.insert(7, bad_specs[1])
    result = runner.invoke(main, ["validate", *map(str, files)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if not line.startswith("error: ")]
    assert [line.split(": ")[0] for line in lines[:len(files)]] == list(map(str, files))
    assert lines[7] == f"{bad_specs[1]}: 0 graph(s), max_batch_size -: 3 error(s)"
    assert lines[0].endswith("max_batch_size 8: valid") and lines[2].endswith("max_batch_size 0 (no batching): valid")
    assert result.output.count("error: ") == 3
    as_json = runner.invoke(main, ["validate", "--json", *map(str, files)])
    assert as_json.exit_code == 2
    payload = json.loads(as_json.stdout)  # the graphs of the valid files beside the errors, one line per graph
    assert payload["ok"] is False and len(payload["errors"]) == 3 and len(payload["graphs"]) == 200


def test_invalid_specs_exit_2_with_every_error_of_every_file(runner: CliRunner, bad_specs: list[Path]) -> None:
    result = runner.invoke(main, ["validate", *map(str, bad_specs)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    first, second = map(str, bad_specs)
    assert f"error: {first}: /graph/input_spec/tensor_data/0/min_shape: has 1 axes but shape has 2; shape, " \
           "min_shape and max_shape must have the same rank" in lines
    assert any(line.startswith(f"error: {first}: /graph/input_spec/tensor_data/1/shape/1: ") for line in lines)
    assert f"error: {second}: /graph: 'input_spec' is a required property" in lines
    assert f"error: {second}: /graph/name: 0 is not of type 'string'" in lines
    assert f"{len(lines)} error(s)" in result.output


def test_valid_and_invalid_together_exit_2(runner: CliRunner, aitune_fixture_dir: Path, bad_specs: list[Path]) -> None:
    result = runner.invoke(main, ["validate", str(aitune_fixture_dir / "mlp.graphspec.json"), str(bad_specs[1])])
    assert result.exit_code == 2
    assert "input_x" not in result.output  # no tables when anything is wrong


def test_json_output_when_valid(runner: CliRunner, aitune_fixture_dir: Path) -> None:
    result = runner.invoke(main, ["validate", "--json", str(aitune_fixture_dir / "explicit_dynamic.graphspec.json")])
    assert result.exit_code == 0
    payload = json.loads(result.output)
    assert payload["ok"] is True
    (graph,) = payload["graphs"]
    assert graph["max_batch_size"] == 32 and graph["min_batch_size"] == 1
    assert [i["name"] for i in graph["inputs"]] == ["input_input_ids", "input_attention_mask", "input_token_type_ids"]
    assert graph["inputs"][0]["opt_shape"] == [8, 256]
    assert graph["inputs"][0]["explicit_definition"] is True
    assert result.output == json.dumps(payload, indent=2, sort_keys=True) + "\n"  # sorted keys


def test_json_output_when_invalid(runner: CliRunner, bad_specs: list[Path]) -> None:
    result = runner.invoke(main, ["validate", "--json", *map(str, bad_specs)])
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    pointers = [(e["file"], e["pointer"]) for e in payload["errors"]]
    assert (str(bad_specs[0]), "/graph/input_spec/tensor_data/0/min_shape") in pointers
    assert (str(bad_specs[1]), "/graph/name") in pointers
    assert "Traceback" not in result.output


def test_missing_file_and_pickle_are_errors_not_tracebacks(runner: CliRunner, tmp_path: Path) -> None:
    pickled = tmp_path / "spec.pkl"
    pickled.write_bytes(b"\x80\x04\x95\x00")
    result = runner.invoke(main, ["validate", str(tmp_path / "missing.json"), str(pickled)])
    assert result.exit_code == 2
    assert "cannot read file" in result.output and "never unpickles" in result.output
    assert "Traceback" not in result.output


def test_no_arguments_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(main, ["validate"])
    assert result.exit_code == 2
    assert "Missing argument" in result.output


def _gen_repo() -> list[str]:
    script = Path(sys.executable).parent / "gen-repo"
    if script.exists():
        return [str(script)]
    found = shutil.which("gen-repo")
    return [found] if found else [sys.executable, "-c", "from generator.cli import main; main()"]


def test_real_process(tmp_path: Path, aitune_fixture_dir: Path, bad_specs: list[Path]) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    ok = subprocess.run(
        [*_gen_repo(), "validate", str(aitune_fixture_dir / "nested_dict.graphspec.json")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "input_extras_mask" in ok.stdout and "Traceback" not in ok.stdout + ok.stderr
    bad = subprocess.run(
        [*_gen_repo(), "validate", "--json", *map(str, bad_specs)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["ok"] is False
    assert "Traceback" not in bad.stdout + bad.stderr
    plain = subprocess.run(
        [*_gen_repo(), "validate", *map(str, bad_specs)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert plain.returncode == 2
    assert plain.stderr.count("error: ") == 5 and "5 error(s)" in plain.stderr
    assert "Traceback" not in plain.stdout + plain.stderr


def _mlp_with_dtype(fixtures: Path, folder: Path, side: str, dtype: str) -> Path:
    """The mlp fixture with the first tensor of ``side`` (input_spec or output_spec) of ``dtype``, written to a file."""
    document = json.loads((fixtures / "mlp.graphspec.json").read_text())
    document["graph"][side]["tensor_data"][0]["dtype"] = dtype
    spec = folder / "dtype.graphspec.json"
    spec.write_text(json.dumps(document))
    return spec


def test_validate_applies_the_servability_rules_of_plan(runner: CliRunner, aitune_fixture_dir: Path,
                                                         tmp_path: Path) -> None:
    # A dtype Triton cannot carry: plan refuses it, so validate does, with the same message.
    spec = _mlp_with_dtype(aitune_fixture_dir, tmp_path, "output_spec", "torch.complex64")
    result = runner.invoke(main, ["validate", str(spec)])
    assert result.exit_code == 2
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text(f"models:\n  - {{name: m, spec: {spec.name}}}\n")
    planned = runner.invoke(main, ["plan", str(manifest)])
    assert planned.exit_code == 2
    message = "/graph/output_spec/tensor_data/0/dtype: dtype 'torch.complex64' has no Triton data type here"
    assert message in result.stderr and message in planned.stderr


def test_validate_refuses_a_dtype_that_is_no_torch_dtype(runner: CliRunner, aitune_fixture_dir: Path,
                                                         tmp_path: Path) -> None:
    # "torch.float128" matches the schema's dtype pattern, but torch has no such dtype: a located refusal that names
    # what gen-repo serves (float64 and the unsigned types included), not the message for a real unservable dtype.
    spec = _mlp_with_dtype(aitune_fixture_dir, tmp_path, "input_spec", "torch.float128")
    result = runner.invoke(main, ["validate", str(spec)])
    assert result.exit_code == 2
    assert (f"error: {spec}: /graph/input_spec/tensor_data/0/dtype: dtype 'torch.float128' is no torch dtype; "
            "gen-repo serves torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, "
            "torch.int16, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64") in \
        result.stderr.splitlines()


def test_validate_says_how_triton_serves_a_real_recording(runner: CliRunner) -> None:
    # The guidance-stacked UNet (aitune 0.6.0): a 0-d timestep and every tensor [2b, ...].
    spec = Path(__file__).parents[1] / "zoo" / "specs" / "unet_guided.graphspec.json"
    result = runner.invoke(main, ["validate", "--json", str(spec)])
    assert result.exit_code == 0, result.output
    (graph,) = json.loads(result.stdout)["graphs"]
    assert graph["triton"]["max_batch_size"] == 0
    assert any("0-d tensors ['input_timestep'] travel as [1]" in d for d in graph["triton"]["decisions"])
    assert any("narrowest batch range 2..8" in a for a in graph["assumptions"])


def test_json_keeps_the_valid_files_graphs_beside_the_errors(runner: CliRunner, aitune_fixture_dir: Path,
                                                             bad_specs: list[Path]) -> None:
    """One invalid file among ten: the document keeps its shape, the nine valid files' graphs and the errors."""
    valid = [*(str(aitune_fixture_dir / f"{name}.graphspec.json") for name in FIXTURES),
             str(aitune_fixture_dir / "tune_report.json")]
    files = [*valid[:4], str(bad_specs[1]), *valid[4:]]
    assert len(files) == 10
    alone = json.loads(runner.invoke(main, ["validate", "--json", "--verbose", *valid]).output)
    for extra in ([], ["--verbose"]):  # one line per graph, and indented
        result = runner.invoke(main, ["validate", "--json", *extra, *files])
        assert result.exit_code == 2
        payload = json.loads(result.stdout)
        assert payload["ok"] is False
        assert payload["graphs"] == alone["graphs"] and len(payload["graphs"]) >= 9
        assert {(e["file"], e["pointer"]) for e in payload["errors"]} >= {(str(bad_specs[1]), "/graph/name")}
        assert result.stderr == ""



def test_table_test_holds_whatever_the_terminal() -> None:
    # The suite's own terminal (forced colour, a narrow width) must not reach the CLI output the tests read.
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "40"}
    env.pop("GEN_REPO_STRICT_SKIPS", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--color=no",
         "tests/cli/test_validate.py::test_valid_specs_exit_0_with_a_table_per_graph"],
        cwd=root, env=env, capture_output=True, text=True, check=False, timeout=300,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout
