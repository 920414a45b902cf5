"""``gen-repo build`` from the command line: exit codes, refusals before any work, --keep-going, --json, -j, progress,
verify/lint on what it writes, and the end-to-end check against a real tritonserver.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from generator.building.pipeline import BuildEvent
from generator.cli import main as cli_main
from generator.planning.targets import tensorrt_available
from tests.build_helpers import (
    MARKER_SOURCE,
    MODELS_SOURCE,
    factory_calls,
    leftovers,
    make_project,
    tree_digest,
    write_manifest,
)
from tests.requirements import missing

MODULE = "zoo_cli_models"


def _run(*args: str) -> SimpleNamespace:
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    return SimpleNamespace(code=result.exit_code, stdout=result.stdout, stderr=result.stderr)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-cache") / "cache"  # made by the first build, which says so


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> SimpleNamespace:
    """mlp (python), two (onnx) and flaky (onnx) built once with --json and the default target of the manifest."""
    root = tmp_path_factory.mktemp("cli-project")
    manifest = make_project(root, MODULE, ("mlp", "two", "flaky"))
    run = _run("build", manifest, "--allow-code", "--cache-dir", cache_dir, "--json")
    assert run.code == 0, run.stderr
    return SimpleNamespace(root=root, manifest=manifest, repo=root / "model_repository", run=run,
                           report=json.loads(run.stdout))


def test_json_summary_and_plain_progress(project: SimpleNamespace) -> None:
    report = project.report
    assert report["ok"] and report["committed"]
    assert [(m["name"], m["target"], m["status"]) for m in report["models"]] == [
        ("mlp", "python", "built"), ("two", "onnx", "built"), ("flaky", "onnx", "built")]
    # Not a terminal: one plain line per model and stage on stderr.
    for line in ("mlp: queued: target python", "mlp: export: torch -> ONNX", "two: check: onnxruntime against torch",
                 "flaky: built: built in"):
        assert line in project.run.stderr
    assert "W1202" not in project.run.stderr and "torchvision" not in project.run.stderr


def test_the_build_says_where_its_cache_lives(project: SimpleNamespace, cache_dir: Path) -> None:
    """The first build into a cache says where it made it; a cache hit says which cache it came from."""
    assert project.run.stderr.count(f"build cache created at {cache_dir}: built models are kept there") == 1
    run = _run("build", project.manifest, "--allow-code", "--cache-dir", cache_dir)
    assert run.code == 0
    assert "build cache created" not in run.stderr
    for model in ("mlp", "two", "flaky"):
        assert f"{model}: cached: model files unchanged: taken from the build cache at {cache_dir}" in run.stderr


def test_second_run_is_cached(project: SimpleNamespace, cache_dir: Path) -> None:
    calls = factory_calls(project.root)
    run = _run("build", project.manifest, "--allow-code", "--cache-dir", cache_dir, "--json")
    assert run.code == 0
    assert {m["status"] for m in json.loads(run.stdout)["models"]} == {"cached"}
    assert factory_calls(project.root) == calls


def test_a_changed_config_over_cached_model_files_says_so(tuned_example_repository: SimpleNamespace,
                                                          example_repository: Path, tmp_path: Path) -> None:
    """The example built, then its manifest given a tuned: block for text (as gen-repo tune writes it): text's model
    files come from the build cache but its config.pbtxt changes, and the build says so; mlp is unchanged."""
    repo = tmp_path / "model_repository"
    shutil.copytree(example_repository, repo)
    cache = tmp_path / "cache"
    shutil.copytree(tuned_example_repository.cache, cache)
    build = ("build", tuned_example_repository.manifest, "--allow-code", "--target", "python", "--cache-dir", cache,
             "-o", repo)
    run = _run(*build)
    assert run.code == 0, run.stderr
    assert "text: reconfigured: config.pbtxt changed; model files from the build cache" in run.stderr
    (mlp,) = [line for line in run.stderr.splitlines() if line.startswith("│ mlp ")]
    (text,) = [line for line in run.stderr.splitlines() if line.startswith("│ text ")]
    assert mlp.split("│")[3].strip() == "cached" and text.split("│")[3].strip() == "reconfigured"
    # The notes come after the table, a line each, so no row is stretched by the longest note.
    assert "\ntext: config.pbtxt changed; model files from the build cache\n" in run.stderr
    assert max(len(line) for line in run.stderr.splitlines() if line[:1] in "┏┃┡│└") < 60
    assert (repo / "text" / "config.pbtxt").read_bytes() == \
        (tuned_example_repository.repo / "text" / "config.pbtxt").read_bytes()
    again = _run(*build, "--json")
    assert [(m["name"], m["status"]) for m in json.loads(again.stdout)["models"]] == [
        ("mlp", "cached"), ("text", "cached")]


def test_factory_without_allow_code_is_refused_and_never_imported(tmp_path: Path) -> None:
    (tmp_path / "marker_factory.py").write_text(MARKER_SOURCE)
    (tmp_path / "mlp.graphspec.json").write_text(
        (Path(__file__).parents[1] / "data" / "aitune" / "mlp.graphspec.json").read_text())
    manifest = write_manifest(tmp_path, "gen-repo.yaml", [
        {"name": "m", "spec": "mlp.graphspec.json", "source": {"factory": "marker_factory:make"}, "target": "onnx"}])
    run = _run("build", manifest, "--cache-dir", tmp_path / "cache")
    assert run.code == 2
    assert "--allow-code" in run.stderr and "/models/0/source/factory" in run.stderr
    assert not (tmp_path / "imported.marker").exists()
    assert not (tmp_path / "model_repository").exists() and not (tmp_path / "cache").exists()


def test_unedited_init_output_is_bad_input_exit_2(tmp_path: Path) -> None:
    """`gen-repo init` leaves each source line commented out: build refuses every model before any work (exit 2,
    the README's code for bad input), naming each entry, and writes nothing."""
    specs = Path(__file__).resolve().parents[2] / "examples" / "specs"
    for spec in specs.glob("*.graphspec.json"):
        shutil.copy(spec, tmp_path)
    assert _run("init", *sorted(tmp_path.glob("*.json")), "-o", tmp_path / "gen-repo.yaml").code == 0
    run = _run("build", tmp_path / "gen-repo.yaml", "--cache-dir", tmp_path / "cache")
    assert run.code == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert [e.split(": ")[2] for e in errors] == ["/models/0", "/models/1"], errors
    assert all("has no source to build from: add `source: {onnx: model.onnx}`" in e for e in errors)
    assert not (tmp_path / "model_repository").exists() and not (tmp_path / "cache").exists()


def test_tensorrt_target_without_tensorrt_stops_at_once(project: SimpleNamespace, tmp_path: Path) -> None:
    trt, why = tensorrt_available("tensorrt")
    if trt is not None:
        raise missing("no_gpu", "standard TensorRT and a GPU are present here")
    calls = factory_calls(project.root)
    run = _run("build", project.manifest, "--allow-code", "--target", "tensorrt", "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "cache")
    assert run.code == 2
    assert f"has target tensorrt, but {why}" in run.stderr
    assert "--target onnx" in run.stderr
    assert factory_calls(project.root) == calls  # nothing imported, nothing exported
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_target_auto_says_what_it_chose(project: SimpleNamespace, cache_dir: Path, tmp_path: Path) -> None:
    trt, why = tensorrt_available("tensorrt")
    if trt is not None:
        raise missing("no_gpu", "standard TensorRT and a GPU are present: auto builds plans (covered by gpu tests)")
    manifest = write_manifest(project.root, "auto.yaml", [
        {"name": "fromonnx", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}}])
    run = _run("build", manifest, "--target", "auto", "-o", tmp_path / "out", "--cache-dir", cache_dir, "--json")
    assert run.code == 0
    report = json.loads(run.stdout)
    assert report["notes"] == [f"target auto -> onnx (no TensorRT plan possible: {why})"]
    assert report["models"][0]["target"] == "onnx"
    run = _run("build", manifest, "--target", "auto", "-o", tmp_path / "out", "--cache-dir", cache_dir)
    assert "note: target auto -> onnx" in run.stderr


def test_failing_model_without_keep_going_writes_nothing(project: SimpleNamespace, cache_dir: Path) -> None:
    before = tree_digest(project.repo)
    (project.root / "broken.flag").write_text("")
    try:
        manifest = write_manifest(project.root, "failing.yaml", [
            {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"},
             "target": "python"},
            # a changed option: a cache miss, so the (now broken) factory runs
            {"name": "flaky", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_flaky"},
             "target": "onnx", "max_batch_size": 8},
        ])
        run = _run("build", manifest, "--allow-code", "--cache-dir", cache_dir)
    finally:
        (project.root / "broken.flag").unlink()
    assert run.code == 1
    assert "the flaky model is broken" in run.stderr
    assert "nothing was written" in run.stderr
    assert tree_digest(project.repo) == before
    assert leftovers(project.root) == []


def test_keep_going_builds_the_rest_and_keeps_the_previous_build(project: SimpleNamespace, cache_dir: Path,
                                                                 tmp_path: Path) -> None:
    repo = tmp_path / "model_repository"
    shutil.copytree(project.repo, repo)
    before = tree_digest(repo)
    previous_lock = json.loads((repo / "gen-repo.lock.json").read_text())
    manifest = write_manifest(project.root, "keep_going.yaml", [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"},
         "target": "python"},
        {"name": "flaky", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_flaky"},
         "target": "onnx", "max_batch_size": 4},
        {"name": "fromonnx", "spec": "specs/mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, "target": "onnx"},
    ])
    (project.root / "broken.flag").write_text("")
    try:
        run = _run("build", manifest, "--allow-code", "--cache-dir", cache_dir, "-o", repo, "--keep-going", "--json")
    finally:
        (project.root / "broken.flag").unlink()
    assert run.code == 1
    report = json.loads(run.stdout)
    assert report["committed"] and not report["ok"]
    assert {m["name"]: m["status"] for m in report["models"]} == {
        "mlp": "cached", "flaky": "kept-previous", "fromonnx": "built"}
    assert "the flaky model is broken" in report["models"][1]["problems"][0]["message"]
    after = tree_digest(repo)
    assert {k: v for k, v in after.items() if k.startswith("flaky/")} == {
        k: v for k, v in before.items() if k.startswith("flaky/")}
    assert "fromonnx/1/model.onnx" in after and "two/config.pbtxt" not in after  # two left the manifest
    lock = json.loads((repo / "gen-repo.lock.json").read_text())
    assert lock["models"]["flaky"] == previous_lock["models"]["flaky"]
    assert _run("verify", repo).code == 0
    assert leftovers(tmp_path) == []


def test_models_refused_at_plan_time_do_not_stop_the_others(project: SimpleNamespace, cache_dir: Path,
                                                             tmp_path: Path) -> None:
    # One manifest: a good model, one whose spec has a dtype Triton cannot carry, one whose axes cannot agree, one
    # whose spec file is missing. Without --keep-going: exit 2 listing every refused model, nothing written.
    document = json.loads((project.root / "specs" / "mlp.graphspec.json").read_text())
    document["graph"]["output_spec"]["tensor_data"][0]["dtype"] = "torch.complex64"
    (project.root / "specs" / "complex.graphspec.json").write_text(json.dumps(document))
    entries = [
        {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"},
         "target": "python"},
        {"name": "complex", "spec": "specs/complex.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"}},
        {"name": "disjoint", "spec": "specs/mlp.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"},
         "dynamic_shapes": [{"path": "x", "shape": [{"type": "BatchDim", "name": "b", "min": 1, "max": 2,
                                                     "opt": None}, 16]}]},
        {"name": "missing", "spec": "specs/nope.graphspec.json", "source": {"factory": f"{MODULE}:make_mlp"}},
    ]
    manifest = write_manifest(project.root, "refusals.yaml", entries)
    repo = tmp_path / "model_repository"
    strict = _run("build", manifest, "--allow-code", "--cache-dir", cache_dir, "-o", repo)
    assert strict.code == 2 and not repo.exists()
    assert "has no Triton data type" in strict.stderr and "spec file 'specs/nope.graphspec.json' not found" in \
        strict.stderr
    assert "does not cover the sizes 1..16 recorded" in strict.stderr
    assert "refused: 'complex', 'disjoint', 'missing'" in strict.stderr

    planned = _run("plan", manifest, "--json")
    assert planned.code == 2
    summary = json.loads(planned.stdout)
    assert [m["name"] for m in summary["models"]] == ["mlp"]
    assert [r["name"] for r in summary["refused"]] == ["complex", "disjoint", "missing"]

    run = _run("build", manifest, "--allow-code", "--cache-dir", cache_dir, "-o", repo, "--keep-going", "--json")
    assert run.code == 1
    report = json.loads(run.stdout)
    assert report["committed"] and not report["ok"]
    assert [(m["name"], m["status"], m["stage"]) for m in report["models"]] == [
        ("mlp", "cached", ""), ("complex", "failed", "plan"), ("disjoint", "failed", "plan"),
        ("missing", "failed", "plan")]
    assert (repo / "mlp" / "1" / "model.onnx").is_file() and not (repo / "complex").exists()
    assert _run("verify", repo).code == 0


def test_verify_catches_a_modified_onnx_file(project: SimpleNamespace, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(project.repo, repo)
    assert _run("verify", repo).code == 0
    onnx_file = repo / "two" / "1" / "model.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes() + b"\0")
    run = _run("verify", repo)
    assert run.code == 1
    assert "two/1/model.onnx" in run.stdout


def test_jobs_and_another_folder_give_identical_bytes(project: SimpleNamespace, tmp_path: Path) -> None:
    """-j 2 (spawned workers), another folder and an empty cache: configs, lock file and ONNX files are identical."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    for name in (f"{MODULE}.py", "gen-repo.yaml", "mlp.pt2", "mlp.onnx"):
        shutil.copy(project.root / name, other / name)
    shutil.copytree(project.root / "specs", other / "specs")
    assert (other / f"{MODULE}.py").read_text() == MODELS_SOURCE
    run = _run("build", other / "gen-repo.yaml", "--allow-code", "--cache-dir", tmp_path / "cache", "-j", "2",
               "--json")
    assert run.code == 0, run.stderr
    assert {m["status"] for m in json.loads(run.stdout)["models"]} == {"built"}
    assert tree_digest(other / "model_repository") == tree_digest(project.repo)


def test_rich_progress_shows_each_model_and_stage() -> None:
    from rich.console import Console

    from generator.cli.build import _RichProgress

    buffer = io.StringIO()
    progress = _RichProgress(Console(file=buffer, force_terminal=True, width=120))
    with progress.running():
        progress(BuildEvent("*", "note", "target auto -> onnx"))
        progress(BuildEvent("mlp", "queued", "target onnx"))
        progress(BuildEvent("mlp", "export", "torch -> ONNX"))
        progress(BuildEvent("text", "cached", "unchanged"))
        progress(BuildEvent("mlp", "built", "built in 1.0 s"))
    text = buffer.getvalue()
    assert "target auto -> onnx" in text and "mlp" in text and "text" in text and "built in 1.0 s" in text
    tasks = {t.fields["model"]: t for t in progress.progress.tasks}
    assert all(t.completed == t.total for t in tasks.values())


# --------------------------------------------------------------------------------------------------------------------
# What gen-repo generates passes gen-repo lint
# --------------------------------------------------------------------------------------------------------------------
def test_lint_passes_on_built_repositories(project: SimpleNamespace, built_example_repository: Path) -> None:
    for repo in (project.repo, built_example_repository):
        run = _run("lint", repo)
        assert run.code == 0, run.stdout
        assert "\n0 error(s)" in "\n" + run.stderr  # the summary line (skipped environment rules come before)


def test_lint_passes_on_config_repositories_of_the_aitune_fixtures(aitune_fixture_dir: Path, tmp_path: Path) -> None:
    """Config-only repositories (no model file: no source) lint clean except for the missing model file."""
    for path in sorted(aitune_fixture_dir.glob("*.graphspec.json")):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(aitune_fixture_dir / "tune_report.json", tmp_path / "tune_report.json")
    entries: list[dict] = [{"spec": p.name, "target": "onnx"} for p in sorted(tmp_path.glob("*.graphspec.json"))]
    entries += [{"name": f"report_{m}", "spec": {"file": "tune_report.json", "graph": m}, "target": "python"}
                for m in ("mlp", "text", "nested_dict", "explicit_dynamic", "two_outputs")]
    manifest = write_manifest(tmp_path, "gen-repo.yaml", entries)
    run = _run("config", manifest, "-o", tmp_path / "repo")
    assert run.code == 0, run.stderr
    run = _run("lint", tmp_path / "repo", "--json")
    findings = json.loads(run.stdout)["findings"]
    assert {f["rule"] for f in findings if f["severity"] == "error"} <= {"model-file-missing"}, findings
    assert len([f for f in findings if f["rule"] == "model-file-missing"]) == len(entries)  # every model was linted


# --------------------------------------------------------------------------------------------------------------------
# End to end: the example repository in a real tritonserver
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.triton
def test_example_repository_serves_torch_outputs(built_example_repository: Path, triton_server_factory) -> None:
    import tritonclient.http as httpclient

    from examples.models import make_mlp, make_text

    server = triton_server_factory(built_example_repository, disable_auto_complete_config=True)
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    assert client.is_model_ready("mlp") and client.is_model_ready("text")
    import torch

    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    request = httpclient.InferInput("input_x", list(x.shape), "FP32")
    request.set_data_from_numpy(x)
    got = client.infer("mlp", [request]).as_numpy("output")
    with torch.no_grad():
        want = make_mlp()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    ids = rng.integers(0, 100, size=(2, 12)).astype(np.int64)
    mask = np.ones((2, 12), dtype=np.int64)
    mask[1, 8:] = 0
    inputs = []
    for name, array in (("input_input_ids", ids), ("input_attention_mask", mask)):
        tensor = httpclient.InferInput(name, list(array.shape), "INT64")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("text", inputs)
    with torch.no_grad():
        logits, pooled = make_text()(torch.from_numpy(ids), torch.from_numpy(mask))
    outputs = [o["name"] for o in client.get_model_metadata("text")["outputs"]]
    np.testing.assert_allclose(result.as_numpy(outputs[0]), logits.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy(outputs[1]), pooled.numpy(), rtol=1e-4, atol=1e-5)
