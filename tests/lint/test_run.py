"""gen-repo lint: the hand-written corpus (good/ has no findings, each bad/<case> exactly its planted defect)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.lint import RULES, Environment, Finding, lint, rules
from generator.lint.layout import parse_config_text
from generator.lint.locator import PbtxtLocator
from generator.lint.rules import RULE_TABLE, Rule
from tests.lint_cases import (
    CASE_IDS,
    CASES,
    Case,
    Model,
    ensemble,
    lint_repository,
    position,
    repo_of,
    step,
    write_side,
)

CORPUS = Path(__file__).parents[1] / "lint_corpus"
GOOD = CORPUS / "good"
BAD_CASES = sorted(p.name for p in (CORPUS / "bad").iterdir() if p.is_dir())


def _expected(case: str) -> dict[str, object]:
    return json.loads((CORPUS / "bad" / case / "expected.json").read_text())


def test_good_corpus_has_no_findings() -> None:
    assert lint_repository(GOOD) == []


def test_good_corpus_covers_the_usual_model_kinds() -> None:
    configs = "\n".join(p.read_text() for p in GOOD.glob("*/config.pbtxt"))
    for needle in (
        'platform: "onnxruntime_onnx"',
        'platform: "tensorrt_plan"',
        'platform: "pytorch_libtorch"',
        'platform: "tensorflow_savedmodel"',
        'platform: "ensemble"',
        'backend: "python"',
        "cc_model_filenames",
        "default_model_filename",
        "sequence_batching",
        "model_warmup",
        "reshape",
    ):
        assert needle in configs, needle
    # gen-repo's own additions sit in the good corpus and must stay unflagged.
    assert (GOOD / "mlp_python" / "1" / "gen_repo" / "contract.json").is_file()
    assert (GOOD / "gen-repo.lock.json").is_file()


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_case_reports_exactly_the_planted_defect(case: str) -> None:
    expected = _expected(case)
    findings = lint_repository(CORPUS / "bad" / case)
    got = [(f.rule, f.file, f.line, f.severity) for f in findings]
    assert got == [(expected["rule"], expected["file"], expected["line"], expected["severity"])], [
        str(f) for f in findings
    ]
    assert RULES[findings[0].rule][0] == findings[0].severity


def test_ensemble_shape_ranges_come_from_the_steps_contracts(tmp_path: Path) -> None:
    """A step output whose contract range exceeds its consumer's: Triton loads it and fails the long requests."""
    def model(name: str, high: int) -> None:
        (tmp_path / name / "1" / "gen_repo").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
            'input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]\n'
            'output [ { name: "y", data_type: TYPE_FP32, dims: [ -1 ] } ]\n')
        tensor = {"dims": [-1], "min_shape": [1, 4], "max_shape": [8, high], "data_type": "TYPE_FP32"}
        (tmp_path / name / "1" / "gen_repo" / "contract.json").write_text(json.dumps(
            {"inputs": [{"name": "x", **tensor}], "outputs": [{"name": "y", **tensor}]}))
        (tmp_path / name / "1" / "model.py").write_text("")

    model("a", 64)
    model("b", 32)
    (tmp_path / "ab" / "1").mkdir(parents=True)
    (tmp_path / "ab" / "config.pbtxt").write_text(
        'name: "ab"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]\n'
        'output [ { name: "y", data_type: TYPE_FP32, dims: [ -1 ] } ]\n'
        'ensemble_scheduling { step [\n'
        '  { model_name: "a" model_version: -1 input_map { key: "x" value: "x" }\n'
        '    output_map { key: "y" value: "t" } },\n'
        '  { model_name: "b" model_version: -1 input_map { key: "x" value: "t" } output_map { key: "y" value: "y" } }\n'
        '] }\n')
    findings = [f for f in lint_repository(tmp_path) if f.rule.startswith("ensemble")]
    assert [(f.rule, f.file, f.line) for f in findings] == [("ensemble-shape-range", "ab/config.pbtxt", 9)]
    assert "axis 1: 4..64 produced, 4..32 accepted" in findings[0].message


def test_a_huge_or_special_config_is_unreadable_not_parsed(tmp_path: Path) -> None:
    """A 40 MB config.pbtxt used to be parsed (about 1 s and 5 MB of memory per MB); a FIFO hung lint."""
    shutil.copytree(GOOD / "mlp_python", tmp_path / "huge")
    with open(tmp_path / "huge" / "config.pbtxt", "r+b") as stream:
        stream.truncate(40 << 20)  # sparse: no disk used, and st_size says 40 MB
    shutil.copytree(GOOD / "mlp_python", tmp_path / "fifo")
    (tmp_path / "fifo" / "config.pbtxt").unlink()
    os.mkfifo(tmp_path / "fifo" / "config.pbtxt")
    findings = lint_repository(tmp_path)
    assert [(f.rule, f.file, f.severity, f.message) for f in findings] == [
        ("config-unreadable", "fifo/config.pbtxt", "error",
         "a FIFO (named pipe), not a regular file; gen-repo reads regular files only"),
        ("config-unreadable", "huge/config.pbtxt", "error",
         "file is 41943040 bytes; at most 4194304 are accepted (limit config_bytes; GEN_REPO_MAX_CONFIG_BYTES changes "
         "it)"),
    ]
    assert CliRunner().invoke(main, ["lint", str(tmp_path)]).exit_code == 1


def test_missing_repository_is_one_error(tmp_path: Path) -> None:
    findings = lint_repository(tmp_path / "nope")
    assert [(f.rule, f.severity) for f in findings] == [("repository-missing", "error")]


def test_onnx_checks_are_skipped_with_a_warning_without_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # what an install without the export extra looks like
    findings = lint_repository(CORPUS / "bad" / "onnx-dim")
    assert [(f.rule, f.severity, f.file) for f in findings] == [("onnx-skipped", "warning", "detector/config.pbtxt")]


def test_parse_error_has_line_and_column() -> None:
    text = 'name: "m"\nmax_batch_size: 4\ninput [ { name: "a" dimz: [ 1 ] } ]\n'
    config, findings = parse_config_text(text, "m/config.pbtxt")
    assert config is None
    assert [(f.rule, f.line, f.column) for f in findings] == [("config-parse", 3, 21)]
    assert "dimz" in findings[0].message and not findings[0].message.startswith("3:21")


def test_locator_indexes_repeated_blocks_both_syntaxes() -> None:
    text = (
        'input [\n  { name: "a" dims: [ 1 ] },\n  { name: "b"\n    dims: [ 2, 3 ] }\n]\n'
        'output { name: "x" dims: 1 }\noutput {\n  name: "y"\n}\n'
        'cc_model_filenames { key: "9.0" value: "b.plan" }\ncc_model_filenames {\n  key: "8.0"\n  value: "a.plan" }\n'
    )
    locator = PbtxtLocator(text)
    assert locator.find(("input", 1, "dims", "#", 1)) == (4, 16)
    assert locator.find(("output", 1, "name")) == (8, 3)
    assert locator.find(("output", 1, "reshape")) == locator.find(("output", 1))  # nearest ancestor
    assert locator.map_entry(("cc_model_filenames",), "8.0") == ("cc_model_filenames", 1)
    assert locator.find((*locator.map_entry(("cc_model_filenames",), "8.0"), "value")) == (13, 3)


def test_findings_are_sorted_and_deterministic(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for case in ("dims-invalid", "tensor-format", "version-non-numeric", "preferred-batch-size"):
        for model in (CORPUS / "bad" / case).iterdir():
            if model.is_dir():
                shutil.copytree(model, repo / f"{case}_{model.name}")
    for model in repo.iterdir():  # model folders were renamed: make the config names follow
        config = model / "config.pbtxt"
        text = config.read_text()
        config.write_text(text.replace(text.split('"')[1], model.name, 1))
    first = lint_repository(repo)
    assert first == lint_repository(repo)
    assert first == sorted(first, key=Finding.sort_key)
    assert {f.rule for f in first} == {"dims-invalid", "tensor-format", "version-non-numeric", "preferred-batch-size"}


def test_only_files_matter_for_gen_repo_additions(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(GOOD / "mlp_python", repo / "mlp_python")
    (repo / "mlp_python" / "1" / "gen_repo" / "reference.npz").write_bytes(b"PK")
    (repo / "gen-repo.lock.json").write_text("{}\n")
    assert lint_repository(repo) == []


# ---------------------------------------------------------------------------- CLI
def test_cli_exit_codes() -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["lint", str(GOOD)]).exit_code == 0
    error = runner.invoke(main, ["lint", str(CORPUS / "bad" / "dims-invalid")])
    assert error.exit_code == 1
    assert "zerodims/config.pbtxt:8:16: error:" in error.output and "[dims-invalid]" in error.output
    warning_only = runner.invoke(main, ["lint", str(CORPUS / "bad" / "version-non-numeric")])
    assert warning_only.exit_code == 0 and "warning:" in warning_only.output
    assert runner.invoke(main, ["lint", str(CORPUS / "does-not-exist")]).exit_code == 2
    assert runner.invoke(main, ["lint"]).exit_code == 2


def test_cli_on_a_model_folder_says_a_repository_folder_is_expected() -> None:
    """`gen-repo lint model_repository/mlp`: one error naming the repository folder to lint instead."""
    model = GOOD / "tiny_classifier"
    result = CliRunner().invoke(main, ["lint", str(model)])
    assert result.exit_code == 1
    assert (f"config.pbtxt: error: {model} is a model folder (it holds config.pbtxt); lint expects the repository "
            f"folder that holds the models: gen-repo lint {GOOD.resolve()} [repository-is-a-model]") in result.output


def test_cli_json_output() -> None:
    result = CliRunner().invoke(main, ["lint", "--json", str(CORPUS / "bad" / "reshape-size")])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    assert payload["summary"] == {"errors": 1, "warnings": 0}
    assert payload["findings"] == [
        {
            "column": 15,
            "file": "reshape_elementcount/config.pbtxt",
            "line": 9,
            "message": payload["findings"][0]["message"],
            "rule": "reshape-size",
            "severity": "error",
        }
    ]
    good = json.loads(CliRunner().invoke(main, ["lint", "--json", str(GOOD)]).stdout)
    assert good["ok"] is True and good["findings"] == []


def test_warmup_data_file_short_or_outside_the_warmup_folder(tmp_path: Path) -> None:
    """The message Triton gives at load ("warmup setting expects 128 bytes") is caught before: short files and
    paths leaving ``<model>/warmup/`` are errors."""
    model = tmp_path / "text_encoder"
    shutil.copytree(GOOD / "text_encoder", model)
    (model / "warmup" / "ids.bin").write_bytes(bytes(120))
    (finding,) = lint_repository(tmp_path)
    assert (finding.rule, finding.severity) == ("warmup-data-file", "error")
    assert "holds 120 bytes; dims [16] of TYPE_INT64 need 128" in finding.message
    config = model / "config.pbtxt"
    config.write_text(config.read_text().replace('input_data_file: "ids.bin"', 'input_data_file: "../1/x"'))
    (finding,) = lint_repository(tmp_path)
    assert (finding.rule, finding.line) == ("path-escape", 31), str(finding)
    assert "input_data_file '../1/x' has a '..' component: Triton joins it to <model>/warmup/" in finding.message


# ---------------------------------------------------------------------------- the case table (tests/lint_cases.py)
def _rule_for(case_id: str) -> Rule:
    (found,) = [r for r in RULE_TABLE if case_id in r.cases or any(c.case == case_id for c in r.checks)]
    return found


def _group(case: Case) -> tuple[Environment | None, tuple[str, ...]]:
    return case.environment, case.external


@pytest.fixture(scope="module")
def linted(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[Finding]]:
    """Every case's sides written into repositories (one set per environment), linted once per set; the findings
    of each side's models."""
    out: dict[tuple[str, str], list[Finding]] = {(c.id, side): [] for c in CASES for side in ("bad", "good")}
    owner: dict[str, tuple[str, str]] = {}
    groups: dict[tuple[Environment | None, tuple[str, ...]], list[Case]] = {}
    for case in CASES:
        groups.setdefault(_group(case), []).append(case)
    for index, ((environment, external), cases) in enumerate(groups.items()):
        roots = [tmp_path_factory.mktemp(f"lint{index}-repo{r}") for r in range(3)]
        for case in cases:
            for side in ("bad", "good"):
                write_side(case, side, roots)
                owner.update({case.name(side, key): (case.id, side) for key in case.models(side)})
        report = lint(roots[:2], external_models=external, environment=environment)
        for finding in report.findings:
            model = finding.file.split(f"{roots[0]}/", 1)[-1].split(f"{roots[1]}/", 1)[-1].split("/")[0]
            if model in owner:
                out[owner[model]].append(finding)
            else:  # a repository with no model of this set
                assert finding.rule == "repository-empty", str(finding)
        _ROOTS[index] = roots
        for case in cases:
            _CASE_ROOTS[case.id] = roots
    return out


_ROOTS: dict[int, list[Path]] = {}
_CASE_ROOTS: dict[str, list[Path]] = {}


def _expected_finding(case: Case, key: str, at: str | tuple[str, int] | None, rule: Rule) -> tuple[Any, ...]:
    """(rule, file, line, column, severity) of a finding the case plants."""
    roots = _CASE_ROOTS[case.id]
    root = roots[repo_of(key)]
    folder = f"{root}/{case.name('bad', key)}"
    if at is None:
        return (rule.id, f"{folder}/{case.where}" if case.where and key == next(iter(case.bad)) else folder, None,
                None, rule.severity)
    line, column = position((root / case.name("bad", key) / "config.pbtxt").read_text(), at)
    return (rule.id, f"{folder}/config.pbtxt", line, column, rule.severity)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_is_flagged_and_its_neighbour_is_not(case: Case, linted: dict[tuple[str, str], list[Finding]]) -> None:
    """The planted finding at its file:line:col, exactly; the accepted neighbour has no finding at all."""
    rule = _rule_for(case.id)
    subject = next(iter(case.bad))
    expected = sorted([_expected_finding(case, subject, case.at, rule),
                       *(_expected_finding(case, key, at, rule) for key, at in case.also),
                       *(_expected_finding(case, key, at, rules.rule(other)) for key, at, other in case.plus)], key=str)
    got = sorted(((f.rule, f.file, f.line, f.column, f.severity) for f in linted[(case.id, "bad")]), key=str)
    assert got == expected, [str(f) for f in linted[(case.id, "bad")]]
    assert linted[(case.id, "good")] == []


# ---------------------------------------------------------------------------- several repositories, the environment
def _two_repositories(tmp_path: Path) -> tuple[Path, Path]:
    """An ensemble in one repository whose step model lies in the other (both sides of tests/lint_cases.py)."""
    first, second = tmp_path / "a", tmp_path / "b"
    case = Case("split", {"e": ensemble(step()), "s@1": Model()}, {})
    write_side(case, "bad", [first, second, tmp_path / "elsewhere"])
    return first, second


def test_cli_resolves_ensemble_steps_across_repositories(tmp_path: Path) -> None:
    """Like Triton's repeated --model-repository: a step in another repository is found; in none, it is an error;
    --external-model names a model loaded from elsewhere."""
    first, second = _two_repositories(tmp_path)
    runner = CliRunner()
    alone = runner.invoke(main, ["lint", str(first)])
    assert alone.exit_code == 1
    assert "split-bad-e/config.pbtxt:6:32:" in alone.output and "[ensemble-model-missing]" in alone.output
    assert runner.invoke(main, ["lint", str(first), str(second)]).exit_code == 0
    assert runner.invoke(main, ["lint", str(first), "--external-model", "split-bad-s"]).exit_code == 0
    (second / "split-bad-e").mkdir()  # the same model name in both repositories: Triton refuses it
    both = runner.invoke(main, ["lint", "--json", str(first), str(second)])
    payload = json.loads(both.stdout)
    assert payload["repositories"] == [str(first), str(second)]
    assert {(f["rule"], f["file"]) for f in payload["findings"] if f["rule"] == "model-duplicate"} == {
        ("model-duplicate", f"{first}/split-bad-e"), ("model-duplicate", f"{second}/split-bad-e")}


def test_cli_environment_rules_need_the_machine_and_say_when_skipped(tmp_path: Path) -> None:
    """--gpus and --backends enable the environment rules; without them the output names what was skipped."""
    case = CASE_IDS["environment-no-gpu"]
    repo = tmp_path / "repo"
    write_side(case, "bad", [repo, tmp_path / "r1", tmp_path / "r2"])
    (repo / case.name("bad", "m") / "config.pbtxt").write_text(
        (repo / case.name("bad", "m") / "config.pbtxt").read_text().replace('"python"', '"onnxruntime"'))
    runner = CliRunner()
    plain = runner.invoke(main, ["lint", str(repo)])
    assert plain.exit_code == 1  # onnxruntime wants model.onnx: a finding of its own, no environment needed
    assert "[environment-" not in plain.stdout
    assert "skipped environment-gpus: needs the GPU count" in plain.stderr
    assert "skipped environment-backend: needs the installed backends" in plain.stderr
    result = runner.invoke(main, ["lint", "--json", "--gpus", "0", "--backends", "python,tensorrt", str(repo)])
    payload = json.loads(result.stdout)
    assert payload["skipped"] == {}
    assert sorted(f["rule"] for f in payload["findings"]) == ["environment-backend", "environment-gpus",
                                                               "model-file-missing"]
    assert "(--gpus, --backends)" in next(f["message"] for f in payload["findings"] if f["rule"] == "environment-gpus")
    one_gpu = json.loads(runner.invoke(main, ["lint", "--json", "--gpus", "1", str(repo)]).stdout)
    assert [f["rule"] for f in one_gpu["findings"]] == ["model-file-missing"]
    assert list(one_gpu["skipped"]) == ["environment-backend"]
    assert runner.invoke(main, ["lint", "--gpus", "-1", str(repo)]).exit_code == 2


def test_a_symlink_at_any_level_of_a_model_folder_is_an_error(tmp_path: Path) -> None:
    """The good corpus with links planted at every level of its model folders, to outside the repository, inside it
    and nowhere: each is one `symlink` error at its path, and nothing else changes (Triton would follow each)."""
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    shutil.copytree(GOOD, repo)
    elsewhere.mkdir()

    def link_out(rel: str) -> None:  # move it out of the repository and leave a link to it in its place
        target = elsewhere / rel.replace("/", "_")
        shutil.move(repo / rel, target)
        (repo / rel).symlink_to(target, target_is_directory=target.is_dir())

    for rel in ("tiny_classifier", "mlp_python/1/gen_repo", "text_encoder/warmup",
                "savedmodel_tf/1/model.savedmodel/variables", "string_identity/3/model.py"):
        link_out(rel)
    shutil.rmtree(repo / "resnet_trt" / "2")
    (repo / "resnet_trt" / "2").symlink_to("1", target_is_directory=True)  # inside the model folder: still a link
    (repo / "simple_add" / "1" / "gone").symlink_to(tmp_path / "nowhere")  # a link to nothing
    findings = lint_repository(repo)
    assert {(f.rule, f.severity, f.file, f.line) for f in findings} == {
        ("symlink", "error", rel, None) for rel in (
            "tiny_classifier", "mlp_python/1/gen_repo", "text_encoder/warmup",
            "savedmodel_tf/1/model.savedmodel/variables", "string_identity/3/model.py", "resnet_trt/2",
            "simple_add/1/gone")}, [str(f) for f in findings]
    by_file = {f.file: f.message for f in findings}
    assert by_file["resnet_trt/2"].startswith("'2' in model 'resnet_trt' is a symlink (to the folder '1')")
    assert by_file["tiny_classifier"].startswith(f"model folder 'tiny_classifier' is a symlink (to the folder "
                                                 f"'{elsewhere / 'tiny_classifier'}')")
    assert "(to the path that does not exist" in by_file["simple_add/1/gone"]
    result = CliRunner().invoke(main, ["lint", str(repo)])
    assert result.exit_code == 1 and result.output.count("[symlink]") == 7


def test_hidden_folders_are_models_to_triton(tmp_path: Path) -> None:
    """Triton's Poll lists every sub-folder, hidden ones too: lint warns about them and checks nothing inside."""
    shutil.copytree(GOOD / "mlp_python", tmp_path / "mlp_python")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (finding,) = lint_repository(tmp_path)
    assert (finding.rule, finding.file, finding.severity) == ("model-folder-hidden", ".ipynb_checkpoints", "warning")


def test_newest_model_config_fields_parse_with_positions() -> None:
    """model_metrics (ModelConfig field 26, Triton 2.52+) and ensemble max_inflight_requests (2.63+) are fields of
    tritonclient's model_config_pb2 (pyproject requires it): they parse, and a finding inside them has line:col."""
    text = ('name: "e"\nplatform: "ensemble"\nmax_batch_size: 4\n'
            "model_metrics {\n  metric_control [ { metric_identifier { family: \"\" } } ]\n}\n"
            "ensemble_scheduling {\n  max_inflight_requests: 16\n  step [ ]\n}\n")
    config, findings = parse_config_text(text, "e/config.pbtxt")
    assert findings == [] and config is not None
    assert config.ensemble_scheduling.max_inflight_requests == 16
    assert config.model_metrics.metric_control[0].HasField("metric_identifier")
    _, wrong = parse_config_text(text.replace("max_inflight_requests", "max_inflight"), "e/config.pbtxt")
    assert [(f.rule, f.line, f.column) for f in wrong] == [("config-parse", 8, 3)]


@pytest.mark.parametrize(("name", "rule"), [
    ("1\n", "version-folder-name"), (" 1", "version-folder-name"), ("+1", "version-folder-name"),
    ("1 ", "version-folder-name"), ("-1", "version-folder-name"), ("\u0661", "version-folder-name"),
    ("9" * 20, "version-folder-name"), ("01", "version-leading-zero"), ("0001", "version-leading-zero"),
])
def test_folders_that_are_not_exactly_a_version_are_flagged(tmp_path: Path, name: str, rule: str) -> None:
    """A folder beside version 1 that reads as a version (to Triton's std::stoll or to Python's int()) but is not
    exactly its name: one finding naming it (the good neighbour's lint is clean). Before, "1\\n", " 1" and "+1" were
    silent (version 1 loads from "1"), "٣" counted as a version. Leading zeros are a warning: Triton skips the folder
    and loads the others (issue 44; tests/lint/test_triton.py loads one)."""
    shutil.copytree(GOOD / "mlp_python", tmp_path / "mlp_python")
    assert lint_repository(tmp_path) == []
    shutil.copytree(GOOD / "mlp_python" / "1", tmp_path / "mlp_python" / name)
    (finding,) = lint_repository(tmp_path)
    severity = "warning" if rule == "version-leading-zero" else "error"
    assert (finding.rule, finding.file, finding.severity) == (rule, f"mlp_python/{name}", severity), str(finding)
    assert ascii(name) in finding.message


def test_ensembles_nested_deeper_than_the_interpreter_stack_are_linted(tmp_path: Path) -> None:
    """Ensembles are walked inner first (an inner one's decoupledness reaches the outer): 1,100 nested ensembles,
    deeper than Python's default recursion limit, lint clean."""
    depth = 1100
    models = {f"e{i}": ensemble(step(f"e{i + 1}")) for i in range(depth)}
    write_side(Case("deep", {**models, f"e{depth}": Model()}, {}), "bad", [tmp_path / f"r{r}" for r in range(3)])
    assert lint([tmp_path / "r0"]).findings == []
