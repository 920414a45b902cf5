"""Publishing to object storage (issue 8): a real S3 server (moto) on loopback and the real Triton server reading it."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.publish import (
    LOCK_OBJECT,
    PublishError,
    PublishLock,
    PublishLocked,
    parse_url,
    publish,
    published_config,
    verify_url,
)
from tests.requirements import missing

AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
BUCKET = "models"


def test_parse_url_forms() -> None:
    aws = parse_url("s3://bucket/some/prefix/")
    assert (aws.protocol, aws.path, aws.endpoint_url) == ("s3", "bucket/some/prefix", None)
    assert aws.triton_url == "s3://bucket/some/prefix"
    local = parse_url("s3://127.0.0.1:9000/bucket/repo")
    assert (local.path, local.endpoint_url) == ("bucket/repo", "http://127.0.0.1:9000")
    assert local.triton_url == "s3://http://127.0.0.1:9000/bucket/repo"
    explicit = parse_url("s3://https://minio.example:443/bucket")
    assert (explicit.path, explicit.endpoint_url) == ("bucket", "https://minio.example:443")
    gcs = parse_url("gs://bucket/repo")
    assert (gcs.protocol, gcs.path) == ("gs", "bucket/repo")
    for bad in ("http://x/y", "s3://", "s3://127.0.0.1:9000/", "s3://ftp://h:1/b", "s3://b/../x", "/some/dir"):
        with pytest.raises(GenRepoError):
            parse_url(bad)


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


# --------------------------------------------------------------------------------------------------------------------
# A real S3 server on loopback
# --------------------------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    moto = Path(sys.executable).parent / "moto_server"
    if not moto.is_file() or importlib.util.find_spec("s3fs") is None:
        raise missing("moto_s3", f"{moto} and the s3fs module are needed")
    port = _free_port()
    process = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    saved = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            assert process.poll() is None and time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.1)
        listening = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
        mine = [line.split()[3] for line in listening.splitlines() if f"pid={process.pid}," in line]
        assert mine == [f"127.0.0.1:{port}"], mine  # loopback only
        import s3fs

        s3fs.S3FileSystem(endpoint_url=f"http://127.0.0.1:{port}", skip_instance_cache=True).mkdir(BUCKET)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _fs(endpoint: str):  # type: ignore[no-untyped-def]
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=f"http://{endpoint}", skip_instance_cache=True, use_listings_cache=False)


def _snapshot(endpoint: str, prefix: str) -> dict[str, bytes]:
    fs = _fs(endpoint)
    fs.invalidate_cache()
    return {p: fs.cat_file(p) for p in fs.find(f"{BUCKET}/{prefix}")}


# --------------------------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_publish_verify_and_republish_unchanged(s3_endpoint: str, example_repository: Path) -> None:
    url = f"s3://{s3_endpoint}/{BUCKET}/plain"
    first = publish(example_repository, url)
    assert {m.name: (m.status, m.version) for m in first.models} == {"mlp": ("published", 1), "text": ("published", 1)}
    assert verify_url(url) == []
    objects = _snapshot(s3_endpoint, "plain")
    assert f"{BUCKET}/plain/gen-repo.lock.json" in objects
    assert not any(p.endswith(LOCK_OBJECT) for p in objects)  # released
    config = objects[f"{BUCKET}/plain/mlp/config.pbtxt"].decode()
    assert "specific" in config and "versions: 1" in config

    again = publish(example_repository, url)
    assert {m.status for m in again.models} == {"unchanged"}
    assert _snapshot(s3_endpoint, "plain") == objects

    # A damaged object in the bucket is found by verify.
    _fs(s3_endpoint).pipe_file(f"{BUCKET}/plain/text/1/model.onnx", b"not onnx")
    problems = verify_url(url)
    assert [p.file for p in problems] == [f"{url}/text/1/model.onnx"]


@pytest.mark.slow
def test_corrupted_upload_is_detected_and_nothing_becomes_visible(s3_endpoint: str, example_repository: Path) -> None:
    url = f"s3://{s3_endpoint}/{BUCKET}/corrupt"
    publish(example_repository, url)
    before = _snapshot(s3_endpoint, "corrupt")

    def damage(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
        assert any("/2/" in p for p in paths)
        victim = next(p for p in paths if p.endswith("model.onnx"))
        fs.pipe_file(victim, fs.cat_file(victim)[:-1] + b"\0")  # same size, one byte changed

    with pytest.raises(PublishError) as caught:
        publish(example_repository, url, force=True, after_upload=damage)
    messages = [p.message for p in caught.value.problems]
    assert any("reads back as sha256" in m for m in messages), messages
    assert _snapshot(s3_endpoint, "corrupt") == before  # no version 2, configs, lock untouched; lock object gone


@pytest.mark.slow
def test_concurrent_publisher_is_refused(s3_endpoint: str, example_repository: Path) -> None:
    url = f"s3://{s3_endpoint}/{BUCKET}/contended"
    target = parse_url(url)
    with PublishLock(_fs(s3_endpoint), target, "first-publisher"):
        with pytest.raises(PublishLocked) as caught:
            publish(example_repository, url, owner="second-publisher")
        assert "first-publisher" in caught.value.problems[0].message
    # An abandoned lock (expired) is taken over.
    stale = PublishLock(_fs(s3_endpoint), target, "dead-publisher", ttl_s=-1.0)
    stale.acquire()
    report = publish(example_repository, url)
    assert {m.status for m in report.models} == {"published"}


@pytest.mark.slow
@pytest.mark.triton
def test_triton_serves_from_s3_and_rolls_to_version_2(
    s3_endpoint: str, warmup_example_repository: Path, triton_server_factory, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """Triton polls the bucket: version 2 stays invisible until its config switch, then loads (warming up from
    its own warmup/2/ data); version 1 keeps its files."""
    import tritonclient.grpc as grpcclient

    from generator.publish import download_repository
    from generator.smoke import run_smoke

    url = f"s3://{s3_endpoint}/{BUCKET}/served"
    report = publish(warmup_example_repository, url)
    assert report.triton_url == f"s3://http://{s3_endpoint}/{BUCKET}/served"
    server = triton_server_factory(report.triton_url, env=AWS_ENV, model_control="poll",
                                   extra_args=["--repository-poll-secs=1"], ready_timeout=180)
    smoke = run_smoke(server.grpc_url, repo_dir=download_repository(url, tmp_path / "v1"))
    assert smoke.exit_code == 0, smoke.to_dict()

    client = grpcclient.InferenceServerClient(server.grpc_url)

    def versions(model: str) -> dict[str, str]:
        return {e.version: e.state for e in client.get_model_repository_index().models if e.name == model}

    def infer_v1() -> None:
        import numpy as np

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
    uploaded = threading.Event()
    proceed = threading.Event()
    outcome: dict[str, object] = {}

    def hold(fs, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
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
        # Version 2 is completely in the bucket but not yet visible: the polling server stays on version 1.
        assert _fs(s3_endpoint).exists(f"{BUCKET}/served/mlp/2/model.onnx")
        for _ in range(6):  # several poll periods
            assert versions("mlp") == {"1": "READY"}
            infer_v1()
            time.sleep(0.5)
        with pytest.raises(PublishLocked):  # and a second publisher meanwhile is refused
            publish(warmup_example_repository, url)
    finally:
        proceed.set()
        thread.join(180)
    assert "error" not in outcome, outcome.get("error")
    assert {m.version for m in outcome["report"].models} == {2}  # type: ignore[attr-defined]

    deadline = time.monotonic() + 120
    while versions("mlp").get("2") != "READY" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert versions("mlp").get("2") == "READY", versions("mlp")
    assert verify_url(url) == []
    smoke = run_smoke(server.grpc_url, repo_dir=download_repository(url, tmp_path / "v2"))
    assert smoke.exit_code == 0, smoke.to_dict()
    # Retention (2 versions) keeps version 1 in the bucket for servers still on it.
    assert _fs(s3_endpoint).exists(f"{BUCKET}/served/mlp/1/model.onnx")
    assert _fs(s3_endpoint).exists(f"{BUCKET}/served/mlp/warmup/1/input_x")
    config = _fs(s3_endpoint).cat_file(f"{BUCKET}/served/mlp/config.pbtxt").decode()
    assert 'input_data_file: "2/input_x"' in config, config


@pytest.mark.slow
def test_cli_publish_and_retention(s3_endpoint: str, warmup_example_repository: Path) -> None:
    """Three publishes keep the newest two versions, their folders and their warmup data; configs name theirs."""
    example_repository = warmup_example_repository
    url = f"s3://{s3_endpoint}/{BUCKET}/cli"
    gen_repo = shutil.which("gen-repo", path=str(Path(sys.executable).parent))
    assert gen_repo
    env = {**os.environ, **AWS_ENV}
    for expected in (1, 2, 3):
        done = subprocess.run([gen_repo, "publish", str(example_repository), url, "--force", "--keep-versions", "2",
                               "--json"], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert {m["version"] for m in json.loads(done.stdout)["models"]} == {expected}
    fs = _fs(s3_endpoint)
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{BUCKET}/cli/mlp")) == ["2", "3", "config.pbtxt", "warmup"]
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{BUCKET}/cli/mlp/warmup")) == ["2", "3"]
    local = (example_repository / "mlp" / "warmup" / "1" / "input_x").read_bytes()
    assert fs.cat_file(f"{BUCKET}/cli/mlp/warmup/3/input_x") == local
    assert 'input_data_file: "3/input_x"' in fs.cat_file(f"{BUCKET}/cli/mlp/config.pbtxt").decode()
    assert verify_url(url) == []


@pytest.mark.slow
@pytest.mark.triton
def test_cli_smoke_launches_triton_on_the_bucket(s3_endpoint: str, example_repository: Path, tmp_path: Path) -> None:
    """`gen-repo smoke --launch --repo s3://...`: tritonserver loads the URL, the checks read the published files."""
    url = f"s3://{s3_endpoint}/{BUCKET}/smoke"
    publish(example_repository, url)
    gen_repo = shutil.which("gen-repo", path=str(Path(sys.executable).parent))
    assert gen_repo
    report_file = tmp_path / "smoke.json"
    done = subprocess.run([gen_repo, "smoke", "--launch", "--repo", url, "--burst", "16", "--json", str(report_file)],
                          capture_output=True, text=True, env={**os.environ, **AWS_ENV}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s3://http://" in done.stderr  # the server was started on the bucket itself
    report = json.loads(report_file.read_text())
    checks = {(r["model"], r["check"]): r["status"] for r in report["results"]}
    assert checks[("mlp", "reference")] == checks[("text", "reference")] == "passed"
