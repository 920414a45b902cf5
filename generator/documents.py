"""Reading spec and manifest documents safely, and validating them against the JSON Schemas in ``schemas/``.

JSON and YAML (safe loader, no tags, no aliases beyond a small budget) only. Nothing from a document is ever
unpickled, evaluated or imported. Every failure is a :class:`~generator.errors.Problem` naming the file, the JSON
pointer and what is wrong.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from generator.errors import GenRepoError, Problem, json_pointer
from generator.resources import resource_dir

#: Spec and manifest files larger than this are refused before parsing (a GraphSpec is a few KB).
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
#: YAML aliases allowed per document; "billion laughs" documents use thousands.
MAX_YAML_ALIASES = 100
#: Containers nested deeper than this are refused (a GraphSpec nests about 8 levels).
MAX_NESTING = 64
#: Values (containers and scalars, counted as often as YAML aliases repeat them) above this are refused: a few
#: nested aliases expand exponentially without tripping MAX_YAML_ALIASES. A GraphSpec has a few hundred.
MAX_DOCUMENT_VALUES = 1_000_000

_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
#: torch.save() writes a zip archive of pickles (AITune checkpoints); refused like a bare pickle.
_TORCH_SAVE_MAGIC = b"PK\x03\x04"


class _AliasCountingLoader(yaml.SafeLoader):
    """SafeLoader that refuses documents with too many aliases (YAML alias bombs)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Count aliases while composing; refuse past the budget."""
        if self.check_event(yaml.events.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_YAML_ALIASES} YAML aliases (alias bomb?)")
        return super().compose_node(parent, index)


def _reject_non_finite(value: str) -> Any:
    raise ValueError(f"{value} is not valid JSON")


def _depth(value: Any, limit: int) -> bool:
    """True when ``value`` nests containers deeper than ``limit`` (iterative: no recursion limit to hit)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return False


def load_document(path: Path | str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse a JSON or YAML file into plain data; raise GenRepoError naming the file and what is wrong.

    YAML is chosen by the ``.yaml``/``.yml`` suffix; everything else is parsed as JSON (NaN and Infinity refused).
    AITune's pickled binary form is recognised and refused with a pointer to the JSON form.
    """
    path = Path(path)
    name = str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise GenRepoError([Problem(name, "", f"file is {size} bytes; at most {max_bytes} are accepted")])
        raw = path.read_bytes()
    except OSError as error:
        raise GenRepoError([Problem(name, "", f"cannot read file: {error.strerror or error}")]) from None
    if raw.startswith(_PICKLE_MAGIC) or raw.startswith(_TORCH_SAVE_MAGIC):
        raise GenRepoError(
            [
                Problem(
                    name,
                    "",
                    "this looks like AITune's pickled binary form; gen-repo never unpickles. Export the JSON form "
                    "instead (GraphSpec JSON as in AITune's tune report: SampleMetadata.to_json_dict())",
                )
            ]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GenRepoError([Problem(name, "", f"not UTF-8 text (byte {error.start})")]) from None
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            data = yaml.load(text, Loader=_AliasCountingLoader)  # a SafeLoader subclass
        else:
            data = json.loads(text, parse_constant=_reject_non_finite)
    except json.JSONDecodeError as error:
        message = f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
        raise GenRepoError([Problem(name, "", message)]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise GenRepoError([Problem(name, "", f"invalid YAML{where}: {problem}")]) from None
    except RecursionError:
        # The message of a RecursionError depends on the stack depth; say what is wrong with the document instead.
        raise GenRepoError([Problem(name, "", f"document nests deeper than {MAX_NESTING} levels")]) from None
    except ValueError as error:
        raise GenRepoError([Problem(name, "", f"cannot parse: {error}")]) from None
    if _too_many_values(data, MAX_DOCUMENT_VALUES):
        raise GenRepoError(
            [Problem(name, "", f"document expands to more than {MAX_DOCUMENT_VALUES} values (YAML alias bomb?)")]
        )
    if _depth(data, MAX_NESTING):
        raise GenRepoError([Problem(name, "", f"document nests deeper than {MAX_NESTING} levels")])
    if _has_non_finite(data):
        raise GenRepoError([Problem(name, "", "document contains NaN or Infinity, which are not valid here")])
    return data


def _too_many_values(value: Any, limit: int) -> bool:
    """Tell whether ``value`` expands to more than ``limit`` values; stops early, so its cost is bounded by limit."""
    stack = [value]
    count = 0
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


@functools.cache
def schema_registry() -> Registry:
    """Every schema in ``schemas/`` by its ``$id``, so that ``$ref``s across files resolve offline."""
    resources = []
    for path in sorted(resource_dir("schemas").glob("*.schema.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        uri = contents.get("$id", f"https://gen-repo.dev/schemas/{path.name}")
        resources.append((uri, Resource.from_contents(contents, default_specification=DRAFT202012)))
    registry: Registry = Registry().with_resources(resources)
    return registry.crawl()


@functools.cache
def schema_validator(schema_file: str) -> Draft202012Validator:
    """The Draft 2020-12 validator for ``schemas/<schema_file>`` (parsed once per process)."""
    schema = json.loads((resource_dir("schemas") / schema_file).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=schema_registry())


def schema_problems(document: Any, schema_file: str, file: str, base: tuple[str | int, ...] = ()) -> list[Problem]:
    """Every schema violation of ``document`` as a Problem, sorted by location (deterministic output)."""
    validator = schema_validator(schema_file)
    problems = [
        Problem(file, json_pointer((*base, *error.absolute_path)), _message(error))
        for error in validator.iter_errors(document)
    ]
    return sorted(problems, key=lambda p: (p.pointer, p.message))


def _message(error: ValidationError) -> str:
    """A short message; for ``oneOf``/``anyOf`` failures, the best sub-error explains more than the summary."""
    if error.validator in {"oneOf", "anyOf"} and error.context:
        best = min(error.context, key=lambda e: (len(e.absolute_path), e.message))
        return f"{error.message[:200]} (closest: {best.message[:200]})"
    return error.message if len(error.message) <= 300 else error.message[:297] + "..."
