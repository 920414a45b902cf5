"""``gen-repo config``'s files for a large manifest, planned in forked workers, each model rendered where it is planned.

Workers send back only each model's ``config.pbtxt`` and ``contract.json`` text (a pickled plan costs about as much
as planning it); the checks and refusals are :func:`generator.planning.targets.plan_build`'s, so the files and errors
are the same with one process or several.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from generator.errors import GenRepoError, Problem
from generator.manifest.entries import RefusedModel
from generator.manifest.loading import EntryStatus, ManifestDocument, SpecCache, check_entries, load_entry
from generator.planning.model_files import model_config_files
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan, plan_ensembles, plan_model
from generator.planning.targets import make_target_resolver, refusal_error
from generator.planning.workers import fork_pool, usable_cpus
from generator.repository.files import write_files

__all__ = ["PARALLEL_MIN_MODELS", "PlannedFiles", "plan_config_files"]

#: Below this many models one process plans them all: starting workers costs more than it saves.
PARALLEL_MIN_MODELS = 200


@dataclass(frozen=True, slots=True)
class PlannedFiles:
    """What ``gen-repo config`` writes: the output folder, the planned names, their files, the refused models.

    ``names``: the models, then the ensembles, in manifest order. ``files``: repository-relative path -> text, in
    the order of :func:`generator.planning.model_files.config_files`. ``refused`` is empty unless ``keep_going``.
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


def plan_config_files(
    document: ManifestDocument, options: BuildOptions, *, jobs: int | None = None, write_to: Path | None = None
) -> PlannedFiles:
    """Plan a read manifest as :func:`generator.planning.targets.plan_build` does (no warmup data); render all.

    ``jobs``: worker processes; default one per usable CPU from :data:`PARALLEL_MIN_MODELS` models on, else 1.
    ``write_to``: a folder (a staging folder: see :func:`generator.repository.staging.config_staging`) where each
    model's files are also written as soon as they are rendered, by the worker that rendered them, so writing overlaps
    planning; the files of models that end up refused may be there too. Raise GenRepoError as ``plan_build`` does.
    """
    count = len(document.entries)
    if jobs is None:
        jobs = usable_cpus() if count >= PARALLEL_MIN_MODELS else 1
    steps = frozenset(step.model_name for ensemble in document.ensembles for step in ensemble.steps)
    if jobs > 1 and count > 1:
        # A few chunks per worker balance the load; each carries the (small) document once.
        size = -(-count // (jobs * 2))
        chunks = [range(i, min(i + size, count)) for i in range(0, count, size)]
        with fork_pool(jobs) as pool:
            if pool is not None:
                results = pool.map(_plan_chunk, [document] * len(chunks), chunks, [options] * len(chunks),
                                   [steps] * len(chunks), [write_to] * len(chunks))
                return _assemble(document, options, [entry for chunk in results for entry in chunk], write_to)
    return _assemble(document, options, _plan_chunk(document, range(count), options, steps, write_to), write_to)


def _plan_chunk(
    document: ManifestDocument, indices: range, options: BuildOptions, steps: frozenset[str], write_to: Path | None
) -> list[_PlannedEntry]:
    """Load, plan and render the entries ``indices`` (in a worker), as ``plan_build`` does each; write their files."""
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
    # Only planned models are written, and planning refuses a name Triton cannot use (config.config_problems): every
    # path stays inside write_to even before the manifest's name checks run.
    if write_to is not None:
        write_files(write_to, {path: text for entry in out for path, text in (entry.files or {}).items()})
    return out


def _assemble(
    document: ManifestDocument, options: BuildOptions, entries: Sequence[_PlannedEntry], write_to: Path | None
) -> PlannedFiles:
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
        files.update(ensemble_files := model_config_files(ensemble))
        if write_to is not None:
            write_files(write_to, ensemble_files)
    return PlannedFiles(document.output_dir, tuple([e.status.name for e in planned] + [e.name for e in ensembles]),
                        files, tuple(refused))
