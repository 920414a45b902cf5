"""Lint one or more repositories as one Triton server with repeated ``--model-repository`` sees them.

In Triton's load order: model folders and configs, versions, platform and backend, every area's rules, the environment,
and last the ensembles across all repositories.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath

from generator.lint.backend_config import check_backend_config
from generator.lint.backends import auto_complete_fills, check_model_files, check_platform, resolve
from generator.lint.batching import check_batching
from generator.lint.ensembles import check_ensemble_config, check_ensembles
from generator.lint.environment import Environment, check_environment
from generator.lint.findings import ConfigFile, Finding
from generator.lint.folders import ModelFolder, Resolved
from generator.lint.layout import (
    alternative_configs,
    check_confinement,
    check_files,
    check_symlinks,
    check_versions,
    discover,
    load_config,
    read_config,
    scan_versions,
)
from generator.lint.model_config import check_model_config
from generator.lint.rate_limiter import check_rate_limiter
from generator.lint.tensorrt import check_plan_profiles, check_profile_sets

__all__ = ["LintReport", "lint"]


@dataclass(frozen=True, slots=True)
class LintReport:
    """Findings (sorted by file, line, column, rule) and the rules skipped for lack of environment facts."""

    findings: list[Finding]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        """Number of error findings."""
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        """Number of findings that are not errors (Triton loads the model, probably not as meant)."""
        return len(self.findings) - self.errors


def check_config(cf: ConfigFile, resolved: Resolved, environment: Environment,
                 fills: frozenset[str] = frozenset()) -> None:
    """Every per-config rule (no file system access) on one parsed, resolved config.

    ``fills`` is what the backend's auto-complete fills into it (none with auto-complete off).
    """
    check_platform(cf, resolved)
    check_model_config(cf, resolved, fills)
    check_backend_config(cf, resolved, environment)
    check_batching(cf)
    check_ensemble_config(cf, resolved)
    check_profile_sets(cf, resolved)
    check_confinement(cf)


def _lint_folder(folder: ModelFolder, environment: Environment) -> list[Finding]:
    findings = check_symlinks(folder)
    findings += load_config(folder, auto_complete=environment.auto_complete)
    findings += scan_versions(folder)
    if folder.cf is not None:
        folder.resolved = resolve(folder.cf.config, folder.path, folder.name)
    findings += check_versions(folder)
    if folder.cf is not None and folder.resolved is not None:
        folder.fills = auto_complete_fills(folder, environment.auto_complete)
        check_config(folder.cf, folder.resolved, environment, folder.fills)
        check_files(folder)
        findings += check_model_files(folder)
        check_plan_profiles(folder)
        check_environment(folder, environment)
    for rel in alternative_configs(folder):  # --model-config-name alternatives: the same per-config rules
        cf, _, parse_findings = read_config(folder, rel)
        findings += parse_findings
        if cf is not None:
            check_config(cf, resolve(cf.config, folder.path, folder.name), environment, folder.fills)
            findings += cf.findings
    return findings


def lint(paths: Sequence[str | FsPath], *, external_models: Iterable[str] = (),
         environment: Environment | None = None) -> LintReport:
    """Lint the repositories ``paths`` together, as one server serving all of them.

    ``external_models``: names loaded from elsewhere (an ensemble step may name them); ``environment``: what the target
    machine has (None: nothing known); rules needing a fact it lacks are skipped and listed. Findings name files
    relative to their repository, prefixed by it when there are several.
    """
    environment = environment or Environment()
    folders, findings = discover(paths)
    for folder in folders:
        findings += _lint_folder(folder, environment)
    by_name: dict[str, ModelFolder] = {}
    for folder in folders:
        by_name.setdefault(folder.name, folder)
    check_ensembles(by_name, frozenset(external_models))
    check_rate_limiter(folders, environment)
    for folder in folders:
        if folder.cf is not None:
            findings += folder.cf.findings
    return LintReport(sorted(findings, key=Finding.sort_key), environment.skipped())

