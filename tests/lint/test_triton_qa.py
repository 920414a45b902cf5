"""Lint against a slice of Triton's own QA folders (tests/triton_qa, whose README says where each config comes from).

Each case is a repository as its QA test prepares it, with Triton's verdict on the models the test judges: lint
reports every refusal it can decide from the files (with the rule the case names) and no error on a model Triton
loads (a rule beyond Triton the case names aside). Lint is told the server's options the QA runs with and the QA
machine's one GPU. The files the QA copies from /data are placeholders here (lint does not read TorchScript,
TensorFlow or identity-backend files); model.py files are stand-ins. The cases the CPU server can load as they are
(the python backend's) are loaded into the real Triton 2.51 too, to hold their verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.lint import Environment, Finding, lint
from tests.lint_cases import PY_MODEL
from tests.requirements import missing

QA = Path(__file__).parents[1] / "triton_qa"
INDEX = json.loads((QA / "cases.json").read_text())
CASES = INDEX["cases"]
#: What gen_qa_models.py writes into output0_labels.txt (16 labels).
LABELS = "".join(f"label{i}\n" for i in range(16))


def write_case(case: dict[str, Any], root: Path) -> Path:
    """The case's repository under ``root``: its configs, and a placeholder for every file the QA copies in."""
    repository = root / case["id"].replace("/", "-")
    for model, files in case["files"].items():
        folder = repository / model
        folder.mkdir(parents=True)
        config = QA / case["id"] / model / "config.pbtxt"
        if config.is_file():
            (folder / "config.pbtxt").write_bytes(config.read_bytes())
        for rel in files:
            path = folder / rel
            if rel.endswith("/"):
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(PY_MODEL if rel.endswith(".py") else LABELS if rel.endswith("labels.txt") else "")
    return repository


def environment(case: dict[str, Any]) -> Environment:
    """What lint is told: the QA server's options, on a machine with the QA's GPUs."""
    return Environment.from_tritonserver_args(case.get("options", ()), gpus=INDEX["gpus"], source="the QA machine")


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[Finding]]]:
    """Every case linted alone: case id -> model folder -> its findings."""
    root = tmp_path_factory.mktemp("qa")
    out: dict[str, dict[str, list[Finding]]] = {}
    for case in CASES:
        by_model: dict[str, list[Finding]] = {model: [] for model in case["files"]}
        for finding in lint([write_case(case, root)], environment=environment(case)).findings:
            by_model[finding.file.split("/")[0]].append(finding)
        out[case["id"]] = by_model
    return out


def _errors(found: list[Finding]) -> set[str]:
    return {f.rule for f in found if f.severity == "error"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_lint_catches_every_decidable_refusal_and_passes_what_triton_loads(
        case: dict[str, Any], findings: dict[str, dict[str, list[Finding]]]) -> None:
    found = findings[case["id"]]
    for model, verdict in case.get("refused", {}).items():
        if "rule" in verdict:
            assert verdict["rule"] in _errors(found[model]), [str(f) for f in found[model]]
    accepted = case.get("accepted", {})
    for model in accepted.get("models", ()):
        assert _errors(found[model]) <= set(accepted.get("beyond_triton", ())), [str(f) for f in found[model]]


def test_the_slice_counts() -> None:
    """The slice as the report states it: 34 cases, 16 refusals (14 decidable), 39 accepted models."""
    refusals = [v for case in CASES for v in case.get("refused", {}).values()]
    accepted = [m for case in CASES for m in case.get("accepted", {}).get("models", ())]
    assert (len(CASES), len(refusals), len([v for v in refusals if "rule" in v]), len(accepted)) == (34, 16, 14, 39)
    assert all(("rule" in v) != ("undecidable" in v) for v in refusals)


# ---------------------------------------------------------------------------- the real server
SERVED = [case for case in CASES if case.get("cpu_server")]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], str | None]]:
    """The CPU server's verdict on each judged model of the served cases (None: loaded, else its refusal).

    One server per set of QA options (auto-complete on, as the QA runs) and of cases whose model names differ,
    explicit model control, one model at a time.
    """
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    from generator.serving.server import TritonNotFoundError, TritonServer, find_tritonserver

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc
    out: dict[tuple[str, str], str | None] = {}
    groups: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []  # same options, model names unique
    for case in SERVED:
        options = tuple(case.get("options", ()))
        group = next((cases for o, cases in groups if o == options
                      and not any(set(case["files"]) & set(c["files"]) for c in cases)), None)
        if group is None:
            groups.append((options, group := []))
        group.append(case)
    servers = [TritonServer(binary) for _ in groups]
    try:
        for index, (server, (options, cases)) in enumerate(zip(servers, groups, strict=True)):  # side by side
            repositories = [write_case(case, tmp_path_factory.mktemp(f"qa-server{index}")) for case in cases]
            server.start(repositories[0], model_control="explicit", extra_args=[
                *options, *(f"--model-repository={r}" for r in repositories[1:])])
        for server, (_, cases) in zip(servers, groups, strict=True):
            server.wait_ready(120)
            client = grpcclient.InferenceServerClient(server.grpc_url)
            for case in cases:
                for model in [*case.get("refused", {}), *case.get("accepted", {}).get("models", ())]:
                    seen = len(server.log_text())
                    try:
                        client.load_model(model, client_timeout=60)
                    except InferenceServerException as error:
                        out[(case["id"], model)] = f"{error.message()}\n{server.log_text()[seen:]}"
                    else:
                        out[(case["id"], model)] = None
                        client.unload_model(model, client_timeout=60)
            server.stop()
    finally:
        for server in servers:
            server.stop()
    yield out


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("case", SERVED, ids=[c["id"] for c in SERVED])
def test_the_cpu_server_gives_the_qa_verdict(case: dict[str, Any],
                                             verdicts: dict[tuple[str, str], str | None]) -> None:
    for model, verdict in case.get("refused", {}).items():
        text = verdicts[(case["id"], model)]
        assert text is not None and verdict["words"] in text, text
    for model in case.get("accepted", {}).get("models", ()):
        assert verdicts[(case["id"], model)] is None, verdicts[(case["id"], model)]
