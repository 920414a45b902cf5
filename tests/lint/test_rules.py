"""The rule table (generator/lint/rules.py) against the code, the cases, the tests it names and docs/lint-rules.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from generator.lint.rules import ERROR, RULE_TABLE, RULES, WARNING
from generator.lint.rules_doc import rules_markdown
from tests.lint_cases import CASES

ROOT = Path(__file__).parents[2]
LINT = ROOT / "generator" / "lint"


def test_docs_are_generated_from_the_table() -> None:
    """docs/lint-rules.md is exactly what ``python -m generator.lint.rules`` prints."""
    assert (ROOT / "docs" / "lint-rules.md").read_text() == rules_markdown()


def test_every_case_is_named_once_and_every_named_case_exists() -> None:
    named = [c.case for r in RULE_TABLE for c in r.checks] + [case for r in RULE_TABLE for case in r.cases]
    assert sorted(named) == sorted(c.id for c in CASES)


def test_most_cases_run_on_the_cpu_server() -> None:
    """Cases left out of tests/lint/test_triton.py say why (in the table); they are the few a CPU server cannot
    reach (the backends it lacks: TensorRT, onnxruntime, pytorch, TensorFlow, OpenVINO; fields newer than 2.51;
    loads that never finish or crash it)."""
    reasons = {c.case: c.server for r in RULE_TABLE for c in r.checks} | {
        case: r.server for r in RULE_TABLE for case in r.cases}
    assert len([c for c in CASES if not reasons[c.id]]) >= 0.8 * len(CASES)


def test_every_rule_is_held_by_a_case_or_a_test_that_exists() -> None:
    for rule in RULE_TABLE:
        assert rule.checks or rule.cases or rule.tests, rule.id
        for test in rule.tests:
            path, name = test.split("::")
            tree = ast.parse((ROOT / path).read_text())
            assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, test


def test_severity_follows_triton() -> None:
    """Errors are what Triton refuses; warnings what it loads (config-missing: with auto-complete on, from a
    config the backend fills in; config-required is its refusal); ensemble-shape-range, config-unreadable
    and the ONNX and TensorRT file rules are errors beyond core (gen-repo's contracts and read limits, the backend
    that loads the model); so are the version folder names Triton reads as another version than gen-repo's tools
    (verify and publish refuse them; leading zeros, which Triton skips, are a warning), and symlinks in a model
    folder, which Triton follows wherever they lead (its case loads; the rule names the Triton code that follows
    the link)."""
    beyond_triton = {"version-folder-name", "symlink"}
    for rule in RULE_TABLE:
        if rule.cases:
            assert rule.severity == (ERROR if rule.id in beyond_triton else WARNING), rule.id
        if rule.checks:
            assert rule.severity == ERROR, rule.id  # (path-escape: also values Triton 2.51 follows out of the model)
        if rule.loaded_by:
            assert rule.id in beyond_triton and rule.cases, rule.id
    assert {r.id for r in RULE_TABLE if r.severity == ERROR and not r.checks} == {
        "repository-missing", "ensemble-shape-range", "config-unreadable", "repository-is-a-model", *beyond_triton}


def _literals(path: Path) -> tuple[set[str], set[str]]:
    """(rule ids passed to ``.add``/``folder_finding``/``Finding``/``WiringProblem``/``Refusal``, every literal)."""
    tree = ast.parse(path.read_text())
    called, literals = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            literals.add(node.value)
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if name in ("add", "folder_finding") and args:
            called.add(args[0])
        elif name in ("Finding", "WiringProblem", "Refusal"):
            called |= {a for a in args if re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)+", a)}
    return called, literals


def test_every_rule_in_the_code_is_in_the_table_and_back() -> None:
    """Every rule id the code reports is in the table; every rule in the table is reported somewhere."""
    called: set[str] = set()
    literals: set[str] = set()
    for path in [*LINT.glob("*.py"), *(ROOT / "generator" / "triton" / f for f in ("ensemble.py", "config_rules.py"))]:
        if path.name != "rules.py":
            c, lits = _literals(path)
            called |= c
            literals |= lits
    assert called - set(RULES) == set()
    assert set(RULES) - literals == set()
