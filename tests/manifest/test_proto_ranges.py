"""Manifest numbers mean what the config can hold (generator/manifest/proto_ranges.py, strict integers in the schema).

Each attack of issue 21 used to end in a traceback (``ValueError: Value out of range``, ``TypeError``,
``AttributeError``) from plan, config and build; each is now a located problem, exit 2. The ranges come from the
ModelConfig descriptors; the tests hold them to protobuf's own enforcement, and every integer the schema lets an
option carry to one of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.manifest.entries import OPTION_KEYS
from generator.manifest.proto_ranges import OPTION_MESSAGES, integer_range, option_number_problems
from generator.resources import resource_dir
from generator.triton.proto import model_config_pb2

EXAMPLE_SPEC = Path(__file__).resolve().parents[2] / "examples" / "specs" / "mlp.graphspec.json"

#: (manifest entry keys, the pointer of the problem, a phrase of its message)
ATTACKS = [
    ({"dynamic_batching": {"preferred_batch_size": [9999999999999999999]}},
     "/models/0/dynamic_batching/preferred_batch_size/0", "does not fit ModelDynamicBatching.preferred_batch_size, "
                                                         "a protobuf int32"),
    ({"dynamic_batching": {"preferred_batch_size": [4.0]}}, "/models/0/dynamic_batching",
     "4.0 is not of type 'integer'"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": 99999999999999999999}},  # past every protobuf integer
     "/models/0/dynamic_batching/max_queue_delay_microseconds", "past the integer limit: gen-repo reads integers "
                                                               "from -9223372036854775808 to 18446744073709551615"),
    ({"instance_group": [{"count": 9999999999999999999}]}, "/models/0/instance_group/0/count",
     "does not fit ModelInstanceGroup.count, a protobuf int32"),
    ({"instance_group": [{"kind": "KIND_GPU", "gpus": [0.0]}]}, "/models/0/instance_group/0/gpus/0",
     "0.0 is not of type 'integer'"),
    ({"batch_axis_multipliers": {"x": 1.0}}, "/models/0/batch_axis_multipliers/x", "1.0 is not of type 'integer'"),
    ({"dynamic_shapes": [{"path": "x", "shape": [{"type": "BatchDim", "name": "b", "min": 1.0, "max": 32}, 16]}]},
     "/models/0/dynamic_shapes/0/shape/0/min", "1.0 is not of type 'integer'"),
    ({"version": 2.0}, "/models/0/version", "2.0 is not of type 'integer'"),
    ({"version_policy": {"latest": 4294967296}}, "/models/0/version_policy/latest",
     "does not fit ModelVersionPolicy.Latest.num_versions, a protobuf uint32"),
    ({"dynamic_batching": {"default_queue_policy": {"max_queue_size": 4294967296}}},
     "/models/0/dynamic_batching/default_queue_policy/max_queue_size", "a protobuf uint32 (0..4294967295)"),
]


def _manifest(tmp_path: Path, entry: dict[str, Any], **document: Any) -> Path:
    (tmp_path / "mlp.graphspec.json").write_text(EXAMPLE_SPEC.read_text())
    path = tmp_path / "gen-repo.yaml"
    model = {"name": "mlp", "spec": "mlp.graphspec.json", "source": {"onnx": "mlp.onnx"}, **entry}
    path.write_text(yaml.safe_dump({"defaults": {"target": "onnx"}, "models": [model], **document}))
    (tmp_path / "mlp.onnx").write_bytes(b"")
    return path


@pytest.mark.parametrize("command", ["plan", "config", "build"])
@pytest.mark.parametrize(("entry", "pointer", "phrase"), ATTACKS,
                         ids=[a[1].removeprefix("/models/0/") for a in ATTACKS])
def test_numbers_the_config_cannot_hold_are_located_problems(tmp_path: Path, command: str, entry: dict[str, Any],
                                                            pointer: str, phrase: str) -> None:
    manifest = _manifest(tmp_path, entry)
    args = [command, str(manifest)] + ([] if command == "plan" else ["-o", str(tmp_path / "out")])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert any(line.startswith(f"error: {manifest}: {pointer}: ") and phrase in line
               for line in result.output.splitlines()), result.output
    assert not (tmp_path / "out").exists()


def test_ensemble_numbers_are_located_problems(tmp_path: Path) -> None:
    ensemble = {"name": "ens", "version": 2**63, "max_batch_size": 2**31,
                "steps": [{"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]}
    manifest = _manifest(tmp_path, {}, ensembles=[ensemble])
    result = CliRunner().invoke(main, ["config", str(manifest), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"{manifest}: /ensembles/0/version: 9223372036854775808 does not fit" in result.output
    assert (f"{manifest}: /ensembles/0/max_batch_size: 2147483648 does not fit ModelConfig.max_batch_size"
            in result.output)


def test_every_option_at_its_largest_value_makes_a_config(tmp_path: Path) -> None:
    """The upper bounds are accepted and written as they are (protobuf holds them)."""
    u64, u32, i32 = 2**64 - 1, 2**32 - 1, 2**31 - 1
    entry = {"dynamic_batching": {"max_queue_delay_microseconds": u64, "priority_levels": u64,
                                  "default_priority_level": u64, "priority_queue_policy": {str(u64): {
                                      "max_queue_size": u32, "default_timeout_microseconds": u64}},
                                  "default_queue_policy": {"max_queue_size": u32}},
             "instance_group": [{"kind": "KIND_CPU", "count": i32}], "version_policy": {"latest": u32}}
    manifest = _manifest(tmp_path, entry)
    result = CliRunner().invoke(main, ["config", str(manifest), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    config = (tmp_path / "out" / "mlp" / "config.pbtxt").read_text()
    for text in (f"max_queue_delay_microseconds: {u64}", f"key: {u64}", f"max_queue_size: {u32}",
                 f"count: {i32}", f"num_versions: {u32}"):
        assert text in config


# ------------------------------------------------------------------------------------------------ the ranges
def _integer_fields(descriptor: Any, seen: set[str]) -> list[Any]:
    if descriptor.full_name in seen:
        return []
    seen.add(descriptor.full_name)
    found = []
    for field in descriptor.fields:
        if field.message_type is not None:
            found += _integer_fields(field.message_type, seen)
        elif integer_range(field) is not None:
            found.append(field)
    return found


@pytest.mark.parametrize("field", _integer_fields(model_config_pb2.ModelConfig.DESCRIPTOR, set()),
                         ids=lambda f: f.full_name)
def test_each_range_is_the_one_protobuf_enforces(field: Any) -> None:
    """Every integer field of ModelConfig: the range read from its descriptor is exactly what protobuf accepts."""
    low, high, _ = integer_range(field)
    from google.protobuf import symbol_database

    message_class = symbol_database.Default().GetSymbol(field.containing_type.full_name)
    for value in (low, high):
        message = message_class()
        if field.is_repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)
    for value in (low - 1, high + 1):
        with pytest.raises(ValueError, match="out of range"):
            message = message_class()
            if field.is_repeated:
                getattr(message, field.name).append(value)
            else:
                setattr(message, field.name, value)


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((resource_dir("schemas") / "manifest.schema.json").read_text())
    return schema


def _integer_leaves(node: Any, path: tuple[str, ...], schema: dict[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    """(path, schema node) of every integer the node admits; ``[]`` steps into array items, ``{}`` into map values."""
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
        return _integer_leaves(schema["$defs"][node["$ref"].removeprefix("#/$defs/")], path, schema)
    found = []
    types = node.get("type")
    if types == "integer" or (isinstance(types, list) and "integer" in types):
        found.append((path, node))
    for key in ("oneOf", "anyOf", "allOf"):
        for branch in node.get(key, []):
            found += _integer_leaves(branch, path, schema)
    for name, child in (node.get("properties") or {}).items():
        found += _integer_leaves(child, (*path, name), schema)
    found += _integer_leaves(node.get("items"), (*path, "[]"), schema)
    found += _integer_leaves(node.get("additionalProperties"), (*path, "{}"), schema)
    return found


def _value_at(path: tuple[str, ...], leaf: Any) -> Any:
    if not path:
        return leaf
    head, rest = path[0], path[1:]
    if head == "[]":
        return [_value_at(rest, leaf)]
    if head == "{}":
        return {"1": _value_at(rest, leaf)}
    return {head: _value_at(rest, leaf)}


def _pointer(path: tuple[str, ...]) -> str:
    return "".join("/" + {"[]": "0", "{}": "1"}.get(step, step) for step in path)


OPTION_INTEGERS = [(option, path, node) for option in OPTION_KEYS
                   for path, node in _integer_leaves({"$ref": f"#/$defs/option.{option}"}, (), _schema())]


def test_every_option_integer_is_found() -> None:
    assert {option for option, _, _ in OPTION_INTEGERS} >= set(OPTION_MESSAGES)


@pytest.mark.parametrize(("option", "path", "node"), OPTION_INTEGERS,
                         ids=[f"{o}{_pointer(p)}" for o, p, _ in OPTION_INTEGERS])
def test_every_integer_an_option_takes_is_bounded(option: str, path: tuple[str, ...], node: Any) -> None:
    """Each integer a manifest option admits is bounded by its config field's type, or by the schema itself."""
    if "maximum" in node:
        return
    value = _value_at(path, 2**64)  # beyond every protobuf integer type
    problems = option_number_problems(option, value, "m.yaml", ("defaults", option))
    assert [p.pointer for p in problems] == [f"/defaults/{option}{_pointer(path)}"], (option, path)
