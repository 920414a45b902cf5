"""Shared pytest fixtures and hooks."""

# ---- triton_server_factory (generator/serving/server.py) ---------------------------------
import pytest


@pytest.fixture
def triton_server_factory():
    """Start real tritonservers on loopback: ``factory(repo, ready_timeout=120, wait=True, **start_options)``.

    Every server started through the factory is stopped at teardown (also when the test failed). Skips the test
    when no tritonserver can be found (no explicit path, none on PATH, nvidia-pytriton not installed).
    """
    from generator.serving.server import TritonNotFoundError, TritonServer, find_tritonserver

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        raise _requirements.missing("tritonserver", f"no tritonserver available: {exc}") from exc
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


# ---- aitune_fixture_dir, examples_dir (generator/specs/graphspec.py, generator/specs/schema.py) --------
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


# ---- example_repository (generator/serving/smoke.py) --------------------------------------------------
def _read_only(folder: _Path):  # type: ignore[no-untyped-def]
    """Yield ``folder`` made read-only for the session, then check that nothing in it changed.

    As root (CI) it is bind-mounted read-only onto itself, so even a server's ``__pycache__`` cannot land in it;
    elsewhere the teardown check alone catches a test (or a server it started) that wrote into it.
    """
    import subprocess

    from tests.build_helpers import tree_digest

    before = tree_digest(folder)
    mounted = _os.geteuid() == 0 and subprocess.run(
        ["mount", "--bind", str(folder), str(folder)], capture_output=True, check=False).returncode == 0
    if mounted:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, check=True)
    try:
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], capture_output=True, check=True)
    after = tree_digest(folder)
    if not mounted:  # without root a served copy's python backend writes bytecode here; nothing else may change
        after = {path: digest for path, digest in after.items() if "__pycache__/" not in path}
    assert after == before, f"a test wrote into the read-only session fixture {folder}"


@pytest.fixture(scope="session")
def example_repository(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The example manifest (``examples/gen-repo.yaml``: mlp and text) built for the python target, once per session.

    Built with ``generator.building.pipeline.build_repository`` into a session folder with its own build cache (no stale
    artifacts from earlier sessions). Read-only (a read-only bind mount as root; checked unchanged at the end):
    copy it (``shutil.copytree``) to edit.
    """
    from generator.building.pipeline import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("example_repository")
    output = base / "model_repository"
    report = build_repository(
        _REPO_ROOT / "examples" / "gen-repo.yaml",
        BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"),
        output_dir=output,
    )
    assert report.ok, report.to_dict()
    yield from _read_only(output)


# ---- warmup_example_repository (generator/planning/config.py warmup, generator/repository/publish.py) ----------------
@pytest.fixture(scope="session")
def warmup_example_repository(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The example manifest with ``warmup: true`` for every model, built for the python target once per session.

    Its configs warm up from the data files the build writes (``<model>/warmup/1/<input>``). Read-only: copy it
    (``shutil.copytree``) to edit.
    """
    import shutil

    from generator.building.pipeline import BuildOptions, build_repository

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
    yield from _read_only(output)


# ---- variant_example_repository (generator/contracts/diff.py, generator/repository/publish.py's release gate) --------
@pytest.fixture(scope="session")
def variant_example_repository(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The example models rebuilt with known contract changes (tests/diff_helpers.py), once per session.

    Against ``example_repository``: mlp gains an output and a higher max_batch_size (compatible); text loses an
    input, changes a dtype, narrows its value domain and sequence range (and widens it) and lowers its max batch.
    Read-only: copy it to edit.
    """
    from generator.building.pipeline import BuildOptions, build_repository
    from tests.diff_helpers import make_variant_project

    base = tmp_path_factory.mktemp("variant_example_repository")
    manifest = make_variant_project(base / "project")
    output = base / "model_repository"
    report = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"),
                              output_dir=output)
    assert report.ok, report.to_dict()
    yield from _read_only(output)


# ---- tuned_example_repository (generator/planning/config.py's tuned:, generator/contracts/diff.py's served settings) -
#: The ``tuned:`` block the tuned example gives its text model (as gen-repo tune writes it).
EXAMPLE_TUNED = {
    "instance_group": [{"kind": "KIND_CPU", "count": 3}],
    "dynamic_batching": {"max_queue_delay_microseconds": 500, "preferred_batch_size": []},
    "measured": {"at": "2026-12-06T08:00:00Z", "hardware": "2 CPUs (Intel Xeon), no GPU", "engine": "loop",
                 "concurrency": [8, 32], "throughput": 412.0, "noise": 0.04, "p99_ms": 12.3, "gen_repo": "0.2.0"},
}


@pytest.fixture(scope="session")
def tuned_example_repository(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The example manifest with ``EXAMPLE_TUNED`` on its text model, built for the python target once per session.

    Yields ``SimpleNamespace(manifest, repo, cache)``: it differs from ``example_repository`` by the tuned block only.
    Read-only: copy it to edit.
    """
    import shutil
    from types import SimpleNamespace

    import yaml

    from generator.building.pipeline import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("tuned_example_repository")
    project = base / "project"
    shutil.copytree(_REPO_ROOT / "examples" / "specs", project / "specs")
    document = yaml.safe_load((_REPO_ROOT / "examples" / "gen-repo.yaml").read_text(encoding="utf-8"))
    text = next(m for m in document["models"] if m["name"] == "text")
    text["tuned"] = EXAMPLE_TUNED
    manifest = project / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    output = base / "model_repository"
    report = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=base / "cache"),
                              output_dir=output)
    assert report.ok, report.to_dict()
    for repo in _read_only(output):
        yield SimpleNamespace(manifest=manifest, repo=repo, cache=base / "cache")


# ---- store: S3 and GCS on loopback (generator/repository/storage_urls.py, generator/repository/publish.py) -----------
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


@pytest.fixture(params=["s3", "gcs", "local"])
def publish_store(request, monkeypatch, tmp_path_factory):
    """Each publish destination in turn: the object stores (as ``store``) and a folder (tests/object_stores.py)."""
    if request.param == "local":
        from tests.object_stores import FolderStore

        return FolderStore(tmp_path_factory.mktemp("folder_store").resolve())
    server = request.getfixturevalue(f"{request.param}_server")
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return server


# ---- zoo_build, zoo_repository (tests/test_zoo.py, tests/reports/test_html_page.py) ----------------------------------
@pytest.fixture(scope="session")
def zoo_build(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The zoo (tests/zoo) built once per session (python target, two processes, own cache): (folder, build report).

    Shared by every module that needs it, so a session builds the zoo once.
    """
    from generator.building.pipeline import BuildOptions, build_repository

    base = tmp_path_factory.mktemp("zoo")
    report = build_repository(
        _REPO_ROOT / "tests" / "zoo" / "gen-repo.yaml",
        BuildOptions(allow_code=True, target="python", cache_dir=base / "cache", jobs=2),
        output_dir=base / "model_repository",
    )
    return base / "model_repository", report


@pytest.fixture(scope="session")
def zoo_repository(zoo_build) -> _Path:  # type: ignore[no-untyped-def]
    """The zoo's repository folder (``zoo_build``'s first element)."""
    return zoo_build[0]


# ---- CI strictness: what CI installs must really run (tests/requirements.py) ------------------------------------
from tests import requirements as _requirements  # noqa: E402

_STRICT = "GEN_REPO_STRICT_SKIPS"
_SKIPS_SEEN = pytest.StashKey[list[tuple[str, str]]]()


def _strict() -> bool:
    return _os.environ.get(_STRICT) == "1"


def pytest_configure(config):  # type: ignore[no-untyped-def]
    """The ``requires`` marker, the skip tally, SIGINT heard and the hypothesis profile (derandomized in CI)."""
    config.addinivalue_line(
        "markers", "requires(*names): skip unless each requirement of tests/requirements.py is present")
    config.stash[_SKIPS_SEEN] = []
    # Same results whatever the terminal: rich (and the CLIs run as children) must not see a forced terminal or width.
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE", "COLUMNS", "LINES"):
        _os.environ.pop(name, None)
    # A runner started in the background by a shell without job control ignores SIGINT, and its children inherit
    # that: the Ctrl-C tests' commands would not hear their Ctrl-C. They get a terminal's default, as a user's would.
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from hypothesis import settings

    # CI: a fixed seed (derandomize), so a red run reproduces; bench/fuzz_long.py runs randomized and longer.
    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("dev")
    settings.load_profile("ci" if _strict() or _os.environ.get("CI") == "true" else "dev")


def pytest_runtest_setup(item):  # type: ignore[no-untyped-def]
    """``@pytest.mark.requires(name, ...)``: skip through the registry before the test runs."""
    for marker in item.iter_markers("requires"):
        for name in marker.args:
            _requirements.require(name)


def _reason(report) -> str:  # type: ignore[no-untyped-def]
    return str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def _judge_skip(requirement, reason: str, where: str, config) -> str | None:  # type: ignore[no-untyped-def]
    """Tally a skip; under strict mode, the failure text for a skip CI must not have (None when allowed)."""
    config.stash[_SKIPS_SEEN].append((requirement.name if requirement is not None else "(not routed)", where))
    if not _strict():
        return None
    if requirement is None:
        return f"{_STRICT}=1: a skip not routed through tests/requirements.py: {reason}"
    if requirement.ci_has:
        return f"{_STRICT}=1: skipped for {requirement.name}, which CI installs or has: {reason}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """Under GEN_REPO_STRICT_SKIPS=1, a skip for a requirement CI has (or an unrouted skip) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        requirement = getattr(call.excinfo.value, "requirement", None) if call.excinfo is not None else None
        failure = _judge_skip(requirement, _reason(report), item.nodeid, item.config)
        if failure is not None:
            report.outcome = "failed"
            report.longrepr = failure


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # type: ignore[no-untyped-def]
    """A module skipped at import has no requirement to read: under strict mode it fails (use the marker)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        failure = _judge_skip(None, _reason(report), collector.nodeid, collector.config)
        if failure is not None:
            report.outcome = "failed"
            report.longrepr = failure


def pytest_terminal_summary(terminalreporter, config):  # type: ignore[no-untyped-def]
    """List the skips by requirement with counts (in CI only the GPU ones may remain)."""
    seen = config.stash[_SKIPS_SEEN]
    if not seen:
        return
    counts: dict[str, int] = {}
    for name, _ in seen:
        counts[name] = counts.get(name, 0) + 1
    terminalreporter.section("skips by requirement (tests/requirements.py)")
    for name, count in sorted(counts.items()):
        requirement = _requirements.REQUIREMENTS.get(name)
        kind = "allowed in CI" if requirement is not None and not requirement.ci_has else f"fails under {_STRICT}=1"
        terminalreporter.write_line(f"{name}: {count} ({kind})")


# ---- the build cache's signing secret (generator/repository/cache.py) ------------------------------------------------
#: Tests sign cache entries with one fixed secret, as the jobs of a CI pipeline share one, so that no test (nor a
#: gen-repo subprocess it starts) creates a per-user secret under ~/.config; tests/repository/test_cache.py covers that
#: file.
TEST_CACHE_SECRET = "gen-repo-tests-cache-secret-0123456789"
_os.environ.setdefault("GEN_REPO_CACHE_SECRET", TEST_CACHE_SECRET)
