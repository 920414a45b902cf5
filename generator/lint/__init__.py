"""``gen-repo lint``: check Triton model repositories against Triton's own rules, as findings with file:line:column.

:mod:`generator.lint.rules` is the one table of rules (docs/lint-rules.md is generated from it); one module per area.
"""

from __future__ import annotations

from generator.lint.environment import Environment, environment_from_server, parse_backends
from generator.lint.findings import Finding
from generator.lint.rules import RULE_TABLE, RULES
from generator.lint.run import LintReport, lint

__all__ = [
    "RULES",
    "RULE_TABLE",
    "Environment",
    "Finding",
    "LintReport",
    "environment_from_server",
    "lint",
    "parse_backends",
]
