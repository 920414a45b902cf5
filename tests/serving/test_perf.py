"""Load-test configuration bounded by the profiles (generator/serving/perf_config.py, perf_models.py), and
`gen-repo perf` on a real server (generator/serving/perf.py, perf_analyzer.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.manifest.loading import load_manifest
from generator.planning.plan import plan_repository
from generator.serving.loadgen import check_loopback
from generator.serving.perf_analyzer import find_perf_analyzer
from generator.serving.perf_config import perf_config_files
from generator.serving.perf_models import (
    PerfModel,
    PerfTensor,
    batch_size_candidates,
    concurrency_values,
    models_from_plan,
)
from generator.specs.graphspec import GraphSpec
from tests.manifest_helpers import AITUNE, EXAMPLES_MANIFEST, fixture_models, write_manifest
from tests.requirements import missing, require

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _item_ranges(graph: GraphSpec, batching: bool) -> dict[str, list[tuple[int, int]]]:
    """Per input tensor name, the allowed (low, high) per request axis from GraphSpec.get_effective_input_shapes."""
    from generator.naming import format_tensor_name

    ranges = {}
    for locator, spec in graph.input_spec.tensor_data:
        low, _, high = graph.get_effective_input_shapes(locator, spec)
        axes = list(zip(low, high, strict=True))
        if batching:
            axes[0] = (1, high[0])  # the batch minimum widens to 1 (issue 3)
        ranges[format_tensor_name(locator.path, "input")] = axes
    return ranges


def _check_against_spec(out: Path, plan) -> int:
    """Every shape in perf_analyzer.json, the input-data files and the Model Analyzer YAML lies inside the spec."""
    commands = json.loads((out / "perf_analyzer.json").read_text())["models"]
    analyzer = yaml.safe_load((out / "model_analyzer.yaml").read_text())
    checked = 0
    for model in plan.models:
        ranges = _item_ranges(model.graph, model.batching)
        entry = commands[model.name]
        assert set(entry["variants"]) == {"min", "opt", "max"}
        for name, variant in entry["variants"].items():
            args = variant["args"]
            batch = int(args[args.index("-b") + 1])
            data = json.loads((out / variant["input_data"]).read_text())["data"]
            assert data, f"{model.name} {name}: empty input data"
            for tensor, axes in ranges.items():
                full = variant["request_shapes"][tensor]
                assert len(full) == len(axes)
                for size, (low, high) in zip(full, axes, strict=True):
                    assert low <= size <= high, (model.name, name, tensor, full, axes)
                item = full[1:] if model.batching else full
                if model.batching:
                    assert full[0] == batch and 1 <= batch <= model.max_batch_size
                else:
                    assert batch == 1
                for element in data:
                    assert element[tensor]["shape"] == item
                    if "content" in element[tensor]:
                        count = 1
                        for d in item:
                            count *= d
                        assert len(element[tensor]["content"]) == count
                # --shape for every dynamic input, at this variant's item shape
                dims = next(t.dims for t in model.inputs if t.name == tensor)
                flags = [args[i + 1] for i, a in enumerate(args) if a == "--shape"]
                expected = f"{tensor}:{','.join(str(d) for d in item)}"
                if -1 in dims:
                    assert expected in flags, (model.name, name, flags)
                checked += 1
        # Model Analyzer: inside the profile's batch range
        ma = analyzer["profile_models"][model.name]
        for size in ma["parameters"]["batch_sizes"]:
            assert 1 <= size <= max(model.max_batch_size, 1)
        mcp = ma["model_config_parameters"]
        if model.batching:
            assert mcp["max_batch_size"] and max(mcp["max_batch_size"]) <= model.max_batch_size
            for preferred in mcp["dynamic_batching"]["preferred_batch_size"]:
                assert max(preferred) <= min(mcp["max_batch_size"])
        else:
            assert "max_batch_size" not in mcp and "dynamic_batching" not in mcp
        assert all(c >= 1 for c in ma["parameters"]["concurrency"])
        for shape_flag in ma["perf_analyzer_flags"].get("shape", []):
            tensor, dims = shape_flag.split(":")
            sizes = [int(d) for d in dims.split(",")]
            axes = ranges[tensor][1:] if model.batching else ranges[tensor]
            assert all(lo <= s <= hi for s, (lo, hi) in zip(sizes, axes, strict=True))
        assert (out / ma["perf_analyzer_flags"]["input-data"]).is_file()
    return checked


def test_perf_config_examples_stay_inside_the_spec(tmp_path: Path) -> None:
    out = tmp_path / "perf"
    code, output = _run("perf-config", str(EXAMPLES_MANIFEST), "-o", str(out))
    assert code == 0, output
    plan = plan_repository(load_manifest(EXAMPLES_MANIFEST))
    assert _check_against_spec(out, plan) >= 6
    text = plan.models[[m.name for m in plan.models].index("text")]
    assert any(-1 in t.dims for t in text.inputs), "the text example must exercise --shape"


def test_perf_config_aitune_fixtures_stay_inside_the_spec(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m", {"models": fixture_models("python")})
    out = tmp_path / "perf"
    code, output = _run("perf-config", str(manifest), "-o", str(out), "--allow-outside")
    assert code == 0, output
    plan = plan_repository(load_manifest(manifest, allow_outside=True))
    assert _check_against_spec(out, plan) > 0
    assert any(not m.batching for m in plan.models), "fixtures should include a non-batching model"


def test_perf_config_is_deterministic_and_path_free(tmp_path: Path) -> None:
    plan = plan_repository(load_manifest(EXAMPLES_MANIFEST))
    first = perf_config_files(models_from_plan(plan), "../model_repository")
    second = perf_config_files(models_from_plan(plan), "../model_repository")
    assert first == second
    for text in first.values():
        assert str(REPO_ROOT) not in text and "/tmp/" not in text


def test_perf_config_from_repository_contracts(tmp_path: Path) -> None:
    """--repo reads gen_repo/contract.json; the same shapes as from the plan."""
    repo = tmp_path / "repo"
    # --target python: the target perf-config's plan resolves `auto` to (the instances, and so the concurrency
    # ranges, follow the target's instance group: 2 KIND_CPU instances for python, 1 KIND_AUTO for onnx).
    code, output = _run("config", str(EXAMPLES_MANIFEST), "-o", str(repo), "--target", "python")
    assert code == 0, output
    from_repo, from_plan = tmp_path / "a", tmp_path / "b"
    assert _run("perf-config", "--repo", str(repo), "-o", str(from_repo))[0] == 0
    assert _run("perf-config", str(EXAMPLES_MANIFEST), "-o", str(from_plan))[0] == 0
    a = json.loads((from_repo / "perf_analyzer.json").read_text())
    b = json.loads((from_plan / "perf_analyzer.json").read_text())
    assert a == b


def test_perf_config_refuses_a_repository_without_contracts(tmp_path: Path) -> None:
    model = tmp_path / "repo" / "m"
    (model / "1").mkdir(parents=True)
    shutil.copy(AITUNE / "mlp.graphspec.json", model / "1" / "x.json")
    (model / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    code, output = _run("perf-config", "--repo", str(tmp_path / "repo"), "-o", str(tmp_path / "out"))
    assert code == 2
    assert "contract.json" in output


def test_model_analyzer_bounds_for_a_small_profile() -> None:
    tensor = PerfTensor("x", "TYPE_FP32", (-1,), (1, 2), (3, 5), (6, 9))
    model = PerfModel("m", 1, 6, (tensor,), opt_batch_size=3, instance_kind="KIND_GPU")
    files = perf_config_files([model], "repo")
    analyzer = yaml.safe_load(files["model_analyzer.yaml"])
    mcp = analyzer["profile_models"]["m"]["model_config_parameters"]
    assert mcp["max_batch_size"] == [3, 4, 6]
    assert mcp["dynamic_batching"]["preferred_batch_size"] == [[3]]
    assert batch_size_candidates(model) == [1, 2, 3, 4, 6]
    assert max(concurrency_values(model)) <= 64
    assert analyzer["run_config_search_disable"] is True
    assert analyzer["profile_models"]["m"]["perf_analyzer_flags"]["shape"] == ["x:5"]


def test_loopback_only() -> None:
    for url in ("127.0.0.1:8001", "localhost:8001", "[::1]:8001"):
        check_loopback(url)
    from generator.errors import GenRepoError

    with pytest.raises(GenRepoError):
        check_loopback("10.0.0.5:8001")
    code, output = _run("perf", "--url", "192.0.2.1:8001", "--duration", "0.1")
    assert code == 2 and "loopback" in output


def test_perf_analyzer_detection_says_why() -> None:
    """Why no perf_analyzer runs here, and only that: perf and tune say what measures instead (once)."""
    status = find_perf_analyzer(None if shutil.which("perf_analyzer") is None else "/nonexistent/perf_analyzer")
    assert not status.usable and status.reason and "load loop" not in status.reason


def test_perf_analyzer_detection_refuses_a_broken_binary(tmp_path: Path) -> None:
    fake = tmp_path / "perf_analyzer"
    fake.write_text("#!/bin/sh\necho 'error while loading shared libraries: GLIBC_2.38 not found' >&2\nexit 127\n")
    fake.chmod(0o755)
    status = find_perf_analyzer(str(fake))
    assert not status.usable and "GLIBC_2.38" in status.reason


# --------------------------------------------------------------------------------------------------------------------
# Against the real CPU Triton server
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def perf_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example repository (python target) built once for this module, with a private cache."""
    require("torch")
    require("onnxruntime")
    from generator.building.pipeline import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("perf")
    repo = base / "repo"
    build_repository(EXAMPLES_MANIFEST, BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"), repo)
    return repo


@pytest.mark.triton
def test_perf_against_a_real_server(perf_repository: Path, triton_server_factory, tmp_path: Path) -> None:
    server = triton_server_factory(perf_repository)
    report = tmp_path / "perf.json"
    precious = tmp_path / "precious"
    precious.write_text("precious")
    report.symlink_to(precious)  # planted: --json replaces the link, never writes through it
    summary = tmp_path / "summary.md"
    code, output = _run("perf", "--url", server.grpc_url, "--repo", str(perf_repository), "--duration", "1.5",
                        "--concurrency", "1", "--concurrency", "4", "--engine", "loop", "--json", str(report),
                        "--summary-md", str(summary))
    assert code == 0, output
    assert not report.is_symlink() and precious.read_text() == "precious"
    document = json.loads(report.read_text())
    results = document["results"]
    assert {r["model"] for r in results} == {"mlp", "text"}
    # Each model's runtime alone, measured once (onnxruntime on its model.onnx), and every figure a fraction of it.
    ceilings = {c["model"]: c for c in document["ceilings"]}
    assert set(ceilings) == {"mlp", "text"} and len(document["ceilings"]) == 2
    for result in results:
        assert result["requests"] > 0 and result["errors"] == 0, result
        assert result["throughput"] > 0
        assert result["p50_ms"] is not None and result["p99_ms"] is not None
        assert 0 < result["p50_ms"] <= result["p99_ms"]
        ceiling = ceilings[result["model"]]
        assert ceiling["runtime"] == "onnxruntime" and ceiling["skipped"] is None and ceiling["throughput"] > 0
        assert result["ceiling_fraction"] == pytest.approx(result["throughput"] / ceiling["throughput"], abs=1e-3)
    assert "infer/s" in output and "of ceil" in output and "mlp: ceiling " in output
    for model in ("mlp", "text"):
        best = max((r for r in results if r["model"] == model), key=lambda r: r["throughput"])
        assert f"{best['ceiling_fraction']:.2f} of the ceiling" in summary.read_text()
    schema = json.loads((REPO_ROOT / "schemas" / "report_perf.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


@pytest.mark.triton
def test_perf_launch_http_one_model(perf_repository: Path) -> None:
    from generator.serving.server import TritonNotFoundError, find_tritonserver

    try:
        find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc
    code, output = _run("perf", "--launch", "--repo", str(perf_repository), "--model", "text", "-i", "http",
                        "--duration", "1", "--concurrency", "2", "--shape", "max", "--json", "-")
    assert code == 0, output
    payload = json.loads(output[output.index("{"):])
    (result,) = payload["results"]
    assert result["model"] == "text" and result["shape"] == "max" and result["batch_size"] == 16
    assert result["requests"] > 0 and result["throughput"] > 0


def test_perf_config_covers_a_manifest_ensemble_inside_its_range(tmp_path: Path) -> None:
    """An ensemble is an endpoint to load-test too: its configs stay inside the range its steps accept."""
    examples = Path(EXAMPLES_MANIFEST).parent
    document = {"models": [{"name": "mlp", "spec": str(examples / "specs" / "mlp.graphspec.json")}],
                "ensembles": [{"name": "pipe", "max_batch_size": 8,
                               "steps": [{"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]}]}
    out = tmp_path / "perf"
    code, output = _run("perf-config", str(write_manifest(tmp_path / "m", document)), "-o", str(out),
                        "--allow-outside")
    assert code == 0, output
    profile = yaml.safe_load((out / "model_analyzer.yaml").read_text())["profile_models"]
    # Triton refuses instance groups and dynamic batching on an ensemble: nothing of its config is searched.
    assert "model_config_parameters" not in profile["pipe"] and "model_config_parameters" in profile["mlp"]
    assert max(profile["pipe"]["parameters"]["batch_sizes"]) <= 8
    script = (out / "perf_analyzer.sh").read_text()
    assert "perf_analyzer -m pipe -x 1 -b 1 --input-data pipe/input_data.min.json" in script
    with (out / "pipe" / "input_data.max.json").open() as handle:
        (request,) = json.load(handle)["data"]
    assert request["x"]["shape"] == [16] and len(request["x"]["content"]) == 16  # one item; -b sets the batch
    assert "perf_analyzer -m pipe -x 1 -b 8 --input-data pipe/input_data.max.json" in script  # the ensemble's max


# --------------------------------------------------------------------------------------------------------------------
# perf-config --repo: every path it writes is a folder name of the repository, inside -o
# --------------------------------------------------------------------------------------------------------------------
def _tree(root: Path, *skip: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (not under ``skip``), with a file's bytes (None for a folder or link)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        out[str(path)] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


@pytest.mark.parametrize("named", ["{outside}/abs", "../../escaped", "mlp/../../../escaped", "nested/mlp", "text",
                                   ".", ""],
                         ids=["absolute", "dotdot", "dotdot-inside", "slash", "another-model", "dot", "empty"])
def test_perf_config_refuses_a_contract_naming_another_model_or_path(example_repository: Path, tmp_path: Path,
                                                                     named: str) -> None:
    """The contract's `model` decides the files' folder under -o: one that is not its own folder's name is a
    located error (exit 2), and nothing is written anywhere (neither outside -o nor in it)."""
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    contract = repo / "mlp" / "1" / "gen_repo" / "contract.json"
    doc = json.loads(contract.read_text())
    doc["model"] = named.format(outside=tmp_path / "outside")
    contract.write_text(json.dumps(doc))
    out = tmp_path / "work" / "out"
    out.parent.mkdir()
    before = _tree(tmp_path, repo)
    code, output = _run("perf-config", "--repo", str(repo), "-o", str(out))
    assert code == 2, output
    assert f"{contract}: /model: names the model {doc['model']!r}, but the contract lies in the model folder " \
           "'mlp'" in " ".join(output.split())
    assert _tree(tmp_path, repo) == before  # nothing written: not -o, not outside it


def test_perf_config_refuses_a_model_folder_linked_out_of_the_repository(example_repository: Path,
                                                                         tmp_path: Path) -> None:
    """A model folder that is a symlink to a folder outside the repository is not read (its contract neither)."""
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    shutil.copytree(example_repository, repo)
    shutil.move(repo / "mlp", elsewhere)
    (repo / "mlp").symlink_to(elsewhere, target_is_directory=True)
    code, output = _run("perf-config", "--repo", str(repo), "-o", str(tmp_path / "out"))
    assert code == 2, output
    assert "refused: a symlink" in output and str(repo / "mlp") in output
    assert not (tmp_path / "out").exists()


def test_perf_config_never_writes_through_a_link_planted_in_the_output(example_repository: Path,
                                                                       tmp_path: Path) -> None:
    """-o/<model> planted as a symlink to a folder outside -o: refused before anything is written; the folder it
    points at is unchanged. A symlink at a file's own name is replaced, its target unchanged."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "input_data.min.json").write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mlp").symlink_to(outside, target_is_directory=True)
    code, output = _run("perf-config", "--repo", str(example_repository), "-o", str(out))
    assert code == 2, output
    assert f"{out / 'mlp' / 'input_data.min.json'}: /: refused: " in output and "leads outside" in output
    assert sorted(p.name for p in outside.iterdir()) == ["input_data.min.json"]
    assert (outside / "input_data.min.json").read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == ["mlp"]  # nothing else written either

    (out / "mlp").unlink()
    (out / "perf_analyzer.json").symlink_to(outside / "input_data.min.json")
    code, output = _run("perf-config", "--repo", str(example_repository), "-o", str(out))
    assert code == 0, output
    assert not (out / "perf_analyzer.json").is_symlink()
    assert json.loads((out / "perf_analyzer.json").read_text())["format"] == "gen-repo-perf/1"
    assert (outside / "input_data.min.json").read_text() == "precious"
    assert (out / "perf_analyzer.sh").stat().st_mode & 0o777 == 0o755


def _input_data(out: Path, model: str) -> list[dict]:
    """Every input-data entry perf-config wrote for ``model`` (min, opt and max)."""
    return [entry for variant in ("min", "opt", "max")
            for entry in json.loads((out / model / f"input_data.{variant}.json").read_text())["data"]]


def test_perf_config_input_data_stays_inside_the_contracts_values(example_repository: Path, tmp_path: Path) -> None:
    """The example's text model embeds token ids: the built contract says input_ids index a 100-row table. Every
    index perf_analyzer would send is inside it, and the mask keeps every position (no fully masked row)."""
    out = tmp_path / "out"
    assert _run("perf-config", "--repo", str(example_repository), "-o", str(out))[0] == 0
    contract = json.loads((example_repository / "text" / "1" / "gen_repo" / "contract.json").read_text())
    (ids,) = [t for t in contract["inputs"] if t["name"] == "input_input_ids"]
    low, high = ids["value_range"]
    assert (low, high) == (0, 99)
    for entry in _input_data(out, "text"):
        assert all(low <= v <= high for v in entry["input_input_ids"]["content"])
        assert set(entry["input_attention_mask"]["content"]) == {1}


def test_perf_config_input_data_takes_a_declared_range(tmp_path: Path) -> None:
    """A manifest's value range above the small defaults (10..20): the data is drawn inside it, not from 0..7."""
    document = yaml.safe_load(EXAMPLES_MANIFEST.read_text())
    for model in document["models"]:
        model["spec"] = str(EXAMPLES_MANIFEST.parent / model["spec"])
        if model["name"] == "text":
            model["inputs"] = {"input_ids": {"value_range": [10, 20]}}
    manifest = write_manifest(tmp_path / "m", document)
    out = tmp_path / "out"
    code, output = _run("perf-config", str(manifest), "-o", str(out), "--allow-outside")
    assert code == 0, output
    values = {v for entry in _input_data(out, "text") for v in entry["input_input_ids"]["content"]}
    assert values and min(values) >= 10 and max(values) <= 20
