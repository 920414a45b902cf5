"""Reading spec and manifest documents safely: JSON and YAML within limits, nothing executed.

YAML by the safe loader with a small alias budget; nothing is ever unpickled, evaluated or imported, and every
failure is a located :class:`~generator.errors.Problem`.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from pathlib import Path
from typing import Any

from generator.bounded import LIMITS, limit, read_bytes
from generator.errors import GenRepoError, Problem, json_pointer
from generator.json_reader import parse_json
from generator.number_limits import MAX_INT_CHARS, float_problem, integer_problem

# PyYAML is imported where used: it only reads .yaml files.

#: The defaults of the limits in :data:`generator.bounded.LIMITS` (the one table; environment variables change them
#: per run, see :func:`generator.bounded.limit`): spec and manifest bytes (a GraphSpec is a few KB), YAML aliases per
#: document ("billion laughs" documents use thousands), nesting (a GraphSpec nests about 8 levels) and values,
#: counted as often as YAML aliases repeat them (a few nested aliases expand exponentially without tripping the
#: alias limit; a GraphSpec has a few hundred).
MAX_DOCUMENT_BYTES = LIMITS["document_bytes"].default
MAX_YAML_ALIASES = LIMITS["yaml_aliases"].default
MAX_NESTING = LIMITS["nesting"].default
MAX_DOCUMENT_VALUES = LIMITS["document_values"].default

_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
#: torch.save() writes a zip archive of pickles (AITune checkpoints); refused like a bare pickle.
_TORCH_SAVE_MAGIC = b"PK\x03\x04"


#: Read YAML with libyaml's C parser (``yaml.CSafeLoader``) where PyYAML was built with it (its wheels are): about
#: 3x faster on a manifest. False falls back to the pure-Python ``SafeLoader`` (the tests switch it off to check
#: that both paths enforce the same limits).
PREFER_LIBYAML = True


@functools.cache
def _python_yaml_loader() -> type:
    """Pure-Python SafeLoader that refuses documents with too many aliases (YAML alias bombs) while composing."""
    import yaml

    class AliasCountingLoader(yaml.SafeLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._aliases = 0
            self._max_aliases = limit("yaml_aliases")

        def compose_node(self, parent: Any, index: Any) -> Any:
            """Count aliases while composing; refuse past the budget."""
            if self.check_event(yaml.events.AliasEvent):
                self._aliases += 1
                if self._aliases > self._max_aliases:
                    raise yaml.YAMLError(f"more than {self._max_aliases} YAML aliases (alias bomb?)")
            return super().compose_node(parent, index)

    return AliasCountingLoader


def yaml_loader() -> type:
    """The loader class :func:`load_document` reads YAML with: ``yaml.CSafeLoader`` where libyaml is available.

    Both are safe loaders (standard YAML types only, never Python objects). The C loader composes in C, so aliases are
    counted on the composed node graph (:func:`_count_aliases`) before anything is constructed; the Python one counts
    them while composing.
    """
    import yaml

    if PREFER_LIBYAML and getattr(yaml, "__with_libyaml__", False):
        return yaml.CSafeLoader
    return _python_yaml_loader()


def _count_aliases(root: Any) -> None:
    """Raise YAMLError when the composed node graph holds more than the ``yaml_aliases`` limit of aliases.

    A composed node appears once in its parent unless an alias repeats it (a merge key ``<<: *x`` included), so every
    reference to a node already seen is one alias, exactly what the Python loader counts. Each node is entered once:
    the walk is linear in the text, never in the expansion an alias bomb aims at.
    """
    import yaml

    seen = {id(root)}
    stack = [root]
    aliases = 0
    max_aliases = limit("yaml_aliases")
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            children: Any = itertools.chain.from_iterable(node.value)
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            continue
        for child in children:
            if id(child) in seen:
                aliases += 1
                if aliases > max_aliases:
                    raise yaml.YAMLError(f"more than {max_aliases} YAML aliases (alias bomb?)")
            else:
                seen.add(id(child))
                stack.append(child)


def _load_yaml(text: str, name: str) -> Any:
    """Parse YAML text into plain data with the alias budget enforced and duplicate keys refused.

    Raises YAMLError or RecursionError for a text it cannot compose, GenRepoError (every duplicate key located) for
    a mapping with a key twice: PyYAML keeps the last value silently, as Python's json does, and the one JSON reader
    (:mod:`generator.json_reader`) refuses it, so YAML does too.
    """
    import yaml

    loader = yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if isinstance(loader, yaml.CSafeLoader) and "*" in text:  # no '*' in the text: no alias, nothing to count
            _count_aliases(node)
        problems = _node_problems(loader, node, name)
        if problems:
            raise GenRepoError(problems)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _number_problem(loader: Any, node: Any) -> str | None:
    """Why a scalar node's number is past :mod:`generator.number_limits` (None: within, or not a number).

    Checked on the node, before construction: PyYAML converts an integer of any length (int-to-string
    ``ValueError`` past 4,300 digits; binary and sexagesimal notations have no such limit) and overflows floats to
    infinity. An integer too long to be within the limits in any notation is refused unconverted.
    """
    tag = node.tag.rsplit(":", 1)[-1]
    if tag == "int":
        short = len(node.value.replace("_", "")) <= MAX_INT_CHARS
        return integer_problem(node.value, loader.construct_yaml_int(node) if short else None)
    if tag == "float":
        try:
            value = loader.construct_yaml_float(node)
        except OverflowError:  # a sexagesimal float whose base outgrows a float
            value = math.inf
        return float_problem(node.value, value)
    return None


def _node_problems(loader: Any, root: Any, name: str) -> list[Problem]:
    """Every key twice in one mapping (merge keys excepted) and every number past the limits, located.

    Each problem has its pointer, line and column. A key is its resolved tag and text, so ``1`` and ``"1"`` differ
    as they do once constructed. Each node is entered once (aliases are not walked again), nesting beyond the limit
    is left to :func:`_depth`.
    """
    import yaml

    problems: list[tuple[int, Problem]] = []

    def number(node: Any, where: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.ScalarNode) and (message := _number_problem(loader, node)) is not None:
            mark = node.start_mark
            problems.append((mark.index, Problem(name, json_pointer(where), f"{message} (line {mark.line + 1} "
                                                                              f"column {mark.column + 1})")))

    seen = {id(root)}
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    max_nesting = limit("nesting")
    while stack:
        node, where = stack.pop()
        if len(where) > max_nesting:
            continue
        if isinstance(node, yaml.MappingNode):
            keys: set[tuple[str, str]] = set()
            children = []
            for key, value in node.value:
                number(key, (*where, key.value if isinstance(key, yaml.ScalarNode) else "?"))
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if (key.tag, key.value) in keys:
                        mark = key.start_mark
                        problems.append((mark.index, Problem(
                            name, json_pointer([*where, key.value]), f"key {key.value!r} appears more than once in "
                            f"one mapping (line {mark.line + 1} column {mark.column + 1}); the document is refused")))
                    keys.add((key.tag, key.value))
                children.append((value, (*where, key.value if isinstance(key, yaml.ScalarNode) else "?")))
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, (*where, index)) for index, item in enumerate(node.value)]
        else:
            number(node, where)
            continue
        for child, path in reversed(children):
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, path))
    return [problem for _, problem in sorted(problems, key=lambda item: item[0])]


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


def load_document(path: Path | str, max_bytes: int | None = None) -> Any:
    """Parse a JSON or YAML file into plain data; raise GenRepoError naming the file and what is wrong.

    YAML by the ``.yaml``/``.yml`` suffix, everything else JSON (NaN and Infinity refused); AITune's pickled form is
    refused with a pointer to the JSON form. Read by :func:`generator.bounded.read_bytes` within ``document_bytes``
    (``max_bytes`` lowers it).
    """
    name = str(path)
    try:
        raw = read_bytes(name, "document_bytes")
    except FileNotFoundError as error:
        raise GenRepoError([Problem(name, "", f"cannot read file: {error.strerror}")]) from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise GenRepoError([Problem(name, "", f"file is {len(raw)} bytes; at most {max_bytes} are accepted")])
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
    max_values = limit("document_values")
    if os.path.splitext(name)[1].lower() not in {".yaml", ".yml"}:
        # The one JSON reader: nesting, duplicate keys, NaN and Infinity refused, every problem located. JSON cannot
        # alias, and every value takes at least one character, so only a text longer than the limit is walked.
        data = parse_json(raw, name)
        if len(raw) > max_values and _too_many_values(data, max_values):
            raise GenRepoError([Problem(name, "", f"document expands to more than {max_values} values")])
        return data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GenRepoError([Problem(name, "", f"not UTF-8 text (byte {error.start})")]) from None
    max_nesting = limit("nesting")
    too_deep = Problem(name, "", f"document nests deeper than {max_nesting} levels")
    try:
        data = _load_yaml(text, name)
    except RecursionError:
        # The message of a RecursionError depends on the stack depth; say what is wrong with the document instead.
        raise GenRepoError([too_deep]) from None
    except ValueError as error:
        raise GenRepoError([Problem(name, "", f"cannot parse: {error}")]) from None
    except GenRepoError:
        raise
    except Exception as error:  # yaml.YAMLError: PyYAML is imported only for YAML files
        if not _is_yaml_error(error):
            raise
        problem = getattr(error, "problem", None) or str(error)
        if "maximum nesting depth" in problem:  # libyaml's own limit (1,000 levels), far above ours
            raise GenRepoError([too_deep]) from None
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise GenRepoError([Problem(name, "", f"invalid YAML{where}: {problem}")]) from None
    if _too_many_values(data, max_values):
        raise GenRepoError(
            [Problem(name, "", f"document expands to more than {max_values} values (YAML alias bomb?)")]
        )
    if _depth(data, max_nesting):
        raise GenRepoError([too_deep])
    return data


def _is_yaml_error(error: Exception) -> bool:
    import yaml

    return isinstance(error, yaml.YAMLError)


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


def key_marks(path: Path | str) -> dict[tuple[Any, ...], tuple[int, int]]:
    """The 1-based line and column of every mapping key of a YAML or JSON document, by its path of keys and indices.

    Used on the error path only, after :func:`load_document` accepted the file (size, aliases, nesting): the text is
    composed into YAML nodes, which keep their marks (JSON is read as YAML for this; a JSON text YAML cannot read
    gives no marks). Every node is entered once, so aliases cannot make the walk large.
    """
    import yaml

    try:
        raw = read_bytes(path, "document_bytes")
        loader = yaml_loader()(raw.decode("utf-8"))
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except (GenRepoError, OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return {}
    marks: dict[tuple[Any, ...], tuple[int, int]] = {}
    max_nesting = limit("nesting")
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())] if root is not None else []
    while stack:
        node, where = stack.pop()
        if id(node) in seen or len(where) > max_nesting:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    marks.setdefault((*where, key.value), (key.start_mark.line + 1, key.start_mark.column + 1))
                    stack.append((value, (*where, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*where, index)) for index, item in enumerate(node.value))
    return marks
