"""``gen-repo build``: manifest -> plan -> per-model artifacts (cached) -> staged repository -> atomic swap.

Stages pass plain data; failures are values until the CLI. Progress is :class:`BuildEvent` values sent to a callback
that always runs in the parent process (workers send theirs through a queue).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import queue as queue_module
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from generator.building.artifacts import StageFailed, build_model_artifacts, locate_build_problems
from generator.building.factories import factory_import_path
from generator.building.results import BuildEvent, BuildFailed, BuildReport, ModelResult, Progress, tool_versions
from generator.confinement import OUTPUT_OPTION, output_overlap_problems
from generator.contracts.request_schema import contract_files
from generator.errors import GenRepoError, Problem
from generator.manifest.entries import ModelSource, SampleSource
from generator.naming import WARMUP_FOLDER
from generator.planning.ensemble_plan import EnsemblePlan
from generator.planning.model_files import CONFIG_FILE, config_text, contract_text
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan, RepositoryPlan
from generator.planning.targets import TensorRTTarget, engine_targets, plan_build, preflight
from generator.repository.cache import BuildCache, default_cache_root
from generator.repository.digest import hash_bytes, hash_file
from generator.resources import resource_dir


# -- One model: source -> ONNX -> checks -> reference data -> (plan) -------------------------------------------------
def factory_search_path(plan: RepositoryPlan, options: BuildOptions, cwd: Path | None = None) -> tuple[str, ...]:
    """Folders searched first for ``module:callable`` factories, in order.

    The working folder, then the manifest's folder, then the manifest's ``code_path:`` entries, then
    ``options.code_path``: a factory resolves like an app given to uvicorn or celery, whether gen-repo was installed
    from a wheel or in editable mode.
    """
    folders = [str((cwd or Path.cwd()).resolve()), str(Path(plan.manifest_file).resolve().parent),
               *map(str, plan.code_path), *options.code_path]
    return tuple(dict.fromkeys(folders))


def factory_fingerprint(spec: str, code_path: Sequence[str] = ()) -> str:
    """Content hash of a ``module:callable`` factory's code, for the cache key; imports and runs nothing.

    What counts is the code the factory can import by its own package: every ``.py`` file of the top-level package
    that holds it (``examples.models`` -> all of ``examples/``), or, for a top-level module, its folder's ``.py``
    files and the packages (folders with ``__init__.py``) in that folder. Code elsewhere (an installed library, a
    sibling folder that is no package) is not hashed: a change there needs ``--no-cache``.
    """
    import importlib.util

    top_level = spec.partition(":")[0].partition(".")[0]
    try:
        with factory_import_path(code_path):
            found = importlib.util.find_spec(top_level)  # a top-level name: no parent package is imported
    except (ImportError, ValueError):
        found = None
    if found is None:
        return f"unresolved:{spec}"
    if found.submodule_search_locations:
        files = [(Path(folder), path) for folder in found.submodule_search_locations
                 for path in _python_files(Path(folder))]
    elif found.origin and Path(found.origin).is_file():
        folder = Path(found.origin).parent
        files = [(folder, path) for path in sorted(folder.glob("*.py")) if path.is_file()]
        for package in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
            files.extend((folder, path) for path in _python_files(package))
    else:
        return f"unresolved:{spec}"  # built in, frozen or a namespace without files
    listing = "".join(f"{path.relative_to(root).as_posix()}\0{hash_file(path)}\n" for root, path in files)
    return hash_bytes(listing.encode("utf-8"))


def _python_files(folder: Path) -> list[Path]:
    """``.py`` files under ``folder``, sorted, outside hidden folders and ``__pycache__``."""
    return sorted(
        path for path in folder.rglob("*.py")
        if path.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                      for part in path.relative_to(folder).parts[:-1])
    )


def content_fingerprint(source: ModelSource | SampleSource | None, code_path: Sequence[str] = ()) -> str:
    """What identifies a model source's (or samples') content for the cache key, never its path.

    A file's sha256, or a ``module:callable`` factory's code (:func:`factory_fingerprint`).
    """
    if source is None:
        return "none"
    if source.kind == "factory":
        return f"factory:{source.factory}:{factory_fingerprint(str(source.factory), code_path)}"
    assert source.path is not None
    return f"{source.kind}:{hash_file(source.path)}"


def model_cache_key(
    cache: BuildCache,
    model: ModelPlan,
    options: BuildOptions,
    versions: Mapping[str, str],
    tensorrt: TensorRTTarget | None = None,
) -> str:
    """Build-cache key: spec, source content, target, options, tool versions and (for TensorRT) module and GPUs."""
    trt_part: dict[str, Any] = {}
    if model.target == "tensorrt":
        trt_part = {
            "options": dict(options.tensorrt),
            "module": options.tensorrt_module,
            "version": tensorrt.version if tensorrt is not None else "",
            "engines": engine_targets(model),
        }
    return cache.key(
        spec=model.graph.to_dict(),
        source=content_fingerprint(model.source, options.code_path),
        samples=content_fingerprint(model.samples, options.code_path),
        target=model.target,
        name=model.name,
        # The rendered texts, not the data: a change in how contract.json or request.schema.json is written must not
        # hit files cached before.
        contract=contract_files(contract_text(model)),
        options=dict(model.options),
        # The warmup data files the config names are artifacts too (gen-repo config names none).
        warmup=sorted(e.input_data_file for w in model.config.model_warmup for e in w.inputs.values()),
        tools=dict(versions),
        tensorrt=trt_part,
        # The python target's model.py is copied in from the template: a changed template must miss older entries.
        template=hash_file(resource_dir("templates") / "python" / "model.py") if model.target == "python" else "",
    )


# -- Workers ---------------------------------------------------------------------------------------------------------
#: In a worker process only: where its progress events go (set by the pool's initializer; a queue cannot be
#: pickled into each task).
_WORKER_EVENTS: Any = None


def _init_worker(events: Any) -> None:
    global _WORKER_EVENTS
    _WORKER_EVENTS = events


def _worker_progress(event: BuildEvent) -> None:
    if _WORKER_EVENTS is not None:
        _WORKER_EVENTS.put(event)


def _build_one(
    model: ModelPlan,
    options: BuildOptions,
    cache_root: Path,
    key: str,
    tensorrt: TensorRTTarget | None = None,
    progress: Progress | None = None,
) -> ModelResult:
    """Worker: build (or find in the cache) one model's artifacts; failures come back as a result, not raised.

    Artifacts always go through the cache (content-addressed by ``key``): that is also how a worker process hands
    them to the process that stages the repository.
    """
    progress = progress or _worker_progress
    started = time.monotonic()
    cache = BuildCache(cache_root)
    try:
        if cache.get(key) is not None:
            return ModelResult(model.name, model.target, "cached", time.monotonic() - started, key)
        # Work beside the cache, not in /tmp: nothing is written outside the output and cache folders.
        cache_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".build-{os.getpid()}-", dir=cache_root) as tmp:
            artifacts = build_model_artifacts(
                model,
                options,
                Path(tmp),
                progress,
                tensorrt,
                cache_root,
            )
            cache.put(key, {name: artifacts.folder / name for name in artifacts.files})
        return ModelResult(model.name, model.target, "built", time.monotonic() - started, key, artifacts.notes)
    except StageFailed as error:  # located by build_model_artifacts
        seconds = time.monotonic() - started
        return ModelResult(model.name, model.target, "failed", seconds, key, (), tuple(error.problems), error.stage)
    except Exception as error:  # the cache, a bug or a library: still one model's failure, located
        problems = error.problems if isinstance(error, GenRepoError) else [
            Problem("", "", f"build failed: {type(error).__name__}: {error}")]
        return ModelResult(model.name, model.target, "failed", time.monotonic() - started, key, (),
                           tuple(_locate(model, "build", problems)), "build")


# -- The repository --------------------------------------------------------------------------------------------------
def build_repository(
    manifest_path: Path | str,
    options: BuildOptions | None = None,
    output_dir: Path | str | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Build every model of the manifest and swap the repository in atomically.

    GenRepoError (exit 2) for a manifest that cannot be built at all, before anything is imported (:func:`preflight`).
    Without ``keep_going`` a failed model raises :class:`BuildFailed` and the previous repository stays; with it, failed
    models keep their previous build and the rest is swapped in.
    """
    from generator.repository.lock import build_lock
    from generator.repository.staging import RepositoryWriter

    options = options or BuildOptions()
    progress = progress or (lambda event: None)
    manifest_path = Path(manifest_path)
    plan, notes = plan_build(manifest_path, options, Path(output_dir) if output_dir is not None else None)
    for note in notes:
        progress(BuildEvent("*", "note", note))
    options = replace(options, code_path=factory_search_path(plan, options))
    cache_root = Path(options.cache_dir) if options.cache_dir is not None else default_cache_root()
    _check_output(plan, options, cache_root, given=output_dir is not None)
    # Refusals come first: a refused build creates nothing, not even the cache folder (a refusal stops at once).
    tensorrt = preflight(plan, options)
    fresh_cache = not cache_root.exists()
    with _contained_scratch(cache_root):  # scratch files of torch, onnxruntime and imports go into the cache folder
        if fresh_cache:  # said once: later builds of any project share this folder and reuse what it holds
            progress(BuildEvent("*", "note", f"build cache created at {cache_root}: built models are kept there "
                                             "and reused by later builds (--cache-dir or $GEN_REPO_CACHE to put it "
                                             "elsewhere, --no-cache to rebuild)"))
        cache = BuildCache(cache_root)
        cache.clean_leftovers()  # work folders of builds that were killed
        versions = tool_versions()
        keys = {m.name: model_cache_key(cache, m, options, versions, tensorrt) for m in plan.models}
        if not options.use_cache:
            for key in keys.values():
                shutil.rmtree(cache.entry_path(key), ignore_errors=True)
        results = _run_models(plan, options, cache_root, keys, progress, tensorrt)
        # What the models produce over their whole input range (their builds wrote it into each contract): the
        # configs and the ensembles over them follow it, not the recording alone.
        built = _with_built_output_ranges(plan.models, cache, results)
        ensemble_results, ensembles = _build_ensembles(plan, options, cache, keys, results, versions, progress, built)
        results += ensemble_results
    results = _with_refused(plan, results, progress)
    # What the plan had to assume (batch multipliers AITune's JSON does not carry) belongs in the build report too, and
    # what a tuned: block's figures belong to (or that its settings were never measured).
    assumed = {m.name: tuple(d for d in m.decisions if d.startswith(("assumed: ", "tuned ("))) for m in plan.models}
    results = [replace(r, notes=(*assumed.get(r.name, ()), *r.notes)) for r in results]
    failed = [r for r in results if r.status == "failed"]
    if failed and not options.keep_going:
        raise BuildFailed(BuildReport(plan.output_dir, tuple(results), committed=False, notes=tuple(notes)))

    by_name: dict[str, ModelPlan | EnsemblePlan] = {m.name: built.get(m.name, m) for m in plan.models}
    by_name.update((e.name, ensembles.get(e.name, e)) for e in plan.ensembles)
    final: list[ModelResult] = []
    lock_models: dict[str, dict[str, Any]] = {}
    with RepositoryWriter(plan.output_dir) as writer:
        previous_lock = writer.previous_lock() or {}
        previous, previous_files = previous_lock.get("models", {}), previous_lock.get("artifacts", {})
        for result in results:
            if result.status == "failed":
                kept = writer.adopt_previous(result.name)
                if kept is not None and result.name in previous:
                    lock_models[result.name] = previous[result.name]
                    result = replace(result, status="kept-previous")
                elif kept is not None:  # a folder without a lock entry cannot be vouched for: leave it out
                    shutil.rmtree(kept)
                final.append(result)
                continue
            model = by_name[result.name]
            version_dir = writer.model_dir(model.name, model.version)
            # The bytes copied are the bytes checked (against the entry's signed manifest), so nothing swapped in
            # the cache after the build looked at it reaches the repository.
            if not cache.copy_entry(result.cache_key, version_dir):
                raise GenRepoError([Problem(str(cache.entry_path(result.cache_key)), "", f"the cache entry of "
                                            f"{model.name!r} vanished or changed while the repository was staged")])
            if (version_dir / WARMUP_FOLDER).is_dir():  # warmup data lives beside the config: <model>/warmup/<v>/
                (version_dir / WARMUP_FOLDER).rename(version_dir.parent / WARMUP_FOLDER)
            config = config_text(model)
            (version_dir.parent / CONFIG_FILE).write_text(config, encoding="utf-8")
            # A cache hit is "cached" only while the config it is served with is the one served before too.
            was = previous_files.get(f"{model.name}/{CONFIG_FILE}")
            if result.status == "cached" and isinstance(was, dict) and was.get("sha256") != hash_bytes(config.encode()):
                result = replace(result, status="reconfigured",
                                 notes=(*result.notes, f"{CONFIG_FILE} changed; model files from the build cache"))
                progress(BuildEvent(model.name, "reconfigured", f"{CONFIG_FILE} changed; model files from the build "
                                                                "cache"))
            lock_models[model.name] = _lock_entry(model, result.cache_key, tensorrt)
            final.append(result)
        writer.commit(build_lock(writer.root, versions, lock_models))
    return BuildReport(plan.output_dir, tuple(final), committed=True, notes=tuple(notes))


def _check_output(plan: RepositoryPlan, options: BuildOptions, cache_root: Path, *, given: bool) -> None:
    """Refuse an output folder that holds what the build reads, or that gen-repo did not make (nothing touched yet).

    Located at ``-o`` when the output came from the command line, else at the manifest's ``/output``.
    """
    from generator.repository.staging import output_refusal

    file, pointer = (OUTPUT_OPTION, "") if given else (str(plan.manifest_file), "/output")
    reads: list[tuple[str, Path]] = [("the manifest's folder", Path(plan.manifest_file).parent)]
    for model in plan.models:
        reads += [(f"the {what} of model {model.name!r}", path) for what, path in (
            ("spec", model.spec_file), ("source", model.source.path if model.source else None),
            ("samples", model.samples.path if model.samples else None)) if path is not None]
    sources = [m.source for m in plan.models] + [m.samples for m in plan.models] + [e.source for e in plan.ensembles]
    if any(s is not None and s.kind == "factory" for s in sources):  # factories are imported from these folders
        reads += [("a folder factories are imported from", Path(folder)) for folder in options.code_path]
    reads.append(("the build cache", cache_root))
    problems = output_overlap_problems(plan.output_dir, reads, file, pointer)
    if (why := output_refusal(plan.output_dir)) is not None:
        problems.append(Problem(file, pointer, f"{os.path.abspath(plan.output_dir)}: {why}"))
    if problems:
        raise GenRepoError(problems)


def _with_refused(plan: RepositoryPlan, results: list[ModelResult], progress: Progress) -> list[ModelResult]:
    """The build's results with the models refused at plan time (``--keep-going``) as failed, in manifest order."""
    if not plan.refused:
        return results
    order = {m.name: int(m.manifest_pointer.rsplit("/", 1)[-1] or 0) for m in plan.models}
    refused = []
    for model in plan.refused:
        order[model.name] = model.index
        located = locate_build_problems(model.problems, name=model.name, stage="plan", manifest_file=plan.manifest_file,
                                        pointer=model.pointer or f"/models/{model.index}")
        refused.append(ModelResult(model.name, "", "failed", 0.0, "", (), tuple(located), "plan"))
        reasons = "; ".join(p.message for p in model.problems)
        progress(BuildEvent(model.name, "failed", "refused at plan time: " + reasons))
    return sorted([*results, *refused], key=lambda r: order[r.name])


#: Where libraries put scratch files; redirected into the cache folder while a build imports and exports.
_SCRATCH_ENV = ("TMPDIR", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "PYTHONPYCACHEPREFIX")


@contextlib.contextmanager
def _contained_scratch(cache_root: Path) -> Iterator[None]:
    """Point library scratch writes into a temporary folder in the cache while models build, then delete it.

    onnxruntime writes a device id under ``$XDG_CACHE_HOME`` and a session file in ``$TMPDIR``, torch makes
    ``$TMPDIR/torchinductor_<user>``, a factory's import writes ``__pycache__``: without this a build writes outside its
    output and cache folders. Spawned workers inherit the environment.
    """
    cache_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".scratch-{os.getpid()}-", dir=cache_root))
    saved_env = {name: os.environ.get(name) for name in _SCRATCH_ENV}
    saved_tempdir, saved_prefix = tempfile.tempdir, sys.pycache_prefix
    values = {"TMPDIR": scratch, "XDG_CACHE_HOME": scratch / "xdg", "TORCHINDUCTOR_CACHE_DIR": scratch / "inductor",
              "PYTHONPYCACHEPREFIX": scratch / "pycache"}
    os.environ.update({name: str(value) for name, value in values.items()})
    tempfile.tempdir = None  # recomputed from TMPDIR on next use
    sys.pycache_prefix = str(values["PYTHONPYCACHEPREFIX"])
    try:
        yield
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir, sys.pycache_prefix = saved_tempdir, saved_prefix
        shutil.rmtree(scratch, ignore_errors=True)


def _lock_entry(model: ModelPlan | EnsemblePlan, key: str, tensorrt: TensorRTTarget | None) -> dict[str, Any]:
    """Return what identifies one model's build in the lock file (no paths, no timestamps)."""
    from generator.repository.cache import canonical_json

    if isinstance(model, EnsemblePlan):
        return {"cache_key": key, "steps": [model.steps[j].model_name for j in model.step_order],
                "target": model.target, "version": model.version}
    entry: dict[str, Any] = {
        "cache_key": key,
        "source": model.source.kind if model.source is not None else None,
        "spec_sha256": hash_bytes(canonical_json(model.graph.to_dict()).encode("utf-8")),
        "target": model.target,
        "version": model.version,
    }
    if model.target == "tensorrt" and tensorrt is not None:
        entry["tensorrt"] = tensorrt.lock_entry(engine_targets(model))
    return entry


def _with_built_output_ranges(
    models: Sequence[ModelPlan], cache: BuildCache, results: Sequence[ModelResult]
) -> dict[str, ModelPlan]:
    """Every built (or cached) model's plan with the output ranges its build derived (read from its contract)."""
    from generator.json_reader import read_json
    from generator.planning.model_files import CONTRACT_FILE
    from generator.planning.plan import output_ranges_from_contract, with_output_ranges

    done = {r.name: r.cache_key for r in results if r.status in ("built", "cached")}
    out = {}
    for model in models:
        if model.name in done:
            contract = read_json(cache.files_path(done[model.name]) / CONTRACT_FILE)
            out[model.name] = with_output_ranges(model, output_ranges_from_contract(model, contract))
    return out


def _build_ensembles(
    plan: RepositoryPlan,
    options: BuildOptions,
    cache: BuildCache,
    keys: Mapping[str, str],
    results: Sequence[ModelResult],
    versions: Mapping[str, str],
    progress: Progress,
    built: Mapping[str, ModelPlan],
) -> tuple[list[ModelResult], dict[str, EnsemblePlan]]:
    """Each ensemble's contract and reference data, once its step models are built (cached like a model).

    Planned again over its steps as built (``built``: their output ranges over the whole input range), so ranges and
    wiring rules see what the steps produce. Returns the results and the ensembles as planned again.
    """
    from generator.planning.ensemble_plan import plan_ensemble

    status = {r.name: r.status for r in results}
    models = {m.name: built.get(m.name, m) for m in plan.models}
    out = []
    replanned: dict[str, EnsemblePlan] = {}
    for ensemble in plan.ensembles:
        started = time.monotonic()
        step_names = sorted({s.model_name for s in ensemble.steps})
        failed = [n for n in step_names if status.get(n) not in ("built", "cached")]
        if failed:
            (problem,) = _locate(ensemble, "reference", [Problem(
                str(ensemble.manifest_file), ensemble.manifest_pointer,
                f"not built: step model(s) {', '.join(map(repr, failed))} failed")])
            out.append(ModelResult(ensemble.name, ensemble.target, "failed", 0.0, "", (), (problem,), "reference"))
            progress(BuildEvent(ensemble.name, "failed", problem.message))
            continue
        if ensemble.entry is not None:
            again, problems = plan_ensemble(ensemble.entry, ensemble.manifest_file, list(models.values()))
            if again is None:
                problems = _locate(ensemble, "reference", [
                    replace(p, message="with the output ranges its steps produce over their whole input range: "
                            f"{p.message}") for p in problems])
                out.append(ModelResult(ensemble.name, ensemble.target, "failed", 0.0, "", (), tuple(problems),
                                       "reference"))
                progress(BuildEvent(ensemble.name, "failed", "; ".join(p.message for p in problems)))
                continue
            ensemble = replanned[ensemble.name] = again
        key = cache.key(
            kind="ensemble", name=ensemble.name, contract=contract_files(contract_text(ensemble)),
            config=config_text(ensemble), steps={n: keys[n] for n in step_names}, tools=dict(versions),
            compare=ensemble.compare.to_json(),  # stored in its reference.json
            source=content_fingerprint(ensemble.source, options.code_path) if options.allow_code else "",
        )
        if cache.get(key) is not None:
            out.append(ModelResult(ensemble.name, ensemble.target, "cached", time.monotonic() - started, key))
            progress(BuildEvent(ensemble.name, "cached", f"model files unchanged: taken from the build cache at "
                                                            f"{cache.root}"))
            continue
        progress(BuildEvent(ensemble.name, "reference", "the steps chained in onnxruntime"))
        # Imported here: numpy and onnxruntime are for building one, not for a warm (cached) build.
        from generator.building.ensembles import ENSEMBLE_FILES, build_ensemble_artifacts

        # The steps' entries were checked (or stored) by this build a moment ago: no second hashing of their files.
        folders = {n: cache.files_path(keys[n]) for n in step_names}
        cache.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".build-{os.getpid()}-", dir=cache.root) as tmp:
            try:
                notes = build_ensemble_artifacts(ensemble, models, folders, options, Path(tmp))
            except StageFailed as error:
                problems = _locate(ensemble, error.stage, error.problems, Path(tmp))
                out.append(ModelResult(ensemble.name, ensemble.target, "failed", time.monotonic() - started, key,
                                       (), tuple(problems), error.stage))
                progress(BuildEvent(ensemble.name, "failed", "; ".join(p.message for p in error.problems)))
                continue
            cache.put(key, {name: Path(tmp) / name for name in ENSEMBLE_FILES})
        result = ModelResult(ensemble.name, ensemble.target, "built", time.monotonic() - started, key, tuple(notes))
        out.append(result)
        progress(BuildEvent(ensemble.name, "built", _describe(result)))
    return out, replanned


def _run_models(
    plan: RepositoryPlan,
    options: BuildOptions,
    cache_root: Path,
    keys: Mapping[str, str],
    progress: Progress,
    tensorrt: TensorRTTarget | None,
) -> list[ModelResult]:
    """Build every model: cache hits at once, the rest in parallel processes with ``jobs > 1``.

    TensorRT models are built in this process, one at a time (one build per GPU; multi-GPU builds pin a process per
    GPU themselves).
    """
    results: dict[str, ModelResult] = {}
    cache = BuildCache(cache_root)
    todo = []
    for model in plan.models:
        started = time.monotonic()
        if cache.get(keys[model.name]) is not None:
            results[model.name] = ModelResult(model.name, model.target, "cached", time.monotonic() - started,
                                              keys[model.name])
            progress(BuildEvent(model.name, "cached", f"model files unchanged: taken from the build cache at "
                                                          f"{cache.root}"))
        else:
            todo.append(model)
            progress(BuildEvent(model.name, "queued", f"target {model.target}"))
    if options.ray_address is not None and todo:  # imports Ray only here; cache hits stay local
        from generator.building.distributed import run_models_on_ray

        for result in run_models_on_ray(todo, options, cache_root, keys, progress, tensorrt,
                                        address=options.ray_address):
            results[result.name] = result
        return [results[m.name] for m in plan.models]
    parallel = [m for m in todo if m.target != "tensorrt"] if options.jobs > 1 and len(todo) > 1 else []
    serial = [m for m in todo if m not in parallel]
    if parallel:
        for result in _run_parallel(parallel, options, cache_root, keys, progress):
            results[result.name] = result
            progress(BuildEvent(result.name, result.status, _describe(result)))
    for model in serial:
        result = _build_one(model, options, cache_root, keys[model.name], tensorrt, progress)
        results[model.name] = result
        progress(BuildEvent(model.name, result.status, _describe(result)))
    return [results[m.name] for m in plan.models]


def _run_parallel(
    models: Sequence[ModelPlan], options: BuildOptions, cache_root: Path, keys: Mapping[str, str], progress: Progress
) -> Iterator[ModelResult]:
    """Build ``models`` in spawned processes (torch and onnxruntime are not fork-safe once initialised).

    Worker events travel through a queue; a thread here hands them to ``progress`` until the pool is done.
    """
    context = multiprocessing.get_context("spawn")
    events: Any = context.Queue()
    done = threading.Event()

    def drain() -> None:
        while not (done.is_set() and events.empty()):
            try:
                progress(events.get(timeout=0.1))
            except queue_module.Empty:
                continue
            except (EOFError, OSError):
                return

    thread = threading.Thread(target=drain, name="gen-repo-build-progress", daemon=True)
    thread.start()
    try:
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(options.jobs, len(models)), mp_context=context, initializer=_init_worker,
            initargs=(events,),
        ) as pool:
            futures = {
                pool.submit(_build_one, m, options, cache_root, keys[m.name]): m for m in models
            }
            for future in concurrent.futures.as_completed(futures):
                model = futures[future]
                try:
                    yield future.result()
                except Exception as error:  # the worker process died (killed, out of memory)
                    problem = Problem("", "", f"build process failed: {type(error).__name__}: {error}")
                    yield ModelResult(model.name, model.target, "failed", 0.0, keys[model.name], (),
                                      tuple(_locate(model, "build", [problem])), "build")
    finally:
        done.set()
        thread.join(timeout=5)
        events.close()
        events.join_thread()


def _locate(model: ModelPlan | EnsemblePlan, stage: str, problems: Sequence[Problem],
            workdir: Path | None = None) -> list[Problem]:
    """Problems of a failed model or ensemble, naming it and the stage, located at its manifest entry."""
    if isinstance(model, EnsemblePlan):
        return locate_build_problems(problems, name=model.name, stage=stage, manifest_file=model.manifest_file,
                                     pointer=model.manifest_pointer, kind="ensemble", workdir=workdir)
    return locate_build_problems(problems, name=model.name, stage=stage,
                                 manifest_file=model.manifest_file or model.spec_file,
                                 pointer=model.manifest_pointer or model.spec_pointer, workdir=workdir)


def _describe(result: ModelResult) -> str:
    if result.status == "failed":
        return f"failed after {result.seconds:.1f} s: " + "; ".join(p.message for p in result.problems)
    return f"{result.status} in {result.seconds:.1f} s"
