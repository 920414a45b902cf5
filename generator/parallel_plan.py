"""``gen-repo config``'s files for a large manifest, planned in forked workers, each model rendered where it is planned.

Loading a GraphSpec and planning its model is pure Python and independent per ``models:`` entry, so workers
(:mod:`generator.workers`) split the entries. Each sends back only the texts of the model's ``config.pbtxt`` and
``contract.json``: a pickled :class:`~generator.plan.ModelPlan` costs about as much as planning it
(bench/bench_cli.py), so plans come back only for ensemble steps, and the ensembles are planned here. The manifest's
own checks (:func:`generator.manifest.check_entries`) and the refusal (:func:`generator.planning.refusal_error`) are
those of :func:`generator.planning.plan_build`: the files and every error are the same with one process or several
(tests/test_parallel_plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from generator.build_types import BuildOptions
from generator.errors import GenRepoError, Problem
from generator.manifest import (
    EntryStatus,
    ManifestDocument,
    RefusedModel,
    SpecCache,
    check_entries,
    load_entry,
    read_manifest,
)
from generator.model_files import config_files, model_config_files
from generator.plan import ModelPlan, plan_ensembles, plan_model
from generator.planning import plan_build, refusal_error
from generator.targets import make_target_resolver
from generator.workers import fork_pool, usable_cpus

__all__ = ["PARALLEL_MIN_MODELS", "PlannedFiles", "plan_config_files"]

#: Below this many models one process plans them all: starting workers costs more than it saves.
PARALLEL_MIN_MODELS = 200


@dataclass(frozen=True, slots=True)
class PlannedFiles:
    """What ``gen-repo config`` writes: the output folder, the planned names, their files, the refused models.

    ``names``: the models, then the ensembles, in manifest order. ``files``: repository-relative path -> text, in
    the order of :func:`generator.model_files.config_files`. ``refused`` is empty unless ``keep_going``.
    """

    output_dir: Path
    names: tuple[str, ...]
    files: dict[str, str]
    refused: tuple[RefusedModel, ...]


@dataclass(frozen=True, slots=True)
class _PlannedEntry:
    """One entry as a worker sends it back: its status, its files or planning problems, its plan if a step."""

    status: EntryStatus
    files: dict[str, str] | None
    plan_problems: tuple[Problem, ...]
    plan: ModelPlan | None


def plan_config_files(manifest_path: Path, options: BuildOptions, *, jobs: int | None = None) -> PlannedFiles:
    """Plan the manifest as :func:`generator.planning.plan_build` does (no warmup data) and render every file.

    ``jobs``: worker processes; default one per usable CPU from :data:`PARALLEL_MIN_MODELS` models on, else 1.
    Raise GenRepoError as ``plan_build`` does.
    """
    document = read_manifest(manifest_path, allow_outside=options.allow_outside)
    count = len(document.entries)
    if jobs is None:
        jobs = usable_cpus() if count >= PARALLEL_MIN_MODELS else 1
    if jobs > 1 and count > 1:
        # A few chunks per worker balance the load; each carries the (small) document once.
        size = -(-count // (jobs * 2))
        chunks = [range(i, min(i + size, count)) for i in range(0, count, size)]
        steps = frozenset(step.model_name for ensemble in document.ensembles for step in ensemble.steps)
        with fork_pool(jobs) as pool:
            if pool is not None:
                results = pool.map(_plan_chunk, [document] * len(chunks), chunks, [options] * len(chunks),
                                   [steps] * len(chunks))
                return _assemble(document, options, [entry for chunk in results for entry in chunk])
    plan, _ = plan_build(manifest_path, options, warmup_data=False)
    names = tuple([m.name for m in plan.models] + [e.name for e in plan.ensembles])
    return PlannedFiles(plan.output_dir, names, config_files(plan), plan.refused)


def _plan_chunk(
    document: ManifestDocument, indices: range, options: BuildOptions, steps: frozenset[str]
) -> list[_PlannedEntry]:
    """Load, plan and render the entries ``indices`` (in a worker), as ``plan_build`` does each."""
    resolver = make_target_resolver(options, [])
    cache: SpecCache = {}
    out = []
    for index in indices:
        loaded = load_entry(document, index, cache)
        if loaded.model is None or loaded.status.problems:
            out.append(_PlannedEntry(loaded.status, None, (), None))
            continue
        model = replace(loaded.model, target=options.target) if options.target else loaded.model
        try:
            plan = plan_model(model, document.file, resolver, warmup_data=False)
        except GenRepoError as error:
            out.append(_PlannedEntry(loaded.status, None, tuple(error.problems), None))
            continue
        out.append(_PlannedEntry(loaded.status, model_config_files(plan), (), plan if plan.name in steps else None))
    return out


def _assemble(document: ManifestDocument, options: BuildOptions, entries: Sequence[_PlannedEntry]) -> PlannedFiles:
    """The workers' entries put together as ``plan_build`` and ``config_files`` would: checks, ensembles, refusals."""
    refused = list(check_entries(document, [e.status for e in entries], keep_going=True))
    refused_indices = {r.index for r in refused}
    planned = [e for e in entries if e.status.index not in refused_indices]
    refused += [RefusedModel(e.status.index, e.status.name, e.plan_problems) for e in planned if e.plan_problems]
    planned = [e for e in planned if not e.plan_problems]
    ensembles, refused_ensembles = plan_ensembles(document.file, document.ensembles,
                                                  [e.plan for e in planned if e.plan is not None], refused,
                                                  len(document.entries))
    refused = sorted([*refused, *refused_ensembles], key=lambda r: r.index)
    if refused and not options.keep_going:
        raise refusal_error(refused)
    files: dict[str, str] = {}
    for entry in planned:
        files.update(entry.files or {})
    for ensemble in ensembles:
        files.update(model_config_files(ensemble))
    return PlannedFiles(document.output_dir, tuple([e.status.name for e in planned] + [e.name for e in ensembles]),
                        files, tuple(refused))
