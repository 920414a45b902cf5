"""Every lint case against the real Triton 2.51 (CPU, python backend): the flagged side is refused with the words of
the Triton check the rule ports (or loads, for warnings), and the accepted neighbour loads.

One server per set of server options serves the cases (explicit model control, three repositories: the two lint
reads and one "elsewhere" only the server sees). A case's options are its environment's, the options lint was told
(:meth:`generator.lint.Environment.tritonserver_args`); a case without one is served by the CPU test server
(``--disable-auto-complete-config``). The servers run one after another and load the models one by one: a case's
``load_first`` models, kept loaded, then its subject; each loaded model is unloaded after. Cases whose check the CPU
server cannot reach (a backend it lacks, a field newer than 2.51, a load that never finishes) are left out and say
why in ``generator/lint/rules.py``.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from generator.lint.rules import RULE_TABLE
from tests.lint_cases import CASE_IDS, CASES, CPU_SERVER, Case, Model, ensemble, one, step, write_side
from tests.requirements import missing

pytestmark = pytest.mark.triton

#: case id -> (Triton's words for the refusal, or None: Triton loads it; why the case is not run, or "")
EXPECTED: dict[str, tuple[str | None, str]] = {}
for _rule in RULE_TABLE:
    EXPECTED.update({check.case: (check.message, check.server) for check in _rule.checks})
    EXPECTED.update({case: (None, _rule.server) for case in _rule.cases})
SERVED = [c for c in CASES if not EXPECTED[c.id][1]]


def server_args(case: Case) -> tuple[str, ...]:
    """The tritonserver options a case is served with."""
    return tuple((case.environment or CPU_SERVER).tritonserver_args())


@dataclass(frozen=True)
class Outcome:
    """What the server did with one model: loaded, or refused with this text (client error and new log lines)."""

    loaded: bool
    text: str


def _signature(case: Case, side: str) -> tuple[Any, ...]:
    """What a side's models are, names aside, and how they are served."""
    return (server_args(case), case.load_first, *(
        (key, model.config, model.named, tuple(sorted((rel, str(content)) for rel, content in model.files.items())))
        for key, model in case.models(side).items()))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Outcome]]:
    """Load every served case's subject, both sides, into a real server with its options; unload what loaded."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    from generator.serving.server import TritonNotFoundError, TritonServer, find_tritonserver

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc
    roots = [tmp_path_factory.mktemp(f"triton-repo{r}") for r in range(3)]
    groups: dict[tuple[str, ...], list[Case]] = {}
    for case in SERVED:
        groups.setdefault(server_args(case), []).append(case)
        for side in ("bad", "good"):
            write_side(case, side, roots)
    servers: list[TritonServer] = []

    def launch(args: tuple[str, ...]) -> TritonServer:
        server = TritonServer(binary)
        servers.append(server)
        server.start(roots[0], model_control="explicit", allow_symlinks=True, extra_args=[  # cases plant links
            *args, f"--model-repository={roots[1]}", f"--model-repository={roots[2]}"])
        return server

    def start(args: tuple[str, ...], server: TritonServer | None = None) -> tuple[TritonServer, Any]:
        server = server or launch(args)
        server.wait_ready(120)
        return server, grpcclient.InferenceServerClient(server.grpc_url)

    def load(args: tuple[str, ...], names: list[str]) -> Outcome:
        """Load ``names`` in order, keeping each loaded, and say what happened to the last; unload them all. A server
        that crashed (2.51 does, now and then, after a sequence batcher failed to set up) is started again and the
        loads tried again, up to four times in all."""
        nonlocal server, client
        for _ in range(4):
            seen = len(server.log_text())
            try:
                for name in names:
                    client.load_model(name, client_timeout=60)
            except InferenceServerException as exc:
                time.sleep(0.05)  # the poll error reaches the log just after the answer
                if server.running:
                    outcome = Outcome(False, f"{exc.message()}\n{server.log_text()[seen:]}")
                    _unload(client, names)
                    return outcome
                server.stop()
                server, client = start(args)
                continue
            _unload(client, names)
            return Outcome(True, "")
        return Outcome(False, "tritonserver crashed on every try")

    try:
        launched = {args: launch(args) for args in groups}  # they start side by side, then serve one after another
        results: dict[tuple[str, str], Outcome] = {}
        for args, cases in groups.items():
            server, client = start(args, launched[args])
            done: dict[tuple[Any, ...], Outcome] = {}
            for case in cases:
                for side in ("bad", "good"):
                    key = _signature(case, side)  # identical models (most neighbours are the plain model) load once
                    if key not in done:
                        names = [case.name(side, k) for k in (*case.load_first, next(iter(case.models(side))))]
                        done[key] = load(args, names)
                    results[(case.id, side)] = done[key]
            server.stop()
        yield results
    finally:
        for each in servers:
            each.stop()


def _unload(client: Any, names: list[str]) -> None:
    from tritonclient.utils import InferenceServerException

    for name in reversed(names):
        with contextlib.suppress(InferenceServerException):  # not loaded, or a crash the next load's concern
            client.unload_model(name, unload_dependents=True, client_timeout=60)


@pytest.mark.parametrize("case", SERVED, ids=[c.id for c in SERVED])
def test_real_triton(case: Case, outcomes: dict[tuple[str, str], Outcome]) -> None:
    """The flagged side: refused with the check's words (a warning's: loaded); the neighbour: loaded."""
    message, _ = EXPECTED[case.id]
    bad, good = outcomes[(case.id, "bad")], outcomes[(case.id, "good")]
    if message is None:
        assert bad.loaded, bad.text
    else:
        assert not bad.loaded
        assert message in bad.text, bad.text
    assert good.loaded, good.text


def _load_bad_side_alone(case_id: str, triton_server_factory: Any, tmp_path: Path) -> Any:
    """A server of its own for a case that takes Triton down, after its bad side's load was refused; the server."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    case = CASE_IDS[case_id]
    roots = [tmp_path / f"repo{r}" for r in range(3)]
    write_side(case, "bad", roots)
    server = triton_server_factory(roots[0], model_control="explicit", disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException):
        client.load_model(case.name("bad", "m"), client_timeout=60)
    return server


def test_an_oversized_warmup_batch_takes_triton_down(triton_server_factory: Any, tmp_path: Path) -> None:
    """``warmup-batch-size`` is left out of the shared server: Triton 2.51 does not refuse it, it crashes (or, with
    a model that answers nothing, refuses it with "max allowed is"). Either way the model never serves."""
    server = _load_bad_side_alone("warmup-batch-size", triton_server_factory, tmp_path)
    deadline = time.monotonic() + 30  # a crash answers the load before the process is gone
    while server.running and "max allowed is 4" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server.running or "max allowed is 4" in server.log_text()


def test_a_profile_past_int32_takes_triton_down(triton_server_factory: Any, tmp_path: Path) -> None:
    """``instance-group-profile-int32`` is left out of the shared server: core's GetProfileIndex catches only
    std::invalid_argument from stoi, so a profile past int32 aborts the whole server (SIGABRT), not just the load."""
    server = _load_bad_side_alone("instance-group-profile-int32", triton_server_factory, tmp_path)
    deadline = time.monotonic() + 30
    while server.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server.running
    assert "terminate called after throwing an instance of 'std::out_of_range'" in server.log_text()


def test_url_reads_the_missing_backends_and_external_models_load_from_elsewhere(
        triton_server_factory: Any, tmp_path: Path) -> None:
    """``--url``: a backend the server refused a model for is absent (the GPU count stays unknown, and is said to
    be); ``--external-model``: an ensemble whose step lives in a repository lint does not read loads on the server
    that serves both, and lint accepts it."""
    import tritonclient.grpc as grpcclient
    from click.testing import CliRunner
    from tritonclient.utils import InferenceServerException

    from generator.cli import main

    roots = [tmp_path / f"repo{r}" for r in range(3)]
    missing = CASE_IDS["environment-backend"]
    write_side(missing, "bad", roots)
    split = Case("split", {"e": ensemble(step()), "s@2": Model()}, {})
    write_side(split, "bad", roots)
    server = triton_server_factory(roots[0], model_control="explicit", disable_auto_complete_config=True,
                                   extra_args=[f"--model-repository={roots[2]}"])
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException, match="unable to find backend library for backend 'nosuch'"):
        client.load_model(missing.name("bad", "m"), client_timeout=60)
    client.load_model(split.name("bad", "e"), client_timeout=60)  # its step from the other repository

    runner = CliRunner()
    external = ["--external-model", split.name("bad", "s")]
    result = runner.invoke(main, ["lint", "--json", "--url", server.grpc_url, *external, str(roots[0])])
    payload = json.loads(result.stdout)
    assert [(f["rule"], f["file"]) for f in payload["findings"]] == [
        ("environment-backend", f"{missing.name('bad', 'm')}/config.pbtxt")]
    assert f"server {server.grpc_url}" in payload["findings"][0]["message"]
    assert list(payload["skipped"]) == ["environment-gpus"]
    without = json.loads(runner.invoke(main, ["lint", "--json", str(roots[0])]).stdout)
    assert {f["rule"] for f in without["findings"]} == {"ensemble-model-missing"}
    server.stop()
    assert runner.invoke(main, ["lint", "--url", server.grpc_url, str(roots[0])]).exit_code == 3


def test_a_hidden_folder_stops_triton_in_model_control_none(triton_server_factory: Any, tmp_path: Path) -> None:
    """``model-folder-hidden``: with model control 'none' Triton loads every sub-folder, '.cache' too, fails on it
    and does not start (the warning's reason)."""
    from generator.serving.server import TritonStartError

    write_side(Case("hidden", one(), {}), "bad", [tmp_path, tmp_path / "r1", tmp_path / "r2"])
    (tmp_path / ".cache").mkdir()
    with pytest.raises(TritonStartError, match=r"\.cache"):
        triton_server_factory(tmp_path, ready_timeout=60, exit_timeout_s=1)


def test_a_non_batching_step_in_a_batching_ensemble_fails_batched_requests(
        triton_server_factory: Any, tmp_path: Path) -> None:
    """``ensemble-step-batching`` is a warning, not an error: Triton 2.51 loads the ensemble and serves batch 1, but a
    request with a batch of 2 fails the step's shape check; its neighbour (step dims [-1, 4]) serves both."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    case = CASE_IDS["ensemble-step-batching"]
    roots = [tmp_path / f"repo{r}" for r in range(3)]
    for side in ("bad", "good"):
        write_side(case, side, roots)
    server = triton_server_factory(roots[0], model_control="explicit", disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)

    def infer(side: str, batch: int) -> None:
        request = grpcclient.InferInput("x", [batch, 4], "FP32")
        request.set_data_from_numpy(np.ones((batch, 4), np.float32))
        client.infer(case.name(side, "e"), [request], client_timeout=60)

    for side in ("bad", "good"):
        client.load_model(case.name(side, "e"), client_timeout=60)
        infer(side, 1)
    infer("good", 2)
    with pytest.raises(InferenceServerException, match=r"unexpected shape for input 'x'.*Expected \[4\], got \[2,4\]"):
        infer("bad", 2)


def test_a_leading_zero_version_folder_is_a_warning_and_triton_serves_the_others(
        triton_server_factory: Any, tmp_path: Path) -> None:
    """Issue 44: Triton skips a version folder named '003' (its QA lifecycle test) and serves version 1; lint warns
    about the folder (gen-repo's verify and publish refuse it) and exits 0."""
    import shutil

    import tritonclient.grpc as grpcclient
    from click.testing import CliRunner

    from generator.cli import main

    model = tmp_path / "mlp_python"
    shutil.copytree(Path(__file__).parents[1] / "lint_corpus" / "good" / "mlp_python", model)
    shutil.copytree(model / "1", model / "003")
    result = CliRunner().invoke(main, ["lint", "--json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [(f["rule"], f["severity"], f["file"]) for f in json.loads(result.stdout)["findings"]] == [
        ("version-leading-zero", "warning", "mlp_python/003")]
    server = triton_server_factory(tmp_path, disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert client.is_model_ready("mlp_python", "1")
    assert not client.is_model_ready("mlp_python", "3")
    assert [m.version for m in client.get_model_repository_index().models if m.name == "mlp_python"] == ["1"]
