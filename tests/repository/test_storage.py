"""Object storage (issues 21, 26): URLs, storage failures as located errors (never a traceback), reading a bucket back
and naming its objects, what a launched server's log says about its storage, and no traffic off loopback.

Every test that touches storage runs against a real S3 server (moto) and a real GCS emulator on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from generator.errors import GenRepoError
from generator.repository.publish import publish
from generator.repository.storage_urls import parse_url
from generator.repository.verify import verify_location
from generator.serving.server_storage import server_storage_findings
from tests.loopback_namespace import LoopbackNamespace
from tests.object_stores import (
    AWS_ENV,
    BUCKET,
    HUGE,
    MISSING_BUCKET,
    PLANTS,
    CountingFilesystem,
    ObjectStore,
    gcs_env,
    plant_objects,
    skip_unless_installed,
    store_command,
)
from tests.process_helpers import gen_repo_script
from tests.requirements import require


def _gen_repo(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([gen_repo_script(), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_parse_url_forms() -> None:
    aws = parse_url("s3://bucket/some/prefix/")
    assert (aws.protocol, aws.path, aws.endpoint_url) == ("s3", "bucket/some/prefix", None)
    assert aws.triton_url == "s3://bucket/some/prefix"
    local = parse_url("s3://127.0.0.1:9000/bucket/repo")
    assert (local.path, local.endpoint_url) == ("bucket/repo", "http://127.0.0.1:9000")
    assert local.triton_url == "s3://127.0.0.1:9000/bucket/repo"  # as given: Triton reads it as HTTP too
    assert parse_url("s3://http://127.0.0.1:9000/bucket/repo/").triton_url == "s3://http://127.0.0.1:9000/bucket/repo"
    explicit = parse_url("s3://https://minio.example:443/bucket")
    assert (explicit.path, explicit.endpoint_url) == ("bucket", "https://minio.example:443")
    gcs = parse_url("gs://bucket/repo")
    assert (gcs.protocol, gcs.path, gcs.bucket) == ("gs", "bucket/repo", "bucket")
    for bad in ("http://x/y", "s3://", "s3://127.0.0.1:9000/", "s3://ftp://h:1/b", "s3://b/../x", "/some/dir",
                "gs://b/a\\b", "gs://b/a\nb", "s3://http://no-port/b"):
        with pytest.raises(GenRepoError) as caught:
            parse_url(bad)
        assert caught.value.exit_code == 2 and caught.value.problems[0].file == bad


# --------------------------------------------------------------------------------------------------------------------
# Storage failures: located, exit 2 or 3, no traceback, S3 and GCS alike
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_missing_bucket_and_bad_url_exit_2(store: ObjectStore, example_repository: Path) -> None:
    missing = store.url("repo", bucket=MISSING_BUCKET)
    for args in (["publish", str(example_repository), missing], ["verify", missing], ["verify", "--json", missing],
                 ["smoke", "--launch", "--repo", missing], ["smoke", "--url", "127.0.0.1:1", "--repo", missing]):
        done = _gen_repo(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr, args
        out = done.stdout if "--json" in args else done.stderr
        assert f"{missing}: /: no such bucket '{MISSING_BUCKET}'" in out or (
            json.loads(out)["errors"][0]["message"].startswith(f"no such bucket '{MISSING_BUCKET}'")), (args, out)
    bad = f"{store.scheme}://{BUCKET}/../repo"
    for args in (["publish", str(example_repository), bad], ["verify", bad]):
        done = _gen_repo(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
        assert f"error: {bad}: /: the path has an empty, '.' or '..' component" in done.stderr


@pytest.mark.slow
def test_unreachable_endpoint_exits_3(store: ObjectStore, example_repository: Path) -> None:
    """publish and verify against an endpoint that refuses connections (after the clients' own retries)."""
    url, env = store.dead_url("repo"), store.dead_env()
    gen_repo = gen_repo_script()
    runs = [subprocess.Popen([gen_repo, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **env})
            for args in (["publish", str(example_repository), url], ["verify", url])]  # in parallel: gcsfs retries
    for run in runs:
        out, err = run.communicate(timeout=180)
        assert run.returncode == 3, (run.args, out, err)
        assert "Traceback" not in out + err
        assert f"error: {url}: /: storage endpoint unreachable while" in err, err


@pytest.mark.slow
def test_verify_names_the_remote_object(store: ObjectStore, example_repository: Path) -> None:
    url = store.url("named")
    publish(example_repository, url)
    store.fs().pipe_file(store.key("named", "text/1/model.onnx"), b"not onnx")
    done = _gen_repo("verify", url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (f"{url}/text/1/model.onnx: /artifacts/text~11~1model.onnx: modified: 8 "
                                           "bytes, the lock file says " + done.stdout.split("says ")[1].split()[0])
    assert "gen-repo-verify-" not in done.stdout  # never the deleted temporary copy
    payload = json.loads(_gen_repo("verify", "--json", url).stdout)
    assert payload["repository"] == url and [p["file"] for p in payload["problems"]] == [f"{url}/text/1/model.onnx"]


@pytest.mark.slow
def test_bucket_layouts_that_are_not_a_repository_exit_2(store: ObjectStore, example_repository: Path) -> None:
    """An object that is also the folder of other objects (``mlp/1`` beside ``mlp/1/...``) cannot be read back as a
    folder tree: verify and smoke say so, located, exit 2; zero-byte folder markers (``mlp/``) are only folders."""
    url = store.url("layout")
    publish(example_repository, url)
    fs = store.fs()
    fs.pipe_file(store.key("layout", "mlp/"), b"")  # a console's folder marker: harmless
    assert verify_location(url).problems == []
    fs.pipe_file(store.key("layout", "mlp/1"), b"an object where a folder is")
    for args in (["verify", url], ["smoke", "--url", "127.0.0.1:1", "--repo", url]):
        done = _gen_repo(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert (f"error: {url}/mlp/1: /: an object and also the folder of {url}/mlp/1/gen_repo/contract.json"
                in done.stderr), done.stderr


# --------------------------------------------------------------------------------------------------------------------
# A launched server that cannot read its bucket
# --------------------------------------------------------------------------------------------------------------------
#: The end of tritonserver 2.51's log when its S3 endpoint refuses connections (a real run, about 50 s after start).
_TRITON_S3_LOG = """\
I1204 16:47:29.791631 25189 api.cc:382] "Using credential    for path  s3://http://127.0.0.1:9/bkt/p"
| strict_readiness                 | 1                                                                   |
I1204 16:48:54.154846 25613 server.cc:302] "No server context available. Exiting immediately."
error: creating server: Internal - Unable to create S3 filesystem client. Check account credentials. Exception: '' \
Message: 'curlCode: 7, Couldn't connect to server'
"""


def test_storage_findings_from_a_triton_s3_log(monkeypatch: pytest.MonkeyPatch) -> None:
    findings = server_storage_findings("s3://http://127.0.0.1:9/bkt/p", _TRITON_S3_LOG)
    assert findings == ["error: creating server: Internal - Unable to create S3 filesystem client. Check account "
                        "credentials. Exception: '' Message: 'curlCode: 7, Couldn't connect to server'"]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")
    monkeypatch.delenv("CLOUD_STORAGE_EMULATOR_ENDPOINT", raising=False)
    assert server_storage_findings("gs://b/p", "") == [
        "gen-repo reads gs://b/p through STORAGE_EMULATOR_HOST=http://127.0.0.1:4443, tritonserver through "
        "CLOUD_STORAGE_EMULATOR_ENDPOINT unset (Google Cloud Storage): point both at the same endpoint"]


@pytest.mark.slow
@pytest.mark.triton
def test_smoke_launch_shows_the_servers_storage_errors(gcs_server: ObjectStore, example_repository: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """gen-repo reads the bucket, the launched tritonserver cannot (its endpoint refuses connections): smoke exits 3
    with the server's storage errors, not just 'not ready'."""
    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    url = gcs_server.url("unreadable")
    publish(example_repository, url)
    dead = gcs_server.dead_env()["CLOUD_STORAGE_EMULATOR_ENDPOINT"]
    started = time.monotonic()
    done = _gen_repo("smoke", "--launch", "--repo", url, "--ready-timeout", "8",
                     env={"CLOUD_STORAGE_EMULATOR_ENDPOINT": dead}, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    assert "Traceback" not in done.stderr
    storage_lines = [line for line in done.stderr.splitlines() if "tritonserver storage:" in line]
    assert any("GetBucketMetadata(): UNAVAILABLE" in line and "Couldn't connect to server" in line
               for line in storage_lines), done.stderr[-4000:]
    assert any(f"CLOUD_STORAGE_EMULATOR_ENDPOINT={dead}" in line for line in storage_lines), storage_lines


# --------------------------------------------------------------------------------------------------------------------
# Nothing leaves loopback
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.triton
@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_the_cycle_sends_nothing_off_loopback(kind: str, example_repository: Path) -> None:
    """publish, verify and smoke --launch (tritonserver reading the bucket) inside a network namespace whose only
    other interface is a tripwire on the default route: not one packet goes through it.

    For GCS only the two endpoint variables are set (not NO_GCE_CHECK, GCE_METADATA_ROOT or the gcsfs setting):
    with an emulator configured gen-repo looks up no credentials itself, and keeps the credential lookup of the
    tritonserver it launches on loopback."""
    skip_unless_installed(kind)
    require("user_namespaces")
    namespace = LoopbackNamespace(tripwire=True)
    try:
        port = 29000  # the namespace is private: any port is free
        endpoint = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in namespace.env().items()
               if k not in {*AWS_ENV, *gcs_env(""), "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}}
        if kind == "s3":
            env.update(AWS_ENV)
            url = f"s3://127.0.0.1:{port}/{BUCKET}/loopback"
        else:
            env.update(STORAGE_EMULATOR_HOST=endpoint, CLOUD_STORAGE_EMULATOR_ENDPOINT=endpoint)
            url = f"gs://{BUCKET}/loopback"
        server = namespace.popen(store_command(kind, port), env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        waited = namespace.run([sys.executable, "-c", (
            "import socket, time\n"
            "for _ in range(300):\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {port}), timeout=0.5).close(); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "else: raise SystemExit('not listening')\n"
            + (f"import s3fs; s3fs.S3FileSystem(endpoint_url='{endpoint}').mkdir('{BUCKET}')\n" if kind == "s3" else "")
        )], env=env)
        assert waited.returncode == 0 and server.poll() is None, waited.stderr
        gen_repo = str(Path(sys.executable).parent / "gen-repo")
        for args in (["publish", str(example_repository), url], ["verify", url],
                     ["smoke", "--launch", "--repo", url, "--burst", "4"]):
            done = namespace.run([gen_repo, *args], env=env, timeout=300)
            assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
        assert namespace.packets_off_loopback() == 0
    finally:
        namespace.close()


@pytest.mark.parametrize("fault", ["duplicate", "deep"])
def test_a_bucket_lock_nested_too_deep_or_with_a_key_twice_is_refused_located(
        store: ObjectStore, example_repository: Path, fault: str) -> None:
    """Issue 37: the one JSON reader reads a bucket's lock too: no RecursionError traceback, no last-hash-wins."""
    from generator.errors import json_pointer
    from tests.strategies import json_text

    url = store.url(f"lock-{fault}")
    publish(example_repository, url)
    key = store.key(f"lock-{fault}", "gen-repo.lock.json")
    fs = store.fs()
    lock = json.loads(fs.cat_file(key))
    name = sorted(lock["artifacts"])[0]
    plant = ("duplicate", name) if fault == "duplicate" else ("deep", 100_000)
    path = ("artifacts",) if fault == "duplicate" else ("artifacts", name)
    fs.pipe_file(key, json_text(lock, path, plant).encode())
    done = _gen_repo("verify", url)
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    pointer = json_pointer([*path, name] if fault == "duplicate" else path)
    words = "appears more than once" if fault == "duplicate" else "nests deeper than"
    assert any(f"{url}/gen-repo.lock.json: {pointer}" in line and words in line
               for line in (done.stdout + done.stderr).splitlines()), done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------------------------
# Memory on remote reads: the listing is checked before any object is fetched (issue 37's class)
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: each example uploads megabytes
@given(plants=PLANTS)
def test_verify_refuses_unlisted_and_oversized_objects_from_the_listing_unread(
        plants: list[tuple[str, str, str]], store: ObjectStore, tmp_path_factory,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A published repository with objects planted by the generator: each planted object is refused from the listing
    (unexpected, or listed at another size than the lock's) without a byte of it fetched, and the whole verify holds
    less than one planted object in memory (tracemalloc's peak); the changed object at its size is hashed."""
    import tracemalloc

    from generator.repository.verify import verify_published

    monkeypatch.setenv("GEN_REPO_MAX_BYTECODE_BYTES", "1MiB")
    prefix = f"memory-{os.getpid()}-{time.monotonic_ns()}"
    unread, changed = plant_objects(store, prefix, tmp_path_factory.mktemp("remote") / "repo", plants)
    counting = CountingFilesystem(store.fs())
    verify_published(store.url(prefix), counting)  # warm: the S3/GCS client's models and sessions load once
    counting.fetched.clear()
    tracemalloc.start()
    try:
        verification = verify_published(store.url(prefix), counting)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    problems = {p.file: p.message for p in verification.problems}
    for key, message in unread.items():
        url = parse_url(store.url(prefix)).object_url(key)
        assert problems.get(url, "").startswith(message), (key, problems)
        assert counting.fetched.get(store.key(prefix, key), 0) == 0, (key, counting.fetched)
    for locked in changed:
        assert problems[parse_url(store.url(prefix)).object_url(locked)].startswith("modified: sha256")
    assert len(problems) == len(unread) + len(changed), problems
    assert peak < HUGE // 2, f"verify held {peak} bytes at its peak"
