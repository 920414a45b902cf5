"""Fuzzing ``validate`` and ``plan`` (issue 7): bad input never crashes gen-repo.

Properties, over near-valid documents (a real fixture or the example manifest with ONE field changed) and
structurally random JSON, written as JSON and as YAML:

- ``schema.load_graphspecs``/``spec_file_problems`` and ``manifest.load_manifest`` + ``plan.plan_repository`` raise
  nothing but :class:`~generator.errors.GenRepoError`;
- every Problem names a file and a JSON pointer ("" for the whole file, else starting with "/") whose parent exists
  in the document it names;
- ``gen-repo validate`` and ``gen-repo plan`` exit 0 or 2, never with a traceback.

Bounded for CI (see SETTINGS); ``bench/fuzz_long.py`` runs the same properties for longer.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.errors import GenRepoError, Problem
from generator.manifest.loading import load_manifest
from generator.planning.plan import plan_repository
from generator.specs.schema import load_graphspecs, spec_file_problems, validate_document
from tests.strategies import (
    EXAMPLES,
    TEXT_SLOT,
    Case,
    example_manifest,
    fixture_documents,
    mutated,
    random_documents,
    render,
    spec_cases,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
PLAN_SETTINGS = settings(SETTINGS, max_examples=200)
CLI_SETTINGS = settings(SETTINGS, max_examples=60)
FORMATS = st.sampled_from(["json", "yaml"])


# --------------------------------------------------------------------------------------------------------------------
# Checks shared with bench/fuzz_long.py
# --------------------------------------------------------------------------------------------------------------------
def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def parent_resolves(document: Any, pointer: str) -> bool:
    """Whether every step of ``pointer`` but the last exists in ``document`` (the last may be a missing key)."""
    node = document
    for token in _tokens(pointer)[:-1]:
        if node == TEXT_SLOT:
            return True  # inside a planted literal (a deep nesting is located where it passes the limit)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def check_problems(problems: list[Problem], documents: dict[str, Any], note: str) -> None:
    """Every problem names a file and a pointer into it (checked against ``documents`` where the file is known)."""
    assert problems, f"GenRepoError without problems ({note})"
    for problem in problems:
        assert isinstance(problem, Problem), (problem, note)
        assert isinstance(problem.file, str) and problem.file, (problem, note)
        assert problem.pointer == "" or problem.pointer.startswith("/"), (problem, note)
        assert isinstance(problem.message, str) and problem.message.strip(), (problem, note)
        if problem.file in documents:
            assert parent_resolves(documents[problem.file], problem.pointer), (
                f"{problem} points outside its document ({note})"
            )


def check_validate(path: Path, case: Case) -> None:
    """``validate`` on one file: loads or raises GenRepoError with located problems; spec_file_problems agrees."""
    note = f"{path.name}: {case.description}"
    try:
        load_graphspecs(path)
    except GenRepoError as error:
        check_problems(error.problems, {str(path): case.document}, note)
        assert spec_file_problems(path) == error.problems, note
    else:
        assert spec_file_problems(path) == [], note


def check_plan(manifest: Path, documents: dict[str, Any], note: str) -> None:
    """``plan`` on one manifest: plans or raises GenRepoError with located problems."""
    try:
        plan_repository(load_manifest(manifest))
    except GenRepoError as error:
        check_problems(error.problems, documents, note)


def check_cli(args: list[str], note: str) -> None:
    """The CLI exits 0 or 2, never with a traceback or an unexpected exception."""
    result = CliRunner().invoke(cli, args)
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "Traceback" not in output, f"{note}\n{output[-2000:]}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{note}: {type(result.exception).__name__}: {result.exception}") from result.exception
    assert result.exit_code in (0, 2), f"{note}: exit {result.exit_code}\n{output[-2000:]}"
    if result.exit_code == 2 and "--json" in args:
        payload = json.loads(result.stdout)
        assert payload["ok"] is False and payload["errors"], note
        for error in payload["errors"]:
            assert error["file"] and error["pointer"].startswith("/") and error["message"], (error, note)
    elif result.exit_code == 2:
        assert "error: " in output, f"{note}: exit 2 without an error line\n{output[-2000:]}"


def write_case(folder: Path, stem: str, case: Case, fmt: str) -> Path:
    path = folder / f"{stem}.{fmt}"
    path.write_text(render(case, fmt), encoding="utf-8")
    return path


def manifest_folder(root: Path) -> Path:
    """A folder with the example specs, where fuzzed manifests are written."""
    folder = root / "manifest"
    if not folder.is_dir():
        shutil.copytree(EXAMPLES / "specs", folder / "specs")
    return folder


def base_manifest() -> dict[str, Any]:
    document = example_manifest()
    document["output"] = "model_repository"
    return document


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    manifest_folder(root)
    return root


# --------------------------------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------------------------------
@SETTINGS
@given(case=spec_cases(), fmt=FORMATS)
@example(case=Case({"graph": "\x00gen-repo-fuzz-slot\x00"}, "very-deep", "deep nesting"), fmt="json")
@example(case=Case({"graph": "\x00gen-repo-fuzz-slot\x00"}, "very-deep", "deep nesting"), fmt="yaml")
@example(case=Case({"graph": "\x00gen-repo-fuzz-slot\x00"}, "nan", "NaN text"), fmt="yaml")
@example(case=Case({"graph": None}, "alias-bomb", "billion laughs"), fmt="yaml")
def test_validate_raises_only_located_genrepo_errors(work: Path, case: Case, fmt: str) -> None:
    check_validate(write_case(work, "spec", case, fmt), case)


@SETTINGS
@given(case=st.sampled_from(sorted(fixture_documents())).flatmap(
    lambda name: mutated(fixture_documents()[name], nan_as_float=True)))
@example(case=Case({"name": math.nan, "input_spec": {"tensor_data": [{"shape": [math.inf]}]}}, None, "NaN floats"))
def test_validate_document_with_non_finite_floats(case: Case) -> None:
    """Data that never went through load_document (NaN/inf as Python floats) is still only a GenRepoError."""
    if case.literal is not None:
        return  # a text-only mutation: covered by the file-based property
    try:
        validate_document(case.document, "memory.json")
    except GenRepoError as error:
        check_problems(error.problems, {"memory.json": case.document}, case.description)


# --------------------------------------------------------------------------------------------------------------------
# plan
# --------------------------------------------------------------------------------------------------------------------
def manifest_cases() -> st.SearchStrategy[Case]:
    return st.one_of(mutated(base_manifest()), mutated(base_manifest()), random_documents())


def _manifest_with_spec(spec: str) -> Case:
    document = base_manifest()
    document["models"][0]["spec"] = spec
    return Case(document, None, f"spec path {spec[:40]!r}...")


@PLAN_SETTINGS
@given(case=manifest_cases(), fmt=FORMATS)
@example(case=Case({"models": "\x00gen-repo-fuzz-slot\x00"}, "deep", "deep nesting"), fmt="yaml")
# Found by this test: a path too long for the OS (ENAMETOOLONG) and a NUL byte crashed load_manifest with
# OSError/ValueError (fixed in generator/manifest/loading.py::_resolve).
@example(case=_manifest_with_spec("specs/mlp.graphspec.json" * 1000), fmt="json")
@example(case=_manifest_with_spec("specs/mlp.graphspec.json\x00"), fmt="json")
@example(case=_manifest_with_spec("specs/" + "x" * 300), fmt="yaml")
def test_plan_mutated_manifest(work: Path, case: Case, fmt: str) -> None:
    folder = manifest_folder(work)
    path = write_case(folder, "gen-repo", case, fmt)
    check_plan(path, {str(path): case.document}, case.description)


@PLAN_SETTINGS
@given(case=spec_cases(), inline=st.booleans(), fmt=FORMATS)
def test_plan_with_mutated_spec(work: Path, case: Case, inline: bool, fmt: str) -> None:
    """A valid manifest whose GraphSpec (a file it names, or inline) is fuzzed."""
    folder = manifest_folder(work)
    if inline and case.literal is None:
        document = {"models": [{"name": "m", "spec": case.document, "target": "onnx"}]}
        path = folder / "inline.json"
        path.write_text(json.dumps(document, allow_nan=True), encoding="utf-8")
        check_plan(path, {str(path): document}, case.description)
        return
    spec = write_case(folder, "fuzzed.graphspec", case, fmt)
    document = {"models": [{"name": "m", "spec": spec.name, "target": "onnx"},
                           {"spec": {"file": spec.name, "graph": 0}}]}
    path = folder / "with-spec.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    check_plan(path, {str(path): document, str(spec): case.document}, case.description)


# --------------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------------
@CLI_SETTINGS
@given(case=spec_cases(), fmt=FORMATS, as_json=st.booleans())
def test_cli_validate_exits_0_or_2(work: Path, case: Case, fmt: str, as_json: bool) -> None:
    path = write_case(work, "cli-spec", case, fmt)
    check_cli(["validate", str(path), *(["--json"] if as_json else [])], case.description)


@CLI_SETTINGS
@given(case=manifest_cases(), fmt=FORMATS, as_json=st.booleans())
def test_cli_plan_exits_0_or_2(work: Path, case: Case, fmt: str, as_json: bool) -> None:
    path = write_case(manifest_folder(work), "cli-manifest", case, fmt)
    check_cli(["plan", str(path), *(["--json"] if as_json else [])], case.description)


def test_cli_plan_error_has_no_traceback_and_exit_2(work: Path) -> None:
    """A plain (non-property) check that the CLI property can fail: a bad manifest gives exit 2 and error lines."""
    path = manifest_folder(work) / "bad.yaml"
    path.write_text("models: [{spec: specs/mlp.graphspec.json, max_batch_size: -3}]\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["plan", str(path)])
    assert result.exit_code == 2
    assert "/models/0/max_batch_size" in result.output
    assert "Traceback" not in result.output
