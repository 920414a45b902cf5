"""generator/json_reader.py: the one JSON reader refuses deep nesting and duplicate keys, located, in every file kind.

Issue 37's JSON-structure class: hypothesis plants a duplicate key in a random object, or a nesting deeper than the
limit at a random value, of generated documents and of each kind of JSON file gen-repo reads (spec, manifest, lock,
contract, a report's --diff input); each command refuses it with the file and the JSON pointer, no traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.bounded import LIMITS
from generator.cli import main
from generator.errors import GenRepoError, json_pointer
from generator.json_reader import parse_json, read_json
from generator.terminal_text import visible
from tests.strategies import JSON_VALUES, json_text, planted_json

MAX_NESTING = LIMITS["nesting"].default
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: AITune's recorded tune report (the shared fixtures): the real document ``init`` reads.
AITUNE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "aitune"

@settings(max_examples=300, deadline=None)
@given(st.data(), JSON_VALUES)
def test_a_planted_duplicate_key_or_deep_nesting_is_refused_at_its_pointer(data: st.DataObject, document: Any) -> None:
    text, pointer, words = data.draw(planted_json(document))
    with pytest.raises(GenRepoError) as caught:
        parse_json(text, "doc.json")
    problems = caught.value.problems
    assert any(p.file == "doc.json" and p.pointer.startswith(pointer) and words in p.message for p in problems), \
        (pointer, problems)
    if "appears" in words:
        assert any(p.pointer == pointer for p in problems), (pointer, problems)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_a_document_without_duplicates_within_the_limit_reads_as_json_does(document: Any) -> None:
    text = json.dumps(document)
    assert parse_json(text, "doc.json") == json.loads(text)
    assert parse_json(text.encode(), "doc.json") == json.loads(text)


def test_every_duplicate_of_a_document_is_listed_at_once() -> None:
    text = '{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}, "a": 3}'
    with pytest.raises(GenRepoError) as caught:
        parse_json(text, "f.json")
    assert [(p.pointer, p.message.split(" (")[0]) for p in caught.value.problems] == [
        ("/b/c/1/d", "key 'd' appears more than once in one object"),
        ("/a", "key 'a' appears more than once in one object"),
    ]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
def test_huge_nesting_is_a_located_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(GenRepoError) as caught:
        parse_json(text, "deep.json")
    (problem,) = caught.value.problems
    assert problem.pointer.count("/") == MAX_NESTING and "nests deeper" in problem.message


def test_read_json_reads_a_file_within_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"k": [1, 2]}')
    assert read_json(path) == {"k": [1, 2]}
    monkeypatch.setenv("GEN_REPO_MAX_DOCUMENT_BYTES", "4")
    with pytest.raises(GenRepoError, match="GEN_REPO_MAX_DOCUMENT_BYTES"):
        read_json(path)


# --------------------------------------------------------------------------------------- every kind, through the CLI
def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def repository_copy(example_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of the example repository; each example restores the file it plants in."""
    copy = tmp_path_factory.mktemp("json_kinds") / "model_repository"
    shutil.copytree(example_repository, copy)
    return copy


def _manifest(folder: Path) -> Path:
    path = folder / "manifest.json"
    path.write_text(json.dumps({"models": [{"name": "mlp", "spec": str(EXAMPLES / "specs" / "mlp.graphspec.json"),
                                            "target": "python"}]}))
    return path


def _diff_report(repo: Path, folder: Path) -> Path:
    path = folder / "diff.json"
    result = CliRunner().invoke(main, ["diff", "--json", str(repo), str(repo)])
    path.write_text(result.stdout)
    return path


#: Each kind of file: how to find it (given the repository copy and a scratch folder), the command that reads it,
#: and that command's exit status for a refused document (verify: a corrupt lock is a difference, exit 1).
_KINDS = {
    "spec": (lambda repo, tmp: EXAMPLES / "specs" / "mlp.graphspec.json", lambda repo, f: ["validate", str(f)], 2),
    "manifest": (lambda repo, tmp: _manifest(tmp), lambda repo, f: ["plan", "--allow-outside", str(f)], 2),
    "lock": (lambda repo, tmp: repo / "gen-repo.lock.json", lambda repo, f: ["verify", str(repo)], 1),
    "tune report (init)": (lambda repo, tmp: AITUNE / "tune_report.json",
                           lambda repo, f: ["init", str(f), "-o", str(f.parent / "gen-repo.yaml")], 2),
    "report input (--diff)": (_diff_report, lambda repo, f: ["report", str(repo), "--diff", str(f), "-o",
                                                              str(f.parent / "page.html")], 2),
    "contract (check-request)": (lambda repo, tmp: repo / "mlp" / "1" / "gen_repo" / "contract.json",
                                 lambda repo, f: ["check-request", "--repo", str(repo), "mlp",
                                                  str(repo / "mlp" / "1" / "gen_repo" / "reference.npz")], 2),
    "contract (diff)": (lambda repo, tmp: repo / "text" / "1" / "gen_repo" / "contract.json",
                        lambda repo, f: ["diff", str(repo), str(repo)], 2),
}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(sorted(_KINDS)))
def test_every_kind_of_json_file_with_a_planted_fault_is_refused_located(
        repository_copy: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str) -> None:
    """Issue 37: a duplicate key at a random object, or nesting past the limit at a random value, of a real file of
    each kind: the command that reads it refuses it naming the file and the pointer; no traceback."""
    find, command, status = _KINDS[kind]
    scratch = tmp_path_factory.mktemp("kind")
    original = find(repository_copy, scratch)
    target = original if original.is_relative_to(repository_copy) else scratch / original.name
    saved = original.read_bytes()
    text, pointer, words = data.draw(planted_json(json.loads(saved)))
    try:
        target.write_text(text, encoding="utf-8")
        result = _invoke(*command(repository_copy, target))
    finally:
        if target == original:
            original.write_bytes(saved)
    assert result.exit_code == status, result.output
    shown = visible(f"{target}: {pointer}")  # the printer shows a key's control characters as escapes
    lines = [line for line in result.output.splitlines() if shown in line and words in line]
    assert lines, (pointer, words, result.output)


def test_a_lock_listing_one_file_twice_is_refused_by_verify(repository_copy: Path) -> None:
    lock_path = repository_copy / "gen-repo.lock.json"
    saved = lock_path.read_bytes()
    lock = json.loads(saved)
    name = sorted(lock["artifacts"])[0]
    text = json_text(lock, ("artifacts",), ("duplicate", name))
    try:
        lock_path.write_text(text.replace(f'{json.dumps(name)}: 0', f'{json.dumps(name)}: '
                                          + json.dumps({**lock["artifacts"][name], "sha256": "0" * 64}), 1))
        result = _invoke("verify", "--json", str(repository_copy))
    finally:
        lock_path.write_bytes(saved)
    assert result.exit_code == 1
    (problem,) = json.loads(result.output)["problems"]
    assert problem["file"] == str(lock_path) and problem["pointer"] == json_pointer(["artifacts", name])
    assert problem["message"].startswith(f"corrupt: key {name!r} appears more than once in one object")


def test_every_json_gen_repo_reads_goes_through_the_reader() -> None:
    """json.load/json.loads anywhere else in generator/ would skip the depth and duplicate-key rules (as the local
    store's lease file and the request schema once did)."""
    import ast

    package = Path(__file__).resolve().parent.parent / "generator"
    bypasses = []
    for module in sorted(package.rglob("*.py")):
        if module.name == "json_reader.py":
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in ("load", "loads") and isinstance(node.value, ast.Name)
                    and node.value.id == "json"):
                bypasses.append(f"{module.relative_to(package)}:{node.lineno}: json.{node.attr}")
    assert not bypasses, bypasses


def test_every_config_pbtxt_gen_repo_reads_goes_through_the_config_reader() -> None:
    """One config reader (generator/triton/proto.parse_model_config): text_format.Parse or Merge anywhere else in
    generator/ would read a config.pbtxt without its located refusals (as check-request, report and publish once
    did, each with its own ``except``)."""
    import ast

    package = Path(__file__).resolve().parent.parent / "generator"
    bypasses = []
    for module in sorted(package.rglob("*.py")):
        if module.relative_to(package) == Path("triton/proto.py"):
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("Parse", "Merge", "MergeLines", "ParseLines") and (
                    isinstance(node.value, ast.Name) and node.value.id == "text_format"):
                bypasses.append(f"{module.relative_to(package)}:{node.lineno}: text_format.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "google.protobuf.text_format" and any(
                    a.name in ("Parse", "Merge", "MergeLines", "ParseLines") for a in node.names):
                bypasses.append(f"{module.relative_to(package)}:{node.lineno}: from text_format import")
    assert not bypasses, bypasses


#: Broken model files: (the file, its text, the pointer of the refusal, a phrase of it).
_BROKEN = {
    "config does not parse": ("mlp/config.pbtxt", 'name: "mlp" garbage {{{', "/", "not a valid config.pbtxt (line 1"),
    "config integer past its field": ("mlp/config.pbtxt", 'name: "mlp"\nmax_batch_size: 1' + "0" * 5000 + "\n", "/",
                                      "not a valid config.pbtxt (line 2"),
    "config not UTF-8": ("mlp/config.pbtxt", b'name: "\xff"', "/", "not UTF-8"),
    "contract dims a number": ("mlp/1/gen_repo/contract.json", None, "/inputs/0/dims", "must be a list of integers"),
}


@pytest.mark.parametrize("case", sorted(_BROKEN))
@pytest.mark.parametrize("command", ["check-request", "contract", "perf-config", "diff"])
def test_a_broken_config_or_contract_is_refused_located_by_every_reader(
        repository_copy: Path, tmp_path: Path, case: str, command: str) -> None:
    rel, text, pointer, phrase = _BROKEN[case]
    repo = tmp_path / "repo"
    shutil.copytree(repository_copy, repo)
    path = repo / rel
    if text is None:
        contract = json.loads(path.read_text())
        contract["inputs"][0]["dims"] = 16
        text = json.dumps(contract)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    npz = repository_copy / "mlp" / "1" / "gen_repo" / "reference.npz"
    args = {"check-request": ["check-request", "--repo", str(repo), "mlp", str(npz)],
            "contract": ["contract", str(repo), "mlp"],
            "perf-config": ["perf-config", "--repo", str(repo), "-o", str(tmp_path / "pc")],
            "diff": ["diff", str(repository_copy), str(repo)]}
    result = _invoke(*args[command])
    assert result.exit_code == 2, result.output
    shown = visible(f"{path}: {pointer}")
    assert any(shown in line and phrase in line for line in result.output.splitlines()), result.output
