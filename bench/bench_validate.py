"""Validation throughput: 10,000 AITune GraphSpec documents, JSON Schema + semantic checks, every error located.

    python bench/bench_validate.py [--count 10000] [--invalid 0.1]

Documents are synthesised from the real AITune fixtures (tests/data/aitune or /work/shared/fixtures/aitune): names
varied, a fraction broken on purpose (a non-string dtype, min > max, a missing field, a bad dim). Timed:

- ``generator.specs.schema.validate_document`` as shipped (fast path: jsonschema-rs says valid, else jsonschema reports;
  the semantic checks; GraphSpec build), and the same with the fast path switched off
  (``generator.specs.json_schema.FAST_VALIDATOR_MODULE = None``: jsonschema + the semantic checks);
- the same shipped path with the GraphSpec build stubbed out (schema + semantic checks only);
- the schema pass alone: shipped (``schema_problems``) and with the reference ``jsonschema`` alone (``iter_errors``,
  every error with its path);
- the schema pass alone with ``jsonschema-rs`` (``validator_for(schema).iter_errors``), if installed;
- the semantic pass alone (schema pass stubbed out): "jsonschema-rs + semantic" is the sum of two measured parts.

Agreement: on every broken document the set of error locations from jsonschema-rs must equal jsonschema's. Prints a
table, then the ratio lines last.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import generator.specs.json_schema as json_schema_mod  # noqa: E402
import generator.specs.schema as schema_mod  # noqa: E402
from generator.errors import GenRepoError, json_pointer  # noqa: E402
from generator.resources import resource_dir  # noqa: E402
from generator.specs.json_schema import reference_schema_problems, schema_problems  # noqa: E402


def fixture_dir() -> Path:
    for candidate in (REPO / "tests" / "data" / "aitune", Path("/work/shared/fixtures/aitune")):
        if candidate.is_dir():
            return candidate
    raise SystemExit("no AITune fixtures found")


def _break(doc: dict[str, Any], rng: random.Random) -> None:
    graph = doc["graph"]
    tensor = graph["input_spec"]["tensor_data"][0]
    how = rng.randrange(4)
    if how == 0:
        tensor["dtype"] = 42  # not a string (any torch dtype *name* is schema-valid; plan refuses unknown ones)
    elif how == 1:
        tensor["min_shape"][0] = tensor["max_shape"][0] + 5
    elif how == 2:
        del graph["output_spec"]
    else:
        tensor["max_shape"][-1] = -3


def synthesise(count: int, invalid: float, seed: int = 0) -> tuple[list[dict[str, Any]], list[bool]]:
    rng = random.Random(seed)
    bases = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(fixture_dir().glob("*.graphspec.json"))]
    docs, broken = [], []
    for i in range(count):
        doc = copy.deepcopy(bases[i % len(bases)])
        doc["graph"]["name"] = f"{doc['graph'].get('name', 'g')}_{i}"
        bad = rng.random() < invalid
        if bad:
            _break(doc, rng)
        docs.append(doc)
        broken.append(bad)
    return docs, broken


def time_full(docs: list[dict[str, Any]]) -> tuple[float, int, int]:
    errors = located = 0
    start = time.perf_counter()
    for k, doc in enumerate(docs):
        try:
            schema_mod.validate_document(doc, f"spec{k}.json")
        except GenRepoError as error:
            errors += len(error.problems)
            located += sum(1 for p in error.problems if p.file)
    return time.perf_counter() - start, errors, located


def time_reference_only(docs: list[dict[str, Any]]) -> tuple[float, int, int]:
    """validate_document with the fast path switched off: jsonschema + full semantic reporter + GraphSpec."""
    module = json_schema_mod.FAST_VALIDATOR_MODULE
    json_schema_mod.FAST_VALIDATOR_MODULE = None
    try:
        return time_full(docs)
    finally:
        json_schema_mod.FAST_VALIDATOR_MODULE = module


class _NoBuild:
    """Bench-only stand-in for GraphSpec: validate_document then stops after the checks."""

    @staticmethod
    def from_dict(data: Any) -> None:
        return None


def time_checks_only(docs: list[dict[str, Any]]) -> tuple[float, int, int]:
    """The shipped validate_document with the GraphSpec build stubbed (bench-only monkeypatch): schema + semantic."""
    graph_spec, infer = schema_mod.GraphSpec, schema_mod.infer_batch_multipliers
    schema_mod.GraphSpec = _NoBuild  # type: ignore[assignment,misc]
    schema_mod.infer_batch_multipliers = lambda graph: []  # type: ignore[assignment]
    try:
        return time_full(docs)
    finally:
        schema_mod.GraphSpec, schema_mod.infer_batch_multipliers = graph_spec, infer  # type: ignore[misc]


def time_schema_shipped(docs: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    for k, doc in enumerate(docs):
        schema_problems(doc, schema_mod.GRAPHSPEC_SCHEMA, f"spec{k}.json")
    return time.perf_counter() - start


def time_semantic(docs: list[dict[str, Any]]) -> float:
    """validate_document with the schema pass stubbed (bench-only monkeypatch): the semantic checks + GraphSpec."""
    original = schema_mod.schema_problems
    schema_mod.schema_problems = lambda *a, **k: []  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        for k, doc in enumerate(docs):
            # Broken documents may trip the unguarded builder once the schema pass is gone.
            with contextlib.suppress(GenRepoError, KeyError, TypeError, ValueError, AttributeError, IndexError):
                schema_mod.validate_document(doc, f"spec{k}.json")
        return time.perf_counter() - start
    finally:
        schema_mod.schema_problems = original  # type: ignore[assignment]


def time_jsonschema(docs: list[dict[str, Any]]) -> tuple[float, list[set[str]]]:
    where: list[set[str]] = []
    start = time.perf_counter()
    for k, doc in enumerate(docs):
        where.append({p.pointer for p in reference_schema_problems(doc, schema_mod.GRAPHSPEC_SCHEMA, f"spec{k}.json")})
    return time.perf_counter() - start, where


def time_jsonschema_rs(docs: list[dict[str, Any]]) -> tuple[float, list[set[str]]] | None:
    try:
        import jsonschema_rs
    except ImportError:
        return None
    schema = json.loads((resource_dir("schemas") / schema_mod.GRAPHSPEC_SCHEMA).read_text(encoding="utf-8"))
    validator = jsonschema_rs.validator_for(schema)
    where: list[set[str]] = []
    start = time.perf_counter()
    for doc in docs:
        where.append({json_pointer(tuple(e.instance_path)) for e in validator.iter_errors(doc)})
    return time.perf_counter() - start, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--invalid", type=float, default=0.1, help="fraction of documents broken on purpose")
    args = parser.parse_args()
    docs, broken = synthesise(args.count, args.invalid)
    schema_mod.validate_document(copy.deepcopy(docs[0]), "warmup.json") if not broken[0] else None

    full, errors, located = time_full(docs)
    checks, check_errors, _ = time_checks_only(docs)
    reference, reference_errors, _ = time_reference_only(docs)
    assert (check_errors, reference_errors) == (errors, errors), "the paths must report the same problems"
    shipped_schema = time_schema_shipped(docs)
    semantic = time_semantic(docs)
    js_time, js_where = time_jsonschema(docs)
    rs = time_jsonschema_rs(docs)
    n = len(docs)
    rows = [
        ("validate_document, fast path off (before)", reference),
        ("validate_document as shipped (fast path)", full),
        ("  same, schema + semantic only (no GraphSpec)", checks),
        ("schema pass: jsonschema (reference)", js_time),
        ("schema pass: shipped schema_problems", shipped_schema),
        ("semantic pass + GraphSpec (schema stubbed)", semantic),
    ]
    agree = None
    if rs is not None:
        rs_time, rs_where = rs
        rows.append(("schema pass: jsonschema-rs", rs_time))
        rows.append(("jsonschema-rs + semantic (sum)", rs_time + semantic))
        agree = sum(1 for a, b in zip(js_where, rs_where, strict=True) if a == b)
    print(f"{n} documents, {sum(broken)} broken on purpose; {errors} problems reported, {located} with file + pointer")
    print(f"{'path':<46} {'seconds':>8} {'us/spec':>9} {'specs/s':>9}")
    for name, seconds in rows:
        print(f"{name:<46} {seconds:>8.3f} {seconds / n * 1e6:>9.1f} {n / seconds:>9.0f}")
    if agree is not None:
        print(f"error locations equal (jsonschema vs jsonschema-rs): {agree}/{n} documents")
    else:
        print("jsonschema-rs not installed: pip install jsonschema-rs to measure it")
    print()
    print(f"shipped schema + semantic {checks:.2f} s, with GraphSpec build {full:.2f} s")
    ratio = reference / full
    print(f"ratio validate_document: fast path off / shipped = {ratio:.1f}x (goal >= 3x: "
          f"{'met' if ratio >= 3 else 'NOT met'})")
    if rs is not None:
        total = rs[0] + semantic
        print(f"ratio schema pass: jsonschema / jsonschema-rs = {js_time / rs[0]:.1f}x")
        print(f"ratio full: shipped / (jsonschema-rs + semantic) = {full / total:.1f}x ({total:.2f} s)")


if __name__ == "__main__":
    main()
