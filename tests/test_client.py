"""Client-side request validation: contracts from contract.json, config.pbtxt and a live server; each bad request."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import triton_to_np_dtype

from generator.cli import main
from generator.client import (
    DATA_TYPES,
    ModelContract,
    RequestProblemKind,
    RequestValidationError,
    numpy_dtype,
    to_infer_inputs,
    wire_datatype,
)
from generator.errors import GenRepoError
from tests.manifest_helpers import EXAMPLES_MANIFEST, REPO

ZOO = REPO / "tests" / "zoo"

GOOD = Path(__file__).parent / "lint_corpus" / "good"

TEXT_CONTRACT = {
    "format": "gen-repo-contract/1",
    "model": "text",
    "version": 1,
    "platform": "tensorrt_plan",
    "max_batch_size": 8,
    "inputs": [
        {
            "name": "input_ids",
            "data_type": "TYPE_INT64",
            "dims": [-1],
            "min_shape": [1, 4],
            "opt_shape": [4, 64],
            "max_shape": [8, 128],
        },
        {
            "name": "attention_mask",
            "data_type": "TYPE_INT64",
            "dims": [-1],
            "min_shape": [1, 4],
            "opt_shape": [4, 64],
            "max_shape": [8, 128],
        },
    ],
    "outputs": [{"name": "logits", "data_type": "TYPE_FP32", "dims": [2], "min_shape": [1, 2], "max_shape": [8, 2]}],
}

CONFIG = """
name: "mixed"
backend: "python"
max_batch_size: 4
input [
  { name: "image", data_type: TYPE_FP16, dims: [ 3, -1, -1 ] },
  { name: "prompt", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "mask", data_type: TYPE_BOOL, dims: [ 2 ], optional: true }
]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
"""


@pytest.fixture
def text() -> ModelContract:
    return ModelContract.from_contract_dict(TEXT_CONTRACT)


@pytest.fixture
def mixed() -> ModelContract:
    return ModelContract.from_config(text_format.Parse(CONFIG, model_config_pb2.ModelConfig()))


def _kinds(problems: list) -> list[RequestProblemKind]:
    return [p.kind for p in problems]


def test_import_does_not_load_torch_or_onnx() -> None:
    code = "import sys, generator.client; print(sorted({'torch', 'onnx', 'onnxruntime'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------- loaders
def test_contract_from_contract_json_keeps_exact_ranges(text: ModelContract) -> None:
    ids = text.input("input_ids")
    assert (ids.min_shape, ids.opt_shape, ids.max_shape) == ((1, 4), (4, 64), (8, 128))
    assert ids.dtype == np.int64 and ids.datatype == "INT64"
    assert text.outputs[0].opt_shape is None


def test_contract_from_repository_prefers_contract_json() -> None:
    contract = ModelContract.from_repository(GOOD, "mlp_python")
    assert contract.source.endswith("1/gen_repo/contract.json")
    assert contract.version == 1 and contract.max_batch_size == 32
    assert contract.input("input_x").opt_shape == (16, 16)


def test_contract_from_repository_refuses_a_contract_naming_another_model(tmp_path: Path) -> None:
    """The contract read for a model folder must name that model: requests built from it would go elsewhere."""
    repo = tmp_path / "repo"
    shutil.copytree(GOOD / "mlp_python", repo / "mlp_python")
    contract = repo / "mlp_python" / "1" / "gen_repo" / "contract.json"
    contract.write_text(json.dumps({**json.loads(contract.read_text()), "model": "other"}))
    with pytest.raises(GenRepoError, match=r"names the model 'other', but the contract lies in "
                                           r"the model folder 'mlp_python'"):
        ModelContract.from_repository(repo, "mlp_python")


def test_contract_from_repository_falls_back_to_config() -> None:
    contract = ModelContract.from_repository(GOOD, "tiny_classifier")
    assert contract.source.endswith("config.pbtxt")
    assert contract.max_batch_size == 0 and contract.version == 1
    data = contract.input("data_0")
    assert data.dims == (3, 8, 8) and data.min_shape == data.max_shape == (3, 8, 8)  # dims, not the reshape


def test_contract_from_config_ranges(mixed: ModelContract) -> None:
    image = mixed.input("image")
    # batch 1..max_batch_size; a -1 dim allows any size >= 0 (what Triton accepts), with no upper bound.
    assert image.min_shape == (1, 3, 0, 0)
    assert image.max_shape == (4, 3, None, None)
    assert mixed.input("mask").optional and not mixed.input("prompt").optional


def test_contract_from_a_repository_with_a_config_alone(tmp_path: Path) -> None:
    path = tmp_path / "mixed" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text(CONFIG.replace('name: "mixed"\n', ""))
    contract = ModelContract.from_repository(tmp_path, "mixed")
    assert contract.name == "mixed" and contract.source == str(path)


def test_data_type_mapping_matches_tritonclient() -> None:
    for config_type, (wire, _) in DATA_TYPES.items():
        assert wire_datatype(config_type) == wire
        if config_type != "TYPE_BF16":
            assert numpy_dtype(config_type) == np.dtype(triton_to_np_dtype(wire))
    with pytest.raises(ValueError, match="TYPE_FP8"):
        wire_datatype("TYPE_FP8")


# ---------------------------------------------------------------------------- valid requests
@pytest.mark.parametrize("shape", ["min", "opt", "max"])
def test_example_inputs_validate(shape: str, text: ModelContract, mixed: ModelContract) -> None:
    for contract in (text, mixed, ModelContract.from_repository(GOOD, "mlp_python")):
        inputs = contract.example_inputs(shape)
        assert contract.validate(inputs) == []
        assert set(inputs) == {t.name for t in contract.inputs}
    sizes = {"min": (1, 4), "opt": (4, 64), "max": (8, 128)}[shape]
    assert text.example_inputs(shape)["input_ids"].shape == sizes


def test_example_inputs_batch_size_and_seed(text: ModelContract) -> None:
    inputs = text.example_inputs("opt", batch_size=7, seed=3)
    assert inputs["input_ids"].shape == (7, 64) and text.validate(inputs) == []
    again = text.example_inputs("opt", batch_size=7, seed=3)
    assert all(np.array_equal(inputs[k], again[k]) for k in inputs)
    with pytest.raises(ValueError, match=r"outside 1\.\.8"):
        text.example_inputs(batch_size=9)
    with pytest.raises(ValueError, match="does not batch"):
        ModelContract.from_repository(GOOD, "tiny_classifier").example_inputs(batch_size=1)


def test_optional_input_may_be_left_out(mixed: ModelContract) -> None:
    inputs = mixed.example_inputs()
    del inputs["mask"]
    assert mixed.validate(inputs) == []


def test_string_inputs_accept_bytes_and_objects(mixed: ModelContract) -> None:
    inputs = mixed.example_inputs()
    inputs["prompt"] = np.array([[b"a"], [b"bb"]], dtype=np.bytes_)
    inputs["image"] = inputs["image"].repeat(2, axis=0)
    inputs["mask"] = inputs["mask"].repeat(2, axis=0)
    assert mixed.validate(inputs) == []


# ---------------------------------------------------------------------------- one test per kind of bad request
def test_missing_input(text: ModelContract) -> None:
    inputs = text.example_inputs()
    del inputs["attention_mask"]
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.MISSING]
    assert "'attention_mask' is missing" in problems[0].message


def test_unknown_input(text: ModelContract) -> None:
    inputs = {**text.example_inputs(), "token_type_ids": np.zeros((4, 64), np.int64)}
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.UNKNOWN]
    assert "token_type_ids" in problems[0].message and "attention_mask, input_ids" in problems[0].message


def test_wrong_dtype(text: ModelContract) -> None:
    inputs = text.example_inputs()
    inputs["input_ids"] = inputs["input_ids"].astype(np.int32)
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.DTYPE]
    assert problems[0].message == "input 'input_ids' has dtype int32, expected int64 (TYPE_INT64)"


def test_unicode_array_for_string_input_is_a_dtype_problem(mixed: ModelContract) -> None:
    inputs = mixed.example_inputs()
    inputs["prompt"] = np.array([["hello"]])  # numpy 'U': tritonclient cannot serialise it
    assert _kinds(mixed.validate(inputs)) == [RequestProblemKind.DTYPE]


def test_wrong_rank(text: ModelContract) -> None:
    inputs = text.example_inputs()
    inputs["input_ids"] = inputs["input_ids"][0]  # batch axis dropped
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.RANK]
    assert "has 1 axes" in problems[0].message and "expected 2" in problems[0].message
    assert "batch axis first" in problems[0].message


def test_batch_too_large(text: ModelContract) -> None:
    inputs = {k: np.concatenate([v, v, v]) for k, v in text.example_inputs("max").items()}  # 24 > 8
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.BATCH_TOO_LARGE] * 2
    assert problems[0].axis == 0 and problems[0].value == 24 and problems[0].allowed == (1, 8)
    assert "above max_batch_size 8" in problems[0].message


def test_batch_sizes_disagree(text: ModelContract) -> None:
    inputs = text.example_inputs("opt")
    inputs["attention_mask"] = inputs["attention_mask"][:2]
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.BATCH_MISMATCH]
    assert "'attention_mask' has 2, 'input_ids' has 4" in problems[0].message


def test_dim_out_of_range(text: ModelContract) -> None:
    inputs = text.example_inputs()
    inputs["input_ids"] = np.zeros((4, 200), np.int64)
    inputs["attention_mask"] = np.zeros((4, 200), np.int64)
    problems = text.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.DIM_OUT_OF_RANGE] * 2
    first = problems[0]
    assert (first.input, first.axis, first.value, first.allowed) == ("input_ids", 1, 200, (4, 128))
    assert first.message.startswith("input 'input_ids' axis 1 is 200, allowed 4..128")


def test_static_dim_mismatch_from_config(mixed: ModelContract) -> None:
    inputs = mixed.example_inputs()
    inputs["image"] = np.zeros((1, 4, 8, 8), np.float16)
    problems = mixed.validate(inputs)
    assert _kinds(problems) == [RequestProblemKind.DIM_OUT_OF_RANGE]
    assert "axis 1 is 4, allowed exactly 3" in problems[0].message


def test_raise_on_error_carries_every_problem(text: ModelContract) -> None:
    with pytest.raises(RequestValidationError) as info:
        text.validate({"input_ids": np.zeros((9, 2), np.int32)}, raise_on_error=True)
    assert _kinds(info.value.problems) == [  # in the contract's input order
        RequestProblemKind.DTYPE,
        RequestProblemKind.BATCH_TOO_LARGE,
        RequestProblemKind.DIM_OUT_OF_RANGE,
        RequestProblemKind.MISSING,
    ]
    assert "request for model 'text' is invalid (4 problem(s))" in str(info.value)
    assert text.validate(text.example_inputs(), raise_on_error=True) == []


# ---------------------------------------------------------------------------- every problem in one pass
def _planned_contracts() -> dict[str, ModelContract]:
    """The example's and the zoo's contracts as the build writes them (planned: no export, no torch).

    Integer inputs the manifest gives no values get the domain the build finds in the exported graph
    (:mod:`generator.building.export.onnx_indices`, :mod:`generator.building.export.onnx_masks`): an index into a
    100-row table (the example's embedding), a mask 0..1.
    """
    from generator.manifest.loading import load_manifest
    from generator.planning.contract import contract_from_plan
    from generator.planning.plan import plan_repository
    from generator.planning.values import ValueDomain, is_mask_like

    contracts = {}
    for manifest in (EXAMPLES_MANIFEST, ZOO / "gen-repo.yaml"):
        plan = plan_repository(load_manifest(manifest))
        for model in (*plan.models, *plan.ensembles):
            found = {}
            for tensor in model.inputs:
                kind = numpy_dtype(tensor.data_type).kind if tensor.data_type != "TYPE_STRING" else "O"
                if kind in "biu" and is_mask_like(tensor.name):
                    found[tensor.name] = ValueDomain(0, 1, mask_keep=False if kind == "b" else 1, source="mask")
                elif kind in "iu":
                    found[tensor.name] = ValueDomain(0, 99, source="index into the 100-row table 'embed.weight'")
            contracts[f"{manifest.parent.name}/{model.name}"] = ModelContract.from_contract_dict(
                contract_from_plan(model, found))
    return contracts


PLANNED = _planned_contracts()
Planted = set[tuple[RequestProblemKind, str]]


def _grow(array: np.ndarray, axis: int, size: int) -> np.ndarray:
    """``array`` with ``axis`` of ``size``, its entries repeated (so every value stays a valid one)."""
    return np.take(array, np.arange(size) % array.shape[axis], axis=axis)


def _outside(tensor, dtype: np.dtype) -> float | None:
    """A value outside ``tensor``'s domain that ``dtype`` holds exactly; None when there is none to plant."""
    domain = tensor.values
    if domain is None or dtype.kind not in "iuf":
        return None
    value = max(domain.values) + 1 if domain.values is not None else (domain.high + 1 if domain.high is not None
                                                                        else None)
    if value is None or (dtype.kind in "iu" and value > np.iinfo(dtype).max):
        return None
    return value


def _plant_faults(data: st.DataObject, contract: ModelContract) -> tuple[dict[str, np.ndarray], Planted]:
    """A valid request for ``contract`` with independent faults planted in it, and the problems each must give."""
    request = contract.example_inputs(data.draw(st.sampled_from(["min", "opt", "max"])),
                                      seed=data.draw(st.integers(0, 2**32 - 1)))
    planted: Planted = set()
    too_large = contract.batching and data.draw(st.booleans(), label="batch above max_batch_size")
    if too_large:
        request = {n: _grow(a, 0, contract.max_batch_size + 1) for n, a in request.items()}
    for tensor in contract.inputs:
        array = request[tensor.name]
        faults = data.draw(st.sets(st.sampled_from(["missing", "value", "dtype", "shape"]), max_size=3),
                           label=tensor.name)
        if "missing" in faults:
            del request[tensor.name]
            planted.add((RequestProblemKind.MISSING, tensor.name))
            continue
        shape_fault = data.draw(st.sampled_from(["rank", "dim"])) if "shape" in faults else None
        growable = [axis for axis in range(array.ndim) if not (contract.batching and axis == 0)
                    and tensor.max_shape[axis] is not None]
        if shape_fault == "dim" and growable:
            axis = data.draw(st.sampled_from(growable))
            array = _grow(array, axis, int(tensor.max_shape[axis]) + 1)  # one past the largest size allowed
            planted.add((RequestProblemKind.DIM_OUT_OF_RANGE, tensor.name))
        wrong = np.dtype(np.float32 if array.dtype == np.float64 else np.int8 if array.dtype.kind == "b"
                         else np.float64)
        outside = _outside(tensor, array.dtype)
        if "value" in faults and outside is not None:
            array = array.copy()
            array.flat[data.draw(st.integers(0, array.size - 1))] = outside
            planted.add((RequestProblemKind.VALUE_OUT_OF_RANGE, tensor.name))
        if "dtype" in faults:
            array = array.astype(wrong) if array.dtype != object else np.zeros(array.shape, wrong)
            planted.add((RequestProblemKind.DTYPE, tensor.name))
        if shape_fault == "rank":
            array = array[..., np.newaxis]
            planted.add((RequestProblemKind.RANK, tensor.name))
        elif too_large:  # an input of the wrong rank has no batch axis to judge
            planted.add((RequestProblemKind.BATCH_TOO_LARGE, tensor.name))
        request[tensor.name] = array
    if data.draw(st.booleans(), label="unknown input"):
        request["not_an_input"] = np.zeros((1, 2), np.float32)
        planted.add((RequestProblemKind.UNKNOWN, "not_an_input"))
    return request, planted


def _check_file(contract: ModelContract, request: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """check-request's problems for ``request`` saved as an .npz, against ``contract`` written as contract.json."""
    from generator.cli.check_request import check_request_file
    from generator.planning.contract import render_contract

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        written = root / "repo" / contract.name / "1" / "gen_repo" / "contract.json"
        written.parent.mkdir(parents=True)
        written.write_text(render_contract(contract.to_dict()))
        np.savez(root / "request.npz", **request)
        read = ModelContract.from_repository(root / "repo", contract.name)
        (case,) = check_request_file(read, root / "request.npz")["cases"]
    return [(p["kind"], p["input"]) for p in case["problems"]]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_planted_fault_is_reported_in_one_pass(data: st.DataObject) -> None:
    """Faults planted in a valid request, several at once and several in one input (a value past its domain in an
    array of the wrong shape or dtype), are each reported by one ``validate``, and nothing else is."""
    contract = PLANNED[data.draw(st.sampled_from(sorted(PLANNED)), label="model")]
    request, planted = _plant_faults(data, contract)
    problems = contract.validate(request)
    found = [(p.kind, p.input) for p in problems]
    assert sorted(found) == sorted(planted), "\n".join(p.message for p in problems)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_check_request_reports_every_planted_fault_from_the_file(data: st.DataObject) -> None:
    """The same through check-request's .npz reading: arrays it refuses by their headers still have values judged."""
    contract = PLANNED[data.draw(st.sampled_from(sorted(PLANNED)), label="model")]
    request, planted = _plant_faults(data, contract)
    assert sorted(_check_file(contract, request)) == sorted((k.value, n) for k, n in planted)


@pytest.mark.parametrize("name", sorted(PLANNED))
def test_no_fault_is_reported_for_a_valid_request(name: str) -> None:
    contract = PLANNED[name]
    for shape in ("min", "opt", "max"):
        for seed in range(3):
            request = contract.example_inputs(shape, seed=seed)
            assert contract.validate(request) == []
    assert _check_file(contract, contract.example_inputs("max")) == []


def test_check_request_lists_a_value_past_its_table_beside_a_sequence_too_long(tmp_path: Path) -> None:
    """The issue's request: ids of 150 (the example's table has 100 rows) in a sequence of 70 (at most 64), without
    its attention mask. Every problem is listed at once, not the value only after the shape is fixed."""
    contract = PLANNED["examples/text"]
    repo = tmp_path / "repo" / "text" / "1" / "gen_repo"
    repo.mkdir(parents=True)
    from generator.planning.contract import render_contract

    (repo / "contract.json").write_text(render_contract(contract.to_dict()))
    ids = np.full((2, 70), 150, np.int64)
    np.savez(tmp_path / "request.npz", input_input_ids=ids)
    result = CliRunner().invoke(main, ["check-request", "--repo", str(tmp_path / "repo"), "text",
                                       str(tmp_path / "request.npz")])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "model text: version 1 (highest version folder)",  # which version was read (stderr)
        "invalid: text [request]",
        "  value_out_of_range: input 'input_input_ids': value 150 is above 0..99 (index into the 100-row table "
        "'embed.weight')",
        "  dim_out_of_range: input 'input_input_ids' axis 1 is 70, allowed 4..64 (shape [2, 70], expected "
        "[1..16, 4..64])",
        "  missing: input 'input_attention_mask' is missing (required by model 'text', TYPE_INT64, shape "
        "[1..16, 4..64])",
    ]


# ---------------------------------------------------------------------------- InferInput conversion
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_to_infer_inputs(protocol: str, mixed: ModelContract) -> None:
    inputs = mixed.example_inputs("opt", batch_size=2)
    converted = {i.name(): i for i in mixed.to_infer_inputs(inputs, protocol=protocol)}
    assert set(converted) == set(inputs)
    for name, array in inputs.items():
        infer_input = converted[name]
        assert infer_input.shape() == list(array.shape)
        assert infer_input.datatype() == mixed.input(name).datatype
    image = converted["image"]
    raw = image._get_content() if protocol == "grpc" else image._get_binary_data()
    assert raw == inputs["image"].tobytes()
    plain = to_infer_inputs({"x": np.ones((2, 3), np.float32)}, protocol=protocol)
    assert plain[0].datatype() == "FP32"
    with pytest.raises(ValueError, match="protocol"):
        to_infer_inputs({}, protocol="websocket")


# ---------------------------------------------------------------------------- check-request CLI
def test_check_request_cli(tmp_path: Path) -> None:
    contract = ModelContract.from_repository(GOOD, "mlp_python")
    good, bad, ref = tmp_path / "good.npz", tmp_path / "bad.npz", tmp_path / "reference.npz"
    np.savez(good, **contract.example_inputs("max"))
    np.savez(bad, input_x=np.zeros((64, 16), np.float32))
    cases = {f"{s}/input/input_x": contract.example_inputs(s)["input_x"] for s in ("min", "opt", "max")}
    np.savez(ref, **cases, **{"min/output/output": np.zeros((1, 4), np.float32)})
    runner = CliRunner()
    base = ["check-request", "--repo", str(GOOD), "mlp_python"]
    assert runner.invoke(main, [*base, str(good)]).exit_code == 0
    invalid = runner.invoke(main, [*base, str(bad)])
    assert invalid.exit_code == 1 and "batch_too_large" in invalid.output
    result = runner.invoke(main, [*base, str(ref), "--json"])
    assert result.exit_code == 0
    assert [c["case"] for c in json.loads(result.stdout)["cases"]] == ["max", "min", "opt"]
    bad_json = json.loads(runner.invoke(main, [*base, str(bad), "--json"]).stdout)
    assert bad_json["ok"] is False and bad_json["cases"][0]["problems"][0]["kind"] == "batch_too_large"
    assert runner.invoke(main, ["check-request", "mlp_python", str(good)]).exit_code == 2  # neither --repo nor --url
    assert runner.invoke(main, [*base[:3], "no_such_model", str(good)]).exit_code == 2


# ---------------------------------------------------------------------------- live server
MODEL_PY = textwrap.dedent(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "input_x").as_numpy()
                out = pb_utils.Tensor("output", x[:, :4].astype(np.float32))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
            return responses
    """
)


@pytest.mark.triton
@pytest.mark.slow
def test_contract_from_live_server_matches_and_predicts_acceptance(tmp_path: Path, triton_server_factory) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    repo = tmp_path / "repo"
    (repo / "mlp_python" / "1").mkdir(parents=True)
    (repo / "mlp_python" / "config.pbtxt").write_text((GOOD / "mlp_python" / "config.pbtxt").read_text())
    (repo / "mlp_python" / "1" / "model.py").write_text(MODEL_PY)
    server = triton_server_factory(repo, disable_auto_complete_config=True)

    from_config = ModelContract.from_repository(repo, "mlp_python")
    for protocol, url in (("grpc", server.grpc_url), ("http", server.http_url)):
        live = ModelContract.from_server(url, "mlp_python", protocol=protocol, timeout=30)
        assert live.max_batch_size == from_config.max_batch_size == 32
        assert live.inputs == from_config.inputs and live.outputs == from_config.outputs

    live = ModelContract.from_server(server.grpc_url, "mlp_python")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for shape in ("min", "opt", "max"):
            inputs = live.example_inputs(shape)
            assert live.validate(inputs) == []
            result = client.infer("mlp_python", live.to_infer_inputs(inputs), client_timeout=60)
            assert np.array_equal(result.as_numpy("output"), inputs["input_x"][:, :4])
        too_big = {"input_x": np.zeros((33, 16), np.float32)}
        assert _kinds(live.validate(too_big)) == [RequestProblemKind.BATCH_TOO_LARGE]
        with pytest.raises(InferenceServerException):  # the server agrees: the request is refused
            client.infer("mlp_python", live.to_infer_inputs(too_big), client_timeout=60)
        wrong_dim = {"input_x": np.zeros((2, 15), np.float32)}
        assert _kinds(live.validate(wrong_dim)) == [RequestProblemKind.DIM_OUT_OF_RANGE]
        with pytest.raises(InferenceServerException):
            client.infer("mlp_python", live.to_infer_inputs(wrong_dim), client_timeout=60)
    finally:
        client.close()

    result = CliRunner().invoke(
        main, ["check-request", "--url", server.http_url, "--protocol", "http", "mlp_python", str(_npz(tmp_path))]
    )
    assert result.exit_code == 0, result.output


def _npz(tmp_path: Path) -> Path:
    path = tmp_path / "request.npz"
    np.savez(path, input_x=np.ones((3, 16), np.float32))
    return path
