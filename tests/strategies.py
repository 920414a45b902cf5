"""Hypothesis strategies for fuzzing gen-repo's inputs (owner: reliability engineer; tests/test_fuzz.py, bench/).

Near-valid documents start from real AITune fixture files (``tests/data/aitune``) and the example manifest, and change
ONE thing: a value's type, a negative or huge size, min > max, NaN/Infinity, an empty or exotic name, deep nesting,
a missing or an extra key. Structurally random documents are arbitrary JSON. A :class:`Case` carries the document
and how to write it, because some mutations only exist as text (``NaN``/``.nan`` literals, nesting deeper than any
encoder allows).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from generator.bounded import LIMITS
from generator.errors import json_pointer
from generator.number_limits import FLOAT_LIMIT, INT_MAX, INT_MIN

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "data" / "aitune"
if not FIXTURES.is_dir():  # a checkout without the copied fixtures
    FIXTURES = REPO.parent / "shared" / "fixtures" / "aitune"
EXAMPLES = REPO / "examples"

#: Placeholder string replaced in the written text (see :func:`render`).
TEXT_SLOT = "\x00gen-repo-fuzz-slot\x00"

#: Literal texts a slot can become: (JSON text, YAML text).
TEXT_LITERALS = {
    "nan": ("NaN", ".nan"),
    "inf": ("Infinity", ".inf"),
    "-inf": ("-Infinity", "-.inf"),
    "deep": ("[" * 200 + "]" * 200, "[" * 200 + "]" * 200),
    "very-deep": ("[" * 100_000 + "]" * 100_000, "[" * 1200 + "]" * 1200),  # YAML: past the recursion limit
    "alias-bomb": ("0", "0"),  # YAML only: rendered by render() as an anchor chain
}


@dataclass(frozen=True)
class Case:
    """A fuzzed document: its data, which literal its slot (if any) becomes, and what was changed (for messages)."""

    document: Any
    literal: str | None = None
    description: str = ""


def fixture_documents() -> dict[str, Any]:
    """Every AITune fixture (GraphSpec files and the tune report) by file name."""
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.glob("*.json"))}


def example_manifest() -> dict[str, Any]:
    """The bundled example manifest (``examples/gen-repo.yaml``) as data."""
    return dict(yaml.safe_load((EXAMPLES / "gen-repo.yaml").read_text(encoding="utf-8")))


def locations(document: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every path (tuple of keys/indices) in ``document``, the root included."""
    yield path
    if isinstance(document, dict):
        for key, value in document.items():
            yield from locations(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from locations(value, (*path, index))


def get_at(document: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path``."""
    for step in path:
        document = document[step]
    return document


def _set_at(document: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    parent = get_at(document, path[:-1])
    parent[path[-1]] = value
    return document


def _delete_at(document: Any, path: tuple[str | int, ...]) -> Any:
    parent = get_at(document, path[:-1])
    del parent[path[-1]]
    return document


#: Replacement values: wrong types, sizes out of every range, names nobody expects.
WEIRD_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(
        [
            None, True, False, 0, -1, -(2**31), 2**31, 2**31 - 1, 2**32, 2**53 + 1, 2**63, 2**64, 10**40, -(10**40),
            0.5, 1.0, -0.0, 1e308, "", " ", ".", "..", "../../etc/passwd", "/abs/path", "a/b", "a\\b", "\x00",
            "batch0", "batch7", "dim0", "dim99", "torch.float64", "torch.complex64", "x" * 5000, "Ünïcødé-名前-🚀",
            "\u202e\u200b", [], {}, [[]], [None], {"": None}, [1, 2, 3], {"type": "BatchDim"},
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.lists(st.integers(-5, 2**40), max_size=6),
)


def _slot(document: Any, path: tuple[str | int, ...], literal: str) -> Case:
    return Case(_set_at(document, path, TEXT_SLOT), literal, f"{literal} text at {list(path)}")


@st.composite
def mutated(draw: st.DrawFn, base: Any, *, nan_as_float: bool = False) -> Case:
    """``base`` with ONE change at a random location (see the module docstring for the kinds of change)."""
    document = copy.deepcopy(base)
    paths = list(locations(document))
    path = draw(st.sampled_from(paths))
    value = get_at(document, path)
    kinds = ["replace", "nan-text", "inf-text", "deep", "nest", "extra-key"]
    if path:
        kinds.append("delete")
    if isinstance(value, int) and not isinstance(value, bool):
        kinds += ["negate", "huge", "zero"]
    if isinstance(value, str):
        kinds += ["empty-string", "unicode", "long-string", "path-like"]
    if len(path) >= 2 and path[-2] in ("min_shape", "max_shape") and isinstance(path[-1], int):
        kinds.append("min-gt-max")
    if len(path) >= 1 and path[-1] in ("min", "max", "opt"):
        kinds.append("min-gt-max")
    if nan_as_float:
        kinds.append("nan-float")
    kind = draw(st.sampled_from(kinds))
    where = list(path)
    if kind == "replace":
        new = draw(WEIRD_VALUES)
        return Case(_set_at(document, path, new), None, f"{where} = {new!r:.60}")
    if kind == "nan-text":
        return _slot(document, path, draw(st.sampled_from(["nan", "-inf"])))
    if kind == "inf-text":
        return _slot(document, path, "inf")
    if kind == "deep":
        return _slot(document, path, draw(st.sampled_from(["deep", "very-deep"])))
    if kind == "nest":
        depth = draw(st.integers(1, 80))
        nested: Any = value
        for _ in range(depth):
            nested = [nested] if draw(st.booleans()) else {"k": nested}
        return Case(_set_at(document, path, nested), None, f"{where} nested {depth} deep")
    if kind == "extra-key":
        key = draw(st.sampled_from(["extra", "", "$ref", "__proto__", "type", "name", "🚀"]))
        if isinstance(value, dict):
            value[key] = draw(WEIRD_VALUES)
            return Case(document, None, f"extra key {key!r} at {where}")
        return Case(_set_at(document, path, {key: value}), None, f"{where} wrapped in {{{key!r}: ...}}")
    if kind == "delete":
        return Case(_delete_at(document, path), None, f"deleted {where}")
    if kind == "negate":
        return Case(_set_at(document, path, -value - draw(st.integers(0, 3))), None, f"{where} negated")
    if kind == "huge":
        new = draw(st.sampled_from([2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1, 2**63, 2**64, 10**30]))
        return Case(_set_at(document, path, new), None, f"{where} = {new}")
    if kind == "zero":
        return Case(_set_at(document, path, 0), None, f"{where} = 0")
    if kind == "empty-string":
        return Case(_set_at(document, path, ""), None, f"{where} = ''")
    if kind == "unicode":
        new = draw(st.text(min_size=1, max_size=20))
        return Case(_set_at(document, path, new), None, f"{where} = {new!r}")
    if kind == "long-string":
        return Case(_set_at(document, path, value * 1000 or "y" * 5000), None, f"{where} x1000")
    if kind == "path-like":
        new = draw(st.sampled_from(["../" + value, "/" + value, value + "/..", value + "\x00", "." + value]))
        return Case(_set_at(document, path, new), None, f"{where} = {new!r}")
    if kind == "min-gt-max":
        if path[-1] in ("min", "max", "opt"):
            parent = get_at(document, path[:-1])
            if isinstance(parent, dict) and isinstance(parent.get("max"), int):
                parent["min"] = parent["max"] + draw(st.integers(1, 100))
            return Case(document, None, f"min > max at {list(path[:-1])}")
        shape_key, axis = path[-2], int(path[-1])
        tensor = get_at(document, path[:-2])
        other = "max_shape" if shape_key == "min_shape" else "min_shape"
        fits = isinstance(tensor.get(other), list) and axis < len(tensor[other])
        if fits and isinstance(tensor["max_shape"][axis], int):
            tensor["min_shape"][axis] = tensor["max_shape"][axis] + draw(st.integers(1, 100))
        return Case(document, None, f"min_shape > max_shape at {list(path[:-2])} axis {axis}")
    assert kind == "nan-float"
    new = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    return Case(_set_at(document, path, new), None, f"{where} = {new} (float)")


JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)
#: Keys gen-repo looks for, so that random objects sometimes reach past the first check.
KNOWN_KEYS = st.sampled_from(
    ["graph", "modules", "graphs", "name", "input_spec", "output_spec", "tensor_data", "shape", "min_shape",
     "max_shape", "dtype", "semantic_path", "dynamic_shapes", "forward_signature", "models", "spec", "source",
     "output", "defaults", "target", "max_batch_size", "file", "factory", "onnx"]
)
SHAPED_JSON = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(KNOWN_KEYS, st.text(max_size=8)), children, max_size=6),
    ),
    max_leaves=40,
)


def random_documents() -> st.SearchStrategy[Case]:
    """Structurally random JSON (any shape, with gen-repo's key names mixed in)."""
    return st.one_of(JSON_VALUES, SHAPED_JSON).map(lambda doc: Case(doc, None, "random JSON"))


def spec_cases() -> st.SearchStrategy[Case]:
    """Fixture GraphSpec documents (and the tune report) with one change, or random JSON."""
    documents = fixture_documents()
    near = st.sampled_from(sorted(documents)).flatmap(lambda name: mutated(documents[name]))
    return st.one_of(near, near, near, random_documents())


def render(case: Case, fmt: str) -> str:
    """The text of ``case`` as ``json`` or ``yaml``, with its slot replaced by the literal text it stands for."""
    if fmt == "json":
        text = json.dumps(case.document, ensure_ascii=False)
        slot = json.dumps(TEXT_SLOT)
    else:
        text = yaml.safe_dump(case.document, allow_unicode=True, sort_keys=False, width=10**9)
        slot = yaml.safe_dump(TEXT_SLOT, width=10**9).removesuffix("\n...\n").strip()
    if case.literal is None:
        return text
    if case.literal == "alias-bomb" and fmt == "yaml":
        return alias_bomb()
    literal = TEXT_LITERALS[case.literal][0 if fmt == "json" else 1]
    assert slot in text, (slot, text[:200])
    return text.replace(slot, literal)


def alias_bomb(levels: int = 12, fan_out: int = 9) -> str:
    """A "billion laughs" YAML document: ``fan_out ** levels`` strings from a few hundred bytes."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * fan_out)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append(f"graph: *a{levels - 1}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------- JSON structure: duplicate keys and deep nesting planted (issue 37)
_MAX_NESTING = LIMITS["nesting"].default
JSON_KEYS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4)
#: Numbers within gen-repo's limits (generator/number_limits.py): the documents a reader accepts.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(INT_MIN, INT_MAX) | st.floats(-FLOAT_LIMIT, FLOAT_LIMIT) | JSON_KEYS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEYS, inner, max_size=3),
    max_leaves=25,
)


def json_paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every value of ``value`` with its path of keys and indices, the root first."""
    yield here, value
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from json_paths(child, (*here, key))


def json_text(value: Any, at: tuple[Any, ...] | None, plant: tuple[str, Any], here: tuple[Any, ...] = ()) -> str:
    """``value`` as JSON text, with ``plant`` at the path ``at``: ("duplicate", key) or ("deep", levels)."""
    if here == at and plant[0] == "deep":
        return "[" * plant[1] + json_text(value, None, plant) + "]" * plant[1]
    if isinstance(value, dict):
        items = [f"{json.dumps(k)}: {json_text(v, at, plant, (*here, k))}" for k, v in value.items()]
        if here == at and plant[0] == "duplicate":
            key = plant[1]
            items += [f"{json.dumps(key)}: 0"] * (1 if key in value else 2)  # the key twice in this object
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(json_text(v, at, plant, (*here, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


@st.composite
def planted_json(draw: st.DrawFn, document: Any) -> tuple[str, str, str]:
    """``document`` as text with a duplicate key or a deep nesting planted; the pointer and words of the refusal."""
    if draw(st.booleans()):
        objects = [(path, value) for path, value in json_paths(document) if isinstance(value, dict)]
        if objects:
            path, value = draw(st.sampled_from(objects))
            key = draw(st.sampled_from(sorted(value))) if value and draw(st.booleans()) else draw(JSON_KEYS)
            return json_text(document, path, ("duplicate", key)), json_pointer([*path, key]), "appears more than once"
    path = draw(st.sampled_from([path for path, _ in json_paths(document)]))
    levels = _MAX_NESTING + draw(st.integers(1, 3000))
    return json_text(document, path, ("deep", levels)), json_pointer(path), f"nests deeper than {_MAX_NESTING} levels"
