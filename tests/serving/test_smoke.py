"""generator.serving.smoke on a real tritonserver (nvidia-pytriton): the example repository passes every check over gRPC
and HTTP, and each check fails when it should (wrong numbers, config drift, a model that does not load, an
unreachable server, a server killed mid-run). One server per scenario (module-scoped) keeps the runtime modest."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

from generator.cli.smoke import _write_outputs
from generator.planning.model_files import config_text
from generator.planning.options import BuildOptions
from generator.planning.targets import plan_build
from generator.reports.junit import json_report, junit_xml
from generator.serving.server import TritonNotFoundError, TritonServer, find_tritonserver, free_port
from generator.serving.smoke import repository_models, run_smoke, tolerance_for
from generator.serving.smoke_results import CHECKS, CheckResult, SmokeOptions, SmokeReport
from tests.requirements import missing

# ---------------------------------------------------------------------------------------------------------------------
# Helpers and fixtures
# ---------------------------------------------------------------------------------------------------------------------
#: A Python-backend model gen-repo did not build: no gen_repo/ folder, OUTPUT0 = INPUT0 + 1.
FOREIGN_CONFIG = """
name: "addone"
backend: "python"
max_batch_size: 8
input { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] }
instance_group { count: 1 kind: KIND_CPU }
dynamic_batching { max_queue_delay_microseconds: 500 }
"""
FOREIGN_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (x + 1.0).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""
#: Appended to a copy of templates/python/model.py: every onnxruntime result gets 1.0 added (wrong numbers).
WRONG_NUMBERS = """

_gen_repo_original_run = TritonPythonModel._run


def _gen_repo_wrong_run(self, arrays):
    return {name: out + 1.0 for name, out in _gen_repo_original_run(self, arrays).items()}


TritonPythonModel._run = _gen_repo_wrong_run
"""
#: Appended to a copy of model.py: the model fails in initialize (does not load).
BROKEN = """

def _gen_repo_broken_initialize(self, args):
    raise RuntimeError("broken on purpose")


TritonPythonModel.initialize = _gen_repo_broken_initialize
"""

def _binary():
    try:
        return find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc


def _start(repo: Path, **options) -> TritonServer:
    server = TritonServer(_binary())
    try:
        server.start(repo, **options)
        server.wait_ready(120)
    except BaseException:
        server.stop()
        raise
    return server


def _statuses(report: SmokeReport, model: str) -> dict[str, str]:
    return {check: result.status for check, result in report.for_model(model).items()}


def _explain(report: SmokeReport) -> str:
    return "\n".join(f"{r.model} {r.check} {r.status}: {r.message}" for r in report.results)


@pytest.fixture(scope="module")
def foreign_repository(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("foreign") / "repo"
    (repo / "addone" / "1").mkdir(parents=True)
    (repo / "addone" / "config.pbtxt").write_text(FOREIGN_CONFIG)
    (repo / "addone" / "1" / "model.py").write_text(FOREIGN_MODEL)
    return repo


@pytest.fixture(scope="module")
def good_server(example_repository: Path, foreign_repository: Path):
    """The example repository (and the foreign one) served as built: model control none, both loaded at start."""
    server = _start(example_repository, extra_args=[f"--model-repository={foreign_repository}"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def good_reports(good_server: TritonServer, example_repository: Path) -> dict[str, SmokeReport]:
    return {
        "grpc": run_smoke(good_server.grpc_url, "grpc", example_repository, options=SmokeOptions(perf=True)),
        "http": run_smoke(good_server.http_url, "http", example_repository, options=SmokeOptions(perf=True)),
    }


@pytest.fixture(scope="module")
def faulty_repository(example_repository: Path, tmp_path_factory) -> Path:
    """A copy of the example repository with three faults the smoke test must find.

    - mlp returns wrong numbers (model.py adds 1.0 to every output);
    - text's config differs from the generated one (queue delay and preferred batch sizes edited after the build);
    - broken: a copy of mlp whose model.py raises in initialize (the model does not load).
    """
    repo = tmp_path_factory.mktemp("faulty") / "repo"
    shutil.copytree(example_repository, repo)
    model_py = repo / "mlp" / "1" / "model.py"
    text = model_py.read_text()
    assert "    def _run(self, arrays):" in text, "templates/python/model.py changed: update WRONG_NUMBERS"
    model_py.write_text(text + WRONG_NUMBERS)

    config = repo / "text" / "config.pbtxt"
    original = config.read_text()
    edited = original.replace("max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 5000")
    edited = edited.replace("dynamic_batching {\n", "dynamic_batching {\n  preferred_batch_size: 4\n")
    assert edited.count("preferred_batch_size") == 1 and "5000" in edited, original
    config.write_text(edited)

    shutil.copytree(repo / "mlp", repo / "broken")
    (repo / "broken" / "config.pbtxt").write_text(
        (repo / "broken" / "config.pbtxt").read_text().replace('name: "mlp"', 'name: "broken"')
    )
    broken_py = repo / "broken" / "1" / "model.py"
    broken_py.write_text(broken_py.read_text() + BROKEN)

    # onnx_mlp: mlp as `target: auto` builds it on a CPU machine (onnx), which the bundled Triton cannot serve.
    plan, _ = plan_build(Path(__file__).resolve().parents[2] / "examples" / "gen-repo.yaml",
                         BuildOptions(target="onnx"))
    onnx_mlp = next(m for m in plan.models if m.name == "mlp")
    shutil.copytree(repo / "mlp", repo / "onnx_mlp")
    (repo / "onnx_mlp" / "1" / "model.py").unlink()
    (repo / "onnx_mlp" / "config.pbtxt").write_text(config_text(onnx_mlp).replace('name: "mlp"', 'name: "onnx_mlp"'))
    for copy in ("broken", "onnx_mlp"):  # a contract describes the model of its own folder
        contract = repo / copy / "1" / "gen_repo" / "contract.json"
        contract.write_text(contract.read_text().replace('"model": "mlp"', f'"model": "{copy}"'))
    return repo


@pytest.fixture(scope="module")
def faulty_server(faulty_repository: Path):
    """The faulty copy, served with explicit model control and nothing loaded: smoke loads each model it checks."""
    server = _start(faulty_repository, model_control="explicit")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def faulty_report(faulty_server: TritonServer, example_repository: Path) -> SmokeReport:
    """Smoke against the faulty server with --repo pointing at the ORIGINAL build (what was promised)."""
    return run_smoke(faulty_server.grpc_url, "grpc", example_repository, ["mlp", "text"])


# ---------------------------------------------------------------------------------------------------------------------
# Without a server
# ---------------------------------------------------------------------------------------------------------------------
def test_tolerances_are_dtype_aware_and_overridable() -> None:
    assert tolerance_for(np.dtype(np.float32)) == (1e-4, 1e-5)
    assert tolerance_for(np.dtype(np.float16))[0] > tolerance_for(np.dtype(np.float32))[0]
    assert tolerance_for(np.dtype(np.int64)) == (0.0, 0.0)
    assert tolerance_for(np.dtype(np.float32), rtol=0.5) == (0.5, 1e-5)


def test_report_exit_codes() -> None:
    passed = CheckResult("m", "ready", "passed")
    assert SmokeReport([passed, CheckResult("m", "reference", "skipped")], "u", "grpc").exit_code == 0
    assert SmokeReport([passed, CheckResult("m", "burst", "failed")], "u", "grpc").exit_code == 1
    assert SmokeReport([passed, CheckResult("m", "burst", "error")], "u", "grpc").exit_code == 1
    assert SmokeReport([CheckResult("m", "ready", "error")], "u", "grpc", reachable=False).exit_code == 3


def test_report_files_replace_a_symlink_at_their_name_never_its_target(tmp_path: Path) -> None:
    """--json and --junit-xml planted as symlinks (to a file of someone else's): each is replaced by the report,
    the link's target keeps its bytes, and no temporary file is left beside them."""
    report = SmokeReport([CheckResult("m", "ready", "passed")], "u", "grpc")
    target = tmp_path / "precious"
    target.write_text("precious")
    (tmp_path / "out").mkdir()
    paths = {tmp_path / "out" / "smoke.json": json_report, tmp_path / "out" / "smoke.xml": junit_xml}
    for path in paths:
        path.symlink_to(target)
    _write_outputs(report, *paths, None)  # smoke's own writer of --json and --junit-xml
    for path, render in paths.items():
        assert not path.is_symlink() and path.read_text(encoding="utf-8") == render(report)
    assert target.read_text() == "precious"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["smoke.json", "smoke.xml"]


def test_repository_models(example_repository: Path) -> None:
    assert repository_models(example_repository) == ["mlp", "text"]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.timeout(60)
def test_unreachable_server_exit_3(protocol: str) -> None:
    url = f"127.0.0.1:{free_port()}"  # nothing listens there
    report = run_smoke(url, protocol, models=["mlp", "text"], options=SmokeOptions(timeout_s=5))
    assert report.exit_code == 3 and not report.reachable
    assert [(r.model, r.check, r.status) for r in report.results] == [("mlp", "ready", "error"),
                                                                       ("text", "ready", "error")]
    assert "not reachable" in report.results[0].message and url in report.results[0].message


# ---------------------------------------------------------------------------------------------------------------------
# The example repository passes
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.triton
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_example_repository_passes_every_check(good_reports: dict[str, SmokeReport], protocol: str) -> None:
    report = good_reports[protocol]
    assert report.exit_code == 0, _explain(report)
    assert report.models == ["mlp", "text"]
    for model in report.models:
        assert _statuses(report, model) == dict.fromkeys(CHECKS, "passed"), _explain(report)
        burst = report.for_model(model)["burst"].details
        assert burst["succeeded"] == 64 and burst["dynamic_batching"] is True
        assert burst["execution_count"] < burst["inference_count"] == 64
        assert set(burst["perf"]) >= {"throughput_infer_per_s", "latency_p50_ms", "latency_p99_ms"}
        reference = report.for_model(model)["reference"].details["comparisons"]
        assert {c["case"] for c in reference} == {"min", "opt", "max"} and all(c["ok"] for c in reference)
    assert "batch 33 > max_batch_size 32" in report.for_model("mlp")["reject_batch"].message
    assert "axis 1 = 65, allowed 4..64" in report.for_model("text")["reject_shape"].message


@pytest.mark.triton
def test_junit_xml_opens_in_junitparser(good_reports: dict[str, SmokeReport], faulty_report: SmokeReport,
                                        tmp_path: Path) -> None:
    from junitparser import Error, Failure, JUnitXml, Skipped

    path = tmp_path / "good.xml"
    _write_outputs(good_reports["grpc"], None, path, None)
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == ["mlp", "text"]
    for name, suite in suites.items():
        cases = list(suite)
        assert [c.name for c in cases] == list(CHECKS)
        assert {c.classname for c in cases} == {name}
        assert all(c.is_passed and c.time >= 0 for c in cases)
        assert suite.tests == len(CHECKS) and suite.failures == 0 and suite.errors == 0

    (tmp_path / "faulty.xml").write_text(junit_xml(faulty_report))
    xml = JUnitXml.fromfile(str(tmp_path / "faulty.xml"))
    outcome = {(c.classname, c.name): [type(r) for r in c.result] for suite in xml for c in suite}
    assert outcome[("mlp", "reference")] == [Failure]
    assert outcome[("text", "config")] == [Failure]
    assert outcome[("mlp", "inference")] == [] and outcome[("text", "reference")] == []
    failure = next(c for s in xml for c in s if c.classname == "mlp" and c.name == "reference").result[0]
    assert "differs from the reference" in failure.message and "max_abs_error" in failure.text
    assert Error not in {t for types in outcome.values() for t in types}
    assert Skipped not in {t for types in outcome.values() for t in types}


@pytest.mark.triton
def test_json_report(good_reports: dict[str, SmokeReport]) -> None:
    text = json_report(good_reports["http"])
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert document["exit_code"] == 0 and document["protocol"] == "http" and document["reachable"] is True
    assert document["counts"] == {"passed": 2 * len(CHECKS), "failed": 0, "skipped": 0, "error": 0}
    assert {(r["model"], r["check"]) for r in document["results"]} == {(m, c) for m in ("mlp", "text") for c in CHECKS}


@pytest.mark.triton
def test_repository_gen_repo_did_not_build(good_server: TritonServer, foreign_repository: Path) -> None:
    report = run_smoke(good_server.http_url, "http", foreign_repository)
    assert report.exit_code == 0, _explain(report)
    results = report.for_model("addone")
    assert _statuses(report, "addone") == {**dict.fromkeys(CHECKS, "passed"), "reference": "skipped"}
    assert "gen-repo did not build" in results["reference"].message
    assert results["inference"].details["inputs"] == "random inputs inside the config's dims"
    assert "allowed exactly 4" in results["reject_shape"].message  # the static dim, from the config alone


@pytest.mark.triton
def test_without_repo_checks_every_served_model(good_server: TritonServer) -> None:
    """No --repo: every model in the server's index, reduced checks from the server's config alone."""
    # 8 in flight: batching does not depend on two requests arriving within the queue delay (test_summaries.py).
    report = run_smoke(good_server.grpc_url, "grpc", options=SmokeOptions(burst=16, concurrency=8))
    assert report.models == ["addone", "mlp", "text"]
    for model in report.models:
        results = report.for_model(model)
        assert results["config"].status == "skipped" and "no --repo" in results["config"].message
        assert results["reference"].status == "skipped" and "no --repo" in results["reference"].message
    for model in ("addone", "mlp"):
        statuses = {s for c, s in _statuses(report, model).items() if c not in ("config", "reference")}
        assert statuses == {"passed"}, report.to_dict()
    # text's dims are [-1] and its model.py enforces the profile (4..64): size-1 random inputs are honestly refused,
    # and the message says where the real ranges are.
    inference = report.for_model("text")["inference"]
    assert inference.status == "failed" and "outside the model's profile" in inference.message
    assert "pass --repo" in inference.message
    assert report.exit_code == 1


# ---------------------------------------------------------------------------------------------------------------------
# Each check fails when it should
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.triton
def test_wrong_numbers_fail_the_reference_check(faulty_report: SmokeReport) -> None:
    assert faulty_report.exit_code == 1
    assert _statuses(faulty_report, "mlp") == {**dict.fromkeys(CHECKS, "passed"), "reference": "failed"}
    result = faulty_report.for_model("mlp")["reference"]
    assert "output 'output' differs from the reference" in result.message
    assert all(abs(c["max_abs_error"] - 1.0) < 1e-3 for c in result.details["comparisons"])
    assert "loaded through the repository API" in faulty_report.for_model("mlp")["ready"].message


@pytest.mark.triton
def test_config_drift_fails_the_config_check(faulty_report: SmokeReport) -> None:
    assert _statuses(faulty_report, "text") == {**dict.fromkeys(CHECKS, "passed"), "config": "failed"}
    differences = faulty_report.for_model("text")["config"].details["differences"]
    assert "dynamic_batching.max_queue_delay_microseconds: generated 100, server 5000" in differences
    assert "dynamic_batching.preferred_batch_size: generated none (served as [16]), server [4]" in differences


@pytest.mark.triton
def test_model_that_does_not_load(faulty_server: TritonServer, faulty_repository: Path) -> None:
    report = run_smoke(faulty_server.http_url, "http", faulty_repository, ["broken"])
    assert report.exit_code == 1
    ready = report.for_model("broken")["ready"]
    assert ready.status == "failed" and "failed to load" in ready.message and "broken on purpose" in ready.message
    assert {r.status for r in report.results if r.check != "ready"} == {"skipped"}
    assert all("not ready" in r.message for r in report.results if r.check != "ready")


@pytest.mark.triton
def test_a_server_without_the_models_backend_says_which_and_how_to_proceed(faulty_server: TritonServer,
                                                                            faulty_repository: Path) -> None:
    """target auto gives onnx on a CPU machine; the bundled Triton has the python backend only."""
    report = run_smoke(faulty_server.grpc_url, "grpc", faulty_repository, ["onnx_mlp"])
    ready = report.for_model("onnx_mlp")["ready"]
    assert ready.status == "failed" and ready.details["missing_backend"] == "onnxruntime", ready.message
    assert "this server has no 'onnxruntime' backend, and the model's config asks for it (platform " \
           "'onnxruntime_onnx')" in ready.message
    assert "a Triton that has the onnxruntime backend" in ready.message and "--target python" in ready.message
    # A model that fails for another reason gets no such hint.
    broken = run_smoke(faulty_server.grpc_url, "grpc", faulty_repository, ["broken"]).for_model("broken")["ready"]
    assert "backend" not in broken.details and "--target python" not in broken.message


@pytest.mark.triton
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["killed", "frozen"])
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_server_lost_mid_run(protocol: str, how: str, example_repository: Path, triton_server_factory) -> None:
    """Killed (connections refused) or frozen with SIGSTOP (no answer at all): a clear report, no hang."""
    server = triton_server_factory(example_repository)
    url = server.grpc_url if protocol == "grpc" else server.http_url
    seen: list[CheckResult] = []
    box: dict[str, SmokeReport] = {}

    def lose_server_after_config(result: CheckResult) -> None:
        seen.append(result)
        if (result.model, result.check) == ("mlp", "config"):
            # The whole process group: the server and its Python backend stubs.
            os.killpg(server.pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)

    def run() -> None:
        options = SmokeOptions(timeout_s=2)
        box["report"] = run_smoke(url, protocol, example_repository, options=options, progress=lose_server_after_config)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        worker.join(150)
    finally:
        if how == "frozen":
            os.killpg(server.pid, signal.SIGCONT)  # let the factory stop it normally
    assert not worker.is_alive(), f"run_smoke hung after the server was {how}"
    report = box["report"]
    assert seen == report.results  # progress saw every result, in order
    assert report.exit_code == 1 and "stopped answering during mlp/inference" in report.server_lost
    assert _statuses(report, "mlp")["ready"] == _statuses(report, "mlp")["config"] == "passed"
    after = [r for r in report.results if (r.model, r.check) not in {("mlp", "ready"), ("mlp", "config")}]
    assert len(after) == 2 * len(CHECKS) - 2 and {r.status for r in after} == {"error"}
    assert report.for_model("mlp")["inference"].message.startswith("server lost: the server stopped answering")
    assert all(r.message.startswith("not run: the server stopped answering during mlp/inference") for r in after[1:])
    assert set(_statuses(report, "text").values()) == {"error"}
