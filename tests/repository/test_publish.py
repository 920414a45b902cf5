"""Publishing (issues 8, 21, 26, 38): every test that meets a destination runs on each of the ``publish_store``
fixture's three, a real S3 server (moto) and a real GCS emulator on loopback and a folder, and the real Triton server
reads the published repository from each. The few cases only one kind of destination has are marked where they are.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.repository.bucket_reads import STAGING_PREFIX
from generator.repository.contract_sources import diff_locations
from generator.repository.local_store import LocalStore
from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.publish import (
    LOCK_OBJECT,
    PublishError,
    PublishLock,
    PublishLocked,
    ReleaseRefused,
    publish,
    published_config,
)
from generator.repository.storage_urls import parse_destination
from generator.repository.verify import verify_location
from tests.bucket_states import sync, with_version_folder
from tests.object_stores import FolderStore, Store
from tests.process_helpers import gen_repo_script

_REPO_ROOT = Path(__file__).resolve().parents[2]
#: Names publish gives what it leaves only while it runs: the publishers' lock, reservations, a folder's staging.
_IN_FLIGHT = (".gen-repo-publish", STAGING_PREFIX)


def test_published_config_pins_the_version() -> None:
    text = 'name: "m"\nbackend: "python"\nmax_batch_size: 8\nversion_policy { latest { num_versions: 1 } }\n'
    out = published_config(text, 7)
    assert "specific" in out and "versions: 7" in out and "latest" not in out


def test_published_config_renames_the_versions_warmup_data() -> None:
    text = ('name: "m"\nbackend: "python"\nmax_batch_size: 8\nmodel_warmup { name: "w" batch_size: 1 inputs { '
            'key: "x" value { data_type: TYPE_FP32 dims: 4 input_data_file: "1/x" } } inputs { key: "y" value { '
            'data_type: TYPE_FP32 dims: 4 input_data_file: "mine/y" } } }\n')
    out = published_config(text, 7, local_version=1)
    assert 'input_data_file: "7/x"' in out and 'input_data_file: "mine/y"' in out  # a user's own file stays


def _flip_last_byte(fs, path: str) -> None:  # type: ignore[no-untyped-def]
    data = fs.cat_file(path)
    fs.pipe_file(path, data[:-1] + bytes([data[-1] ^ 0xFF]))  # same size, one byte changed


def _in_flight(store: Store, prefix: str) -> list[str]:
    """What a finished publish must not leave behind (the lock, a reservation, a staging folder)."""
    return [key for key in store.snapshot(prefix) if any(name in key for name in _IN_FLIGHT)]


def _served(store: Store, prefix: str, model: str) -> int:
    config = store.read(prefix, f"{model}/config.pbtxt").decode()
    return int(config.split("versions:")[1].split()[0])


def _versions(store: Store, prefix: str, model: str) -> list[str]:
    """The model's folders Triton reads as versions (not warmup, not a hidden staging folder)."""
    return [name for name in store.names(prefix, model) if name[:1].isdigit()]


# --------------------------------------------------------------------------------------------------------------------
# The publish cycle, on each store
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_publish_verify_and_republish_unchanged(publish_store: Store, example_repository: Path) -> None:
    store = publish_store
    url = store.url("plain")
    first = publish(example_repository, url)
    assert {m.name: (m.status, m.version) for m in first.models} == {"mlp": ("published", 1), "text": ("published", 1)}
    assert first.triton_url == store.triton_url("plain")
    assert verify_location(url).problems == []
    objects = store.snapshot("plain")
    assert store.key("plain", LOCK_FILE_NAME) in objects
    assert _in_flight(store, "plain") == []  # the publishers' lock released
    config = objects[store.key("plain", "mlp/config.pbtxt")].decode()
    assert "specific" in config and "versions: 1" in config

    again = publish(example_repository, url)
    assert {m.status for m in again.models} == {"unchanged"}
    assert store.snapshot("plain") == objects

    # A folder another tool made: the next version is numbered past it, left alone, and verify names it alone.
    store.put("plain", "mlp/7/notes.txt", b"not gen-repo's")
    forced = publish(example_repository, url, force=True)
    assert {m.name: (m.version, m.foreign) for m in forced.models} == {"mlp": (8, ("7",)), "text": (2, ())}
    assert store.read("plain", "mlp/7/notes.txt") == b"not gen-repo's"
    assert [p.file for p in verify_location(url).problems] == [f"{url}/mlp/7/notes.txt"]

    # A damaged object in the store is found by verify, named as the object.
    store.put("plain", "text/1/model.onnx", b"not onnx")
    problems = verify_location(url).problems
    assert sorted(p.file for p in problems) == [f"{url}/mlp/7/notes.txt", f"{url}/text/1/model.onnx"]


@pytest.mark.slow
def test_publish_trusts_the_objects_not_the_remote_lock(publish_store: Store, example_repository: Path) -> None:
    """A served version whose objects were changed is never 'unchanged': publish refuses, naming each object, and
    changes nothing; --force publishes a new version, and the damaged one is removed rather than kept as the
    fallback that retention preserves (an intact one is kept)."""
    store = publish_store
    url = store.url("tampered")
    publish(example_repository, url)
    _flip_last_byte(store.fs(), store.key("tampered", "text/1/model.onnx"))
    store.put("tampered", "mlp/1/__pycache__/model.cpython-311.pyc", b"planted")
    before = store.snapshot("tampered")

    with pytest.raises(PublishError) as caught:
        publish(example_repository, url)
    problems = {p.file: p.message for p in caught.value.problems}
    assert problems[f"{url}/text/1/model.onnx"].startswith("modified: sha256"), problems
    verified = {p.file: p.message for p in verify_location(url).problems}
    assert problems[f"{url}/mlp/1/__pycache__/model.cpython-311.pyc"].startswith("refused: not cpython"), problems
    assert {f: m for f, m in problems.items() if f != url} == verified  # publish says what verify says
    assert "gen-repo verify" in problems[url] and "--force" in problems[url]
    assert store.snapshot("tampered") == before  # nothing changed

    store.remove("tampered", "mlp/1/__pycache__/model.cpython-311.pyc")
    report = publish(example_repository, url, force=True, keep_versions=2)
    outcome = {m.name: (m.version, m.removed_versions, m.damaged_versions) for m in report.models}
    assert outcome == {"mlp": (2, (), ()), "text": (2, (1,), (1,))}
    assert store.exists("tampered", "mlp/1/model.onnx")  # the intact fallback stays
    assert not store.exists("tampered", "text/1/model.onnx")
    assert verify_location(url).problems == []


@pytest.mark.slow
def test_corrupted_upload_is_detected_and_nothing_becomes_visible(publish_store: Store,
                                                                  example_repository: Path) -> None:
    store = publish_store
    url = store.url("corrupt")
    publish(example_repository, url)
    before = store.snapshot("corrupt")

    def damage(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
        target = next(p for p in paths if p.endswith("model.onnx"))
        # A bucket has no rename: version 2 is uploaded as itself, unserved until its config switch. A folder's is
        # uploaded under a hidden staging name and renamed into place.
        assert (f"/{STAGING_PREFIX}" if store.kind == "local" else "/2/") in target, target
        _flip_last_byte(fs, target)

    with pytest.raises(PublishError) as caught:
        publish(example_repository, url, force=True, after_upload=damage)
    assert caught.value.exit_code == 1
    messages = [p.message for p in caught.value.problems]
    assert any(m.startswith("uploaded object modified: sha256") for m in messages), messages
    assert store.snapshot("corrupt") == before  # no version 2, configs, lock untouched; lock object gone


@pytest.mark.slow
def test_concurrent_publisher_is_refused(publish_store: Store, example_repository: Path) -> None:
    """A publisher (or a lock) meeting a held publishers' lock is refused, naming its holder; a released lock leaves
    nothing; an expired one (its publisher died) is taken over, by a publish and by a lock."""
    store = publish_store
    url = store.url("contended")
    target = store.target("contended")
    with PublishLock(store.fs(), target, "first-publisher"):
        with pytest.raises(PublishLocked) as caught:
            publish(example_repository, url, owner="second-publisher")
        assert "first-publisher" in caught.value.problems[0].message
        with pytest.raises(PublishLocked) as refused, PublishLock(store.fs(), target, "third-publisher"):
            pass
        assert "first-publisher" in refused.value.problems[0].message
    assert not store.exists("contended", LOCK_OBJECT)
    PublishLock(store.fs(), target, "dead-publisher", ttl_s=-1.0).acquire()  # never released
    report = publish(example_repository, url)
    assert {m.status for m in report.models} == {"published"}
    PublishLock(store.fs(), target, "dead-publisher", ttl_s=-1.0).acquire()
    with PublishLock(store.fs(), target, "next-publisher") as lock:
        assert json.loads(store.read("contended", LOCK_OBJECT))["token"] == lock.token
    assert _in_flight(store, "contended") == []  # taken over, released; nothing left beside it


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
def test_a_publish_killed_mid_upload_leaves_the_served_version_untouched(publish_store: Store,
                                                                         warmup_example_repository: Path,
                                                                         tmp_path: Path) -> None:
    """SIGKILL mid-upload: configs and lock file byte-identical, version 1 still served; the next publish goes on
    (the dead publisher's lock was not held) and takes version 3, 2 staying reserved until its lease ends."""
    store = publish_store
    url = store.url("killed")
    publish(warmup_example_repository, url)
    root = store.key("killed")
    served = {key: data for key, data in store.snapshot("killed").items()
              if "/" not in key[len(root) + 1:] or key.endswith("config.pbtxt")}
    flag = tmp_path / "uploading"
    process = subprocess.Popen([sys.executable, "-c", _KILLED_PUBLISHER, str(warmup_example_repository), url,
                                str(flag)], cwd=_REPO_ROOT)  # the store's environment is the test's
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert process.poll() is None and time.monotonic() < deadline, "the publisher did not reach its upload"
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    after = store.snapshot("killed")
    assert {key: data for key, data in after.items() if key in served} == served
    assert _served(store, "killed", "mlp") == _served(store, "killed", "text") == 1
    if store.kind == "local":  # only a folder stages: no version folder 2 anywhere, the partial one hidden
        assert _versions(store, "killed", "mlp") == ["1"] and _versions(store, "killed", "text") == ["1"]
        assert store.names("killed", "mlp/warmup") == ["1"]
        staged = [key[len(root) + 1:] for key in after if f"/{STAGING_PREFIX}" in key]
        assert staged and all(rel.split("/")[1].startswith(STAGING_PREFIX) for rel in staged)
    report = publish(warmup_example_repository, url, force=True)
    assert {m.version for m in report.models} == {3}
    assert store.exists("killed", "mlp/3/model.py") and _served(store, "killed", "mlp") == 3


@pytest.mark.slow
@pytest.mark.triton
def test_triton_serves_from_the_store_and_rolls_to_version_2(
    publish_store: Store, warmup_example_repository: Path, triton_server_factory, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """Triton polls the store: version 2 stays invisible until its config switch, then loads (warming up from
    its own warmup/2/ data); version 1 keeps its files; `gen-repo smoke --url --repo URL` checks the server; a
    second publisher while version 2 uploads is not refused. On a folder, version 1's bytecode (written by the Python
    backend) is not counted as damage."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    from generator.serving.smoke import run_smoke

    store = publish_store
    url = store.url("served")
    report = publish(warmup_example_repository, url)
    assert report.triton_url == store.triton_url("served")
    server = triton_server_factory(report.triton_url, env=store.env, model_control="poll",
                                   extra_args=["--repository-poll-secs=1"], ready_timeout=180)
    smoke = run_smoke(server.grpc_url, repo_dir=store.folder("served", tmp_path / "v1"))
    assert smoke.exit_code == 0, smoke.to_dict()

    client = grpcclient.InferenceServerClient(server.grpc_url)

    def versions(model: str) -> dict[str, str]:
        return {e.version: e.state for e in client.get_model_repository_index().models if e.name == model}

    def infer_v1() -> None:
        stored = warmup_example_repository / "mlp" / "1" / "gen_repo"
        inputs = np.load(stored / "reference.npz")
        case = json.loads((stored / "reference.json").read_text())["cases"][0]
        request = []
        for name in case["inputs"]:
            array = inputs[f"{case['name']}/input/{name}"]
            tensor = grpcclient.InferInput(name, list(array.shape), "FP32")
            tensor.set_data_from_numpy(array)
            request.append(tensor)
        result = client.infer("mlp", request, model_version="1", client_timeout=30)
        for name in case["outputs"]:
            np.testing.assert_allclose(result.as_numpy(name), inputs[f"{case['name']}/output/{name}"], rtol=1e-4,
                                       atol=1e-5)

    assert versions("mlp") == {"1": "READY"}
    if store.kind == "local":  # Triton imports a folder's model.py in place (a bucket's from a local copy)
        assert [key for key in store.snapshot("served") if "/mlp/1/" in key and key.endswith(".pyc")]
    uploaded = threading.Event()
    proceed = threading.Event()
    outcome: dict[str, object] = {}

    def hold(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
        outcome["uploaded"] = all(fs.exists(p) for p in paths)
        uploaded.set()
        assert proceed.wait(120)

    def second_publish() -> None:
        try:
            outcome["report"] = publish(warmup_example_repository, url, force=True, after_upload=hold)
        except BaseException as error:  # reported to the test thread
            outcome["error"] = error

    thread = threading.Thread(target=second_publish)
    thread.start()
    try:
        assert uploaded.wait(120), outcome
        # Version 2 is completely in the store but not yet visible: the polling server stays on version 1.
        assert outcome["uploaded"] is True
        for _ in range(6):  # several poll periods
            assert versions("mlp") == {"1": "READY"}
            infer_v1()
            time.sleep(0.5)
        # A second publisher meanwhile is not refused: the publishers' lock is held only to reserve and to switch.
        assert {m.status for m in publish(warmup_example_repository, url).models} == {"unchanged"}
    finally:
        proceed.set()
        thread.join(180)
    assert "error" not in outcome, outcome.get("error")
    assert {(m.version, m.damaged_versions) for m in outcome["report"].models} == {(2, ())}  # type: ignore[attr-defined]

    deadline = time.monotonic() + 120
    while versions("mlp").get("2") != "READY" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert versions("mlp").get("2") == "READY", versions("mlp")
    assert verify_location(url).problems == []
    done = subprocess.run([gen_repo_script(), "smoke", "--url", server.grpc_url, "--repo", url, "--burst", "8"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Retention (2 versions) keeps version 1 in the store for servers still on it.
    assert _versions(store, "served", "mlp") == ["1", "2"]
    assert store.exists("served", "mlp/1/model.onnx")
    assert store.exists("served", "mlp/warmup/1/input_x")
    config = store.read("served", "mlp/config.pbtxt").decode()
    assert 'input_data_file: "2/input_x"' in config, config


@pytest.mark.slow
def test_cli_publish_and_retention(publish_store: Store, warmup_example_repository: Path) -> None:
    """Three publishes keep the newest two versions, their folders and their warmup data; configs name theirs."""
    store = publish_store
    url = store.url("cli")
    for expected in (1, 2, 3):
        done = subprocess.run([gen_repo_script(), "publish", str(warmup_example_repository), url, "--force",
                               "--keep-versions", "2", "--json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert {m["version"] for m in json.loads(done.stdout)["models"]} == {expected}
    assert store.names("cli", "mlp") == ["2", "3", "config.pbtxt", "warmup"]
    assert store.names("cli", "mlp/warmup") == ["2", "3"]
    local = (warmup_example_repository / "mlp" / "warmup" / "1" / "input_x").read_bytes()
    assert store.read("cli", "mlp/warmup/3/input_x") == local
    assert 'input_data_file: "3/input_x"' in store.read("cli", "mlp/config.pbtxt").decode()
    assert verify_location(url).problems == []
    assert _in_flight(store, "cli") == []
    # Text output: the URL in the form it was given, for the user and for tritonserver.
    done = subprocess.run([gen_repo_script(), "publish", str(warmup_example_repository), url], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"published to {url}; serve it with tritonserver --model-repository={store.triton_url('cli')}")


@pytest.mark.slow
def test_cli_verify_diff_and_report_read_the_published_store(publish_store: Store, example_repository: Path,
                                                            tmp_path: Path) -> None:
    """`gen-repo verify`, `diff` and `report` take the store's URL: verify passes, then names a tampered file (exit
    1); diff against the local repository finds nothing breaking; the report page names the tampered file."""
    store = publish_store
    url = store.url("read")
    publish(example_repository, url)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([gen_repo_script(), *args], capture_output=True, text=True, timeout=180)

    done = run("verify", url, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    store.put("read", "mlp/1/model.py", b"tampered")
    done = run("verify", url)
    assert done.returncode == 1 and "mlp/1/model.py" in done.stdout, done.stdout + done.stderr
    assert run("diff", url, str(example_repository)).returncode == 0
    done = run("report", url, "-o", str(tmp_path / "report.html"))
    assert done.returncode == 0, done.stderr
    assert "model.py" in (tmp_path / "report.html").read_text()  # the tampered file is named on the page


@pytest.mark.slow
@pytest.mark.triton
def test_cli_smoke_launches_triton_on_the_store(publish_store: Store, example_repository: Path,
                                                tmp_path: Path) -> None:
    """`gen-repo smoke --launch --repo URL`: tritonserver loads the URL, the checks read the published files."""
    store = publish_store
    url = store.url("smoke")
    publish(example_repository, url)
    report_file = tmp_path / "smoke.json"
    done = subprocess.run([gen_repo_script(), "smoke", "--launch", "--repo", url, "--burst", "16", "--json",
                           str(report_file)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"serving {store.triton_url('smoke')}" in done.stderr  # the server was started on the store itself
    report = json.loads(report_file.read_text())
    checks = {(r["model"], r["check"]): r["status"] for r in report["results"]}
    assert checks[("mlp", "reference")] == checks[("text", "reference")] == "passed"


# --------------------------------------------------------------------------------------------------------------------
# The lock publish relies on (issue 21)
# --------------------------------------------------------------------------------------------------------------------
def _with_lock(source: Path, destination: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    shutil.copytree(source, destination)
    lock = json.loads((destination / LOCK_FILE_NAME).read_text())
    edit(lock)
    (destination / LOCK_FILE_NAME).write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return destination


@pytest.mark.slow
def test_publish_accepts_the_locks_verify_accepts(publish_store: Store, example_repository: Path,
                                                  tmp_path: Path) -> None:
    """A lock entry without ``version`` is valid (verify accepts it): publish takes the version from the model's one
    version folder."""
    repo = _with_lock(example_repository, tmp_path / "repo", lambda lock: lock["models"]["mlp"].pop("version"))
    done = subprocess.run([gen_repo_script(), "verify", str(repo)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    report = publish(repo, publish_store.url("versionless"))
    assert {m.name: (m.status, m.version) for m in report.models} == {"mlp": ("published", 1), "text": ("published", 1)}
    assert verify_location(publish_store.url("versionless")).problems == []


@pytest.mark.parametrize(("edit", "pointer", "verify_code"), [
    (lambda lock: lock["models"]["mlp"].update(version="1"), "/models/mlp/version", 1),
    (lambda lock: lock["models"]["mlp"].update(version=3), "/models/mlp/version", 0),  # publish: one folder, 1
    (lambda lock: lock.update(models=["mlp", "text"]), "/models", 1),
    (lambda lock: lock["artifacts"].pop("mlp/config.pbtxt"), "/models/mlp", 1),  # the config is then unexpected
])
def test_publish_and_verify_refuse_the_same_invalid_locks(example_repository: Path, tmp_path: Path, edit,  # type: ignore[no-untyped-def]
                                                         pointer: str, verify_code: int) -> None:
    """Locks publish cannot rely on: publish refuses them located (exit 2), before any storage is contacted (the
    URL's endpoint is not even listening); verify reports those that are not valid locks (a lock whose ``version``
    names another folder than its artifacts' is valid, but not what a build writes)."""
    repo = _with_lock(example_repository, tmp_path / "repo", edit)
    lock_file = str(repo / LOCK_FILE_NAME)
    verified = subprocess.run([gen_repo_script(), "verify", str(repo)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == verify_code, verified.stdout + verified.stderr
    published = subprocess.run([gen_repo_script(), "publish", str(repo), "s3://127.0.0.1:9/bucket/x"],
                               capture_output=True, text=True, timeout=60)
    assert published.returncode == 2, published.stdout + published.stderr
    assert "Traceback" not in published.stderr
    assert f"error: {lock_file}: {pointer}: " in published.stderr or f"error: {repo}" in published.stderr, (
        published.stderr)


def test_a_lock_whose_model_has_two_versions_is_not_published(example_repository: Path, tmp_path: Path) -> None:
    """Valid for verify (Triton serves both folders), but a publish uploads one version per model: refused, located."""
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    shutil.copytree(repo / "mlp" / "1", repo / "mlp" / "2")
    lock = json.loads((repo / LOCK_FILE_NAME).read_text())
    lock["models"]["mlp"].pop("version")
    for rel, meta in list(lock["artifacts"].items()):
        if rel.startswith("mlp/1/"):
            lock["artifacts"]["mlp/2/" + rel[len("mlp/1/"):]] = meta
    (repo / LOCK_FILE_NAME).write_text(json.dumps(lock))
    with pytest.raises(GenRepoError) as caught:
        publish(repo, "s3://127.0.0.1:9/bucket/x")
    assert [(p.pointer, p.message) for p in caught.value.problems] == [
        ("/models/mlp", "artifacts in version folders [1, 2] (with warmup/<version>/): a publish uploads one version "
                        "per model")]


# --------------------------------------------------------------------------------------------------------------------
# The release gate: a version that breaks clients of the served one is not published by accident
# --------------------------------------------------------------------------------------------------------------------
def _without_model(source: Path, destination: Path, model: str) -> Path:
    """A copy of a built repository without ``model`` (its folder and lock entries): still a valid repository."""
    shutil.copytree(source, destination)
    shutil.rmtree(destination / model)
    lock = json.loads((destination / LOCK_FILE_NAME).read_text())
    lock["models"].pop(model)
    lock["artifacts"] = {rel: meta for rel, meta in lock["artifacts"].items() if not rel.startswith(f"{model}/")}
    (destination / LOCK_FILE_NAME).write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return destination


@pytest.mark.slow
def test_publish_refuses_a_breaking_version_unless_allowed(publish_store: Store, example_repository: Path,
                                                           variant_example_repository: Path) -> None:
    """The example models are served; their rebuild breaks text's clients (a removed input, a dtype, a narrowed
    range and domain, a lower max batch). Publish refuses it (exit 1, every breaking change listed, nothing
    uploaded) as `gen-repo diff` calls it breaking; --allow-breaking publishes it and records the changes and who
    allowed them in the lock file."""
    store = publish_store
    url = store.url("gated")
    publish(example_repository, url)
    before = store.snapshot("gated")
    assert {c.model for c in diff_locations(url, str(variant_example_repository)).changes if c.breaking} == {"text"}

    refused = subprocess.run([gen_repo_script(), "publish", str(variant_example_repository), url],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    listed = sorted(line.split(": breaking (")[1].split(")")[0] for line in refused.stderr.splitlines()
                    if line.startswith(f"error: {url}/text: /: breaking ("))
    assert listed == ["data_type", "input_removed", "max_batch_size_lowered", "range_narrowed",
                      "value_domain_narrowed"]
    assert f"{url}/mlp: /: breaking" not in refused.stderr  # mlp's changes are compatible
    assert store.snapshot("gated") == before  # nothing uploaded, the publishers' lock released

    allowed = subprocess.run([gen_repo_script(), "publish", str(variant_example_repository), url, "--allow-breaking",
                              "--allowed-by", "release-manager", "--json"], capture_output=True, text=True,
                             timeout=120)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    models = {m["name"]: m for m in json.loads(allowed.stdout)["models"]}
    assert {name: m["version"] for name, m in models.items()} == {"mlp": 2, "text": 2}
    lock = json.loads(store.read("gated", LOCK_FILE_NAME))
    text, mlp = lock["models"]["text"]["release"], lock["models"]["mlp"]["release"]
    assert text == models["text"]["release"]
    assert (text["from_version"], text["allowed_by"]) == (1, "release-manager")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text["allowed_at"])
    assert [(c["kind"], c["classification"]) for c in text["changes"]].count(("input_removed", "breaking")) == 1
    assert "allowed_by" not in mlp and {c["classification"] for c in mlp["changes"]} == {"compatible"}
    assert verify_location(url).problems == []

    # Version 2 is served now: going back to the example models breaks its clients in turn (library call).
    with pytest.raises(ReleaseRefused) as caught:
        publish(example_repository, url)
    assert {p.file for p in caught.value.problems} == {f"{url}/mlp", f"{url}/text", url}


@pytest.mark.slow
def test_publish_of_compatible_changes_needs_no_flag(publish_store: Store, example_repository: Path,
                                                     variant_example_repository: Path, tmp_path: Path) -> None:
    """mlp's rebuild only adds an output and raises max_batch_size: published without --allow-breaking, the
    compatible changes recorded, and no one named as having allowed anything."""
    url = publish_store.url("compatible")
    publish(example_repository, url)
    report = publish(_without_model(variant_example_repository, tmp_path / "mlp-only", "text"), url)
    assert {m.name: (m.status, m.version) for m in report.models} == {"mlp": ("published", 2), "text": ("kept", 1)}
    release = {m.name: m.release for m in report.models}["mlp"]
    assert release is not None and "allowed_by" not in release
    assert [(c["kind"], c["classification"]) for c in release["changes"]] == [
        ("max_batch_size_raised", "compatible"), ("output_added", "compatible")]


@pytest.mark.slow
def test_a_served_setting_change_is_recorded_and_printed_as_diff_reports_it(
        publish_store: Store, example_repository: Path, tuned_example_repository) -> None:  # type: ignore[no-untyped-def]
    """text rebuilt with only its instance count and queue delay changed: publish records in the lock and prints the
    changes `gen-repo diff` reports, between the two repositories and between the store and the rebuild. Before, it
    recorded none and printed "0 breaking, 0 compatible change(s) against version 1"."""
    store = publish_store
    prefix = f"tuned-{store.kind}"
    url = store.url(prefix)
    publish(example_repository, url)
    diffed = diff_locations(url, str(tuned_example_repository.repo))
    assert diffed.changes == diff_locations(str(example_repository), str(tuned_example_repository.repo)).changes
    assert [(c.model, c.kind, c.breaking) for c in diffed.changes] == [
        ("text", "instance_group", False), ("text", "queue_delay", False)]
    done = subprocess.run([gen_repo_script(), "publish", str(tuned_example_repository.repo), url], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == ["mlp: unchanged (version 1)",
                                            "text: published (version 2); 0 breaking, 2 compatible change(s) against "
                                            "version 1"], done.stdout
    lock = json.loads(store.read(prefix, LOCK_FILE_NAME))
    assert lock["models"]["text"]["release"] == {"from_version": 1, "changes": [c.to_dict() for c in diffed.changes]}


# --------------------------------------------------------------------------------------------------------------------
# Hostile repositories and buckets: names, swapped files, what a bucket lacks, folders gen-repo did not make, sizes
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_version_folder_named_with_a_final_newline_is_refused_everywhere(publish_store: Store,
                                                                         example_repository: Path,
                                                                         tmp_path: Path) -> None:
    """Folder "1\\n" (its lock keys too): Python's int() and Triton's std::stoll read it as version 1, whose folder
    "1" does not exist. verify and lint report it (exit 1, naming it); publish refuses it located (exit 2) before the
    bucket is touched: the served version 1 stays served, nothing changes. Before, verify passed and publish
    uploaded 0 objects as version 2 and pointed the config at it."""
    store = publish_store
    repo = with_version_folder(example_repository, tmp_path / "repo", "text", "1\n")
    url = store.url("newline")
    publish(example_repository, url)
    before = store.snapshot("newline")

    verified = subprocess.run([gen_repo_script(), "verify", str(repo)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert "folder '1\\n' is not exactly a version folder" in verified.stdout, verified.stdout
    linted = subprocess.run([gen_repo_script(), "lint", str(repo)], capture_output=True, text=True, timeout=60)
    # Triton itself would load version 1 from the missing folder "1" (lint held that before too).
    assert linted.returncode == 1 and "[version-folder-prefix]" in linted.stdout, linted.stdout + linted.stderr
    published = subprocess.run([gen_repo_script(), "publish", str(repo), url], capture_output=True, text=True,
                               timeout=120)
    assert published.returncode == 2, published.stdout + published.stderr
    assert "Traceback" not in published.stderr
    assert f"error: {repo / LOCK_FILE_NAME}: /artifacts/text~11" in published.stderr, published.stderr
    assert store.snapshot("newline") == before
    assert verify_location(url).problems == []


class _SwapOnFirstListing:
    """A real store's filesystem that, when publish first lists the bucket (after its own verify of the local
    repository), runs ``swap``: another process changing a local file at that moment. Every call goes to the store."""

    def __init__(self, fs, swap) -> None:  # type: ignore[no-untyped-def]
        self._fs = fs
        self._swap = swap

    def find(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self._swap is not None:
            self._swap, swap = None, self._swap
            swap()
        return self._fs.find(*args, **kwargs)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._fs, name)


@pytest.mark.slow
def test_a_file_swapped_after_verify_is_refused_and_the_lock_is_derived_from_the_local_lock(
        publish_store: Store, example_repository: Path, tmp_path: Path) -> None:
    """A model file replaced (same size) after publish's verify: every uploaded byte is hashed against the local lock
    file, so the publish is refused naming the file (exit 2) and nothing becomes visible. Before, the swapped bytes
    were uploaded and the bucket's lock recorded their hash. Published properly, the bucket lock's entries for the
    new version are the local lock's."""
    store = publish_store
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    url = store.url("swapped")
    publish(repo, url)
    before = store.snapshot("swapped")
    model_file = repo / "text" / "1" / "model.onnx"
    original = model_file.read_bytes()

    def swap() -> None:
        model_file.write_bytes(original[:-1] + bytes([original[-1] ^ 0xFF]))

    with pytest.raises(GenRepoError) as caught:
        publish(repo, url, force=True, filesystem=_SwapOnFirstListing(store.fs(), swap))
    assert caught.value.exit_code == 2
    (problem,) = caught.value.problems
    assert (problem.file, problem.pointer) == (str(model_file), "/artifacts/text~11~1model.onnx")
    assert problem.message.startswith("changed since it was verified"), problem.message
    assert store.snapshot("swapped") == before

    model_file.write_bytes(original)
    report = publish(repo, url, force=True)
    assert {m.version for m in report.models} == {2}
    local = json.loads((repo / LOCK_FILE_NAME).read_text())["artifacts"]
    remote = json.loads(store.read("swapped", LOCK_FILE_NAME))["artifacts"]
    for key, meta in local.items():
        model, _, rest = key.partition("/")
        if rest.startswith("1/") and not rest.endswith("contract.json"):
            assert remote[f"{model}/2/{rest[2:]}"] == meta, key
    assert verify_location(url).problems == []


@pytest.mark.slow
@pytest.mark.parametrize(("lock_state", "pinned"), [("missing", False), ("no version", False), ("partial", False),
                                                    ("missing", True)])
def test_the_gate_compares_with_what_triton_serves_whatever_the_bucket_lock_lacks(
        publish_store: Store, example_repository: Path, variant_example_repository: Path, lock_state: str,
        pinned: bool) -> None:
    """A bucket synced without a lock (which Triton serves), or whose lock has no ``version`` or lacks a model:
    the served version is the one Triton serves (the config's policy, else the highest folder), so the breaking
    rebuild of text is refused as ``gen-repo diff`` calls it breaking, and nothing changes. Before, the gate was
    skipped, publish exited 0 and, without a lock, removed version 1."""
    store = publish_store
    prefix = f"gate-{lock_state.replace(' ', '-')}-{pinned}"
    sync(store, prefix, example_repository, pinned=pinned, lock_state=lock_state)
    url = store.url(prefix)
    before = store.snapshot(prefix)
    diffed = diff_locations(url, str(variant_example_repository))
    assert {c.model for c in diffed.changes if c.breaking} == {"text"}
    with pytest.raises(ReleaseRefused) as caught:
        publish(variant_example_repository, url)
    assert {p.file for p in caught.value.problems} == {f"{url}/text", url}
    assert store.snapshot(prefix) == before
    done = subprocess.run([gen_repo_script(), "diff", url, str(variant_example_repository)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr


@pytest.mark.slow
def test_retention_never_removes_a_folder_no_lock_lists(publish_store: Store, example_repository: Path) -> None:
    """A prefix synced without a lock, with folders of other tools ("7", " 5", "04"): publish leaves every one of
    them and version 1 alone and reports them (a version number above all of them); a later publish removes only
    the version the lock file lists. Before, retention removed every version folder but the new one."""
    store = publish_store
    foreign = {"mlp/7/notes.txt": b"someone else's", "mlp/ 5/x": b"x", "mlp/04/x": b"x", "mlp/warmup/9/x": b"x"}
    sync(store, "foreign", example_repository, pinned=False, lock_state="missing", foreign=foreign)
    url = store.url("foreign")
    said: list[str] = []
    report = publish(example_repository, url, keep_versions=1, progress=lambda model, text: said.append(text))
    mlp = {m.name: m for m in report.models}["mlp"]
    assert (mlp.version, mlp.removed_versions, mlp.foreign) == (10, (), (" 5", "04", "1", "7", "warmup/9"))
    assert any(text.startswith("left alone: ' 5', '04', '1', '7', 'warmup/9'") for text in said), said
    for key, data in foreign.items():
        assert store.read("foreign", key) == data
    assert store.exists("foreign", "mlp/1/model.py")

    again = {m.name: m for m in publish(example_repository, url, keep_versions=1, force=True).models}["mlp"]
    assert (again.version, again.removed_versions) == (11, (10,))
    assert not store.exists("foreign", "mlp/10/model.py")
    assert store.exists("foreign", "mlp/1/model.py")
    for key, data in foreign.items():
        assert store.read("foreign", key) == data


@pytest.mark.slow
def test_bucket_objects_over_their_limits_are_refused_not_parsed(publish_store: Store, example_repository: Path,
                                                                 variant_example_repository: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket's lock file over ``lock_bytes`` (a valid lock padded to 2 MiB, the limit set to 1 MiB), a served
    config over ``config_bytes``, a publishers' lock object over ``publish_object_bytes``: each refused naming the
    object and the limit, before it is parsed, nothing changed. Before, the lock file and the lock object were read
    whole and parsed."""
    store = publish_store
    url = store.url("limits")
    publish(example_repository, url)
    padded = json.loads(store.read("limits", LOCK_FILE_NAME))
    padded["tool_versions"]["padding"] = "x" * (2 << 20)
    store.put("limits", LOCK_FILE_NAME, json.dumps(padded).encode())
    before = store.snapshot("limits")

    monkeypatch.setenv("GEN_REPO_MAX_LOCK_BYTES", "1MiB")
    with pytest.raises(PublishError) as caught:
        publish(variant_example_repository, url)
    assert caught.value.problems[0].file == f"{url}/{LOCK_FILE_NAME}"
    assert "limit lock_bytes" in caught.value.problems[0].message
    monkeypatch.delenv("GEN_REPO_MAX_LOCK_BYTES")
    assert store.snapshot("limits") == before

    store.put("limits", "text/config.pbtxt", store.read("limits", "text/config.pbtxt") + b"#" * (5 << 20))  # 5 MiB

    with pytest.raises(ReleaseRefused) as refused:
        publish(variant_example_repository, url)
    messages = {p.file: p.message for p in refused.value.problems}
    assert "limit config_bytes" in messages[f"{url}/text"], messages
    store.put("limits", "text/config.pbtxt", before[store.key("limits", "text/config.pbtxt")])

    store.put("limits", LOCK_OBJECT, b"{" + b" " * (100 << 10) + b"}")
    with pytest.raises(GenRepoError) as locked:
        publish(variant_example_repository, url, allow_breaking=True)
    assert locked.value.problems[0].file == f"{url}/{LOCK_OBJECT}"
    assert "limit publish_object_bytes" in locked.value.problems[0].message
    store.remove("limits", LOCK_OBJECT)
    assert store.snapshot("limits") == before


@pytest.mark.slow
def test_the_publishers_lock_is_not_held_while_comparing_and_uploading(publish_store: Store,
                                                                       example_repository: Path) -> None:
    """While one publisher has compared contracts and uploaded its version (hook ``after_upload``), the lock object
    is absent and other publishers are not refused: one with nothing to publish says unchanged, one with a new
    version reserves another number and switches first. The first one then finds the served state changed and is
    refused, its upload removed: two publishers never both succeed on conflicting state. Before, the lock was held
    from before the gate to the end, and both others were refused."""
    store = publish_store
    url = store.url("overlap")
    publish(example_repository, url)
    seen: dict[str, object] = {}

    def meanwhile(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
        seen["lock object"] = store.exists("overlap", LOCK_OBJECT)
        seen["unchanged"] = {m.status for m in publish(example_repository, url).models}
        seen["other"] = {m.version for m in publish(example_repository, url, force=True).models}

    with pytest.raises(PublishError) as caught:
        publish(example_repository, url, force=True, after_upload=meanwhile)
    assert seen == {"lock object": False, "unchanged": {"unchanged"}, "other": {3}}
    assert {p.file for p in caught.value.problems} >= {f"{url}/{LOCK_FILE_NAME}", url}
    assert not store.exists("overlap", "mlp/2/model.py")  # the refused publisher's upload is gone
    assert _served(store, "overlap", "mlp") == 3
    assert _in_flight(store, "overlap") == []  # no lock, no reservation, no staging
    assert verify_location(url).problems == []


# --------------------------------------------------------------------------------------------------------------------
# Folders only: how a path names the destination, and symlinks (which buckets do not have)
# --------------------------------------------------------------------------------------------------------------------
def test_relative_paths_and_file_urls_name_the_same_folder(example_repository: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative destination is resolved from the current folder (and the destination itself through its
    symlinks); ``file://`` names the same folder, for publish and for verify; file:// naming another host, a missing
    folder and another scheme are refused (exit 2)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    report = publish(example_repository, "alias")
    assert report.triton_url == str(tmp_path / "real") and verify_location(str(tmp_path / "real")).problems == []
    assert parse_destination(f"file://{tmp_path}/real").path == str(tmp_path / "real")
    again = publish(example_repository, f"file://{tmp_path}/real")
    assert {m.status for m in again.models} == {"unchanged"}
    done = subprocess.run([gen_repo_script(), "verify", f"file://{tmp_path}/alias", "--json"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    for bad in ("file://other-host/srv/repo", str(tmp_path / "missing"), "ftp://host/repo"):
        with pytest.raises(GenRepoError) as refused:
            parse_destination(bad)
        assert refused.value.exit_code == 2 and refused.value.problems[0].file == bad


def test_a_symlink_planted_in_the_destination_is_refused_and_never_followed(example_repository: Path,
                                                                           tmp_path: Path) -> None:
    store, outside = FolderStore(tmp_path.resolve()), tmp_path / "outside"
    outside.mkdir()
    url = store.url("shared")
    publish(example_repository, url)
    (Path(url) / "mlp" / "2").symlink_to(outside, target_is_directory=True)  # where version 2 would go
    before = store.snapshot("shared")
    with pytest.raises(GenRepoError) as refused:
        publish(example_repository, url, force=True)
    assert refused.value.exit_code == 2
    assert [p.file for p in refused.value.problems] == [f"{url}/mlp/2"]
    assert "symlink" in refused.value.problems[0].message
    assert store.snapshot("shared") == before and list(outside.iterdir()) == []


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

def _folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (symlinks as their target text)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[path.relative_to(folder).as_posix()] = os.readlink(path).encode()
        elif path.is_file():
            out[path.relative_to(folder).as_posix()] = path.read_bytes()
    return out


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
    published = _folder_files(dest)
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
    assert _folder_files(dest) == published
    read_only = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && exec "${@:2}"'
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", read_only, "-", str(dest),
                           *serve], capture_output=True, text=True, timeout=300, cwd=_REPO_ROOT)
    assert done.returncode == 0 and "served" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert _folder_files(dest) == published
    verify = subprocess.run([gen_repo_script(), "verify", str(dest)], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout
