"""``gen-repo verify DIR [--json]``: exit 0 when the repository matches its lock, 1 when not, 2 on bad usage."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.repository.lock import LOCK_FILE_NAME, build_lock
from generator.repository.staging import RepositoryWriter
from tests.requirements import missing


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "model_repository"
    with RepositoryWriter(dest) as writer:
        folder = writer.model_dir("mlp", 1)
        (folder.parent / "config.pbtxt").write_text('name: "mlp"\n')
        (folder / "model.onnx").write_bytes(b"onnx" * 100)
        (folder / "model.plan").write_bytes(b"plan" * 100)
        writer.commit(build_lock(writer.root, {"gen-repo": "0.1.0"}, {"mlp": {"target": "python"}}))
    return dest


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["verify", *args])
    return result.exit_code, result.stdout, result.stderr


def test_clean_repository_exits_0(repo: Path) -> None:
    code, out, _err = run(str(repo))
    assert code == 0
    assert "ok: 3 artifact(s) match" in out
    code, out, _err = run(str(repo), "--json")
    assert code == 0
    assert json.loads(out) == {"ok": True, "repository": str(repo), "artifacts": 3, "problems": []}


@pytest.mark.parametrize("artifact", ["mlp/1/model.onnx", "mlp/1/model.plan", "mlp/config.pbtxt"])
def test_modified_artifact_exits_1(repo: Path, artifact: str) -> None:
    data = bytearray((repo / artifact).read_bytes())
    data[0] ^= 0xFF  # flip one byte, same size
    (repo / artifact).write_bytes(bytes(data))
    code, out, _err = run(str(repo))
    assert code == 1
    assert f"{repo / artifact}: /artifacts/{artifact.replace('/', '~1')}: modified: sha256" in out
    assert "1 difference(s)" in out


def test_missing_and_extra_listed_in_json(repo: Path) -> None:
    (repo / "mlp/1/model.plan").unlink()
    (repo / "mlp/1/stray.txt").write_text("stray")
    code, out, _err = run(str(repo), "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["ok"] is False
    messages = {Path(p["file"]).name: p["message"] for p in payload["problems"]}
    assert messages.keys() == {"model.plan", "stray.txt"}
    assert messages["model.plan"].startswith("missing")
    assert messages["stray.txt"].startswith("unexpected")


def test_a_folder_that_is_not_exactly_a_version_exits_1(repo: Path) -> None:
    """An empty folder " 2" beside version 1 (Triton reads it as version 2, from a folder "2" that does not exist):
    verify names it and exits 1. Before, it was not looked at."""
    (repo / "mlp" / " 2").mkdir()
    code, out, _err = run(str(repo), "--json")
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert problem["file"] == str(repo / "mlp" / " 2")
    assert problem["message"].startswith("folder ' 2' is not exactly a version folder: Triton reads it as version 2")


def test_corrupt_lock_exits_1(repo: Path) -> None:
    (repo / LOCK_FILE_NAME).write_text("{")
    code, out, _err = run(str(repo))
    assert code == 1
    assert f"{repo / LOCK_FILE_NAME}: /: corrupt" in out


def test_not_a_repository_exits_2(tmp_path: Path, repo: Path) -> None:
    code, _out, err = run(str(tmp_path / "nope"))
    assert code == 2  # what to do, as publish says for a missing folder
    assert (f"{tmp_path / 'nope'}: /: no such folder: check the path, or build the repository there first (gen-repo "
            f"build MANIFEST -o {tmp_path / 'nope'})") in err
    code, _out, err = run(str(repo / LOCK_FILE_NAME))
    assert code == 2
    assert f"not a folder: give the repository's folder, the one holding {LOCK_FILE_NAME}" in err
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain)
    (plain / LOCK_FILE_NAME).unlink()
    code, out, _err = run(str(plain), "--json")
    assert code == 2
    assert "no gen-repo.lock.json" in json.loads(out)["errors"][0]["message"]
    code, _out, _err = run()
    assert code == 2  # click's own usage error: DIR missing


def test_entry_point_subprocess(repo: Path) -> None:
    (repo / "mlp/1/model.onnx").write_bytes(b"tampered")
    script = Path(sys.executable).parent / "gen-repo"
    if not script.exists():
        raise missing("console_script", f"{script} does not exist")
    result = subprocess.run([str(script), "verify", str(repo)], capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stderr
    assert "model.onnx" in result.stdout and "Traceback" not in result.stderr
