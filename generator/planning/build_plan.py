"""Planning a manifest for this machine: load, resolve ``target: auto`` (and a ``--target`` override), plan.

What ``gen-repo plan``, ``config`` and ``build`` share before anything is built. Light on purpose: it imports the
manifest, the plan and the target rules, never the build machinery (artifacts, cache, worker pools), torch or onnx,
so ``plan`` and ``config`` start fast (tests/cli/test_light_imports.py holds this).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from generator.building.results import BuildOptions
from generator.errors import GenRepoError
from generator.manifest.loading import Manifest, RefusedModel, load_manifest
from generator.planning.plan import RepositoryPlan, plan_repository
from generator.planning.targets import make_target_resolver

__all__ = ["BuildOptions", "plan_build", "refusal_error"]


def plan_build(
    manifest_path: Path, options: BuildOptions, output_dir: Path | None = None, *, warmup_data: bool = True
) -> tuple[RepositoryPlan, list[str]]:
    """Load and plan the manifest, resolving ``target: auto`` (and a ``--target`` override) for this machine.

    ``warmup_data``: warmup reads the data files the build writes (``False`` for configs alone).

    Every model is planned; one that cannot be (at loading or planning) is refused. Without ``keep_going`` any
    refusal raises GenRepoError with the problems of every refused model at once; with it they are in
    :attr:`RepositoryPlan.refused`.
    """
    notes: list[str] = []
    manifest: Manifest = load_manifest(manifest_path, allow_outside=options.allow_outside, keep_going=True)
    if options.target:
        manifest = replace(manifest, models=tuple(replace(m, target=options.target) for m in manifest.models))
    plan = plan_repository(manifest, make_target_resolver(options, notes), keep_going=True,
                           warmup_data=warmup_data)
    if plan.refused and not options.keep_going:
        raise refusal_error(plan.refused)
    if output_dir is not None:
        plan = replace(plan, output_dir=Path(output_dir))
    return plan, notes


def refusal_error(refused: Sequence[RefusedModel]) -> GenRepoError:
    """The error of a build that refuses ``refused`` (in manifest order): every problem of each, and their names."""
    names = ", ".join(repr(r.name) for r in refused)
    return GenRepoError([p for r in refused for p in r.problems], f"refused: {names} (--keep-going builds the other "
                        "models)")
