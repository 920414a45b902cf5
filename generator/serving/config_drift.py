"""The smoke ``config`` check's comparisons: a generated config against the server's view of it.

The server's ``get_model_config`` and ``get_model_metadata`` and gen-repo's ``contract.json`` must agree with the
generated config on what a client relies on; each function lists the differences as sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format

from generator.client import ModelContract, config_to_contract
from generator.dtypes import wire_datatype
from generator.triton.proto import model_config_pb2

__all__ = ["config_differences", "contract_differences", "metadata_differences"]


def _io_differences(kind: str, expected: Sequence[Any], served: Sequence[Any]) -> list[str]:
    problems = []
    want = {io.name: io for io in expected}
    have = {io.name: io for io in served}
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing:
        problems.append(f"{kind}s missing on the server: {missing}")
    if extra:
        problems.append(f"{kind}s the generated config does not have: {extra}")
    for name in [n for n in want if n in have]:
        a, b = want[name], have[name]
        if a.data_type != b.data_type:
            problems.append(
                f"{kind} '{name}' data_type: generated {model_config_pb2.DataType.Name(a.data_type)}, "
                f"server {model_config_pb2.DataType.Name(b.data_type)}"
            )
        if list(a.dims) != list(b.dims):
            problems.append(f"{kind} '{name}' dims: generated {list(a.dims)}, server {list(b.dims)}")
        if a.HasField("reshape") != b.HasField("reshape") or list(a.reshape.shape) != list(b.reshape.shape):
            shown = [list(m.reshape.shape) if m.HasField("reshape") else None for m in (a, b)]
            problems.append(f"{kind} '{name}' reshape: generated {shown[0]}, server {shown[1]}")
    return problems


def _message_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def config_differences(expected: model_config_pb2.ModelConfig, served: model_config_pb2.ModelConfig) -> list[str]:
    """List what differs between a generated config and the server's view of it; empty when they agree.

    Compared: max_batch_size, platform/backend (where the generated config sets them), inputs and outputs (names,
    data types, dims, reshape), dynamic batching (every field; ``preferred_batch_size`` as the generated config sets
    it, else as ``[max_batch_size]``, what Triton's NormalizeModelConfig fills in) and instance groups (count, kind
    unless ``KIND_AUTO``, gpus where set; names and server defaults for a config without groups are not compared).
    """
    problems: list[str] = []
    if expected.max_batch_size != served.max_batch_size:
        problems.append(f"max_batch_size: generated {expected.max_batch_size}, server {served.max_batch_size}")
    for attribute in ("platform", "backend"):
        want, have = getattr(expected, attribute), getattr(served, attribute)
        if want and want != have:
            problems.append(f"{attribute}: generated {want!r}, server {have!r}")
    problems += _io_differences("input", expected.input, served.input)
    problems += _io_differences("output", expected.output, served.output)

    if expected.HasField("dynamic_batching") != served.HasField("dynamic_batching"):
        state = {True: "on", False: "off"}
        problems.append(
            f"dynamic_batching: generated {state[expected.HasField('dynamic_batching')]}, "
            f"server {state[served.HasField('dynamic_batching')]}"
        )
    elif expected.HasField("dynamic_batching"):
        want_db, have_db = _message_dict(expected.dynamic_batching), _message_dict(served.dynamic_batching)
        filled = "preferred_batch_size" not in want_db
        if filled:  # Triton's NormalizeModelConfig serves "none" as max_batch_size alone
            want_db["preferred_batch_size"] = [expected.max_batch_size] if expected.max_batch_size > 0 else []
            have_db.setdefault("preferred_batch_size", [])
        for key in sorted(set(want_db) | set(have_db)):
            if want_db.get(key) != have_db.get(key):
                want = (f"none (served as {want_db[key]})" if filled and key == "preferred_batch_size"
                        else want_db.get(key))
                problems.append(f"dynamic_batching.{key}: generated {want}, server {have_db.get(key)}")

    if expected.instance_group:
        if len(expected.instance_group) != len(served.instance_group):
            problems.append(
                f"instance_group: generated {len(expected.instance_group)} group(s), "
                f"server {len(served.instance_group)}"
            )
        for i, (want_ig, have_ig) in enumerate(zip(expected.instance_group, served.instance_group, strict=False)):
            kind = model_config_pb2.ModelInstanceGroup.Kind.Name
            if max(want_ig.count, 1) != have_ig.count:
                problems.append(f"instance_group[{i}].count: generated {want_ig.count}, server {have_ig.count}")
            if want_ig.kind != model_config_pb2.ModelInstanceGroup.KIND_AUTO and want_ig.kind != have_ig.kind:
                problems.append(
                    f"instance_group[{i}].kind: generated {kind(want_ig.kind)}, server {kind(have_ig.kind)}"
                )
            if list(want_ig.gpus) and list(want_ig.gpus) != list(have_ig.gpus):
                problems.append(
                    f"instance_group[{i}].gpus: generated {list(want_ig.gpus)}, server {list(have_ig.gpus)}"
                )
    return problems


def metadata_differences(expected: model_config_pb2.ModelConfig, metadata: Mapping[str, Any]) -> list[str]:
    """Whether ``get_model_metadata`` describes the generated config's tensors (shape = [-1] + dims when batching)."""
    problems = []
    batch = [-1] if expected.max_batch_size > 0 else []
    for kind, ios, key in (("input", expected.input, "inputs"), ("output", expected.output, "outputs")):
        served = {t["name"]: t for t in metadata.get(key, [])}
        for io in ios:
            entry = served.get(io.name)
            if entry is None:
                problems.append(f"metadata: {kind} '{io.name}' missing")
                continue
            want_type = wire_datatype(model_config_pb2.DataType.Name(io.data_type))
            if entry["datatype"] != want_type:
                problems.append(f"metadata: {kind} '{io.name}' datatype {entry['datatype']}, expected {want_type}")
            want_shape = batch + list(io.dims)
            if entry["shape"] != want_shape:
                problems.append(f"metadata: {kind} '{io.name}' shape {entry['shape']}, expected {want_shape}")
        extra = sorted(set(served) - {io.name for io in ios})
        if extra:
            problems.append(f"metadata: unexpected {kind}s {extra}")
    return problems


def contract_differences(contract: ModelContract, served: model_config_pb2.ModelConfig) -> list[str]:
    """Whether ``gen_repo/contract.json`` (what requests are built from) matches the server's config."""
    problems = []
    view = config_to_contract(served, name=contract.name)
    if contract.max_batch_size != view.max_batch_size:
        problems.append(f"contract.json max_batch_size {contract.max_batch_size}, server {view.max_batch_size}")
    for kind, want, have in (("input", contract.inputs, view.inputs), ("output", contract.outputs, view.outputs)):
        served_tensors = {t.name: t for t in have}
        for tensor in want:
            other = served_tensors.get(tensor.name)
            if other is None:
                problems.append(f"contract.json {kind} '{tensor.name}' is not on the server")
            elif (tensor.data_type, tensor.dims) != (other.data_type, other.dims):
                problems.append(
                    f"contract.json {kind} '{tensor.name}' is {tensor.data_type} {list(tensor.dims)}, "
                    f"server {other.data_type} {list(other.dims)}"
                )
    return problems
