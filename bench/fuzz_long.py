"""A long fuzzing campaign: the properties of tests/test_fuzz.py with many more examples (issue 7).

    python bench/fuzz_long.py                      # 20,000 examples spread over the properties
    python bench/fuzz_long.py --examples 2000 --seed 1

Prints, per property, how many examples ran, how long it took and what failed (the shrunk failing example), and a
JSON summary on the last line. Exit 0 when every property held. Failing examples belong in tests/test_fuzz.py as
``@example``s (see bench/README.md, "Fuzzing").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.strategies import Case, fixture_documents, mutated, spec_cases  # noqa: E402
from tests.test_fuzz import (  # noqa: E402
    FORMATS,
    check_cli,
    check_plan,
    check_problems,
    check_validate,
    manifest_cases,
    manifest_folder,
    write_case,
)

#: Share of the examples each property gets (the CLI ones are slower per example).
SHARES = {"validate": 0.3, "validate_document": 0.1, "plan_manifest": 0.2, "plan_spec": 0.25, "cli_validate": 0.075,
          "cli_plan": 0.075}


def properties(root: Path) -> dict[str, Callable[..., None]]:
    """The properties, as plain functions of one example (given hypothesis strategies below)."""
    from generator.errors import GenRepoError
    from generator.specs.schema import validate_document

    def validate(case: Case, fmt: str) -> None:
        check_validate(write_case(root, "spec", case, fmt), case)

    def validate_doc(case: Case) -> None:
        if case.literal is not None:
            return
        try:
            validate_document(case.document, "memory.json")
        except GenRepoError as error:
            check_problems(error.problems, {"memory.json": case.document}, case.description)

    def plan_manifest(case: Case, fmt: str) -> None:
        path = write_case(manifest_folder(root), "gen-repo", case, fmt)
        check_plan(path, {str(path): case.document}, case.description)

    def plan_spec(case: Case, fmt: str) -> None:
        import yaml

        folder = manifest_folder(root)
        spec = write_case(folder, "fuzzed.graphspec", case, fmt)
        document = {"models": [{"name": "m", "spec": spec.name, "target": "onnx"}]}
        path = folder / "with-spec.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        check_plan(path, {str(path): document, str(spec): case.document}, case.description)

    def cli_validate(case: Case, fmt: str, as_json: bool) -> None:
        path = write_case(root, "cli-spec", case, fmt)
        check_cli(["validate", str(path), *(["--json"] if as_json else [])], case.description)

    def cli_plan(case: Case, fmt: str, as_json: bool) -> None:
        path = write_case(manifest_folder(root), "cli-manifest", case, fmt)
        check_cli(["plan", str(path), *(["--json"] if as_json else [])], case.description)

    return {"validate": validate, "validate_document": validate_doc, "plan_manifest": plan_manifest,
            "plan_spec": plan_spec, "cli_validate": cli_validate, "cli_plan": cli_plan}


def strategies() -> dict[str, dict[str, Any]]:
    documents = fixture_documents()
    nan_floats = st.sampled_from(sorted(documents)).flatmap(lambda n: mutated(documents[n], nan_as_float=True))
    return {
        "validate": {"case": spec_cases(), "fmt": FORMATS},
        "validate_document": {"case": nan_floats},
        "plan_manifest": {"case": manifest_cases(), "fmt": FORMATS},
        "plan_spec": {"case": spec_cases(), "fmt": FORMATS},
        "cli_validate": {"case": spec_cases(), "fmt": FORMATS, "as_json": st.booleans()},
        "cli_plan": {"case": manifest_cases(), "fmt": FORMATS, "as_json": st.booleans()},
    }


def _counting(func: Callable[..., None], count: dict[str, int]) -> Callable[..., None]:
    def counted(**kwargs: Any) -> None:
        count["n"] += 1
        func(**kwargs)

    return counted


def run(examples: int, random_seed: int | None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gen-repo-fuzz-") as tmp:
        root = Path(tmp)
        manifest_folder(root)
        funcs = properties(root)
        for name, given_args in strategies().items():
            budget = max(1, int(examples * SHARES[name]))
            count = {"n": 0}
            counted = _counting(funcs[name], count)
            test = settings(
                max_examples=budget,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )(given(**given_args)(counted))
            if random_seed is not None:
                test = seed(random_seed)(test)
            started = time.monotonic()
            failure = None
            try:
                test()
            except Exception as error:  # a property failed: report the shrunk example, keep going
                failure = "".join(traceback.format_exception_only(type(error), error)).strip()[-3000:]
            seconds = time.monotonic() - started
            results[name] = {"budget": budget, "examples": count["n"], "seconds": round(seconds, 1),
                             "failure": failure}
            status = "FAILED" if failure else "ok"
            print(f"{name:18} {status:6} {count['n']:6} calls (budget {budget}) in {seconds:7.1f} s", flush=True)
            if failure:
                print("  " + failure.replace("\n", "\n  "), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=20_000, help="examples over all properties (default 20000)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    args = parser.parse_args()
    started = time.monotonic()
    results = run(args.examples, args.seed)
    summary = {
        "examples": sum(r["examples"] for r in results.values()),
        "seconds": round(time.monotonic() - started, 1),
        "failures": {name: r["failure"] for name, r in results.items() if r["failure"]},
        "properties": results,
    }
    print(json.dumps(summary, sort_keys=True))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
