"""Issue 44, fragments per target: a ``pbtxt:`` fragment sets only what the target's backend reads
(generator/planning/fragments.py BACKEND_READS), through the real manifest loader and planner; what it accepts for
the python target loads in the real Triton."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from generator.cli import main
from generator.errors import GenRepoError
from generator.planning.fragments import BACKEND_READS, fragment_kind
from generator.planning.options import TARGETS
from tests.manifest_helpers import REPO, batch_graph, one_model, write_manifest

#: Every parameter some target's backend reads, and one none does.
PARAMETERS = sorted(set().union(*(r.parameters for r in BACKEND_READS.values())) | {"NOT_READ_BY_ANY"})
#: A value each parameter may take (the table judges keys; confinement judges the path).
VALUES = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env.tar.gz"}
OPTIMIZATION = [f.name for f in model_config_pb2.ModelOptimizationPolicy.DESCRIPTOR.fields]
ACCELERATORS = [(where, name) for where in ("gpu_execution_accelerator", "cpu_execution_accelerator")
                for name in ("tensorrt", "cuda", "openvino", "nosuch")]


def _plan(tmp_path: Path, target: str, fragment: str) -> tuple[Any, list[tuple[str, str]]]:
    """(the planned model or None, the problems as (pointer, message))."""
    try:
        return one_model(tmp_path, batch_graph(), target=target, pbtxt=fragment), []
    except GenRepoError as error:
        return None, [(p.pointer, p.message) for p in error.problems]


def _refused(problems: list[tuple[str, str]], target: str, what: str, why: str) -> None:
    kind = fragment_kind(target, 8)
    assert problems == [("/models/0/pbtxt", next(m for _, m in problems if what in m))], problems
    (_, message), = problems
    assert message.startswith(f"pbtxt fragment may not set {what} ({kind}): ") and why in message, message


@pytest.mark.parametrize(("target", "key"), [(t, k) for t in TARGETS for k in PARAMETERS])
def test_a_parameter_is_accepted_exactly_when_the_targets_backend_reads_it(tmp_path: Path, target: str,
                                                                           key: str) -> None:
    fragment = f'parameters {{ key: "{key}" value {{ string_value: "{VALUES.get(key, "1")}" }} }}'
    model, problems = _plan(tmp_path, target, fragment)
    reads = BACKEND_READS[target]
    if key in reads.parameters:
        assert model is not None, problems
        assert model.config.parameters[key].string_value == VALUES.get(key, "1")
    else:
        _refused(problems, target, f"parameters[{key!r}]", f"the {reads.backend} backend does not read it")


def _optimization_setting(name: str) -> str:
    config = model_config_pb2.ModelConfig()
    field = config.optimization.DESCRIPTOR.fields_by_name[name]
    if field.message_type is not None:
        getattr(config.optimization, name).SetInParent()
    elif field.enum_type is not None:
        setattr(config.optimization, name, field.enum_type.values[-1].number)
    else:
        setattr(config.optimization, name, True if field.type == field.TYPE_BOOL else 1)
    return text_format.MessageToString(config)


@pytest.mark.parametrize(("target", "name"), [(t, n) for t in TARGETS for n in OPTIMIZATION])
def test_an_optimization_setting_is_accepted_exactly_when_the_targets_backend_reads_it(
        tmp_path: Path, target: str, name: str) -> None:
    model, problems = _plan(tmp_path, target, _optimization_setting(name))
    reads = BACKEND_READS[target]
    if name in reads.optimization:
        assert model is not None, problems
        assert name in {f.name for f, _ in model.config.optimization.ListFields()}  # merged
    else:
        _refused(problems, target, f"optimization.{name}", f"the {reads.backend} backend does not read it")


@pytest.mark.parametrize(("target", "where", "name"), [(t, w, n) for t in TARGETS for w, n in ACCELERATORS])
def test_an_execution_accelerator_is_accepted_only_where_the_backend_knows_it(tmp_path: Path, target: str,
                                                                             where: str, name: str) -> None:
    fragment = f'optimization {{ execution_accelerators {{ {where} {{ name: "{name}" }} }} }}'
    model, problems = _plan(tmp_path, target, fragment)
    known = BACKEND_READS[target].accelerators.get(where, frozenset())
    if "execution_accelerators" not in BACKEND_READS[target].optimization:
        _refused(problems, target, "optimization.execution_accelerators", "backend does not read it")
    elif name in known:
        assert model is not None, problems
    else:
        _refused(problems, target, f"optimization.execution_accelerators.{where}[0] {name!r}",
                 "fails the load on another")


@pytest.mark.parametrize("target", TARGETS)
def test_a_decoupled_policy_is_refused_on_every_target(tmp_path: Path, target: str) -> None:
    _, problems = _plan(tmp_path, target, "model_transaction_policy { decoupled: true }")
    _refused(problems, target, "model_transaction_policy", "answer each request once")


def test_every_refusal_of_a_fragment_is_reported_at_once_exit_2(tmp_path: Path) -> None:
    """The issue's cases in one onnx fragment: a decoupled policy, a python-backend parameter, a TensorRT-backend
    optimization; plan exits 2 with each at the manifest's pointer, no traceback."""
    fragment = ('model_transaction_policy { decoupled: true }\n'
                'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/e.tar.gz" } }\n'
                'optimization { cuda { graphs: true } }\n')
    shutil.copy(REPO / "examples" / "specs" / "mlp.graphspec.json", tmp_path)
    manifest = write_manifest(tmp_path, {"models": [{"name": "mlp", "spec": "mlp.graphspec.json", "target": "onnx",
                                                     "pbtxt": fragment}]}, name="gen-repo.json")
    result = CliRunner().invoke(main, ["plan", str(manifest), "--json"])
    assert result.exit_code == 2, result.output
    problems = [p for r in json.loads(result.stdout)["refused"] for p in r["problems"]]
    assert [(p["pointer"], p["message"].split(" (")[0]) for p in problems] == [
        ("/models/0/pbtxt", "pbtxt fragment may not set model_transaction_policy"),
        ("/models/0/pbtxt", "pbtxt fragment may not set optimization.cuda"),
        ("/models/0/pbtxt", "pbtxt fragment may not set parameters['EXECUTION_ENV_PATH']")], problems
    assert "Traceback" not in result.output


#: Fragments the python target accepts, one model each: its backend's parameters, and the fields core reads.
PYTHON_FRAGMENTS = {
    "params": 'parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value { string_value: "no" } }\n'
              'instance_group { kind: KIND_CPU count: 2 }',
    "versions": "version_policy { all { } }\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"
                'metric_tags { key: "team" value: "a" }',
    "warmup": 'model_warmup { name: "w" batch_size: 2 inputs { key: "input_x" value { data_type: TYPE_FP32 dims: 16 '
              "zero_data: true } } }",
}


@pytest.mark.triton
def test_the_fragments_the_python_target_accepts_load_in_triton(tmp_path: Path, triton_server_factory: Any) -> None:
    """One server, a few representative fragments the table accepts for the python target: every model loads with
    the fragment in its served config. (The onnx target's need Triton's onnxruntime backend, which the CPU server
    lacks.)"""
    import tritonclient.grpc as grpcclient

    from tests.planning.test_config_triton import TRIVIAL_MODEL_PY

    spec = str(REPO / "examples" / "specs" / "mlp.graphspec.json")
    manifest = write_manifest(tmp_path / "project", {"models": [
        {"name": name, "spec": spec, "target": "python", "pbtxt": fragment}
        for name, fragment in PYTHON_FRAGMENTS.items()]})
    out = tmp_path / "repo"
    result = CliRunner().invoke(main, ["config", str(manifest), "-o", str(out), "--allow-outside"])
    assert result.exit_code == 0, result.output
    for name in PYTHON_FRAGMENTS:
        (out / name / "1" / "model.py").write_text(TRIVIAL_MODEL_PY)
    server = triton_server_factory(out, disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert all(client.is_model_ready(name) for name in PYTHON_FRAGMENTS), server.log_tail()
    assert client.get_model_config("params").config.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value == "no"
    assert client.get_model_config("versions").config.version_policy.HasField("all")
