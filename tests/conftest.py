"""Shared pytest fixtures and hooks."""

# ---- triton_server_factory (generator/server.py) ---------------------------------
import pytest


@pytest.fixture
def triton_server_factory():
    """Start real tritonservers on loopback: ``factory(repo, ready_timeout=120, wait=True, **start_options)``.

    Every server started through the factory is stopped at teardown (also when the test failed). Skips the test
    when no tritonserver can be found (no explicit path, none on PATH, nvidia-pytriton not installed).
    """
    from generator.server import TritonNotFoundError, TritonServer, find_tritonserver

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        pytest.skip(f"no tritonserver available: {exc}")
    servers: list[TritonServer] = []

    def start(model_repository, *, ready_timeout: float = 120.0, wait: bool = True, **options):
        server = TritonServer(binary)
        servers.append(server)
        server.start(model_repository, **options)
        if wait:
            server.wait_ready(ready_timeout)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


# ---- aitune_fixture_dir, examples_dir (generator/spec.py, generator/schema.py) --------
import os as _os  # noqa: E402 - one section per fixture family
from pathlib import Path as _Path  # noqa: E402

_REPO_ROOT = _Path(__file__).resolve().parent.parent
#: A copy of ../shared/fixtures/aitune kept in the repository, so CI on a clean clone needs nothing outside it.
_AITUNE_FIXTURE_COPY = _REPO_ROOT / "tests" / "data" / "aitune"
_AITUNE_FIXTURE_SHARED = _REPO_ROOT.parent / "shared" / "fixtures" / "aitune"


def _find_aitune_fixtures() -> _Path:
    override = _os.environ.get("GEN_REPO_AITUNE_FIXTURES")
    candidates = [_Path(override)] if override else []
    candidates += [_AITUNE_FIXTURE_COPY, _AITUNE_FIXTURE_SHARED]
    for candidate in candidates:
        if (candidate / "tune_report.json").is_file():
            return candidate
    raise FileNotFoundError(f"AITune fixtures not found (looked in {', '.join(map(str, candidates))})")


@pytest.fixture(scope="session")
def aitune_fixture_dir() -> _Path:
    """Folder of the real AITune 0.6.0 GraphSpec fixtures (``GEN_REPO_AITUNE_FIXTURES`` overrides it)."""
    return _find_aitune_fixtures()


@pytest.fixture(scope="session")
def examples_dir() -> _Path:
    """The repository's ``examples/`` folder (models.py and specs/*.graphspec.json)."""
    return _REPO_ROOT / "examples"


# ---- example_repository (generator/smoke.py) --------------------------------------------------
@pytest.fixture(scope="session")
def example_repository(tmp_path_factory) -> _Path:
    """The example manifest (``examples/gen-repo.yaml``: mlp and text) built for the python target, once per session.

    Built with ``generator.build.build_repository`` into a session folder with its own build cache (no stale
    artifacts from earlier sessions). Tests must not modify it: copy it (``shutil.copytree``) to edit.
    """
    from generator.build import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("example_repository")
    output = base / "model_repository"
    report = build_repository(
        _REPO_ROOT / "examples" / "gen-repo.yaml",
        BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"),
        output_dir=output,
    )
    assert report.ok, report.to_dict()
    return output


# ---- warmup_example_repository (generator/config.py warmup, generator/publish.py) -----------------------------
@pytest.fixture(scope="session")
def warmup_example_repository(tmp_path_factory) -> _Path:
    """The example manifest with ``warmup: true`` for every model, built for the python target once per session.

    Its configs warm up from the data files the build writes (``<model>/warmup/1/<input>``). Read-only: copy it
    (``shutil.copytree``) to edit.
    """
    import shutil

    from generator.build import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("warmup_example_repository")
    shutil.copytree(_REPO_ROOT / "examples" / "specs", base / "specs")
    manifest = (_REPO_ROOT / "examples" / "gen-repo.yaml").read_text(encoding="utf-8")
    assert "defaults:\n" in manifest
    (base / "gen-repo.yaml").write_text(manifest.replace("defaults:\n", "defaults:\n  warmup: true\n", 1))
    output = base / "model_repository"
    report = build_repository(
        base / "gen-repo.yaml", BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"),
        output_dir=output,
    )
    assert report.ok, report.to_dict()
    return output


# ---- store: S3 and GCS on loopback (generator/storage.py, generator/publish.py) -------------------------------------
@pytest.fixture(scope="session")
def s3_server():
    """moto_server on 127.0.0.1 with the test bucket, once per session (tests/object_stores.py)."""
    from tests.object_stores import running_store

    with running_store("s3") as store:
        yield store


@pytest.fixture(scope="session")
def gcs_server():
    """gcp-storage-emulator (in memory) on 127.0.0.1 with the test bucket, once per session."""
    from tests.object_stores import running_store

    with running_store("gcs") as store:
        yield store


@pytest.fixture(params=["s3", "gcs"])
def store(request, monkeypatch):
    """Each object store in turn, its environment set for the test (and the processes it starts)."""
    server = request.getfixturevalue(f"{request.param}_server")
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return server


# ---- built_example_repository (generator/build.py) ----------------------------------------
@pytest.fixture(scope="session")
def built_example_repository(example_repository) -> _Path:
    """The example manifest built by ``gen-repo build``'s library call (``--target python``, own cache), once.

    The same session build as ``example_repository`` (which already runs the real ``build_repository``); read-only.
    """
    return example_repository


# ---- CI strictness: what CI installs must really run ----------------------------------------------------------------
#: Skip reasons that mean "a tool the project installs is missing". Locally they skip; with GEN_REPO_STRICT_SKIPS=1
#: (set by .ci/run) they fail, so a broken install can never turn the real-server tests into silent skips.
_INSTALLED_TOOL_SKIPS = (
    "no tritonserver available",
    "tensorrt_rtx is not installed",
    "moto[server] and s3fs are needed",
    "gcp-storage-emulator and gcsfs are needed",
    "ray is not installed",
    "the gen-repo console script is not installed",
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """Turn skips for missing project-installed tools into failures under GEN_REPO_STRICT_SKIPS=1."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _os.environ.get("GEN_REPO_STRICT_SKIPS") == "1":
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if any(marker in reason for marker in _INSTALLED_TOOL_SKIPS):
            report.outcome = "failed"
            report.longrepr = f"skipped in CI, where this tool is installed: {reason}"


# ---- the build cache's signing secret (generator/cache.py) ---------------------------------------------------------
#: Tests sign cache entries with one fixed secret, as the jobs of a CI pipeline share one, so that no test (nor a
#: gen-repo subprocess it starts) creates a per-user secret under ~/.config; tests/test_cache.py covers that file.
TEST_CACHE_SECRET = "gen-repo-tests-cache-secret-0123456789"
_os.environ.setdefault("GEN_REPO_CACHE_SECRET", TEST_CACHE_SECRET)
