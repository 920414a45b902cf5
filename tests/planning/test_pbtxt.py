"""generator.planning.pbtxt: both printers give exactly text_format's bytes, and the fast one is really used."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor, text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from generator.planning import pbtxt
from generator.planning.config import parse_config

_FD = descriptor.FieldDescriptor
ModelConfig = model_config_pb2.ModelConfig

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    _FD.CPPTYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    _FD.CPPTYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    _FD.CPPTYPE_UINT32: st.integers(0, 2**32 - 1),
    _FD.CPPTYPE_UINT64: st.integers(0, 2**64 - 1),
    _FD.CPPTYPE_BOOL: st.booleans(),
    _FD.CPPTYPE_FLOAT: st.floats(width=32),
    _FD.CPPTYPE_DOUBLE: st.floats(),
}


def _is_map(field: Any) -> bool:
    return field.cpp_type == _FD.CPPTYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _scalar(draw: st.DrawFn, field: Any) -> Any:
    if field.cpp_type == _FD.CPPTYPE_ENUM:
        return draw(st.sampled_from([v.number for v in field.enum_type.values]))
    if field.cpp_type == _FD.CPPTYPE_STRING:
        text = draw(_TEXT)
        return text.encode("utf-8") if field.type == _FD.TYPE_BYTES else text
    return draw(_SCALARS[field.cpp_type])


@st.composite
def _fill(draw: st.DrawFn, message: Any, depth: int) -> Any:
    """Set a random subset of ``message``'s fields (maps of 0 to 3 entries, floats included), ``depth`` levels deep."""
    fields = [f for f in message.DESCRIPTOR.fields if depth > 0 or f.cpp_type != _FD.CPPTYPE_MESSAGE]
    for field in draw(st.lists(st.sampled_from(fields), max_size=4, unique_by=lambda f: f.name)) if fields else ():
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            for _ in range(draw(st.integers(0, 3))):
                key = _scalar(draw, field.message_type.fields_by_name["key"])
                if value_field.cpp_type == _FD.CPPTYPE_MESSAGE:
                    draw(_fill(value[key], depth - 1))
                else:
                    value[key] = _scalar(draw, value_field)
        elif field.cpp_type == _FD.CPPTYPE_MESSAGE:
            if pbtxt._repeated(field):
                for _ in range(draw(st.integers(1, 2))):
                    draw(_fill(value.add(), depth - 1))
            else:
                value.SetInParent()
                draw(_fill(value, depth - 1))
        elif pbtxt._repeated(field):
            value.extend(_scalar(draw, field) for _ in range(draw(st.integers(1, 3))))
        else:
            setattr(message, field.name, _scalar(draw, field))
    return message


def model_configs(depth: int = 3) -> st.SearchStrategy[Any]:
    """Random ModelConfig messages, any field of the proto."""
    return st.builds(ModelConfig).flatmap(lambda m: _fill(m, depth))


@settings(max_examples=400, deadline=None)
@given(model_configs())
def test_message_text_is_text_format_byte_for_byte(config):
    assert pbtxt.message_text(config) == text_format.MessageToString(config)


@settings(max_examples=400, deadline=None)
@given(model_configs())
def test_lean_printer_alone_is_text_format_byte_for_byte(config):
    out: list[str] = []
    pbtxt._print_text(config, "", out)
    assert "".join(out) == text_format.MessageToString(config)


@pytest.mark.requires("protobuf_upb")
def test_c_encoder_is_taken_for_a_typical_config():
    config = parse_config(
        'name: "m" platform: "tensorrt_plan" max_batch_size: 8 version_policy { latest { num_versions: 1 } } '
        'input { name: "x" data_type: TYPE_FP32 dims: [-1, 3] } output { name: "y" data_type: TYPE_FP16 dims: 2 } '
        'dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100 } '
        'instance_group { kind: KIND_GPU count: 1 profile: "0" } parameters { key: "a" value { string_value: "1" } } '
        'model_warmup { name: "w" batch_size: 8 inputs { key: "x" value { data_type: TYPE_FP32 dims: [4, 3] '
        "random_data: true } } }"
    )
    assert pbtxt._c_encoder_agrees()
    assert pbtxt._c_encoder_safe(config)
    two_entries = ModelConfig()
    two_entries.CopyFrom(config)
    two_entries.parameters["b"].string_value = "2"
    assert not pbtxt._c_encoder_safe(two_entries)
    nested_two = ModelConfig()
    nested_two.CopyFrom(config)
    nested_two.model_warmup[0].inputs["z"].dims.append(1)
    assert not pbtxt._c_encoder_safe(nested_two)
    with_float = ModelConfig()
    with_float.CopyFrom(config)
    with_float.sequence_batching.direct.minimum_slot_utilization = -0.0
    assert not pbtxt._c_encoder_safe(with_float)
    defaults = ModelConfig()  # several entries, some with a default key or value: text_format leaves those out
    defaults.CopyFrom(nested_two)
    for key, value in (("a", ""), ("b", "x"), ("", "y")):
        defaults.cc_model_filenames[key] = value
    defaults.model_warmup[0].inputs[""].SetInParent()
    for message in (config, two_entries, nested_two, with_float, defaults):
        assert pbtxt.message_text(message) == text_format.MessageToString(message)
