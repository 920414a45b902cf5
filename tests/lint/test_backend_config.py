"""What each backend takes in a config (generator/lint/backend_config.py) beyond the cases in tests/lint_cases.py:
KIND_AUTO as core normalizes it, string states, the onnxruntime refusal in place of the batching warning, and a
model folder without config.pbtxt as the server's auto-complete option decides."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.lint import Environment, lint
from tests.lint_cases import IO, NO_PLATFORM, ORT, PT, PT_FILE, PY, TRT, Case, Model, write_side


def _rules(tmp_path: Path, config: str | None, files: dict, environment: Environment | None = None) -> list[str]:
    roots = [tmp_path / "repo", tmp_path / "r1", tmp_path / "r2"]
    write_side(Case("bc", {"m": Model(config, files)}, {}), "bad", roots)
    return [f.rule for f in lint([tmp_path / "repo"], environment=environment).findings]


@pytest.mark.parametrize(("backend", "gpus", "refused"), [
    ("tensorrt", None, False), ("tensorrt", 0, True), ("tensorrt", 1, False),
    ("openvino", None, False), ("openvino", 0, False), ("openvino", 1, True),
])
def test_kind_auto_is_judged_as_core_normalizes_it(tmp_path: Path, backend: str, gpus: int | None,
                                                   refused: bool) -> None:
    head, files = ((TRT, {"1/model.plan": "p"}) if backend == "tensorrt" else
                   ('backend: "openvino"\n', {"1/model.xml": ""}))
    config = head + NO_PLATFORM + "instance_group [ { kind: KIND_AUTO } ]\n" + IO
    assert _rules(tmp_path, config, files, Environment(gpus=gpus)) == (["instance-kind-backend"] if refused else [])


def test_pytorch_string_states_only_without_batching(tmp_path: Path) -> None:
    state = ('sequence_batching { state [ { input_name: "s__0" output_name: "s__1" data_type: TYPE_STRING dims: '
             '[ 1 ] } ] }\n')
    assert _rules(tmp_path / "a", PT + state + IO, dict(PT_FILE)) == ["backend-data-type"]
    assert _rules(tmp_path / "b", PT.replace("4", "0") + state + IO, dict(PT_FILE)) == []


def test_onnxruntime_refuses_what_the_python_backend_only_warns_about(tmp_path: Path) -> None:
    optional = ('dynamic_batching { }\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    assert _rules(tmp_path / "py", 'backend: "python"\nmax_batch_size: 4\n' + optional, dict(PY)) == [
        "optional-input-batching"]
    assert "optional-input-onnxruntime" in _rules(tmp_path / "ort", ORT + optional, {"1/model.onnx": b""})
    assert "optional-input-batching" not in _rules(tmp_path / "ort2", ORT + optional, {"1/model.onnx": b""})


def test_a_missing_config_follows_the_auto_complete_option(tmp_path: Path) -> None:
    """With auto-complete on (Triton's default) a python model without config.pbtxt loads (a warning); with
    --disable-auto-complete-config it is refused; a folder whose backend cannot be inferred is refused either way."""
    roots = [tmp_path / "repo", tmp_path / "r1", tmp_path / "r2"]
    write_side(Case("nc", {"m": Model(None, dict(PY))}, {}), "bad", roots)
    runner = CliRunner()
    default = runner.invoke(main, ["lint", str(tmp_path / "repo")])
    assert default.exit_code == 0 and "[config-missing]" in default.output, default.output
    assert "backend 'python' from '1/model.py'" in default.output
    strict = runner.invoke(main, ["lint", "--disable-auto-complete-config", str(tmp_path / "repo")])
    assert strict.exit_code == 1 and "auto-complete is off (--disable-auto-complete-config)" in strict.output
    assert "[config-required]" in strict.output
    assert _rules(tmp_path / "x", None, {"1/weights.bin": "w"}) == ["platform-missing"]


INCOMPLETE = ('input [ { name: "INPUT0" data_type: TYPE_FP32 }, { name: "INPUT1" dims: [ 16 ] } ]\n'
              'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n')
AUTO_COMPLETE_PY = "def auto_complete_config(auto_complete_model_config):\n    return auto_complete_model_config\n"


@pytest.mark.parametrize(("head", "files", "fills"), [
    (TRT, {"1/model.plan": "p"}, True),
    ('platform: "tensorflow_savedmodel"\n', {"1/model.savedmodel/": None}, True),
    ('backend: "python"\n', {"1/model.py": AUTO_COMPLETE_PY}, True),
    ('backend: "python"\n', dict(PY), False),  # no auto_complete_config: the python backend fills nothing
    (PT, dict(PT_FILE), False),
])
def test_fields_a_backend_auto_completes_are_errors_only_with_auto_complete_off(
        tmp_path: Path, head: str, files: dict, fills: bool) -> None:
    """Triton's QA L0_model_config autofill_noplatform_success/{tensorrt,tensorflow_savedmodel}/incomplete_input
    and python/incomplete_output load: with auto-complete on, the backend fills a listed tensor's missing data_type
    and dims (a python model through its model.py's auto_complete_config, read as text, never run); with it off,
    core refuses them."""
    missing = {"tensor-data-type", "dims-empty"}
    default = set(_rules(tmp_path / "on", head + INCOMPLETE, files))
    strict = set(_rules(tmp_path / "off", head + INCOMPLETE, files, Environment(auto_complete=False)))
    assert missing <= strict
    assert (missing & default) == (set() if fills else missing)


def test_onnxruntime_lists_the_graph_inputs_only_where_the_config_lists_none(tmp_path: Path) -> None:
    """Triton's QA L0_model_config autofill_noplatform_success/onnx/empty_config: no inputs in the config, and the
    onnxruntime backend's auto-complete lists the graph's; one input listed, it lists nothing more."""
    from tests.lint_cases import onnx_bytes

    graph = {"1/model.onnx": onnx_bytes([("x", "FLOAT", ["b", 4]), ("z", "FLOAT", ["b", 4])],
                                        [("y", "FLOAT", ["b", 4])])}
    outputs = 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    assert _rules(tmp_path / "none", ORT + outputs, graph) == []
    assert _rules(tmp_path / "strict", ORT + outputs, graph, Environment(auto_complete=False)) == ["onnx-io-name"] * 2
    one = ORT + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + outputs
    assert _rules(tmp_path / "one", one, graph) == ["onnx-io-name"]
