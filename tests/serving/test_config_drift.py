"""The smoke config check's comparisons (generator/serving/config_drift.py): what the server fills in is not drift."""

from __future__ import annotations

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from generator.serving.config_drift import config_differences


def _config(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


GENERATED = """
name: "m" backend: "python" max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: [ 16 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
instance_group { count: 1 kind: KIND_CPU }
dynamic_batching { max_queue_delay_microseconds: 100 }
"""


def test_config_differences_ignores_what_the_server_fills_in() -> None:
    served = _config(GENERATED)
    served.instance_group[0].name = "m_0"
    served.dynamic_batching.preferred_batch_size.append(8)  # Triton's auto-complete for an empty list
    served.default_model_filename = "model.py"
    assert config_differences(_config(GENERATED), served) == []


def test_config_differences_names_each_difference() -> None:
    served = _config(GENERATED)
    served.max_batch_size = 4
    served.input[0].dims[0] = 17
    served.input[0].data_type = model_config_pb2.TYPE_FP16
    served.output[0].name = "z"
    served.instance_group[0].count = 2
    served.dynamic_batching.max_queue_delay_microseconds = 5000
    problems = config_differences(_config(GENERATED), served)
    text = "\n".join(problems)
    assert "max_batch_size: generated 8, server 4" in text
    assert "input 'x' dims: generated [16], server [17]" in text
    assert "input 'x' data_type: generated TYPE_FP32, server TYPE_FP16" in text
    assert "outputs missing on the server: ['y']" in text and "['z']" in text
    assert "instance_group[0].count: generated 1, server 2" in text
    assert "dynamic_batching.max_queue_delay_microseconds" in text
    served = _config(GENERATED)
    served.ClearField("dynamic_batching")
    assert config_differences(_config(GENERATED), served) == ["dynamic_batching: generated on, server off"]


def test_no_preferred_sizes_are_served_as_max_batch_size_and_anything_else_is_drift() -> None:
    served = _config(GENERATED)
    served.dynamic_batching.preferred_batch_size.append(4)
    assert config_differences(_config(GENERATED), served) == [
        "dynamic_batching.preferred_batch_size: generated none (served as [8]), server [4]"]
