"""Validating documents against the JSON Schemas in ``schemas/`` (Draft 2020-12), every problem located.

``jsonschema`` reports every problem; ``jsonschema_rs``, where installed, only answers "valid" fast, trusted only where
it cannot be more lenient. Patterns are ECMA-262; where asked, ``4.0`` is no integer (docs/security.md).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from generator.errors import Problem, json_pointer, one_line
from generator.json_reader import read_json
from generator.resources import resource_dir
from generator.specs.documents import key_marks

if TYPE_CHECKING:
    # Imported where used: jsonschema and referencing only judge invalid documents (about 0.1 s of start-up that
    # `gen-repo validate` on valid specs never needs).
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

__all__ = [
    "FAST_VALIDATOR_MODULE",
    "ecma_pattern",
    "fast_schema_valid",
    "fast_validator",
    "has_ref_cycle",
    "reference_schema_problems",
    "schema_problems",
    "schema_registry",
    "schema_validator",
]


@functools.cache
def schema_registry() -> Registry:
    """Every schema in ``schemas/`` by its ``$id``, so that ``$ref``s across files resolve offline."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources = []
    for path in sorted(resource_dir("schemas").glob("*.schema.json")):
        contents = read_json(path)
        uri = contents.get("$id", f"https://gen-repo.dev/schemas/{path.name}")
        resources.append((uri, Resource.from_contents(contents, default_specification=DRAFT202012)))
    registry: Registry = Registry().with_resources(resources)
    return registry.crawl()


@functools.lru_cache(maxsize=256)
def ecma_pattern(pattern: str) -> re.Pattern[str]:
    r"""``pattern`` compiled to match as ECMA-262 (JSON Schema's dialect) does: ``$`` only at the very end.

    Python's ``$`` also matches before a final newline; every ``$`` outside a character class, not escaped, becomes
    ``\Z``. The other constructs of the schemas' patterns mean the same in both dialects.
    """
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index:index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            char = r"\Z"
        out.append(char)
        index += 1
    return re.compile("".join(out))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """The ``pattern`` keyword with ECMA-262's ``$`` (jsonschema's own uses ``re.search`` as it is)."""
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not ecma_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _is_strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _validator_class(strict_integers: bool) -> Any:
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER
    if strict_integers:
        checker = checker.redefine("integer", _is_strict_integer)
    return validators.extend(Draft202012Validator, validators={"pattern": _pattern}, type_checker=checker)


@functools.cache
def schema_validator(schema_file: str, strict_integers: bool = False) -> Draft202012Validator:
    """The Draft 2020-12 validator for ``schemas/<schema_file>`` (parsed once per process).

    Patterns match as ECMA-262 (:func:`ecma_pattern`). ``strict_integers``: ``integer`` admits Python ints only,
    not floats of integral value (``4.0``).
    """
    from jsonschema import Draft202012Validator

    schema = read_json(resource_dir("schemas") / schema_file)
    Draft202012Validator.check_schema(schema)
    validator: Draft202012Validator = _validator_class(strict_integers)(schema, registry=schema_registry())
    return validator


def _import_fast_module() -> ModuleType | None:
    try:
        return importlib.import_module("jsonschema_rs")
    except ImportError:
        return None


#: The ``jsonschema_rs`` module, or None where it is not installed (then only the reference validator runs). Set it
#: to None to switch the fast path off (the tests do, to exercise the fallback).
FAST_VALIDATOR_MODULE: ModuleType | None = _import_fast_module()


def _load_schema(schema_file: str) -> dict[str, Any]:
    schema: dict[str, Any] = read_json(resource_dir("schemas") / schema_file)
    return schema


@functools.cache
def _schema_documents() -> dict[str, dict[str, Any]]:
    """Every schema in ``schemas/`` by its ``$id``."""
    out = {}
    for path in sorted(resource_dir("schemas").glob("*.schema.json")):
        contents = read_json(path)
        out[contents.get("$id", f"https://gen-repo.dev/schemas/{path.name}")] = contents
    return out


def _refs(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                yield ref
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def has_ref_cycle(schema_id: str, schemas: dict[str, dict[str, Any]]) -> bool:
    """Tell whether following ``$ref``s from ``schemas[schema_id]`` can come back to a schema already on the way.

    ``schemas`` maps ``$id`` to schema. Only ``$ref``s of the form ``[<$id>]#/$defs/<name>`` (what schemas/ uses) are
    followed; any other counts as a cycle, so that an unexpected schema shape falls back to the reference validator
    rather than risk a crash.
    """

    def target(base: str, ref: str) -> tuple[str, str] | None:
        uri, _, fragment = ref.partition("#")
        uri = uri or base
        if uri not in schemas or not (fragment == "" or fragment.startswith("/$defs/")):
            return None
        return uri, fragment

    def node(key: tuple[str, str]) -> Any:
        uri, fragment = key
        contents: Any = schemas[uri]
        return contents if not fragment else contents.get("$defs", {}).get(fragment.removeprefix("/$defs/"))

    on_path: set[tuple[str, str]] = set()
    done: set[tuple[str, str]] = set()

    def visit(key: tuple[str, str]) -> bool:
        if key in on_path:
            return True
        if key in done:
            return False
        on_path.add(key)
        found = node(key)
        if found is None:
            return True
        for ref in _refs(found):
            following = target(key[0], ref)
            if following is None or visit(following):
                return True
        on_path.discard(key)
        done.add(key)
        return False

    return visit((schema_id, ""))


@functools.cache
def _build_fast_validator(module: ModuleType, schema_file: str) -> Any | None:
    schema = _load_schema(schema_file)
    if has_ref_cycle(schema.get("$id", f"https://gen-repo.dev/schemas/{schema_file}"), _schema_documents()):
        return None
    # Every schema in schemas/ is registered, so the tune report's $refs into graphspec.schema.json resolve from
    # memory; offline=True refuses to fetch anything else (a schema must never reach the network).
    registry = module.Registry(list(_schema_documents().items()))
    return module.Draft202012Validator(schema, registry=registry, offline=True)


def fast_validator(schema_file: str) -> Any | None:
    """The ``jsonschema_rs`` validator for ``schemas/<schema_file>`` (built once), or None without the fast path.

    None when jsonschema_rs is not installed (or switched off, see ``FAST_VALIDATOR_MODULE``) or when the schema has
    ``$ref`` cycles.
    """
    module = FAST_VALIDATOR_MODULE
    if module is None:
        return None
    return _build_fast_validator(module, schema_file)


def contains_tuple(value: Any) -> bool:
    """Tell whether a tuple stands anywhere in ``value`` (jsonschema_rs takes it for an array, jsonschema does not)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif isinstance(item, tuple):
            return True
        elif isinstance(item, dict):  # dict subclasses: rarer, so checked after the exact types
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def contains_integral_float(value: Any) -> bool:
    """Tell whether a float of integral value (``4.0``) stands anywhere in ``value``.

    The fast path takes it for an integer; the strict reference does not.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if item.is_integer():
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def fast_schema_valid(document: Any, schema_file: str, strict_integers: bool = False) -> bool:
    """True only when the fast path can vouch that ``document`` is valid; False means "ask the reference".

    ``strict_integers``: see the module docstring.
    """
    validator = fast_validator(schema_file)
    if validator is None:
        return False
    try:
        valid = bool(validator.is_valid(document))
    except (ValueError, TypeError, OverflowError):
        return False  # not plain JSON data (date, set, bytes, int keys, lone surrogates...): the reference judges
    return valid and not contains_tuple(document) and not (strict_integers and contains_integral_float(document))


def schema_problems(
    document: Any,
    schema_file: str,
    file: str,
    base: tuple[str | int, ...] = (),
    strict_integers: bool = False,
    *,
    source: Path | None = None,
) -> list[Problem]:
    """Every schema violation of ``document`` as a Problem, sorted by location (deterministic output).

    The fast path answers for valid documents; the problems of an invalid one always come from the reference
    validator (see the module docstring), so they are the same with or without jsonschema_rs. ``strict_integers``:
    see :func:`fast_schema_valid`. ``source``: the file ``document`` was read from; an unknown
    key is then reported with its line and column there.
    """
    if fast_schema_valid(document, schema_file, strict_integers):
        return []
    return reference_schema_problems(document, schema_file, file, base, strict_integers, source=source)


def reference_schema_problems(
    document: Any,
    schema_file: str,
    file: str,
    base: tuple[str | int, ...] = (),
    strict_integers: bool = False,
    *,
    source: Path | None = None,
) -> list[Problem]:
    """:func:`schema_problems` by the reference validator (``jsonschema``) alone."""
    validator = schema_validator(schema_file, strict_integers)
    errors = list(validator.iter_errors(document))
    marks: dict[tuple[Any, ...], tuple[int, int]] = {}
    if source is not None and any(_unknown_keys(e) for e in _with_best_context(errors)):
        marks = key_marks(source)
    problems = [
        Problem(file, json_pointer((*base, *error.absolute_path)), _message(error, marks))
        for error in errors
    ]
    return sorted(problems, key=lambda p: (p.pointer, p.message))


def _best_context(error: ValidationError) -> ValidationError:
    """The sub-error of a ``oneOf``/``anyOf`` failure that explains it best.

    jsonschema's ``best_match`` (the branch whose type the value has, and within it the deepest error):
    ``preferred_batch_size: [4.0]`` is closest to "4.0 is not of type 'integer'", not to "not a boolean".
    """
    from jsonschema.exceptions import best_match

    best = best_match([error])  # descends into the context; itself when no sub-error stands out
    if best is error:
        best = min(error.context or [error], key=lambda e: (len(e.absolute_path), e.message))
    return best


def _with_best_context(errors: list[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        yield error
        if error.validator in {"oneOf", "anyOf"} and error.context:
            yield _best_context(error)


def _message(error: ValidationError, marks: dict[tuple[Any, ...], tuple[int, int]] | None = None) -> str:
    """A short message; for ``oneOf``/``anyOf`` failures, the best sub-error explains more than the summary.

    An unknown key gets the closest known key as a suggestion and, with ``marks``, its line and column.
    """
    if error.validator in {"oneOf", "anyOf"} and error.context:
        best = _best_context(error)
        return f"{error.message[:200]} (closest: {best.message[:200]}{_unknown_key_hints(best, marks)})"
    return one_line(error.message) + _unknown_key_hints(error, marks)


def _unknown_keys(error: ValidationError) -> list[tuple[str, list[str]]]:
    """For an ``additionalProperties: false`` failure: each unexpected key with the known keys of its object."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return []
    schema = error.schema if isinstance(error.schema, dict) else {}
    known = [str(k) for k in schema.get("properties") or {}]
    patterns = list(schema.get("patternProperties") or {})
    if patterns:  # jsonschema's own rule for which keys are extra; rare in our schemas
        import re

        return [(str(k), known) for k in error.instance
                if k not in known and not any(re.search(p, str(k)) for p in patterns)]
    return [(str(k), known) for k in error.instance if k not in known]


def _unknown_key_hints(error: ValidationError, marks: dict[tuple[Any, ...], tuple[int, int]] | None) -> str:
    hints = []
    for key, known in _unknown_keys(error):
        where = (marks or {}).get((*error.absolute_path, key))
        at = f" at line {where[0]} column {where[1]}" if where else ""
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        suggestion = f", did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
        hints.append(f"{key!r}{at}{suggestion}")
    return "; " + "; ".join(hints) if hints else ""
