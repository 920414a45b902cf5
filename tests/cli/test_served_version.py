"""Every command that needs a model reads the version Triton serves, and says which.

A folder and a bucket hold what a publish killed after its upload and before its switch leaves: mlp's version 2
uploaded, its config still pinned to version 1. The folder also holds an older version an operator pinned: text's
version 2 published, then its config pinned back to version 1. Each unserved version's contract renames the inputs,
so a command that read it would send, check or show inputs Triton does not have.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from generator.cli import main
from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.publish import publish, published_config
from tests.object_stores import ObjectStore

_REPO_ROOT = Path(__file__).resolve().parents[2]
#: What a command reading the served versions says (generator.contracts.served.ServedModel.describe).
SERVED = {model: f"model {model}: version 1 (version_policy specific)" for model in ("mlp", "text")}
#: The prefix of every input name in an unserved version's contract.
UNSERVED = "unserved_"

#: A publisher killed after its upload (and, for a folder, the rename into place) and before its switch.
_KILLED_PUBLISHER = textwrap.dedent("""
    import os, sys
    import generator.repository.publish as publishing

    publishing._check_served_state = lambda *args: os._exit(0)  # the switch's first act: killed there
    publishing.publish(sys.argv[1], sys.argv[2], allow_breaking=True)
    sys.exit("the publisher was not killed")
""")


def _unserved_copy(source: Path, dest: Path, models: tuple[str, ...]) -> Path:
    """``source`` with each of ``models``' contracts renaming its inputs, the lock file kept in step."""
    shutil.copytree(source, dest)
    lock = json.loads((dest / LOCK_FILE_NAME).read_text(encoding="utf-8"))
    for model in models:
        rel = f"{model}/1/gen_repo/contract.json"
        doc = json.loads((dest / rel).read_text(encoding="utf-8"))
        for tensor in doc["inputs"]:
            tensor["name"] = UNSERVED + tensor["name"]
        data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        (dest / rel).write_bytes(data)
        lock["artifacts"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (dest / LOCK_FILE_NAME).write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return dest


def _publish_killed_before_the_switch(local: Path, url: str) -> None:
    done = subprocess.run([sys.executable, "-c", _KILLED_PUBLISHER, str(local), url], cwd=_REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _stage(example: Path, work: Path, url: str, *, pin_text: Path | None = None) -> None:
    """Publish ``example`` to ``url`` and leave mlp's version 2 unswitched; with ``pin_text`` (the destination
    folder) text's version 2 is published first and its config pinned back to version 1."""
    publish(example, url)
    if pin_text is not None:
        publish(_unserved_copy(example, work / "text_changed", ("text",)), url, allow_breaking=True)
    changed = ("mlp", "text") if pin_text is not None else ("mlp",)  # text as published: unchanged
    _publish_killed_before_the_switch(_unserved_copy(example, work / "both_changed", changed), url)
    if pin_text is not None:
        config = (example / "text" / "config.pbtxt").read_text(encoding="utf-8")
        (pin_text / "text" / "config.pbtxt").write_text(published_config(config, 1, 1), encoding="utf-8")


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _input_names(contract: dict[str, Any]) -> list[str]:
    return [t["name"] for t in contract["inputs"]]


@pytest.fixture(scope="module")
def staged_folder(example_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared folder: mlp's version 2 unswitched, text's version 2 published and pinned back to version 1."""
    work = tmp_path_factory.mktemp("served_version")
    dest = work / "shared"
    dest.mkdir()
    _stage(example_repository, work, str(dest), pin_text=dest)
    assert sorted(p.name for p in (dest / "mlp").iterdir() if p.name.isdigit()) == ["1", "2"]
    assert sorted(p.name for p in (dest / "text").iterdir() if p.name.isdigit()) == ["1", "2"]
    for model in ("mlp", "text"):
        assert (dest / model / "2" / "gen_repo" / "contract.json").read_text().count(UNSERVED) > 0
        assert "versions: 1" in (dest / model / "config.pbtxt").read_text()
    return dest


@pytest.mark.slow
def test_contract_and_check_request_read_the_served_version(staged_folder: Path, example_repository: Path) -> None:
    for model in ("mlp", "text"):
        result = _run("contract", str(staged_folder), model)
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines() == [SERVED[model]]
        built = json.loads((example_repository / model / "1" / "gen_repo" / "contract.json").read_text())
        assert _input_names(json.loads(result.stdout)) == _input_names(built)

        request = staged_folder / model / "1" / "gen_repo" / "reference.npz"  # the served inputs' names
        result = _run("check-request", "--repo", str(staged_folder), "--json", model, str(request))
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        assert payload["read"] == SERVED[model] and payload["ok"], payload


@pytest.mark.slow
def test_report_and_diff_say_the_served_version(staged_folder: Path, example_repository: Path,
                                                tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = _run("report", str(staged_folder), "-o", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text(encoding="utf-8")
    assert html.count("<dd>1 (version_policy specific)</dd>") == 2
    assert UNSERVED not in html and "input_x" in html

    result = _run("diff", str(staged_folder), str(example_repository))
    assert result.exit_code == 0, result.output  # the served versions are the example's: nothing breaking
    assert result.stderr.splitlines() == [f"old: {SERVED['mlp']}", f"old: {SERVED['text']}",
                                          "new: model mlp: version 1 (version_policy latest)",
                                          "new: model text: version 1 (version_policy latest)"]


@pytest.mark.slow
@pytest.mark.triton
def test_smoke_and_perf_on_a_server_read_the_served_version(staged_folder: Path, triton_server_factory,
                                                            tmp_path: Path) -> None:
    server = triton_server_factory(staged_folder)
    report = tmp_path / "smoke.json"
    result = _run("smoke", "--url", server.grpc_url, "--repo", str(staged_folder), "--burst", "4", "--json",
                  str(report))
    assert result.exit_code == 0, result.output
    reads = {r["model"]: r["details"].get("read") for r in json.loads(report.read_text())["results"]
             if r["check"] == "config"}
    assert reads == SERVED

    # perf says which version it read; and a request built from an unserved contract names inputs the server does
    # not have, so every request answered proves the served contract; mlp's batch is its opt batch.
    result = _run("perf", "--url", server.grpc_url, "--repo", str(staged_folder), "--engine", "loop", "--duration",
                  "0.3", "--concurrency", "1", "--json", "-")
    assert result.exit_code == 0, result.output
    rows = {row["model"]: row for row in json.loads(result.stdout)["results"]}
    assert sorted(rows) == ["mlp", "text"]
    assert all(row["requests"] > 0 and row["errors"] == 0 for row in rows.values()), rows
    assert rows["mlp"]["batch_size"] == 32
    assert [line for line in result.stderr.splitlines() if line.startswith("model ")] == list(SERVED.values())


@pytest.mark.slow
@pytest.mark.triton
def test_tune_reads_the_served_version(staged_folder: Path, tmp_path: Path) -> None:
    tune_report = tmp_path / "tune.json"
    result = _run("tune", str(staged_folder), "--engine", "loop", "--budget", "1", "--window", "0.3",
                  "--concurrency", "1", "--report", str(tune_report))
    assert result.exit_code == 0, result.output
    for model in ("mlp", "text"):
        assert SERVED[model] in result.stderr.splitlines()
    measured = {m["model"] for m in json.loads(tune_report.read_text())["models"] if m["candidates"]}
    assert measured == {"mlp", "text"}


@pytest.mark.slow
@pytest.mark.triton
def test_a_bucket_with_an_unswitched_version_is_read_at_the_served_one(store: ObjectStore, example_repository: Path,
                                                                      tmp_path: Path) -> None:
    url = store.url("unswitched")
    _stage(example_repository, tmp_path, url)
    assert store.fs().exists(store.key("unswitched", "mlp/2/gen_repo/contract.json"))

    report = tmp_path / "smoke.json"
    result = _run("smoke", "--repo", url, "--launch", "--burst", "4", "--json", str(report))
    assert result.exit_code == 0, result.output
    reads = {r["model"]: r["details"].get("read") for r in json.loads(report.read_text())["results"]
             if r["check"] == "config"}
    assert reads == SERVED
    assert f"not checked: {store.url('unswitched')}/mlp/2: objects no lock lists" in result.stderr

    page = tmp_path / "report.html"
    result = _run("report", url, "-o", str(page))
    assert result.exit_code == 0, result.output
    assert page.read_text(encoding="utf-8").count("<dd>1 (version_policy specific)</dd>") == 2

    result = _run("diff", url, str(example_repository))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[:2] == [f"old: {SERVED['mlp']}", f"old: {SERVED['text']}"]
