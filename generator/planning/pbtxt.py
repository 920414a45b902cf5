"""Deterministic protobuf text format: exactly ``text_format.MessageToString(message)``, printed fast.

``text_format``'s printer is pure Python with several calls per field; it was most of the cost of generating a
``config.pbtxt`` (bench/bench_config_gen.py). Two faster printers give the same bytes:

- protobuf's C text encoder (``str(message)`` on the upb backend), about 4x faster than :func:`_print_text`. It
  differs from ``text_format`` in three ways only: map entries come out in another order (string keys descending on
  protobuf 6.33; ``text_format`` sorts keys ascending), a map entry's default key or value is printed
  (``text_format`` leaves it out), and floats are printed another way (``-0`` for ``-0.0``, ``1e+10``, 9 significant
  digits). So it is used only for messages where none can show: no map with more than one entry, none with a default
  key or value, no float or double field set; and only on the upb backend, after a one-time check that it agrees
  with ``text_format`` on a sample message;
- :func:`_print_text`, a lean copy of ``text_format``'s default output, for every other message; it still hands each
  message inside (a map entry, an element) that the C encoder prints like ``text_format`` to it, so only the parts
  that differ are printed in Python. What it does not cover (extensions, groups, ``Any``) falls back to
  ``text_format`` itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor, text_encoding, text_format
from google.protobuf.internal import api_implementation, type_checkers

__all__ = ["message_text"]

_FD = descriptor.FieldDescriptor


def message_text(message: Any) -> str:
    """``text_format.MessageToString(message)`` with default options, byte for byte."""
    c_encoder = _c_encoder_agrees()
    if c_encoder and _c_encoder_safe(message):
        return str(message)
    out: list[str] = []
    try:
        _print_text(message, "", out, c_encoder)
    except _UnsupportedError:
        return text_format.MessageToString(message)
    return "".join(out)


# --------------------------------------------------------------------------------------------------------------------
# protobuf's C text encoder, where its bytes are text_format's
# --------------------------------------------------------------------------------------------------------------------
@functools.cache
def _c_encoder_agrees() -> bool:
    """Whether ``str(message)`` is upb's C encoder and prints a sample like ``text_format`` (checked once)."""
    if api_implementation.Type() != "upb":
        return False  # the python backend's str() *is* text_format; the cpp backend's differs in places
    from google.protobuf import descriptor_pb2

    sample = descriptor_pb2.FileDescriptorProto(name="caf\u00e9 \"\\'\t\x01", package="p", syntax="proto3")
    message = sample.message_type.add(name="M")
    message.field.add(name="f", number=2**29 - 1, label=_FD.LABEL_REPEATED, type=_FD.TYPE_INT64)
    message.options.map_entry = False
    sample.options.cc_enable_arenas = True
    return str(sample) == text_format.MessageToString(sample)


@dataclass(frozen=True, slots=True)
class _Checks:
    """Where the C encoder could print a message type differently from text_format (computed once per type).

    ``messages``: (name, repeated) of message fields whose type may hold such a difference; ``maps``: map fields;
    ``floats``: float and double fields (printed differently whenever set).
    """

    messages: tuple[tuple[str, bool], ...] = ()
    maps: tuple[Any, ...] = ()
    floats: frozenset[str] = frozenset()


#: Types the C encoder never prints like text_format (``Any`` is expanded, extensions and groups are printed their
#: own way): a message of such a type, or holding one, always takes the lean printer.
_REFUSED = None


@functools.cache
def _checks(message_descriptor: Any) -> _Checks | None:
    """The :class:`_Checks` of a message type, ``None`` where the C encoder is never used for it."""
    return _find_checks(message_descriptor, set())


def _find_checks(message_descriptor: Any, visiting: set[str]) -> _Checks | None:
    name = message_descriptor.full_name
    if name == "google.protobuf.Any" or message_descriptor.extension_ranges or name in visiting:
        return _REFUSED  # a recursive type is refused too: simpler than a fixed point, and none is in ModelConfig
    visiting.add(name)
    messages, maps, floats = [], [], set()
    for field in message_descriptor.fields:
        if field.type == _FD.TYPE_GROUP:
            return _REFUSED
        if field.cpp_type in (_FD.CPPTYPE_FLOAT, _FD.CPPTYPE_DOUBLE):
            floats.add(field.name)
        elif field.cpp_type == _FD.CPPTYPE_MESSAGE:
            if field.message_type.has_options and field.message_type.GetOptions().map_entry:
                maps.append(field)
                continue
            inner = _find_checks(field.message_type, visiting)
            if inner is _REFUSED:
                return _REFUSED
            if inner.messages or inner.maps or inner.floats:
                messages.append((field.name, _repeated(field)))
    visiting.discard(name)
    return _Checks(tuple(messages), tuple(maps), frozenset(floats))


def _c_encoder_safe(message: Any) -> bool:
    """True when the C encoder prints ``message`` exactly as text_format does.

    That is: no float or double set, and no map with more than one entry or with a default key or scalar value,
    anywhere in it. Only the fields that can hold one are looked at.
    """
    checks = _checks(message.DESCRIPTOR)
    if checks is None:
        return False
    if checks.floats and any(field.name in checks.floats for field, _ in message.ListFields()):
        return False
    for field in checks.maps:
        entries = getattr(message, field.name)
        if entries and not _one_entry_safe(field, entries):
            return False
    for name, repeated in checks.messages:
        if repeated:
            # [:] reads a upb container at once; iterating it ends in a formatted IndexError, which costs more.
            for element in getattr(message, name)[:]:
                if not _c_encoder_safe(element):
                    return False
        elif message.HasField(name) and not _c_encoder_safe(getattr(message, name)):
            return False
    return True


def _one_entry_safe(field: Any, entries: Any) -> bool:
    """A map of one entry that text_format prints like the C encoder.

    text_format sorts entries by key (the C encoder orders them otherwise) and prints each as a message
    ``{key, value}``, so it leaves out a key or scalar value equal to its default (``""``, 0, false), which the C
    encoder prints.
    """
    if len(entries) > 1:
        return False
    key = next(iter(entries))  # the one entry (not .items(): a Python-level view over the upb map)
    if not key:
        return False
    value, value_field = entries[key], field.message_type.fields_by_name["value"]
    if value_field.cpp_type == _FD.CPPTYPE_MESSAGE:
        return _c_encoder_safe(value)
    return bool(value) and value_field.cpp_type not in (_FD.CPPTYPE_FLOAT, _FD.CPPTYPE_DOUBLE)


def _repeated(field: Any) -> bool:
    # ``is_repeated`` where protobuf has it (``label`` is deprecated there); ``label`` on older releases.
    is_repeated = getattr(field, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else field.label == _FD.LABEL_REPEATED


# --------------------------------------------------------------------------------------------------------------------
# The lean printer: text_format's default output, fewer calls per field
# --------------------------------------------------------------------------------------------------------------------
class _UnsupportedError(Exception):
    """A message the fast printer leaves to text_format."""


#: Field kinds of the fast printer.
_MESSAGE, _MAP, _ENUM, _STRING, _BYTES, _BOOL, _FLOAT, _OTHER = range(8)
#: Characters text_format's CEscape leaves alone: printable ASCII except the quote characters and backslash.
#: text_format.MessageToString's own default for ``as_utf8`` (True from protobuf 4.x on; older releases escape).
_AS_UTF8 = bool(getattr(text_format, "_as_utf8_default", False))
_PLAIN = frozenset(chr(c) for c in range(32, 127)) - {'"', "'", "\\"}


@functools.cache
def _field_kind(field: Any) -> tuple[int, str, bool, dict[int, str]]:
    """(kind, printed name with its separator, repeated, enum names) of a field descriptor, computed once."""
    if field.is_extension or field.type == _FD.TYPE_GROUP:
        raise _UnsupportedError
    cpp = field.cpp_type
    repeated = _repeated(field)
    if cpp == _FD.CPPTYPE_MESSAGE:
        options = field.message_type.GetOptions() if field.message_type.has_options else None
        kind = _MAP if options is not None and options.map_entry else _MESSAGE
        return kind, f"{field.name} {{\n", repeated, {}
    if cpp == _FD.CPPTYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return _ENUM, f"{field.name}: ", repeated, names
    if cpp == _FD.CPPTYPE_STRING:
        return (_BYTES if field.type == _FD.TYPE_BYTES else _STRING), f"{field.name}: ", repeated, {}
    if cpp == _FD.CPPTYPE_BOOL:
        return _BOOL, f"{field.name}: ", repeated, {}
    if cpp == _FD.CPPTYPE_FLOAT:
        return _FLOAT, f"{field.name}: ", repeated, {}
    return _OTHER, f"{field.name}: ", repeated, {}  # integers and doubles: str(value)


def _scalar_text(kind: int, value: Any, enum_names: dict[int, str]) -> str:
    if kind == _ENUM:
        return enum_names.get(value, str(value))
    if kind == _STRING:
        if _PLAIN.issuperset(value):
            return f'"{value}"'
        if _AS_UTF8:
            return '"' + text_encoding.CEscape(value, True) + '"'
        return '"' + text_encoding.CEscape(value.encode("utf-8"), False) + '"'
    if kind == _BYTES:
        return '"' + text_encoding.CEscape(value, False) + '"'
    if kind == _BOOL:
        return "true" if value else "false"
    if kind == _FLOAT:
        return str(value) if math.isnan(value) else str(type_checkers.ToShortestFloat(value))
    return str(value)


def _print_text(message: Any, pad: str, out: list[str], c_encoder: bool = False) -> None:
    """Append ``message``'s text_format lines (default options) at indentation ``pad`` to ``out``.

    With ``c_encoder``, each message inside that the C encoder prints like text_format is printed by it (indented):
    only the parts that differ (a map of several entries, a float) are printed here.
    """
    if message.DESCRIPTOR.full_name == "google.protobuf.Any":
        raise _UnsupportedError
    inner = pad + "  "
    for descriptor_field, value in message.ListFields():
        kind, head, repeated, enum_names = _field_kind(descriptor_field)
        if kind == _MAP:
            entry_class = value.GetEntryClass()
            for key in sorted(value):
                out.append(pad + head)
                # A standalone entry message leaves out a default key or value, as text_format does.
                entry = entry_class(key=key, value=value[key])
                if c_encoder and _c_encoder_safe(entry):
                    out.append(_indented(str(entry), inner))
                else:
                    _print_text(entry, inner, out, c_encoder)
                out.append(pad + "}\n")
        elif kind == _MESSAGE:
            for element in value[:] if repeated else (value,):
                out.append(pad + head)
                if c_encoder and _c_encoder_safe(element):
                    out.append(_indented(str(element), inner))
                else:
                    _print_text(element, inner, out, c_encoder)
                out.append(pad + "}\n")
        else:
            for element in value[:] if repeated else (value,):
                out.append(pad + head + _scalar_text(kind, element, enum_names) + "\n")


def _indented(text: str, pad: str) -> str:
    """``text`` (whole lines, each ending in a newline) with ``pad`` before every line."""
    return pad + text[:-1].replace("\n", "\n" + pad) + "\n" if text else ""
