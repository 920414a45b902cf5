"""Publishing to a shared folder (issue 38): ``gen-repo publish DIR /path`` and ``file:///path``.

The same versions, read-back, release gate and publishers' lock as on S3/GCS (tests/repository/test_publish.py), with
visibility by rename (generator/repository/local_store.py): every test publishes into a real folder, and the last
one serves it with a real Triton server while a second publish rolls it to version 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.repository.bucket_reads import STAGING_PREFIX
from generator.repository.contract_sources import diff_locations
from generator.repository.local_store import LocalStore
from generator.repository.publish import (
    LOCK_OBJECT,
    PublishError,
    PublishLock,
    PublishLocked,
    ReleaseRefused,
    publish,
)
from generator.repository.storage_urls import parse_destination
from generator.repository.verify import verify_repository
from tests.process_helpers import gen_repo_script

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (symlinks as their target text)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[path.relative_to(folder).as_posix()] = os.readlink(path).encode()
        elif path.is_file():
            out[path.relative_to(folder).as_posix()] = path.read_bytes()
    return out


def _versions(folder: Path, model: str) -> list[str]:
    """The model's folders Triton reads as versions (not warmup, not a hidden staging folder)."""
    return sorted(p.name for p in (folder / model).iterdir() if p.is_dir() and p.name[:1].isdigit())


def _served(folder: Path, model: str) -> int:
    config = (folder / model / "config.pbtxt").read_text()
    return int(config.split("versions:")[1].split()[0])


def test_publish_twice_then_retention(warmup_example_repository: Path, tmp_path: Path) -> None:
    """Three versions into a folder: each verified, configs pinned, the newest two kept (and their warmup data),
    an unchanged republish changes nothing, a folder gen-repo did not make is left alone and named."""
    dest = tmp_path / "shared"
    dest.mkdir()
    first = publish(warmup_example_repository, str(dest))
    assert {m.status for m in first.models} == {"published"} and first.triton_url == str(dest)
    assert verify_repository(dest) == [] and _served(dest, "mlp") == 1
    before = _snapshot(dest)
    again = publish(warmup_example_repository, str(dest))
    assert {m.status for m in again.models} == {"unchanged"} and _snapshot(dest) == before
    (dest / "mlp" / "7").mkdir()  # someone else's version folder
    (dest / "mlp" / "7" / "notes.txt").write_text("not gen-repo's")
    for expected in (8, 9):  # mlp: one past the foreign 7; text: 2, 3
        report = publish(warmup_example_repository, f"file://{dest}", force=True)
        assert {m.name: m.version for m in report.models} == {"mlp": expected, "text": expected - 6}
        assert next(m for m in report.models if m.name == "mlp").foreign == ("7",)
    assert _versions(dest, "mlp") == ["7", "8", "9"]  # version 1 removed by retention (keep 2), 7 left alone
    assert _versions(dest, "text") == ["2", "3"]
    assert sorted(p.name for p in (dest / "mlp" / "warmup").iterdir()) == ["8", "9"]
    assert (dest / "mlp" / "7" / "notes.txt").read_text() == "not gen-repo's"
    assert _served(dest, "mlp") == 9 and 'input_data_file: "9/input_x"' in (dest / "mlp/config.pbtxt").read_text()
    assert [p.file for p in verify_repository(dest)] == [str(dest / "mlp/7/notes.txt")]  # only the foreign file
    assert not [p for p in dest.rglob("*") if p.name.startswith((STAGING_PREFIX, ".gen-repo-publish"))]


def test_relative_paths_and_file_urls_name_the_same_folder(example_repository: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative destination is resolved from the current folder (and the destination itself through its
    symlinks); file:// naming another host, and a missing folder, are refused (exit 2)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    report = publish(example_repository, "alias")
    assert report.triton_url == str(tmp_path / "real") and verify_repository(tmp_path / "real") == []
    assert parse_destination(f"file://{tmp_path}/real").path == str(tmp_path / "real")
    for bad in ("file://other-host/srv/repo", str(tmp_path / "missing"), "ftp://host/repo"):
        with pytest.raises(GenRepoError) as refused:
            parse_destination(bad)
        assert refused.value.exit_code == 2 and refused.value.problems[0].file == bad


def test_the_gate_refuses_a_breaking_change_and_diff_agrees(example_repository: Path,
                                                           variant_example_repository: Path, tmp_path: Path) -> None:
    dest = tmp_path / "shared"
    dest.mkdir()
    publish(example_repository, str(dest))
    before = _snapshot(dest)
    with pytest.raises(ReleaseRefused) as refused:
        publish(variant_example_repository, f"file://{dest}")
    assert refused.value.exit_code == 1 and _snapshot(dest) == before  # nothing uploaded, nothing staged
    breaking = {c.model for c in diff_locations(f"file://{dest}", str(variant_example_repository)).changes
                if c.breaking}
    assert breaking == {"text"} and any("breaking" in p.message for p in refused.value.problems)
    report = publish(variant_example_repository, str(dest), allow_breaking=True, allowed_by="ci")
    assert next(m for m in report.models if m.name == "text").release["allowed_by"] == "ci"  # type: ignore[index]


def test_a_staged_file_damaged_before_the_read_back_is_caught_and_nothing_becomes_visible(
        example_repository: Path, tmp_path: Path) -> None:
    dest = tmp_path / "shared"
    dest.mkdir()
    publish(example_repository, str(dest))
    before = _snapshot(dest)

    def damage(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
        target = next(p for p in paths if p.endswith("/model.py"))
        assert f"/{STAGING_PREFIX}" in target  # uploaded under the hidden name, not as a version folder
        data = Path(target).read_bytes()
        Path(target).write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))

    with pytest.raises(PublishError) as refused:
        publish(example_repository, str(dest), force=True, after_upload=damage)
    assert refused.value.exit_code == 1 and any("modified: sha256" in p.message for p in refused.value.problems)
    assert _snapshot(dest) == before  # staging removed, reservation released, configs and lock as they were


def test_a_symlink_planted_in_the_destination_is_refused_and_never_followed(example_repository: Path,
                                                                           tmp_path: Path) -> None:
    dest, outside = tmp_path / "shared", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    publish(example_repository, str(dest))
    (dest / "mlp" / "2").symlink_to(outside, target_is_directory=True)  # where version 2 would go
    before = _snapshot(dest)
    with pytest.raises(GenRepoError) as refused:
        publish(example_repository, str(dest), force=True)
    assert refused.value.exit_code == 2
    assert [p.file for p in refused.value.problems] == [str(dest / "mlp" / "2")]
    assert "symlink" in refused.value.problems[0].message
    assert _snapshot(dest) == before and list(outside.iterdir()) == []


def test_a_planted_symlink_on_the_way_is_never_written_through(tmp_path: Path) -> None:
    """Even past the listing (planted meanwhile), LocalStore writes nothing through a symlinked folder."""
    dest, outside = tmp_path / "shared", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "mlp").symlink_to(outside, target_is_directory=True)
    store = LocalStore(str(dest))
    for write in (lambda: store.pipe_file(f"{dest}/mlp/config.pbtxt", b"x"),
                  lambda: store.open(f"{dest}/mlp/.s/1/model.py").close(),
                  lambda: store.cat_file(f"{dest}/mlp/config.pbtxt")):
        with pytest.raises(GenRepoError) as refused:
            write()
        assert "symlink" in refused.value.problems[0].message
    assert list(outside.iterdir()) == []


def test_the_lock_file_refuses_a_second_publisher_and_an_expired_one_is_taken_over(tmp_path: Path) -> None:
    dest = tmp_path / "shared"
    dest.mkdir()
    target = parse_destination(str(dest))
    store = LocalStore(target.path)
    with PublishLock(store, target, "alice@a"):
        with pytest.raises(PublishLocked) as refused, PublishLock(store, target, "bob@b"):
            pass
        assert "alice@a" in refused.value.problems[0].message
    assert not (dest / LOCK_OBJECT).exists()
    stale = PublishLock(store, target, "dead@c", ttl_s=1)
    stale.acquire()  # never released: its publisher died
    time.sleep(1.1)
    with PublishLock(store, target, "bob@b") as lock:
        assert json.loads((dest / LOCK_OBJECT).read_text())["token"] == lock.token
    assert not [p.name for p in dest.iterdir()]  # taken over, released; nothing left beside it


_KILLED_PUBLISHER = textwrap.dedent("""
    import sys, time
    import generator.repository.publish as publishing

    real = publishing.upload_file
    sent = []

    def slow_upload(*args, **kwargs):
        real(*args, **kwargs)
        sent.append(1)
        if len(sent) == 2:  # mid-upload: some files written, others not
            open(sys.argv[3], "w").close()
            time.sleep(600)

    publishing.upload_file = slow_upload
    publishing.publish(sys.argv[1], sys.argv[2], force=True)
""")


@pytest.mark.slow
def test_a_publish_killed_mid_upload_leaves_the_served_version_untouched(warmup_example_repository: Path,
                                                                         tmp_path: Path) -> None:
    """SIGKILL mid-upload: configs and lock file byte-identical, no version folder 2 anywhere (the partial version
    sits only under its hidden staging name, which Triton skips); the next publish goes on."""
    dest = tmp_path / "shared"
    dest.mkdir()
    publish(warmup_example_repository, str(dest))
    served = {rel: data for rel, data in _snapshot(dest).items() if "/" not in rel or rel.endswith("config.pbtxt")}
    flag = tmp_path / "uploading"
    process = subprocess.Popen([sys.executable, "-c", _KILLED_PUBLISHER, str(warmup_example_repository), str(dest),
                                str(flag)], cwd=_REPO_ROOT)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert process.poll() is None and time.monotonic() < deadline, "the publisher did not reach its upload"
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    after = _snapshot(dest)
    assert {rel: data for rel, data in after.items() if rel in served} == served
    assert _versions(dest, "mlp") == ["1"] and _versions(dest, "text") == ["1"]
    assert sorted(p.name for p in (dest / "mlp" / "warmup").iterdir()) == ["1"]
    staged = [rel for rel in after if f"/{STAGING_PREFIX}" in rel]
    assert staged and all(rel.split("/")[1].startswith(STAGING_PREFIX) for rel in staged)
    report = publish(warmup_example_repository, str(dest), force=True)  # the dead publisher's lock was not held
    assert {m.version for m in report.models} == {3}  # 2 stays reserved by the dead publisher until its lease ends
    assert (dest / "mlp" / "3" / "model.py").is_file() and _served(dest, "mlp") == 3


@pytest.mark.slow
def test_cli_publish_verify_diff_report_on_a_folder(example_repository: Path, tmp_path: Path) -> None:
    dest = tmp_path / "shared"
    dest.mkdir()
    url = f"file://{dest}"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([gen_repo_script(), *args], capture_output=True, text=True, timeout=180)

    done = run("publish", str(example_repository), url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"published to {url}; serve it with tritonserver --model-repository={dest}"
    done = run("verify", url, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    (dest / "mlp" / "1" / "model.py").write_text("tampered")
    assert run("verify", url).returncode == 1
    assert run("diff", url, str(example_repository)).returncode == 0
    done = run("report", url, "-o", str(tmp_path / "report.html"))
    assert done.returncode == 0, done.stderr
    assert "model.py" in (tmp_path / "report.html").read_text()  # the tampered file is named on the page


@pytest.mark.slow
@pytest.mark.triton
def test_triton_serves_the_folder_and_rolls_to_version_2(warmup_example_repository: Path, triton_server_factory,  # type: ignore[no-untyped-def]
                                                         tmp_path: Path) -> None:
    """A real Triton server polling the published folder serves version 1 (smoke passes), then version 2 after a
    second publish, with version 1's bytecode (written by the Python backend) not counted as damage; `smoke --launch
    --repo file://...` serves the folder itself."""
    import tritonclient.grpc as grpcclient

    from generator.serving.smoke import run_smoke

    dest = tmp_path / "shared"
    dest.mkdir()
    report = publish(warmup_example_repository, str(dest))
    server = triton_server_factory(report.triton_url, model_control="poll", extra_args=["--repository-poll-secs=1"],
                                   ready_timeout=180)
    smoke = run_smoke(server.grpc_url, repo_dir=dest)
    assert smoke.exit_code == 0, smoke.to_dict()
    client = grpcclient.InferenceServerClient(server.grpc_url)

    def ready() -> set[str]:
        return {e.version for e in client.get_model_repository_index().models if e.name == "mlp"
                and e.state == "READY"}

    assert ready() == {"1"}
    assert list((dest / "mlp" / "1").rglob("*.pyc"))  # the Python backend wrote bytecode beside model.py
    assert {m.status for m in publish(warmup_example_repository, str(dest)).models} == {"unchanged"}
    second = publish(warmup_example_repository, str(dest), force=True)
    assert {(m.version, m.damaged_versions) for m in second.models} == {(2, ())}
    assert _versions(dest, "mlp") == ["1", "2"]  # version 1 kept for servers still on it
    deadline = time.monotonic() + 120
    while ready() != {"2"}:
        assert time.monotonic() < deadline, client.get_model_repository_index()
        time.sleep(0.5)
    smoke = run_smoke(server.grpc_url, repo_dir=dest)
    assert smoke.exit_code == 0, smoke.to_dict()
    assert verify_repository(dest) == []
    done = subprocess.run([gen_repo_script(), "smoke", "--launch", "--repo", f"file://{dest}", "--burst", "8"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


#: Serves the folder given with the launcher every gen-repo command uses (which sets PYTHONDONTWRITEBYTECODE=1 and
#: PYTHONPYCACHEPREFIX here) until every model is ready, then stops it.
_SERVE_ONCE = """
import sys
from pathlib import Path
from generator.serving.server import launch
with launch(Path(sys.argv[1]), ready_timeout=180, env={"PYTHONPYCACHEPREFIX": sys.argv[2]}) as server:
    print("served", flush=True)
"""


@pytest.mark.triton
@pytest.mark.slow
def test_serving_a_published_folder_writes_bytecode_and_a_read_only_mount_keeps_it_out(
        example_repository: Path, tmp_path: Path) -> None:
    """docs/release-pipelines.md, "Triton's bytecode": what serving a shared folder writes, what verify says of it,
    and the remedy that keeps the folder as published."""
    from tests.requirements import require

    require("root")  # a read-only bind mount in a private mount namespace
    require("tritonserver")
    dest = tmp_path / "shared"
    dest.mkdir()
    publish(example_repository, str(dest))
    published = _snapshot(dest)
    serve = [sys.executable, "-c", _SERVE_ONCE, str(dest), str(tmp_path / "pycache-prefix")]
    done = subprocess.run(serve, capture_output=True, text=True, timeout=300, cwd=_REPO_ROOT)
    assert done.returncode == 0 and "served" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    # The python backend's stub writes bytecode beside each model.py: neither PYTHONDONTWRITEBYTECODE nor
    # PYTHONPYCACHEPREFIX in its environment keeps it out.
    tag = sys.implementation.cache_tag  # the stub's Python is this one (nvidia-pytriton runs it from this venv)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.pyc")) == [
        f"mlp/1/__pycache__/model.{tag}.pyc", f"text/1/__pycache__/model.{tag}.pyc"]
    assert not (tmp_path / "pycache-prefix").exists()
    verify = subprocess.run([gen_repo_script(), "verify", str(dest)], capture_output=True, text=True, timeout=120)
    assert (verify.returncode, verify.stdout) == (0, f"ok: {len(published) - 1} artifact(s) match gen-repo.lock.json\n")
    # Bytecode of another Python (NVIDIA's Triton container runs its own) cannot be checked here: refused.
    pyc = dest / "mlp" / "1" / "__pycache__" / f"model.{tag}.pyc"
    pyc.rename(pyc.with_name("model.cpython-399.pyc"))
    verify = subprocess.run([gen_repo_script(), "verify", str(dest)], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 1 and "mlp/1/__pycache__/model.cpython-399.pyc" in verify.stdout, verify.stdout
    assert "bytecode for cpython-399" in verify.stdout, verify.stdout

    # The remedy: remove it, and serve the folder through a read-only mount. Nothing is written; every model loads.
    for folder in dest.rglob("__pycache__"):
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    assert _snapshot(dest) == published
    read_only = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && exec "${@:2}"'
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", read_only, "-", str(dest),
                           *serve], capture_output=True, text=True, timeout=300, cwd=_REPO_ROOT)
    assert done.returncode == 0 and "served" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert _snapshot(dest) == published
    verify = subprocess.run([gen_repo_script(), "verify", str(dest)], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout
