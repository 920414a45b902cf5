"""A real Triton server (nvidia-pytriton, CPU) loads python-target models written by ``gen-repo config``.

Started with ``--disable-auto-complete-config``: what the server reports must be exactly what we wrote, i.e. the
generated configs are complete on their own. The version folders get a trivial model.py (zeros of the right
shapes) until the build writes the real one.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from generator.cli import main
from tests.manifest_helpers import AITUNE, EXAMPLES_MANIFEST, FIXTURE_FILES, write_manifest

pytestmark = [pytest.mark.triton, pytest.mark.slow]

TRIVIAL_MODEL_PY = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.max_batch_size = int(config.get("max_batch_size", 0))
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"]), [max(int(d), 1) for d in o["dims"]])
            for o in config["output"]
        ]
        self.first_input = config["input"][0]["name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            batch = pb_utils.get_input_tensor_by_name(request, self.first_input).as_numpy().shape[0]
            tensors = [
                pb_utils.Tensor(name, np.zeros(([batch] if self.max_batch_size else []) + dims, dtype=dtype))
                for name, dtype, dims in self.outputs
            ]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
'''


def _write_repository(tmp_path):
    out = tmp_path / "repo"
    examples = CliRunner().invoke(main, ["config", str(EXAMPLES_MANIFEST), "-o", str(out), "--target", "python"])
    assert examples.exit_code == 0, examples.output
    document = {"defaults": {"target": "python"}, "models": [{"spec": str(AITUNE / f)} for f in FIXTURE_FILES]}
    manifest = write_manifest(tmp_path / "fixtures", document)
    fixtures = CliRunner().invoke(main, ["config", str(manifest), "-o", str(out), "--allow-outside"])
    assert fixtures.exit_code == 0, fixtures.output
    written = {}
    for config_file in sorted(out.glob("*/config.pbtxt")):
        config = text_format.Parse(config_file.read_text(), model_config_pb2.ModelConfig())
        (config_file.parent / "1" / "model.py").write_text(TRIVIAL_MODEL_PY)
        written[config.name] = config
    return out, written


def test_triton_loads_generated_configs_without_auto_complete(tmp_path, triton_server_factory):
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    repo, written = _write_repository(tmp_path)
    assert len(written) == 2 + len(FIXTURE_FILES)
    server = triton_server_factory(repo, disable_auto_complete_config=True, ready_timeout=240,
                                   extra_args=["--exit-on-error=false", "--strict-readiness=false"])
    client = grpcclient.InferenceServerClient(server.grpc_url)
    not_ready = [name for name in written if not client.is_model_ready(name)]
    assert not not_ready, f"models not ready: {not_ready}\n{server.log_tail()}"
    for name, ours in written.items():
        served = client.get_model_config(name).config
        assert served.name == name
        assert served.max_batch_size == ours.max_batch_size, name
        assert served.backend == "python"
        for kind in ("input", "output"):
            got = [(t.name, t.data_type, list(t.dims), t.HasField("reshape")) for t in getattr(served, kind)]
            want = [(t.name, t.data_type, list(t.dims), t.HasField("reshape")) for t in getattr(ours, kind)]
            assert got == want, (name, kind)
        assert served.HasField("dynamic_batching") == ours.HasField("dynamic_batching"), name
        if ours.HasField("dynamic_batching"):
            # None written: Triton's NormalizeModelConfig serves max_batch_size as the one preferred size.
            preferred = list(ours.dynamic_batching.preferred_batch_size) or [ours.max_batch_size]
            assert list(served.dynamic_batching.preferred_batch_size) == preferred
            assert (served.dynamic_batching.max_queue_delay_microseconds
                    == ours.dynamic_batching.max_queue_delay_microseconds == 100)
        assert [(g.kind, g.count) for g in served.instance_group] == [(g.kind, g.count) for g in ours.instance_group]

    # The server enforces what we wrote: batch 32 fits the mlp example, 33 is refused.
    for batch, ok in ((32, True), (33, False)):
        data = grpcclient.InferInput("input_x", [batch, 16], "FP32")
        data.set_data_from_numpy(np.zeros((batch, 16), dtype=np.float32))
        if ok:
            result = client.infer("mlp", [data])
            assert result.as_numpy("output").shape == (batch, 4)
        else:
            with pytest.raises(InferenceServerException, match=r"inference request batch-size must be <= 32 for 'mlp'"):
                client.infer("mlp", [data])
