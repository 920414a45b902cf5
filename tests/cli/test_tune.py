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
    (["{tmp}", "--budget", "-1"], "--budget >= 0"),
    (["{tmp}", "--tolerance", "1.5"], "0 < --tolerance < 1"),
    (["{tmp}", "--repo", "{tmp}"], "give --repo only with a manifest"),
])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["tune", *[a.format(tmp=tmp_path) for a in args]])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_an_unknown_model_exits_2_before_any_server_starts(example_repository: Path) -> None:
    result = CliRunner().invoke(main, ["tune", str(example_repository), "--model", "nope"])
    assert result.exit_code == 2
    assert "no model 'nope'" in result.output


@pytest.mark.triton
@pytest.mark.slow
def test_tune_writes_the_best_into_the_manifest(example_repository: Path, tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    before = manifest.read_text()
    summary = tmp_path / "summary.md"
    result = subprocess.run(
        [GEN_REPO, "tune", str(manifest), "--repo", str(example_repository), "--model", "mlp", "--budget", "3",
         "--window", "0.5", "--concurrency", "4", "--json", "--summary-md", str(summary), "--report",
         str(tmp_path / "tune.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert json.loads((tmp_path / "tune.json").read_text()) == report
    schema = json.loads((resource_dir("schemas") / "report_tune.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    (model,) = report["models"]
    assert model["model"] == "mlp" and model["concurrency"] == [4] and model["best"]["score"] > 0
    assert report["engine"] == "loop"
    tuned = {m.name: m.tuned for m in load_manifest(manifest).models}
    assert tuned["text"] is None
    best = model["best"]
    assert tuned["mlp"]["instance_group"] == [{"kind": best["kind"], "count": best["instance_count"]}]
    assert tuned["mlp"]["dynamic_batching"] == {
        "max_queue_delay_microseconds": best["max_queue_delay_microseconds"],
        "preferred_batch_size": best["preferred_batch_size"]}
    assert tuned["mlp"]["measured"]["engine"] == "loop" and tuned["mlp"]["measured"]["concurrency"] == [4]
    assert manifest.read_text().startswith(before.split("  - name: text")[0])  # the user's text before it is kept
    assert "gen-repo tune" in summary.read_text() and "mlp" in summary.read_text()
    # The model's runtime alone (onnxruntime on its model.onnx) measured once, and the best a fraction of it.
    ceiling = model["ceiling"]
    assert ceiling["runtime"] == "onnxruntime" and ceiling["skipped"] is None and ceiling["throughput"] > 0
    assert model["best_of_ceiling"] == pytest.approx(best["score"] / ceiling["throughput"], abs=1e-3)
    assert f"{model['best_of_ceiling']:.2f} of {ceiling['throughput']:.0f}/s ceiling" in summary.read_text()

    # The next build reproduces the configuration tune measured, byte for byte, and so does the one after it.
    from generator.building.pipeline import BuildOptions, build_repository
    from generator.planning.config import parse_config, render_config
    from generator.tuning.space import Setting, candidate_config

    measured = render_config(candidate_config(
        parse_config((example_repository / "mlp" / "config.pbtxt").read_text()),
        Setting(best["instance_count"], best["kind"], best["max_queue_delay_microseconds"],
                tuple(best["preferred_batch_size"]))))
    for output in ("first", "second"):
        built = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=tmp_path / "cache"),
                                 output_dir=tmp_path / output)
        assert built.ok, built.to_dict()
        assert (tmp_path / output / "mlp" / "config.pbtxt").read_text() == measured


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
