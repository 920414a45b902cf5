"""The request schema (generator/contracts/request_schema.py) against ModelContract.validate, the real Triton and ajv.

Requests are made from the example and zoo models' contracts (the session's builds) by :func:`make_case`: valid ones
and ones with one planted fault. For each, ``ModelContract.validate`` (the Python validator) and the schema
(jsonschema, Draft 2020-12) must agree on accept or refuse; so must the real Triton serving the build (HTTP JSON
``/v2/models/M/infer``) and Node's ajv. The checks JSON Schema cannot express (docs/client.md) are
:data:`NOT_EXPRESSIBLE`: a request whose only problem is one of them is generated on purpose and shown to pass the
schema, so the exclusion stays explicit.
"""

from __future__ import annotations

import json
import random
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from generator.client import ModelContract, RequestProblemKind, json_request
from generator.contracts.request_schema import REQUEST_SCHEMA_FILE, render_request_schema, request_schema
from generator.naming import version_folder
from tests import requirements

#: The planted faults, each with the problem kind the validator must report for it (None: a valid request).
FAULTS: dict[str, RequestProblemKind | None] = {
    "valid": None,
    "dtype": RequestProblemKind.DTYPE,
    "rank": RequestProblemKind.RANK,
    "dim_low": RequestProblemKind.DIM_OUT_OF_RANGE,
    "dim_high": RequestProblemKind.DIM_OUT_OF_RANGE,
    "batch_over": RequestProblemKind.BATCH_TOO_LARGE,
    "value": RequestProblemKind.VALUE_OUT_OF_RANGE,
    "missing": RequestProblemKind.MISSING,
    "unknown": RequestProblemKind.UNKNOWN,
}
#: What the validator checks and JSON Schema cannot express (docs/client.md): every input with one batch size.
#: (``data``'s length against the shape cannot go wrong here: every request is made from numpy arrays.)
NOT_EXPRESSIBLE = {"batch_mismatch": RequestProblemKind.BATCH_MISMATCH}


@dataclass
class Case:
    """One request: the model's contract, the planted fault and the arrays (name -> numpy array)."""

    contract: ModelContract
    fault: str
    inputs: dict[str, np.ndarray]

    @property
    def body(self) -> dict[str, Any]:
        return json_request(self.inputs)


def _batch(contract: ModelContract, rng: random.Random) -> int | None:
    if not contract.batching:
        return None
    high = min([contract.max_batch_size, *(t.max_shape[0] or contract.max_batch_size for t in contract.inputs)])
    return rng.randint(1, min(high, 3))  # small: every valid request also runs in the server


def _resized(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` at ``shape``, its values repeated (so still inside the input's value domain)."""
    if array.size == 0:
        return np.zeros(shape, array.dtype)
    return np.resize(array, shape)


def _outside(contract: ModelContract, name: str) -> Any:
    """A value outside input ``name``'s domain that its dtype can hold; None when there is none."""
    tensor = contract.input(name)
    domain = tensor.values
    if domain is None or tensor.dtype.kind not in "iuf":
        return None
    numbers = list(domain.values) if domain.values is not None else [domain.low, domain.high]
    candidates = [max(n for n in numbers if n is not None) + 1, min(n for n in numbers if n is not None) - 1]
    for value in candidates:
        if tensor.dtype.kind == "f" or np.iinfo(tensor.dtype).min <= value <= np.iinfo(tensor.dtype).max:
            return tensor.dtype.type(value)
    return None


def make_case(contract: ModelContract, fault: str, rng: random.Random, shape: str = "min") -> Case | None:
    """A request for ``contract`` with ``fault`` planted (see :data:`FAULTS`); None where the model has no room for it.

    The base request is :meth:`ModelContract.example_inputs` at ``shape`` with a small batch: inputs agree on shared
    axes, so a valid request really runs in the model.
    """
    inputs = contract.example_inputs(shape, batch_size=_batch(contract, rng), seed=rng.randrange(2**16))
    names = [t.name for t in contract.inputs]
    pick = rng.choice(names)
    tensor = contract.input(pick)
    if fault == "valid":
        pass
    elif fault == "dtype":
        other = [d for d in (np.float32, np.int64, np.int32, np.bool_) if np.dtype(d) != tensor.dtype]
        inputs[pick] = np.ones(inputs[pick].shape, rng.choice(other))
    elif fault == "rank":
        inputs[pick] = inputs[pick][..., None]
    elif fault in ("dim_low", "dim_high"):
        first = 1 if contract.batching else 0  # the batch axis has faults of its own
        axes = [a for a in range(first, tensor.rank)
                if (tensor.min_shape[a] >= 1 if fault == "dim_low" else tensor.max_shape[a] is not None)]
        if not axes:
            return None
        axis = rng.choice(axes)
        shape_now = list(inputs[pick].shape)
        high = tensor.max_shape[axis]
        shape_now[axis] = tensor.min_shape[axis] - 1 if fault == "dim_low" else (high or 0) + 1
        inputs[pick] = _resized(inputs[pick], tuple(shape_now))
    elif fault == "batch_over":
        if not contract.batching:
            return None
        inputs = {n: _resized(a, (contract.max_batch_size + 1, *a.shape[1:])) for n, a in inputs.items()}
    elif fault == "value":
        plantable = [n for n in names if _outside(contract, n) is not None]
        if not plantable:
            return None
        pick = rng.choice(plantable)
        array = inputs[pick].copy()
        array.flat[rng.randrange(array.size)] = _outside(contract, pick)
        inputs[pick] = array
    elif fault == "missing":
        required = [t.name for t in contract.inputs if not t.optional]
        if not required:
            return None
        del inputs[rng.choice(required)]
    elif fault == "unknown":
        inputs["not_an_input"] = np.zeros((1, 1), np.float32)
    elif fault == "batch_mismatch":
        if not contract.batching or len(names) < 2 or contract.max_batch_size < 2:
            return None
        batch = inputs[pick].shape[0]
        other = 2 if batch == 1 else 1
        inputs[pick] = _resized(inputs[pick], (other, *inputs[pick].shape[1:]))
    else:
        raise AssertionError(fault)
    return Case(contract, fault, inputs)


def _contracts(repository: Path) -> list[ModelContract]:
    models = sorted(p.name for p in repository.iterdir() if p.is_dir())
    return [ModelContract.from_repository(repository, m) for m in models]


def _schema_file(repository: Path, model: str) -> Path:
    versions = [v for p in (repository / model).iterdir() if (v := version_folder(p.name)) is not None]
    return repository / model / str(max(versions)) / REQUEST_SCHEMA_FILE


def _validator(repository: Path, model: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(_schema_file(repository, model).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def built(example_repository: Path, zoo_repository: Path) -> list[tuple[Path, ModelContract]]:
    """Every model of the example and zoo builds, with the repository it lies in."""
    return [(repo, contract) for repo in (example_repository, zoo_repository) for contract in _contracts(repo)]


def _check(case: Case, validator: jsonschema.Draft202012Validator) -> tuple[bool, bool]:
    """(validator accepts, schema accepts); the validator must report the planted fault's kind."""
    problems = case.contract.validate(case.inputs)
    kinds = {p.kind for p in problems}
    expected = FAULTS.get(case.fault) or NOT_EXPRESSIBLE.get(case.fault)
    if expected is None:
        assert problems == [], problems
    else:
        assert expected in kinds, (case.fault, problems)
    return not problems, validator.is_valid(case.body)


# ---------------------------------------------------------------------------- the schema, built and printed
def test_every_built_model_has_a_request_schema_its_contract_makes(built) -> None:
    for repository, contract in built:
        path = _schema_file(repository, contract.name)
        written = path.read_text(encoding="utf-8")
        contract_json = json.loads((path.parent / "contract.json").read_text(encoding="utf-8"))
        # From the contract beside it and from the client's reading of it: the same bytes (docs/client.md).
        assert written == render_request_schema(contract_json) == render_request_schema(contract.to_dict())
        assert json.loads(written) == contract.request_schema()
        jsonschema.Draft202012Validator.check_schema(json.loads(written))


def test_the_schema_is_the_same_bytes_whatever_the_contracts_key_order(built) -> None:
    for _, contract in built:
        document = contract.to_dict()
        shuffled = dict(reversed(list(document.items())))
        shuffled["inputs"] = [dict(reversed(list(t.items()))) for t in document["inputs"]]
        assert render_request_schema(shuffled) == render_request_schema(document)


def test_the_schema_records_the_contracts_ranges_domains_and_batch_limit(example_repository: Path) -> None:
    schema = json.loads(_schema_file(example_repository, "text").read_text(encoding="utf-8"))
    contract = json.loads((_schema_file(example_repository, "text").parent / "contract.json").read_text())
    ids = next(i for i, t in enumerate(contract["inputs"]) if t["name"] == "input_input_ids")
    shape = schema["$defs"][f"input{ids}"]["properties"]["shape"]
    tensor = contract["inputs"][ids]
    assert [(a["minimum"], a["maximum"]) for a in shape["prefixItems"]] == list(
        zip(tensor["min_shape"], tensor["max_shape"], strict=True))
    assert shape["prefixItems"][0]["maximum"] <= contract["max_batch_size"]
    element = schema["$defs"][f"input{ids}_element"]
    assert (element["type"], element["minimum"], element["maximum"]) == ("integer", *tensor["value_range"])


# ---------------------------------------------------------------------------- agreement with the validator
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), fault=st.sampled_from([*FAULTS, *NOT_EXPRESSIBLE]), rng=st.randoms(use_true_random=False),
       shape=st.sampled_from(["min", "opt"]))
def test_schema_accepts_exactly_what_the_validator_accepts(built, data, fault, rng, shape) -> None:
    repository, contract = data.draw(st.sampled_from(built), label="model")
    case = make_case(contract, fault, rng, shape)
    assume(case is not None)
    assert case is not None
    validator_ok, schema_ok = _check(case, _validator(repository, contract.name))
    if fault in NOT_EXPRESSIBLE:
        # The exclusion made explicit: the validator refuses, the schema cannot see it (docs/client.md).
        assert (validator_ok, schema_ok) == (False, True), (contract.name, fault)
    else:
        assert validator_ok == schema_ok, (contract.name, fault, case.contract.validate(case.inputs))


# ---------------------------------------------------------------------------- the corpus: the server and ajv
def _corpus(built: list[tuple[Path, ModelContract]], repeats: int, seed: int) -> list[tuple[Path, Case]]:
    """Every model with every fault (and the valid request) ``repeats`` times, from a fixed seed."""
    rng = random.Random(seed)
    cases = []
    for repository, contract in built:
        for fault in [*FAULTS, *NOT_EXPRESSIBLE]:
            for _ in range(repeats):
                case = make_case(contract, fault, rng)
                if case is not None:
                    cases.append((repository, case))
    return cases


def _infer(url: str, model: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{url}/v2/models/{model}/infer", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # loopback: the server the test started
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def _index_domain(case: Case) -> bool:
    """Whether the planted value fault lies in an index input (a table lookup onnxruntime refuses to run past)."""
    return any(t.values is not None and t.values.source.startswith("index into")
               and t.values.array_problem(np.asarray(case.inputs[t.name])) is not None
               for t in case.contract.inputs if t.name in case.inputs)


@pytest.mark.triton
@pytest.mark.slow
def test_the_real_server_accepts_and_refuses_as_the_schema_does(built, example_repository, zoo_repository,
                                                                 triton_server_factory) -> None:
    """Over HTTP JSON: what the validator and the schema accept runs, what they refuse Triton refuses (400).

    Value domains are the contract's, not Triton's: a value outside an index input's table fails in the model
    (onnxruntime will not read past the table: 500), any other value outside its domain (a timestep past 999) runs.
    """
    disagreements = []
    for repository in (example_repository, zoo_repository):
        server = triton_server_factory(repository, disable_auto_complete_config=True)
        for _, case in (c for c in _corpus(built, 1, seed=38) if c[0] == repository):
            validator_ok, schema_ok = _check(case, _validator(repository, case.contract.name))
            status, message = _infer(server.http_url, case.contract.name, case.body)
            server_ok = status == 200
            expected = validator_ok and schema_ok
            if case.fault in NOT_EXPRESSIBLE:
                expected = False  # Triton refuses it too: the validator is right, only the schema cannot say so
            elif case.fault == "value":
                expected = not _index_domain(case)
            # Triton's own request checks answer 400; a table lookup past its end fails inside the model (500).
            refusal = 500 if case.fault == "value" else 400
            if server_ok != expected or (not server_ok and status != refusal):
                disagreements.append((case.contract.name, case.fault, status, message[:300]))
        if repository == example_repository:
            _json_only_forms(server.http_url, _validator(repository, "mlp"))
        server.stop()
    assert disagreements == []


def _json_only_forms(url: str, validator: jsonschema.Draft202012Validator) -> None:
    """What only a JSON request can say (numpy arrays by name cannot), against the schema and the server.

    ``data`` nested as the shape is valid; an input twice and an unknown output are refused by both; ``data`` short
    of its shape passes the schema (it cannot count, docs/client.md) and Triton refuses it.
    """
    one = {"name": "input_x", "datatype": "FP32", "shape": [2, 16], "data": [0.5] * 32}
    nested = {"inputs": [{**one, "data": [[0.5] * 16] * 2}]}
    with_output = {"inputs": [one], "outputs": [{"name": "output"}]}
    for valid in (nested, with_output):
        assert validator.is_valid(valid) and _infer(url, "mlp", valid)[0] == 200
    for invalid in ({"inputs": [one, one]}, {"inputs": [one], "outputs": [{"name": "not_an_output"}]}):
        assert not validator.is_valid(invalid) and _infer(url, "mlp", invalid)[0] == 400
    short = {"inputs": [{**one, "data": [0.5] * 31}]}
    status, message = _infer(url, "mlp", short)
    assert validator.is_valid(short) and status != 200 and "shape" in message, (status, message)


def test_node_ajv_agrees_with_jsonschema_on_every_request(built) -> None:
    requirements.require("node")
    requirements.require("ajv")
    cases = _corpus(built, 3, seed=7)
    schemas = {f"{repo.name}:{contract.name}": json.loads(_schema_file(repo, contract.name).read_text())
               for repo, contract in built}
    payload = {"schemas": schemas,
               "cases": [{"schema": f"{repo.name}:{case.contract.name}", "request": case.body} for repo, case in cases]}
    result = subprocess.run(["node", str(requirements.NODE_PROJECT / "validate.mjs")], input=json.dumps(payload),
                            capture_output=True, text=True, check=True, timeout=300)
    answer = json.loads(result.stdout)
    assert answer["compile_errors"] == {}  # strict ajv: every keyword is one it knows and applies
    expected = [_check(case, _validator(repo, case.contract.name))[1] for repo, case in cases]
    assert answer["verdicts"] == expected
    assert {c.fault for _, c in cases} == {*FAULTS, *NOT_EXPRESSIBLE} and False in expected and True in expected


def test_a_request_schema_from_a_config_alone_leaves_unbounded_dims_open() -> None:
    config = """
name: "mixed"
backend: "python"
max_batch_size: 4
input [
  { name: "image", data_type: TYPE_FP16, dims: [ 3, -1 ] },
  { name: "prompt", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "mask", data_type: TYPE_BOOL, dims: [ 2 ], optional: true }
]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
"""
    contract = ModelContract.from_config(text_format.Parse(config, model_config_pb2.ModelConfig()))
    validator = jsonschema.Draft202012Validator(request_schema(contract.to_dict()))
    wide = {"image": np.zeros((4, 3, 5000), np.float16), "prompt": np.array([[b"hi"]] * 4, dtype=object)}
    assert contract.validate(wide) == [] and validator.is_valid(json_request(wide))
    with_mask = {**wide, "mask": np.zeros((4, 2), np.bool_)}
    assert contract.validate(with_mask) == [] and validator.is_valid(json_request(with_mask))
    for bad in ({"image": wide["image"]},  # prompt missing (mask is optional)
                {**wide, "prompt": np.zeros((4, 1), np.float32)},  # wrong datatype
                {**wide, "image": np.zeros((5, 3, 8), np.float16)}):  # batch 5 > max_batch_size 4
        assert contract.validate(bad) and not validator.is_valid(json_request(bad))
    twice = json_request(wide)
    twice["inputs"].append(twice["inputs"][0])  # the same input twice: no mapping can say it, the schema refuses
    assert not validator.is_valid(twice)
    assert not validator.is_valid({**json_request(wide), "outputs": [{"name": "not_an_output"}]})
    assert validator.is_valid({**json_request(wide), "outputs": [{"name": "score"}]})
