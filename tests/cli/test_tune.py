"""``gen-repo tune`` through the real command line: bad usage, a real tune written into a manifest, an interrupt."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.manifest.loading import load_manifest
from generator.resources import resource_dir

GEN_REPO = str(Path(sys.executable).parent / "gen-repo")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES / "specs", tmp_path / "specs")
    manifest = tmp_path / "gen-repo.yaml"
    shutil.copy(EXAMPLES / "gen-repo.yaml", manifest)
    return manifest


@pytest.mark.parametrize(("args", "message"), [
    (["nowhere.yaml"], "no such manifest or repository folder"),
    (["{tmp}", "--budget", "-1"], "Invalid value for '--budget': -1.0 is not in the range x>=0."),
    (["{tmp}", "--tolerance", "1.5"], "Invalid value for '--tolerance': 1.5"),
    (["{tmp}", "--repo", "{tmp}"], "give --repo only with a manifest"),
])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["tune", *[a.format(tmp=tmp_path) for a in args]])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_tune_before_any_build_says_the_build_command(tmp_path: Path) -> None:
    """The bundled example, not built yet: the error names the repository it looked for and the command making it."""
    manifest = _project(tmp_path)
    result = CliRunner().invoke(main, ["tune", str(manifest)])
    assert result.exit_code == 2, result.output
    assert (f"{tmp_path / 'model_repository'}: /: no built repository here: build it first (gen-repo build {manifest} "
            "--allow-code), or give the built one with --repo DIR") in result.output
    result = CliRunner().invoke(main, ["tune", str(manifest), "--repo", str(tmp_path / "repo")])
    assert result.exit_code == 2, result.output
    assert f"(gen-repo build {manifest} -o {tmp_path / 'repo'} --allow-code), or check --repo" in result.output


def test_an_unknown_model_exits_2_before_any_server_starts(example_repository: Path) -> None:
    result = CliRunner().invoke(main, ["tune", str(example_repository), "--model", "nope"])
    assert result.exit_code == 2
    assert "no model 'nope'" in result.output


#: The generated mlp's queue delay, lengthened: with 2 clients the batcher waits it out for a preferred batch of 4
#: that never fills, so the baseline serves at most 2 items per delay (20/s), and the next delay down far more.
CRIPPLED_DELAY_US = 100_000


def _crippled(example_repository: Path, tmp_path: Path) -> Path:
    from generator.planning.config import parse_config, render_config

    repo = tmp_path / "repository"
    shutil.copytree(example_repository, repo)
    path = repo / "mlp" / "config.pbtxt"
    config = parse_config(path.read_text())
    config.dynamic_batching.max_queue_delay_microseconds = CRIPPLED_DELAY_US
    del config.dynamic_batching.preferred_batch_size[:]
    config.dynamic_batching.preferred_batch_size.append(4)
    path.chmod(0o644)
    path.write_text(render_config(config))
    return repo


@pytest.mark.triton
@pytest.mark.slow
def test_tune_writes_a_gain_beyond_the_noise_that_the_build_serves(example_repository: Path, tmp_path: Path,
                                                                   triton_server_factory) -> None:
    manifest = _project(tmp_path)
    before = manifest.read_text()
    summary = tmp_path / "summary.md"
    result = subprocess.run(
        [GEN_REPO, "tune", str(manifest), "--repo", str(_crippled(example_repository, tmp_path)), "--model", "mlp",
         "--budget", "20", "--window", "0.5", "--settle", "4", "--concurrency", "2", "--summary-md",
         str(summary), "--report", str(tmp_path / "tune.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "tune.json").read_text())
    # The table, then why the load loop measured, said once.
    (note,) = [line for line in result.stderr.splitlines() if line.startswith("note: measured with")]
    assert note.startswith("note: measured with the built-in load loop: ") and note.count("load loop") == 1, note
    schema = json.loads((resource_dir("schemas") / "report_tune.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    (model,) = report["models"]
    assert model["model"] == "mlp" and model["concurrency"] == [2] and report["engine"] == "loop"
    # Arithmetic: the baseline serves at most 2 items per queue delay (10% margin for the clock); the best beat it
    # beyond both figures' noise, with a shorter delay.
    assert model["baseline"]["score"] <= 1.1 * 2 / (CRIPPLED_DELAY_US / 1e6), model["baseline"]
    best = model["best"]
    assert not model["kept"] and best["max_queue_delay_microseconds"] < CRIPPLED_DELAY_US
    lows = best["score"] * (1 - max(r["throughput_noise"] for r in best["results"]) / 2)
    assert lows > model["baseline"]["score"] * (1 + max(r["throughput_noise"] for r in model["baseline"]["results"]))
    # Every candidate measured was loaded as asked: the settings the server reported are the candidate's own.
    for candidate in model["candidates"]:
        if "error" not in candidate:
            assert candidate["applied"] == {k: candidate[k] for k in candidate["applied"]}, candidate
    tuned = {m.name: m.tuned for m in load_manifest(manifest).models}
    assert tuned["text"] is None
    assert tuned["mlp"]["instance_group"] == [{"kind": best["kind"], "count": best["instance_count"]}]
    assert tuned["mlp"]["dynamic_batching"] == {
        "max_queue_delay_microseconds": best["max_queue_delay_microseconds"],
        "preferred_batch_size": best["preferred_batch_size"]}
    assert tuned["mlp"]["measured"]["engine"] == "loop" and tuned["mlp"]["measured"]["concurrency"] == [2]
    assert manifest.read_text().startswith(before.split("  - name: text")[0])  # the user's text before it is kept
    assert "gen-repo tune" in summary.read_text() and "mlp" in summary.read_text()
    # The model's runtime alone (onnxruntime on its model.onnx) measured once, and the best a fraction of it.
    ceiling = model["ceiling"]
    assert ceiling["runtime"] == "onnxruntime" and ceiling["skipped"] is None and ceiling["throughput"] > 0
    assert model["best_of_ceiling"] == pytest.approx(best["score"] / ceiling["throughput"], abs=1e-3)
    assert f"{model['best_of_ceiling']:.2f} of {ceiling['throughput']:.0f}/s ceiling" in summary.read_text()

    # The build serves what the server applied when tune measured it: the built repository loaded in Triton, its
    # model_config read back, twice (the second build reproduces the first byte for byte).
    from generator.building.pipeline import BuildOptions, build_repository
    from generator.triton.connection import Connection
    from generator.tuning.measure import applied_setting

    texts = []
    for output in ("first", "second"):
        built = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=tmp_path / "cache"),
                                 output_dir=tmp_path / output)
        assert built.ok, built.to_dict()
        texts.append((tmp_path / output / "mlp" / "config.pbtxt").read_text())
    assert texts[0] == texts[1]
    server = triton_server_factory(tmp_path / "first")
    with Connection(server.grpc_url, "grpc", 30.0) as connection:
        assert applied_setting(connection.config("mlp")).to_dict() == best["applied"]

    # Edited by hand (one instance more): plan and build no longer show the measurement, they say "not measured".
    count = best["instance_count"]
    text = manifest.read_text()
    assert text.count(f"count: {count}}}]") == 1
    manifest.write_text(text.replace(f"count: {count}}}]", f"count: {count + 1}}}]"))
    figure = f"{tuned['mlp']['measured']['throughput']:g} inferences/s"
    planned = CliRunner().invoke(main, ["plan", str(manifest), "--target", "python"])
    assert planned.exit_code == 0, planned.output
    assert "not measured: these settings were edited after they were measured" in planned.output
    assert figure not in planned.output
    built = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=tmp_path / "cache"),
                             output_dir=tmp_path / "edited")
    assert built.ok and figure not in json.dumps(built.to_dict())
    assert "not measured" in json.dumps(built.to_dict())


@pytest.mark.triton
@pytest.mark.slow
def test_an_interrupted_tune_leaves_the_manifest_untouched(example_repository: Path, tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    before = manifest.read_bytes()
    process = subprocess.Popen(
        [GEN_REPO, "tune", str(manifest), "--repo", str(example_repository), "--budget", "600", "--window", "0.5",
         "--concurrency", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()
    try:
        while True:  # the baseline measured: the search (and its write at the end) is under way
            line = lines.get(timeout=240)
            if line.startswith("mlp: ") and "/s" in line:
                break
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert manifest.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen-repo.yaml", "specs"]
