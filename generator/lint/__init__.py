"""``gen-repo lint``: check Triton model repositories against Triton's own rules, as findings with file:line:column.

Every refusal Triton's model loading can decide from the repository's files is a rule (core
``model_config_utils.cc``, ``ensemble_utils.cc``, the repository manager and model lifecycle, the backends' file
checks), plus what the backends expect on disk and, for ONNX models, that the graph agrees with the config.
:mod:`generator.lint.rules` is the one table of rules, their Triton sources and the tests that hold them
(``docs/lint-rules.md`` is generated from it). One module per area:

- :mod:`~generator.lint.layout`: model and version folders, config files, the files a config names;
- :mod:`~generator.lint.backends`: platform/backend inference as core does it, model files, ONNX agreement;
- :mod:`~generator.lint.model_config`: inputs, outputs, batch I/O, instance groups, metrics, warmup;
- :mod:`~generator.lint.batching`: dynamic and sequence batching;
- :mod:`~generator.lint.ensembles`: ensembles across repositories (steps, versions, cycles, wiring);
- :mod:`~generator.lint.environment`: GPUs and installed backends of the target machine.

Findings are errors (Triton refuses the model) or warnings (Triton loads it, probably not as meant).
"""

from __future__ import annotations

from generator.lint.environment import Environment, environment_from_server, parse_backends
from generator.lint.findings import Finding
from generator.lint.rules import RULE_TABLE, RULES
from generator.lint.run import LintReport, lint, lint_repository

__all__ = [
    "RULES",
    "RULE_TABLE",
    "Environment",
    "Finding",
    "LintReport",
    "environment_from_server",
    "lint",
    "lint_repository",
    "parse_backends",
]
