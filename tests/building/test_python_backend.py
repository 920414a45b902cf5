"""templates/python/model.py served by a REAL tritonserver (nvidia-pytriton, CPU) through generator.serving.server."""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from examples.models import make_mlp, make_text
from generator.building.export.onnx import export_onnx
from generator.resources import resource_dir
from generator.serving.burst import quiet_statistics, settled_statistics
from generator.serving.server import TritonNotFoundError, find_tritonserver, launch
from generator.specs.graphspec import GraphSpec
from tests.build_helpers import GraphTensorPlan, io_from_graph
from tests.requirements import missing

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]

MLP_CONFIG = """\
name: "mlp"
backend: "python"
max_batch_size: 32
input [ { name: "input_x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# The MLP again, for the batching test: with a preferred batch of 32 rows and a 5 s queue delay, Triton closes a batch
# only when the next request does not fit, so how many executions a burst takes depends on row counts, not on how the
# requests and the one instance happen to interleave (the test checks that the burst was sent well inside the delay).
MLP_BATCHED_CONFIG = MLP_CONFIG.replace('name: "mlp"', 'name: "mlp_batched"').replace(
    "dynamic_batching { max_queue_delay_microseconds: 100000 }",
    "dynamic_batching { preferred_batch_size: [ 32 ] max_queue_delay_microseconds: 5000000 }")

TEXT_CONFIG = """\
name: "text"
backend: "python"
max_batch_size: 16
input [
  { name: "input_input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "input_attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }
]
output [
  { name: "output_0" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "output_1" data_type: TYPE_FP32 dims: [ 8 ] }
]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

SCALAR_CONFIG = """\
name: "scalar"
backend: "python"
max_batch_size: 8
input [
  { name: "input_x" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "input_scale" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }
]
output [
  { name: "output_0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "output_1" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }
]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


class PerItemScalar(torch.nn.Module):
    """``x[b, 16]``, ``scale[b]`` (a per-item scalar: config dims [1] with an empty reshape) -> ``(x*scale, sum)``."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * scale.unsqueeze(-1)
        return y, y.sum(dim=1)


_TYPES = {"float32": "TYPE_FP32", "int64": "TYPE_INT64", "bool": "TYPE_BOOL"}


def _contract(name: str, max_batch_size: int, inputs, outputs) -> dict:
    def entry(plan, with_opt: bool) -> dict:
        dims = [(-1 if lo != hi else hi) for lo, hi in zip(plan.min_shape, plan.max_shape, strict=True)]
        out = {"name": plan.name, "data_type": _TYPES[plan.dtype], "dims": dims[1:] if max_batch_size else dims,
               "min_shape": list(plan.min_shape), "max_shape": list(plan.max_shape)}
        if with_opt:
            out["opt_shape"] = list(plan.opt_shape)
        return out

    return {"format": "gen-repo-contract/1", "model": name, "version": 1, "backend": "python",
            "max_batch_size": max_batch_size, "inputs": [entry(p, True) for p in inputs],
            "outputs": [entry(p, False) for p in outputs]}


def _add_model(repo: Path, name: str, config: str, module, spec: Path, max_batch_size: int) -> None:
    graph = GraphSpec.from_dict(json.loads(spec.read_text())["graph"])
    inputs, outputs = io_from_graph(graph)
    version = repo / name / "1"
    (version / "gen_repo").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    shutil.copy(resource_dir("templates") / "python" / "model.py", version / "model.py")
    export_onnx(module, version / "model.onnx", inputs, outputs, forward_signature=graph.forward_signature)
    contract = _contract(name, max_batch_size, inputs, outputs)
    (version / "gen_repo" / "contract.json").write_text(json.dumps(contract, indent=2, sort_keys=True) + "\n")


def _add_scalar_model(repo: Path) -> None:
    inputs = [GraphTensorPlan("input_x", "x", "float32", (1, 16), (4, 16), (8, 16), 0),
              GraphTensorPlan("input_scale", "scale", "float32", (1,), (4,), (8,), 0)]
    outputs = [GraphTensorPlan("output_0", 0, "float32", (1, 16), (8, 16), (8, 16), 0),
               GraphTensorPlan("output_1", 1, "float32", (1,), (8,), (8,), 0)]
    version = repo / "scalar" / "1"
    (version / "gen_repo").mkdir(parents=True)
    (repo / "scalar" / "config.pbtxt").write_text(SCALAR_CONFIG)
    shutil.copy(resource_dir("templates") / "python" / "model.py", version / "model.py")
    export_onnx(PerItemScalar(), version / "model.onnx", inputs, outputs)
    contract = _contract("scalar", 8, inputs, outputs)
    for entry in (contract["inputs"][1], contract["outputs"][1]):  # request side: [batch, 1]; model side: [batch]
        entry.update(dims=[1], reshape=[], min_shape=[*entry["min_shape"], 1], max_shape=[*entry["max_shape"], 1])
    contract["inputs"][1]["opt_shape"] = [4, 1]
    (version / "gen_repo" / "contract.json").write_text(json.dumps(contract, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    try:
        find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", str(exc)) from exc
    repo = tmp_path_factory.mktemp("python_backend") / "repo"
    _add_model(repo, "mlp", MLP_CONFIG, make_mlp(), ROOT / "examples/specs/mlp.graphspec.json", 32)
    _add_model(repo, "mlp_batched", MLP_BATCHED_CONFIG, make_mlp(), ROOT / "examples/specs/mlp.graphspec.json", 32)
    _add_model(repo, "text", TEXT_CONFIG, make_text(), ROOT / "examples/specs/text.graphspec.json", 16)
    _add_scalar_model(repo)
    with launch(repo, ready_timeout=180, disable_auto_complete_config=True) as running:
        yield running


def _text_inputs(grpcclient, ids: np.ndarray, mask: np.ndarray) -> list:
    a = grpcclient.InferInput("input_input_ids", list(ids.shape), "INT64")
    a.set_data_from_numpy(ids)
    b = grpcclient.InferInput("input_attention_mask", list(mask.shape), "INT64")
    b.set_data_from_numpy(mask)
    return [a, b]


def _torch_text(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        logits, pooled = make_text()(torch.from_numpy(ids), torch.from_numpy(mask))
    return logits.numpy(), pooled.numpy()


def test_inference_matches_torch(server) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = np.random.default_rng(0).standard_normal((3, 16), dtype=np.float32)
    with torch.no_grad():
        want = make_mlp()(torch.from_numpy(x)).numpy()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    request = grpcclient.InferInput("input_x", [3, 16], "FP32")
    request.set_data_from_numpy(x)
    got = client.infer("mlp", [request], client_timeout=60).as_numpy("output")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    http = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    request_http = httpclient.InferInput("input_x", [3, 16], "FP32")
    request_http.set_data_from_numpy(x)
    np.testing.assert_allclose(http.infer("mlp", [request_http]).as_numpy("output"), want, rtol=1e-5, atol=1e-6)

    rng = np.random.default_rng(1)
    ids, mask = rng.integers(0, 100, (2, 37)), np.ones((2, 37), np.int64)
    result = client.infer("text", _text_inputs(grpcclient, ids, mask), client_timeout=60)
    logits, pooled = _torch_text(ids, mask)
    np.testing.assert_allclose(result.as_numpy("output_0"), logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.as_numpy("output_1"), pooled, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("seq", "axis_text"), [(65, "axis 1 is 65, allowed 4..64"), (3, "axis 1 is 3, allowed 4..64")])
def test_out_of_range_request_is_rejected(server, seq: int, axis_text: str) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(server.grpc_url)
    ids, mask = np.zeros((1, seq), np.int64), np.ones((1, seq), np.int64)
    with pytest.raises(InferenceServerException) as info:
        client.infer("text", _text_inputs(grpcclient, ids, mask), client_timeout=60)
    message = str(info.value)
    assert "input 'input_input_ids' shape [1, " in message and axis_text in message
    assert "outside the model's profile" in message
    # The server itself refuses a batch above max_batch_size.
    x = np.zeros((33, 16), np.float32)
    request = grpcclient.InferInput("input_x", [33, 16], "FP32")
    request.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="batch"):
        client.infer("mlp", [request], client_timeout=60)


def _burst(server, model: str, make_inputs, count: int):
    """Send ``count`` requests at once through gRPC async_infer; return (results or exceptions) in order."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    done = threading.Semaphore(0)
    results: list = [None] * count

    def callback(index: int):
        def on_done(result, error) -> None:
            results[index] = error if error is not None else result
            done.release()

        return on_done

    for i in range(count):
        client.async_infer(model, make_inputs(grpcclient, i), callback(i), client_timeout=120)
    for _ in range(count):
        assert done.acquire(timeout=180), "a request never completed"
    client.close()
    return results


def _stats(server, model: str) -> tuple[int, int]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    stats = client.get_inference_statistics(model, as_json=True, client_timeout=30)["model_stats"][0]
    return int(stats.get("inference_count", 0)), int(stats.get("execution_count", 0))


def test_concurrent_requests_are_batched_and_split_back(server) -> None:
    rng = np.random.default_rng(2)
    sizes = [1 + (i % 3) for i in range(32)]  # 63 rows, at most 3 per request
    xs = [rng.standard_normal((n, 16), dtype=np.float32) for n in sizes]
    sent: list[float] = []

    def make(grpcclient, i: int) -> list:
        sent.append(time.monotonic())
        request = grpcclient.InferInput("input_x", list(xs[i].shape), "FP32")
        request.set_data_from_numpy(xs[i])
        return [request]

    read = functools.partial(_stats, server, "mlp_batched")
    before_inferences, before_executions = quiet_statistics(read, timeout_s=10)
    results = _burst(server, "mlp_batched", make, 32)
    assert sent[-1] - sent[0] < 2.5, "the burst took half the 5 s queue delay to send: batching is not determined"
    model = make_mlp()
    for x, result in zip(xs, results, strict=True):
        assert not isinstance(result, Exception), result
        with torch.no_grad():
            np.testing.assert_allclose(result.as_numpy("output"), model(torch.from_numpy(x)).numpy(),
                                       rtol=1e-5, atol=1e-6)
    # Triton counts a request after responding to it: read once the burst's requests are all counted.
    counts = settled_statistics(read, (before_inferences, before_executions), sum(sizes), timeout_s=10)
    inferences, executions = counts[0] - before_inferences, counts[1] - before_executions
    assert inferences == sum(sizes)
    # Every batch but the last closes at 32 rows or when the next request (at most 3 rows) does not fit, so with at
    # least 30: 63 rows make 2 executions (32 + 31) or 3, whatever the arrival order and timing.
    assert 2 <= executions <= 3, f"{executions} executions for 63 rows in 32 requests"


def test_mixed_shapes_and_a_bad_request_in_one_batch(server) -> None:
    """Different sequence lengths go in separate groups; one out-of-range request fails alone."""
    rng = np.random.default_rng(3)
    seqs = [8, 16, 8, 100, 16, 8, 12, 16] * 2
    data = [(rng.integers(0, 100, (1 + i % 2, s)), np.ones((1 + i % 2, s), np.int64)) for i, s in enumerate(seqs)]

    results = _burst(server, "text", lambda grpcclient, i: _text_inputs(grpcclient, *data[i]), len(data))
    for (ids, mask), seq, result in zip(data, seqs, results, strict=True):
        if seq == 100:
            assert isinstance(result, Exception)
            assert "axis 1 is 100, allowed 4..64" in str(result)
            continue
        assert not isinstance(result, Exception), result
        logits, pooled = _torch_text(ids, mask)
        np.testing.assert_allclose(result.as_numpy("output_0"), logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(result.as_numpy("output_1"), pooled, rtol=1e-5, atol=1e-6)


def test_per_item_scalar_with_reshape(server) -> None:
    """Config ``dims: [1]`` + ``reshape: []``: requests carry [b, 1], the ONNX model takes [b]; so do the outputs."""
    import tritonclient.grpc as grpcclient

    rng = np.random.default_rng(4)
    sizes = [1, 3, 2, 2]
    data = [(rng.standard_normal((n, 16), dtype=np.float32), rng.standard_normal((n, 1), dtype=np.float32))
            for n in sizes]

    def make(client_module, i: int) -> list:
        x, scale = data[i]
        a = client_module.InferInput("input_x", list(x.shape), "FP32")
        a.set_data_from_numpy(x)
        b = client_module.InferInput("input_scale", list(scale.shape), "FP32")
        b.set_data_from_numpy(scale)
        return [a, b]

    results = _burst(server, "scalar", make, len(data))
    for (x, scale), result in zip(data, results, strict=True):
        assert not isinstance(result, Exception), result
        y, total = PerItemScalar()(torch.from_numpy(x), torch.from_numpy(scale[:, 0]))
        np.testing.assert_allclose(result.as_numpy("output_0"), y.numpy(), rtol=1e-5, atol=1e-6)
        assert result.as_numpy("output_1").shape == (x.shape[0], 1)
        np.testing.assert_allclose(result.as_numpy("output_1")[:, 0], total.numpy(), rtol=1e-5, atol=1e-5)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert client.get_model_metadata("scalar", as_json=True)["inputs"][1]["shape"] == ["-1", "1"]
