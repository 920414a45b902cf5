"""Manifest numbers against what Triton's ``ModelConfig`` can hold: ranges read from the protobuf descriptors.

Each option is walked along the message it becomes (:data:`OPTION_MESSAGES`) and every integer checked against its
field's type, so an out-of-range number is a located problem instead of protobuf's ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from generator.errors import Problem, json_pointer
from generator.triton.proto import model_config_pb2

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor

__all__ = ["OPTION_MESSAGES", "integer_range", "number_problems", "option_number_problems"]

_CONFIG = model_config_pb2.ModelConfig.DESCRIPTOR
_POLICY = model_config_pb2.ModelVersionPolicy.DESCRIPTOR

#: Where each manifest option goes in ModelConfig: the field it fills (its message is walked key by key). A
#: version policy is written ``{latest: N}`` / ``{specific: [...]}``: the one field of each sub-message.
OPTION_MESSAGES: dict[str, FieldDescriptor | Mapping[str, FieldDescriptor]] = {
    "max_batch_size": _CONFIG.fields_by_name["max_batch_size"],
    "dynamic_batching": _CONFIG.fields_by_name["dynamic_batching"],
    "instance_group": _CONFIG.fields_by_name["instance_group"],
    "version_policy": {
        "latest": _POLICY.nested_types_by_name["Latest"].fields_by_name["num_versions"],
        "specific": _POLICY.nested_types_by_name["Specific"].fields_by_name["versions"],
    },
}
#: A model or ensemble version: a number in ``ModelVersionPolicy.specific.versions`` (and a folder name).
VERSION_FIELD = _POLICY.nested_types_by_name["Specific"].fields_by_name["versions"]
#: An ensemble's max_batch_size.
MAX_BATCH_SIZE_FIELD = _CONFIG.fields_by_name["max_batch_size"]

_RANGES = {"TYPE_INT32": (-(2**31), 2**31 - 1), "TYPE_SINT32": (-(2**31), 2**31 - 1),
           "TYPE_SFIXED32": (-(2**31), 2**31 - 1), "TYPE_UINT32": (0, 2**32 - 1), "TYPE_FIXED32": (0, 2**32 - 1),
           "TYPE_INT64": (-(2**63), 2**63 - 1), "TYPE_SINT64": (-(2**63), 2**63 - 1),
           "TYPE_SFIXED64": (-(2**63), 2**63 - 1), "TYPE_UINT64": (0, 2**64 - 1), "TYPE_FIXED64": (0, 2**64 - 1)}


def _type_name(field: FieldDescriptor) -> str:
    from google.protobuf.descriptor import FieldDescriptor as Field

    return next(name for name, value in vars(Field).items() if name.startswith("TYPE_") and value == field.type)


def integer_range(field: FieldDescriptor) -> tuple[int, int, str] | None:
    """``(low, high, "int32")`` for an integer protobuf field; None for any other type."""
    name = _type_name(field)
    if name not in _RANGES:
        return None
    low, high = _RANGES[name]
    return low, high, name.removeprefix("TYPE_").lower()


def _is_repeated(field: FieldDescriptor) -> bool:
    # ``label`` is deprecated from protobuf 6 (``is_repeated``); protobuf >= 4.25 is supported.
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _is_map(field: FieldDescriptor) -> bool:
    message: Descriptor | None = field.message_type
    return message is not None and message.GetOptions().map_entry


def _walk(value: Any, field: FieldDescriptor, path: tuple[str | int, ...], repeated: bool = True
          ) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """``(path, message)`` for every integer under ``value`` that ``field`` cannot hold."""
    if repeated and _is_repeated(field) and not _is_map(field) and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, field, (*path, index), repeated=False)
        return
    if _is_map(field):
        if isinstance(value, Mapping):
            entry = field.message_type.fields_by_name
            key_field, value_field = entry["key"], entry["value"]
            for key, item in value.items():
                if isinstance(key, str) and key.isdigit():
                    yield from _walk(int(key), key_field, (*path, key), repeated=False)
                yield from _walk(item, value_field, (*path, key), repeated=False)
        return
    if field.message_type is not None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                inner = field.message_type.fields_by_name.get(str(key))
                if inner is not None:
                    yield from _walk(item, inner, (*path, key))
        return
    bounds = integer_range(field)
    if bounds is not None and isinstance(value, int) and not isinstance(value, bool):
        low, high, type_name = bounds
        if not low <= value <= high:
            owner = field.containing_type.full_name.removeprefix("inference.")
            yield path, (f"{value} does not fit {owner}.{field.name}, a protobuf {type_name} "
                         f"({low}..{high})")


def number_problems(value: Any, field: FieldDescriptor, file: str, pointer: tuple[str | int, ...]) -> list[Problem]:
    """Problems of the integers in ``value`` (at ``pointer`` of ``file``) that ``field`` cannot hold."""
    return [Problem(file, json_pointer(where), message) for where, message in _walk(value, field, pointer)]


def option_number_problems(option: str, value: Any, file: str, pointer: tuple[str | int, ...]) -> list[Problem]:
    """Problems of manifest option ``option`` (set at ``pointer``) whose numbers its config field cannot hold."""
    target = OPTION_MESSAGES.get(option)
    if target is None:
        return []
    if isinstance(target, Mapping):
        if not isinstance(value, Mapping):
            return []
        return [problem for key, field in target.items() if key in value
                for problem in number_problems(value[key], field, file, (*pointer, key))]
    return number_problems(value, target, file, pointer)
