"""Numbers past gen-repo's limits (generator/number_limits.py), planted in every kind of file gen-repo reads.

Hypothesis plants an integer past int64/uint64 (up to thousands of digits, past Python's int-to-string limit) or a
float past the float limit (1e400, NaN, Infinity) at a random value of a real file of each kind; the command that
reads it refuses it with the file, the JSON pointer and the limit's name, exit 2 (verify: a corrupt lock is a
difference, exit 1), no traceback. Dims arithmetic on a very high-rank shape is refused before it is computed.
"""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.contracts.served import FolderReader, read_served_model
from generator.errors import GenRepoError, json_pointer
from generator.json_reader import parse_json
from generator.number_limits import INT64_MAX, element_count
from generator.terminal_text import visible
from tests.strategies import json_paths

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
AITUNE = ROOT.parent / "shared" / "fixtures" / "aitune"
TUNE = ROOT / "tests" / "data" / "tune" / "example_tune.json"
SLOT = "@@planted-number@@"
LIMIT_WORDS = ("past the integer limit", "past the float limit")

#: Integer literals past [-2**63, 2**64 - 1], some past Python's 4,300-digit int-to-string limit.
BIG_INTEGERS = st.one_of(
    st.sampled_from([str(2**64), str(-(2**63) - 1), "9" * 4301, "1" + "0" * 5000]),
    st.builds(lambda n, neg: ("-" if neg else "") + "9" * n, st.integers(20, 6000), st.booleans()),
)
#: Float literals past the float limit or overflowing to infinity; YAML needs a dot and a signed exponent.
BIG_FLOATS = st.builds(lambda m, e, neg: f"{'-' if neg else ''}{m}.5e+{e}", st.integers(1, 9), st.integers(301, 9999),
                       st.booleans())


def _plant(document: Any, path: tuple[Any, ...]) -> Any:
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = SLOT
    return copy


def _text(document: Any, fmt: str, literal: str) -> str:
    if fmt == "yaml":
        text = yaml.safe_dump(document, sort_keys=False, width=10**9)
        return text.replace(f"'{SLOT}'", literal).replace(f'"{SLOT}"', literal)
    return json.dumps(document, indent=1).replace(json.dumps(SLOT), literal)


# ------------------------------------------------------------------------------------------- each kind of file
def _spec(tmp: Path, repo: Path, fmt: str) -> tuple[Any, Path, list[str]]:
    doc = json.loads((EXAMPLES / "specs" / "mlp.graphspec.json").read_text())
    path = tmp / f"mlp.graphspec.{fmt}"
    return doc, path, ["validate", str(path)]


def _manifest(tmp: Path, repo: Path, fmt: str) -> tuple[Any, Path, list[str]]:
    doc = {"models": [{"name": "mlp", "spec": str(EXAMPLES / "specs" / "mlp.graphspec.json"), "target": "python",
                       "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100}}]}
    path = tmp / f"gen-repo.{fmt}"
    return doc, path, ["plan", "--allow-outside", str(path)]


def _tune_report(tmp: Path, repo: Path, fmt: str) -> tuple[Any, Path, list[str]]:
    path = tmp / "tune_report.json"
    return json.loads((AITUNE / "tune_report.json").read_text()), path, ["init", str(path), "-o",
                                                                         str(tmp / "gen-repo.yaml")]


def _report_input(option: str) -> Callable[[Path, Path, str], tuple[Any, Path, list[str]]]:
    def make(tmp: Path, repo: Path, fmt: str) -> tuple[Any, Path, list[str]]:
        if option == "--tune":
            doc = json.loads(TUNE.read_text())
        elif option == "--diff":
            doc = json.loads(CliRunner().invoke(main, ["diff", "--json", str(repo), str(repo)]).stdout)
        elif option == "--perf":
            doc = {"results": [{"model": "mlp", "concurrency": c, "batch_size": 1, "shape": "opt", "engine": "loop",
                                "throughput": 900.5 * c, "p50_ms": 1.25, "p99_ms": 2.5} for c in (1, 2)]}
        else:
            doc = {"format": "gen-repo-smoke/1", "results": [{"model": "mlp", "check": "ready", "status": "passed",
                                                              "duration_s": 0.5, "message": ""}]}
        path = tmp / f"{option.strip('-')}.json"
        return doc, path, ["report", str(repo), option, str(path), "-o", str(tmp / "page.html")]
    return make


Maker = Callable[[Path, Path, str], tuple[Any, Path, list[str]]]


def _in_repo(rel: str, command: Callable[[Path], list[str]]) -> Maker:
    def make(tmp: Path, repo: Path, fmt: str) -> tuple[Any, Path, list[str]]:
        path = repo / rel
        return json.loads(path.read_text()), path, command(repo)
    return make


#: kind -> (its document, where it goes and the command that reads it; formats; exit status of a refusal)
KINDS: dict[str, tuple[Callable[[Path, Path, str], tuple[Any, Path, list[str]]], tuple[str, ...], int]] = {
    "GraphSpec": (_spec, ("json", "yaml"), 2),
    "manifest": (_manifest, ("json", "yaml"), 2),
    "tune report (init)": (_tune_report, ("json",), 2),
    "report --tune": (_report_input("--tune"), ("json",), 2),
    "report --perf": (_report_input("--perf"), ("json",), 2),
    "report --diff": (_report_input("--diff"), ("json",), 2),
    "report --smoke": (_report_input("--smoke"), ("json",), 2),
    "contract.json (check-request)": (_in_repo("mlp/1/gen_repo/contract.json", lambda r: [
        "check-request", "--repo", str(r), "mlp", str(r / "mlp" / "1" / "gen_repo" / "reference.npz")]), ("json",), 2),
    "contract.json (contract)": (_in_repo("text/1/gen_repo/contract.json", lambda r: ["contract", str(r), "text"]),
                                 ("json",), 2),
    "lock (verify)": (_in_repo("gen-repo.lock.json", lambda r: ["verify", str(r)]), ("json",), 1),
    "reference.json (smoke's reader)": (_in_repo("mlp/1/gen_repo/reference.json", lambda r: []), ("json",), 2),
}


@pytest.fixture(scope="module")
def repository_copy(example_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("numbers") / "model_repository"
    shutil.copytree(example_repository, copy)
    return copy


def _refusal(kind: str, repo: Path, command: list[str], status: int, path: Path, pointer: str) -> None:
    if not command:  # reference.json: read by smoke before it compares, through the served-model reader
        with pytest.raises(GenRepoError) as caught:
            read_served_model(FolderReader(repo), "mlp", reference=True)
        lines = [str(p) for p in caught.value.problems]
    else:
        result = CliRunner().invoke(main, command)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
        assert result.exit_code == status, result.output
        lines = result.output.splitlines()
    shown = visible(f"{path}: {pointer}")
    assert any(shown in line and any(w in line for w in LIMIT_WORDS) for line in lines), (kind, pointer, lines)


def test_every_kind_of_file_with_a_planted_number_is_refused_located(
        repository_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 44: a number past the limits at a random value of a real file of each kind; every kind is drawn."""
    drawn: set[str] = set()

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
    def plant(data: st.DataObject, kind: str) -> None:
        drawn.add(kind)
        make, formats, status = KINDS[kind]
        fmt = data.draw(st.sampled_from(formats), label="format")
        scratch = tmp_path_factory.mktemp("kind")
        document, path, command = make(scratch, repository_copy, fmt)
        where = data.draw(st.sampled_from([p for p, _ in json_paths(document) if p]), label="path")
        literal = data.draw(BIG_INTEGERS | BIG_FLOATS | (st.sampled_from(["NaN", "-Infinity"]) if fmt == "json"
                                                         else st.sampled_from([".nan", "-.inf"])), label="number")
        saved = path.read_bytes() if path.exists() else None
        try:
            path.write_text(_text(_plant(document, where), fmt, literal), encoding="utf-8")
            _refusal(kind, repository_copy, command, status, path, json_pointer(where))
        finally:
            if saved is not None:
                path.write_bytes(saved)

    plant()
    assert drawn == set(KINDS), set(KINDS) - drawn


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_numbers_within_the_limits_read_as_json_does(data: st.DataObject) -> None:
    numbers = data.draw(st.lists(st.integers(-(2**63), 2**64 - 1) | st.floats(-1e300, 1e300), max_size=8))
    text = json.dumps(numbers)
    assert parse_json(text, "n.json") == json.loads(text)


@pytest.mark.parametrize("text", ["[18446744073709551616]", "[-9223372036854775809]", "[1e301]", "[-1e301]"])
def test_the_first_number_past_each_bound_is_refused(text: str) -> None:
    with pytest.raises(GenRepoError) as caught:
        parse_json(text, "n.json")
    assert [p.pointer for p in caught.value.problems] == ["/0"]


# -------------------------------------------------------------------------------- dims arithmetic on high ranks
def test_element_count_stops_at_its_limit_before_computing_a_huge_number() -> None:
    assert element_count([2**30] * 2) == 2**60
    assert element_count([2**30] * 5000) is None
    assert element_count([2**30] * 5000 + [0]) == 0
    assert element_count([3, INT64_MAX // 3 + 1]) is None


@pytest.mark.parametrize("rank", [8, 700])
def test_a_very_high_rank_spec_is_refused_located_by_validate_and_plan(tmp_path: Path, rank: int) -> None:
    """Dims that multiply past int64 (at rank 700 past Python's int-to-string limit too): refused, no traceback."""
    spec = json.loads((EXAMPLES / "specs" / "mlp.graphspec.json").read_text())
    tensor = spec["graph"]["input_spec"]["tensor_data"][0]
    tensor["shape"], tensor["min_shape"], tensor["max_shape"] = (
        ["batch0", *[2**30] * rank], [1, *[2**30] * rank], [32, *[2**30] * rank])
    path = tmp_path / "high.graphspec.json"
    path.write_text(json.dumps(spec))
    manifest = tmp_path / "gen-repo.json"
    manifest.write_text(json.dumps({"models": [{"name": "m", "spec": path.name, "target": "python"}]}))
    for command in (["validate", str(path)], ["plan", str(manifest)]):
        result = CliRunner().invoke(main, command)
        assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
        assert f"{path}: /graph/input_spec/tensor_data/0: " in result.output
        assert f"int64 byte size can count ({INT64_MAX})" in result.output


def test_a_very_high_rank_array_header_is_refused_located(repository_copy: Path, tmp_path: Path) -> None:
    dims = ", ".join(["1073741824"] * 700)
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({dims},), }}"
    header += " " * ((64 - (len(header) + 11) % 64) % 64) + "\n"
    path = tmp_path / "request.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("input_x.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    result = CliRunner().invoke(main, ["check-request", "--repo", str(repository_copy), "mlp", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"{path}: /input_x: " in result.output and "(rank 700)" in result.output
    assert "limit array_elements" in result.output


def test_a_contract_whose_dims_outgrow_int64_is_refused_by_check_request_and_perf_config(
        repository_copy: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(repository_copy, repo)
    path = repo / "mlp" / "1" / "gen_repo" / "contract.json"
    contract = json.loads(path.read_text())
    contract["inputs"][0]["max_shape"] = [32, *[2**30] * 600]
    path.write_text(json.dumps(contract))
    npz = repository_copy / "mlp" / "1" / "gen_repo" / "reference.npz"
    for command in (["check-request", "--repo", str(repo), "mlp", str(npz)],
                    ["perf-config", "--repo", str(repo), "-o", str(tmp_path / "pc")]):
        result = CliRunner().invoke(main, command)
        assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
        assert f"{path}: /inputs/0/max_shape: " in result.output, result.output
