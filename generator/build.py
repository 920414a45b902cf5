"""``gen-repo build``: manifest -> plan -> per-model artifacts (cached) -> staged repository -> atomic swap.

The pipeline passes plain data from stage to stage: :class:`~generator.plan.RepositoryPlan` in, then
:func:`generator.targets.preflight` (everything that can be refused before any work: user code without
``--allow-code``, a TensorRT target without TensorRT, missing GPUs), one :class:`ModelArtifacts` per model out of
:func:`build_model_artifacts` (the only stage that runs torch, onnxruntime or TensorRT, and the unit of parallelism
and caching), then :func:`build_repository` stages everything with :class:`~generator.repository.RepositoryWriter`
and returns a :class:`BuildReport`. Failures are values until the CLI: a failed model is a :class:`ModelResult` with
its problems.

Progress is reported as :class:`BuildEvent` values (model, stage, message) to a callback; worker processes send
theirs through a queue that a thread of the parent drains, so the callback always runs in the parent.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import multiprocessing
import os
import queue as queue_module
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator import __version__
from generator.cache import BuildCache, default_cache_root, hash_bytes, hash_file
from generator.config import render_config
from generator.contract import contract_from_plan, render_contract
from generator.errors import GenRepoError, Problem
from generator.manifest import Manifest, ModelSource, SampleSource, load_manifest
from generator.plan import ModelPlan, RepositoryPlan, plan_repository
from generator.resources import resource_dir
from generator.targets import TensorRTTarget, engine_targets, make_target_resolver, preflight, tensorrt_available

#: What ``target: auto`` may become, in order of preference (issue 4): a TensorRT plan where a GPU and standard
#: TensorRT exist, otherwise ONNX. ``python`` (what a CPU-only Triton serves) is chosen explicitly.
AUTO_TARGETS = ("tensorrt", "onnx")
#: The stages of one model, in order (progress bars count them). ``tensorrt`` only runs for the tensorrt target.
STAGES = ("source", "export", "reference", "check", "tensorrt")
#: Final states of a model in events and results.
FINAL_STAGES = ("built", "cached", "failed")


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """How to build; everything that changes artifacts is part of the cache key.

    ``code_path`` lists folders searched before ``sys.path`` for ``module:callable`` factories; the build puts the
    working folder, the manifest's folder and the manifest's ``code_path:`` entries first (:func:`factory_search_path`),
    as uvicorn and celery resolve an app.
    """

    allow_code: bool = False
    keep_going: bool = False
    jobs: int = 1
    cache_dir: Path | None = None
    use_cache: bool = True
    target: str | None = None
    allow_outside: bool = False
    #: "tensorrt" (Triton plans) or "tensorrt_rtx" (TensorRT-RTX engines: exercises the build path on a CPU; the
    #: engines are not Triton plans).
    tensorrt_module: str = "tensorrt"
    tensorrt: Mapping[str, Any] = field(default_factory=dict)
    code_path: tuple[str, ...] = ()
    #: Build on a Ray cluster (``auto`` or an address) instead of local processes; see generator.distributed.
    ray_address: str | None = None


@dataclass(frozen=True, slots=True)
class BuildEvent:
    """One progress event: the model, its stage and a sentence.

    ``model`` is "*" for the whole build; ``stage`` is one of :data:`STAGES` or :data:`FINAL_STAGES`, or
    ``note``/``queued``.
    """

    model: str
    stage: str
    message: str = ""

    def __str__(self) -> str:
        return f"{self.model}: {self.stage}" + (f": {self.message}" if self.message else "")


#: Progress callback; called in the parent process only (from a helper thread when ``jobs > 1``).
Progress = Callable[[BuildEvent], None]


@dataclass(frozen=True, slots=True)
class ModelArtifacts:
    """One model's built files (relative to its version folder) in a folder, and what the build noticed."""

    folder: Path
    files: tuple[str, ...]
    notes: tuple[str, ...] = ()
    #: Input value domains found in the graph (written to the contract; a Ray node's rewrite needs them too).
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelResult:
    """Outcome of one model: ``built``, ``cached``, ``failed`` or ``kept-previous`` (``--keep-going``).

    ``stage`` names where a failed model stopped: ``plan`` (refused before any work) or one of :data:`STAGES`.
    """

    name: str
    target: str
    status: str
    seconds: float
    cache_key: str = ""
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    stage: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {
            "name": self.name,
            "target": self.target,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "cache_key": self.cache_key,
            "notes": list(self.notes),
            "problems": [p.to_dict() for p in self.problems],
            "stage": self.stage,
        }


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build did: per-model results, build-wide notes and whether the repository was swapped in."""

    output_dir: Path
    models: tuple[ModelResult, ...]
    committed: bool
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every model built (from scratch or from the cache)."""
        return all(m.status in {"built", "cached"} for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {
            "output_dir": str(self.output_dir),
            "committed": self.committed,
            "ok": self.ok,
            "notes": list(self.notes),
            "models": [m.to_dict() for m in self.models],
        }


class BuildFailed(GenRepoError):  # noqa: N818 (the CLI and tests know it by this name)
    """At least one model failed and ``--keep-going`` was not given: nothing was written."""

    exit_code = 1

    def __init__(self, report: BuildReport) -> None:
        self.report = report
        super().__init__([p for m in report.models for p in m.problems])


def tool_versions() -> dict[str, str]:
    """Versions that change artifacts (part of the cache key and the lock file)."""
    from importlib import metadata

    versions = {"gen-repo": __version__, "python": "{}.{}".format(*sys.version_info[:2])}
    # Distribution metadata, not imports: a warm (fully cached) build must not pay for importing torch.
    for distribution in ("torch", "onnx", "onnxruntime", "onnxscript", "numpy"):
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[distribution] = "absent"
    return versions


# --------------------------------------------------------------------------------------------------------------------
# One model: source -> ONNX -> checks -> reference data -> (plan)
# --------------------------------------------------------------------------------------------------------------------
def factory_search_path(plan: RepositoryPlan, options: BuildOptions, cwd: Path | None = None) -> tuple[str, ...]:
    """Folders searched first for ``module:callable`` factories, in order.

    The working folder, then the manifest's folder, then the manifest's ``code_path:`` entries, then
    ``options.code_path``: a factory resolves like an app given to uvicorn or celery, whether gen-repo was installed
    from a wheel or in editable mode.
    """
    folders = [str((cwd or Path.cwd()).resolve()), str(Path(plan.manifest_file).resolve().parent),
               *map(str, plan.code_path), *options.code_path]
    return tuple(dict.fromkeys(folders))


@contextlib.contextmanager
def _code_path(folders: Sequence[str]) -> Iterator[None]:
    """Temporarily put ``folders`` at the front of ``sys.path`` (in order) while a factory is found or imported."""
    added = [f for f in folders if f not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for folder in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)


def _import_factory(spec: str, options: BuildOptions, where: Problem, what: str = "source factory") -> Any:
    """Call ``module:callable`` (only with --allow-code) and return what it makes (an nn.Module, or sample calls)."""
    if not options.allow_code:
        raise GenRepoError(
            [replace(where, message=f"{what} {spec!r} is user code; pass --allow-code to import and run it")]
        )
    module_name, _, attr = spec.partition(":")
    try:
        with _code_path(options.code_path):
            factory = importlib.import_module(module_name)
        target: Any = factory
        for part in attr.split("."):
            target = getattr(target, part)
        module = target()
    except Exception as error:  # user code: anything can happen; report it as the model's problem
        message = f"{what} {spec!r} failed: {type(error).__name__}: {error}"
        raise GenRepoError([replace(where, message=message)]) from error
    return module


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
        with _code_path(code_path):
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
        contract=contract_from_plan(model),
        options=dict(model.options),
        tools=dict(versions),
        tensorrt=trt_part,
    )


class StageFailed(GenRepoError):  # noqa: N818 (a failed stage, like BuildFailed)
    """One stage of one model failed; every problem message starts with the stage (``export: ...``).

    ``raw`` is the exception when it was not a GenRepoError (user code, a library, the node's disk or memory).
    """

    def __init__(self, stage: str, problems: list[Problem], raw: BaseException | None = None) -> None:
        self.stage = stage
        self.raw = raw
        super().__init__([replace(p, message=p.message if p.message.startswith(f"{stage}") else
                                  f"{stage}: {p.message}") for p in problems])


def build_model_artifacts(
    model: ModelPlan,
    options: BuildOptions,
    workdir: Path,
    stage: Callable[[str, str], None] | None = None,
    tensorrt: TensorRTTarget | None = None,
    cache_root: Path | None = None,
) -> ModelArtifacts:
    """Produce every file of ``<model>/<version>/`` for one model in ``workdir``; raise :class:`StageFailed`.

    ``stage(stage, message)`` is told when each stage starts. ``cache_root`` holds the TensorRT timing cache. A
    failure names its stage and, where one is involved, the tensor.
    """
    report = stage or (lambda name, message: None)
    current = ["source"]

    def enter(name: str, message: str) -> None:
        current[0] = name
        report(name, message)

    try:
        return _build_stages(model, options, workdir, enter, tensorrt, cache_root)
    except StageFailed:
        raise
    except GenRepoError as error:
        raise StageFailed(current[0], error.problems) from error
    except Exception as error:  # user code or a library: still this model's failure, with the stage
        message = f"{current[0]} failed: {type(error).__name__}: {error}{_integer_inputs_hint(model, error)}"
        raise StageFailed(current[0], [Problem(str(model.spec_file), model.spec_pointer, message)], error) from error


def _integer_inputs_hint(model: ModelPlan, error: Exception) -> str:
    """For an index error: which values the integer inputs were given (the likely culprit, named)."""
    if not isinstance(error, IndexError) and "index" not in str(error).lower():
        return ""
    shown = [f"{t.name} {t.values.describe()} ({t.values.source})" if t.values else f"{t.name} unrestricted"
             for t in model.inputs if t.dtype.startswith(("torch.int", "torch.uint"))]
    return f" (integer inputs: {'; '.join(shown)}; give their values in the manifest's inputs:)" if shown else ""


def _build_stages(
    model: ModelPlan,
    options: BuildOptions,
    workdir: Path,
    enter: Callable[[str, str], None],
    tensorrt: TensorRTTarget | None,
    cache_root: Path | None,
) -> ModelArtifacts:
    from generator.export.onnx import check_onnx, constants_from_graph, export_onnx, load_pt2, prepare_source_onnx

    where = Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/source", "")
    notes: list[str] = []
    onnx_path = workdir / "model.onnx"
    source = model.source
    if source is None:
        raise GenRepoError([replace(where, message=f"model {model.name!r} has no source to build from")])
    if source.kind == "factory":
        where = replace(where, pointer=where.pointer + "/factory")
    forward_signature = model.graph.forward_signature
    constants = constants_from_graph(model.graph)
    module = None
    enter("source", f"{source.kind} source")
    if source.kind == "pt2":
        assert source.path is not None
        module = load_pt2(source.path)
    elif source.kind == "factory":
        module = _import_factory(str(source.factory), options, where)
    samples = _read_samples(model, options, notes)
    if source.kind == "onnx":
        assert source.path is not None
        prepare_source_onnx(source.path, onnx_path, model.inputs, model.outputs)
        notes.append("ONNX source used as is (I/O checked against the spec)")
    else:
        enter("export", "torch -> ONNX")
        _quiet_torch_onnx_logs()
        result = export_onnx(
            module, onnx_path, model.inputs, model.outputs, forward_signature=forward_signature, constants=constants,
            example=_export_example(samples, model.inputs),
        )
        notes.extend(result.notes)
        notes.append(f"exported with {result.exporter} in {result.seconds:.1f} s")

    enter("reference", "reference inputs and outputs at the min, opt and max shapes")
    domains = _value_domains(model, onnx_path, notes)
    from generator.reference import make_reference_cases, write_reference

    cases, case_notes = make_reference_cases(
        module, model.inputs, model.outputs, model_name=model.name, max_batch_size=model.max_batch_size,
        forward_signature=forward_signature, constants=constants, domains=domains, samples=samples,
        run=None if module is not None else _onnxruntime_runner(model, onnx_path),
    )
    notes.extend(case_notes)
    if module is not None:
        # onnxruntime must reproduce torch on every case (min, opt, max and the samples).
        enter("check", "onnxruntime against torch")
        check_onnx(onnx_path, model.inputs, model.outputs, cases)
    else:
        notes.append("reference outputs come from onnxruntime (the source is ONNX; there is no torch module)")

    files = ["gen_repo/contract.json", "gen_repo/reference.json", "gen_repo/reference.npz"]
    (workdir / "gen_repo").mkdir(exist_ok=True)
    (workdir / "gen_repo" / "contract.json").write_text(render_contract(contract_from_plan(model, domains)),
                                                          encoding="utf-8")
    write_reference(workdir / "gen_repo", cases)

    if model.target == "python":
        shutil.copyfile(resource_dir("templates") / "python" / "model.py", workdir / "model.py")
        files += ["model.onnx", "model.py"]
    elif model.target == "onnx":
        files.append("model.onnx")
    elif model.target == "tensorrt":
        enter("tensorrt", f"{options.tensorrt_module} engine build")
        files += _build_engines(model, options, onnx_path, workdir, notes, tensorrt, cache_root)
        onnx_path.unlink()
    return ModelArtifacts(workdir, tuple(sorted(files)), tuple(notes), domains)


def _read_samples(model: ModelPlan, options: BuildOptions, notes: list[str]) -> list[Any]:
    """The manifest's samples that fit the plan (model-side), with a note for each call skipped."""
    from generator.samples import arrays_from_calls, read_sample_file, usable_samples

    source = model.samples
    if source is None:
        return []
    if source.kind == "factory":
        where = Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/samples/factory", "")
        calls, skipped = arrays_from_calls(
            _import_factory(str(source.factory), options, where, what="samples factory"), model.graph, model.inputs)
        file = str(source.factory)
    else:
        assert source.path is not None
        calls, skipped, file = read_sample_file(source.path, source.kind), [], str(source.path)
    samples, unfit = usable_samples(calls, model.inputs, model.max_batch_size, file)
    notes.extend(skipped + unfit)
    notes.append(f"{len(samples)} of {len(calls) + len(skipped)} sample calls fit the plan")
    return samples


def _export_example(samples: Sequence[Any], inputs: Sequence[Any]) -> list[Any] | None:
    """A sample to trace with, or None for the synthetic example.

    The first sample whose dynamic axes are at least 2 wherever their range allows (torch.export specialises sizes
    0 and 1).
    """
    import torch

    from generator.export.onnx import dynamic_axes_of

    for sample in samples:
        if all(sample.arrays[p.name].shape[axis] >= 2 or p.max_shape[axis] < 2
               for p in inputs for axis in dynamic_axes_of(p)):
            return [torch.from_numpy(sample.arrays[p.name].copy()) for p in inputs]
    return None


def _value_domains(model: ModelPlan, onnx_path: Path, notes: list[str]) -> dict[str, Any]:
    """Value domains found in the graph (index inputs) for inputs the manifest says nothing about.

    A manifest domain that exceeds the table its input indexes is refused: those values would fail in the model.
    """
    import numpy as np
    import onnx

    from generator.export.onnx_indices import index_domains

    found = index_domains(onnx.load(str(onnx_path), load_external_data=False), [t.name for t in model.inputs])
    problems = []
    for tensor in model.inputs:
        domain = found.get(tensor.name)
        if domain is None:
            continue
        if tensor.values is None:
            notes.append(f"input {tensor.name!r} takes {domain.describe()}: {domain.source}")
            continue
        declared = tensor.values
        extremes = np.asarray(declared.values if declared.values is not None else [declared.low, declared.high])
        if domain.array_problem(extremes) is not None:
            problems.append(Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/inputs",
                                    f"input {tensor.name!r}: the manifest's values {declared.describe()} go beyond "
                                    f"{domain.describe()}, the {domain.source}"))
    if problems:
        raise GenRepoError(problems)
    return found


def _quiet_torch_onnx_logs() -> None:
    """Silence torch.onnx's warnings about missing optional operator libraries (torchvision): noise in a build log.

    Done after importing torch: its logging setup on import resets the ``torch.onnx`` logger's level.
    """
    import logging

    import torch  # noqa: F401

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)


def _onnxruntime_runner(model: ModelPlan, onnx_path: Path) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Model-side outputs from onnxruntime, for an ONNX source (there is no torch module to run)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.outputs]

    def run(arrays: Mapping[str, Any]) -> dict[str, Any]:
        return dict(zip(names, session.run(names, dict(arrays)), strict=True))

    return run


def tensorrt_build_options(options: BuildOptions, timing_cache: Path | None) -> Any:
    """The TensorRT layer's build options (``generator.export.tensorrt.BuildOptions``) from the manifest's."""
    from generator.export.tensorrt import BuildOptions as TrtOptions

    values = dict(options.tensorrt)
    if "precision" in values:
        values["precision"] = tuple(values["precision"])
    return TrtOptions(**values, timing_cache_path=timing_cache)


def _build_engines(
    model: ModelPlan,
    options: BuildOptions,
    onnx_path: Path,
    workdir: Path,
    notes: list[str],
    tensorrt: TensorRTTarget | None,
    cache_root: Path | None,
) -> list[str]:
    """TensorRT engine(s) with one optimization profile from the plan's effective shapes.

    One engine per ``cc_model_filenames`` entry, each built in a fresh process pinned (``CUDA_VISIBLE_DEVICES``) to
    a GPU of that compute capability, one after the other; otherwise one engine for this process's GPU. The timing
    cache lives in the cache folder (one file per TensorRT version and GPU kind) and is reused by later builds.
    """
    from generator.export.tensorrt import profile_shapes

    trt, why = tensorrt_available(options.tensorrt_module)
    if trt is None:
        raise GenRepoError([Problem(str(model.spec_file), model.spec_pointer, f"cannot build a TensorRT plan: {why}")])
    version = str(getattr(trt, "__version__", "?"))
    cache = BuildCache(cache_root) if cache_root is not None else None
    profiles = profile_shapes(model.inputs)
    files = []
    targets = engine_targets(model)
    for filename, cc in targets.items():
        device = "cpu" if cc is None else "sm_" + cc.replace(".", "")
        timing = cache.timing_cache_path(f"{options.tensorrt_module}-{version}", device) if cache else None
        trt_options = tensorrt_build_options(options, timing)
        if model.config.cc_model_filenames:
            from generator.gpu import detect_gpus

            gpu = next(g for g in detect_gpus() if g.compute_capability == cc)
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=context, initializer=_pin_gpu, initargs=(gpu.index,)
            ) as pool:
                plan_bytes, summary = pool.submit(
                    engine_bytes, options.tensorrt_module, str(onnx_path), profiles, trt_options
                ).result()
        else:
            plan_bytes, summary = engine_bytes(options.tensorrt_module, str(onnx_path), profiles, trt_options)
        (workdir / filename).write_bytes(plan_bytes)
        files.append(filename)
        loaded = "reused" if summary.get("timing_cache_loaded") else "started"
        if timing is not None:
            loaded += f" ({timing.relative_to(cache.root).as_posix() if cache else timing.name} in the cache folder)"
        notes.append(
            f"{filename}: {summary['flavor']} {summary['trt_version']} for compute capability "
            f"{summary['compute_capability'] or 'none (no GPU)'}, {summary['plan_size']} bytes in "
            f"{summary['build_seconds']:.1f} s, timing cache {loaded}"
        )
        # TensorRT-RTX reads the file but treats timing caches as no-ops; say so rather than claim a reuse.
        notes += [f"{filename}: {n}" for n in summary.get("notes", []) if "timing cache" in n.lower()]
        for flag, reason in sorted(summary.get("skipped_flags", {}).items()):
            notes.append(f"{filename}: {flag} skipped: {reason}")
    if tensorrt is not None and not tensorrt.triton_plan:
        notes.append(
            f"built with {options.tensorrt_module}: the engine is NOT a Triton tensorrt_plan (a test of the build path)"
        )
    return files


def _pin_gpu(index: int) -> None:
    """Worker initializer: make GPU ``index`` (nvidia-smi order) CUDA's device 0 before TensorRT is imported."""
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = str(index)


def engine_bytes(module_name: str, onnx_path: str, profiles: Any, trt_options: Any) -> tuple[bytes, dict[str, Any]]:
    """Build one engine in this process and return its bytes and summary (also run by Ray workers)."""
    from generator.export.tensorrt import build_engine
    from generator.gpu import import_tensorrt

    trt = import_tensorrt(module_name)
    result = build_engine(trt, onnx_path, profiles, trt_options)
    return result.plan_bytes, result.summary()


# --------------------------------------------------------------------------------------------------------------------
# Workers
# --------------------------------------------------------------------------------------------------------------------
#: In a worker process only: where its progress events go (set by the pool's initializer; a queue cannot be
#: pickled into each task).
_WORKER_EVENTS: Any = None


def _init_worker(events: Any) -> None:
    global _WORKER_EVENTS
    _WORKER_EVENTS = events


def _worker_say(event: BuildEvent) -> None:
    if _WORKER_EVENTS is not None:
        _WORKER_EVENTS.put(event)


def _build_one(
    model: ModelPlan,
    options: BuildOptions,
    cache_root: Path,
    key: str,
    tensorrt: TensorRTTarget | None = None,
    say: Progress | None = None,
) -> ModelResult:
    """Worker: build (or find in the cache) one model's artifacts; failures come back as a result, not raised.

    Artifacts always go through the cache (content-addressed by ``key``): that is also how a worker process hands
    them to the process that stages the repository.
    """
    emit = say or _worker_say
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
                lambda stage, message: emit(BuildEvent(model.name, stage, message)),
                tensorrt,
                cache_root,
            )
            cache.put(key, {name: artifacts.folder / name for name in artifacts.files})
        return ModelResult(model.name, model.target, "built", time.monotonic() - started, key, artifacts.notes)
    except GenRepoError as error:
        seconds = time.monotonic() - started
        return ModelResult(model.name, model.target, "failed", seconds, key, (), tuple(error.problems),
                           getattr(error, "stage", ""))
    except Exception as error:  # a bug or a library failure: still one model's failure, reported with its type
        problem = Problem(str(model.spec_file), model.spec_pointer, f"build failed: {type(error).__name__}: {error}")
        return ModelResult(model.name, model.target, "failed", time.monotonic() - started, key, (), (problem,))


# --------------------------------------------------------------------------------------------------------------------
# The repository
# --------------------------------------------------------------------------------------------------------------------
def plan_build(
    manifest_path: Path, options: BuildOptions, output_dir: Path | None = None
) -> tuple[RepositoryPlan, list[str]]:
    """Load and plan the manifest, resolving ``target: auto`` (and a ``--target`` override) for this machine.

    Every model is planned; one that cannot be (at loading or planning) is refused. Without ``keep_going`` any
    refusal raises GenRepoError with the problems of every refused model at once; with it they are in
    :attr:`RepositoryPlan.refused`.
    """
    notes: list[str] = []
    manifest: Manifest = load_manifest(manifest_path, allow_outside=options.allow_outside, keep_going=True)
    if options.target:
        manifest = replace(manifest, models=tuple(replace(m, target=options.target) for m in manifest.models))
    plan = plan_repository(manifest, make_target_resolver(options, notes), keep_going=True)
    if plan.refused and not options.keep_going:
        names = ", ".join(repr(r.name) for r in plan.refused)
        raise GenRepoError([p for r in plan.refused for p in r.problems],
                           f"refused: {names} (--keep-going builds the other models)")
    if output_dir is not None:
        plan = replace(plan, output_dir=Path(output_dir))
    return plan, notes


def build_repository(
    manifest_path: Path | str,
    options: BuildOptions = BuildOptions(),
    output_dir: Path | str | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Build every model of the manifest and swap the repository in atomically.

    Raises GenRepoError (exit code 2) for a manifest that cannot be built at all, before any model is imported or
    exported (see :func:`preflight`). Without ``keep_going`` any failed model raises :class:`BuildFailed` and the
    previous repository stays untouched; with it, failed models keep their previous build (if any) and the rest is
    swapped in.
    """
    from generator.repository import RepositoryWriter, build_lock, copy_tree

    say = progress or (lambda event: None)
    manifest_path = Path(manifest_path)
    plan, notes = plan_build(manifest_path, options, Path(output_dir) if output_dir is not None else None)
    for note in notes:
        say(BuildEvent("*", "note", note))
    options = replace(options, code_path=factory_search_path(plan, options))
    cache_root = Path(options.cache_dir) if options.cache_dir is not None else default_cache_root()
    # Refusals come first: a refused build creates nothing, not even the cache folder (issue 4: "stops at once").
    tensorrt = preflight(plan, options)
    with _contained_scratch(cache_root):  # scratch files of torch, onnxruntime and imports go into the cache folder
        cache = BuildCache(cache_root)
        cache.clean_leftovers()  # work folders of builds that were killed
        versions = tool_versions()
        keys = {m.name: model_cache_key(cache, m, options, versions, tensorrt) for m in plan.models}
        if not options.use_cache:
            for key in keys.values():
                shutil.rmtree(cache.entry_path(key), ignore_errors=True)
        results = _run_models(plan, options, cache_root, keys, say, tensorrt)
    results = _with_refused(plan, results, say)
    # What the plan had to assume (batch multipliers AITune's JSON does not carry) belongs in the build report too.
    assumed = {m.name: tuple(d for d in m.decisions if d.startswith("assumed: ")) for m in plan.models}
    results = [replace(r, notes=(*assumed.get(r.name, ()), *r.notes)) for r in results]
    failed = [r for r in results if r.status == "failed"]
    if failed and not options.keep_going:
        raise BuildFailed(BuildReport(plan.output_dir, tuple(results), committed=False, notes=tuple(notes)))

    by_name = {m.name: m for m in plan.models}
    final: list[ModelResult] = []
    lock_models: dict[str, dict[str, Any]] = {}
    with RepositoryWriter(plan.output_dir) as writer:
        previous = (writer.previous_lock() or {}).get("models", {})
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
            entry = cache.get(keys[model.name])
            if entry is None:  # evicted or damaged between build and staging
                raise GenRepoError([Problem(str(cache_root), "", f"cache entry for {model.name!r} vanished")])
            version_dir = writer.model_dir(model.name, model.version)
            copy_tree(entry, version_dir)
            (version_dir.parent / "config.pbtxt").write_text(render_config(model.config), encoding="utf-8")
            lock_models[model.name] = _lock_entry(model, keys[model.name], tensorrt)
            final.append(result)
        writer.commit(build_lock(writer.root, versions, lock_models))
    return BuildReport(plan.output_dir, tuple(final), committed=True, notes=tuple(notes))


def _with_refused(plan: RepositoryPlan, results: list[ModelResult], say: Progress) -> list[ModelResult]:
    """The build's results with the models refused at plan time (``--keep-going``) as failed, in manifest order."""
    if not plan.refused:
        return results
    order = {m.name: int(m.manifest_pointer.rsplit("/", 1)[-1] or 0) for m in plan.models}
    refused = []
    for model in plan.refused:
        order[model.name] = model.index
        refused.append(ModelResult(model.name, "", "failed", 0.0, "", (), model.problems, "plan"))
        say(BuildEvent(model.name, "failed", "refused at plan time: " + "; ".join(p.message for p in model.problems)))
    return sorted([*results, *refused], key=lambda r: order[r.name])


#: Where libraries put scratch files; redirected into the cache folder while a build imports and exports.
_SCRATCH_ENV = ("TMPDIR", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "PYTHONPYCACHEPREFIX")


@contextlib.contextmanager
def _contained_scratch(cache_root: Path) -> Iterator[None]:
    """Point library scratch writes into a temporary folder in the cache while models build, then delete it.

    onnxruntime writes a telemetry device id under ``$XDG_CACHE_HOME`` (or ``~/.cache``) and a session file in
    ``$TMPDIR`` when imported, torch makes ``$TMPDIR/torchinductor_<user>``, and importing a factory writes
    ``__pycache__`` beside its source: without this a build writes outside the output and cache folders
    (tests/test_safety.py::test_build_writes_only_into_output_and_cache). Spawned workers inherit the environment.
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


def _lock_entry(model: ModelPlan, key: str, tensorrt: TensorRTTarget | None) -> dict[str, Any]:
    """Return what identifies one model's build in the lock file (no paths, no timestamps)."""
    from generator.cache import canonical_json

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


def _run_models(
    plan: RepositoryPlan,
    options: BuildOptions,
    cache_root: Path,
    keys: Mapping[str, str],
    say: Progress,
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
            say(BuildEvent(model.name, "cached", "unchanged: taken from the build cache"))
        else:
            todo.append(model)
            say(BuildEvent(model.name, "queued", f"target {model.target}"))
    if options.ray_address is not None and todo:  # imports Ray only here (issue 8); cache hits stay local
        from generator.distributed import run_models_on_ray

        for result in run_models_on_ray(todo, options, cache_root, keys, say, tensorrt, address=options.ray_address):
            results[result.name] = result
        return [results[m.name] for m in plan.models]
    parallel = [m for m in todo if m.target != "tensorrt"] if options.jobs > 1 and len(todo) > 1 else []
    serial = [m for m in todo if m not in parallel]
    if parallel:
        for result in _run_parallel(parallel, options, cache_root, keys, say):
            results[result.name] = result
            say(BuildEvent(result.name, result.status, _describe(result)))
    for model in serial:
        result = _build_one(model, options, cache_root, keys[model.name], tensorrt, say)
        results[model.name] = result
        say(BuildEvent(model.name, result.status, _describe(result)))
    return [results[m.name] for m in plan.models]


def _run_parallel(
    models: Sequence[ModelPlan], options: BuildOptions, cache_root: Path, keys: Mapping[str, str], say: Progress
) -> Iterator[ModelResult]:
    """Build ``models`` in spawned processes (torch and onnxruntime are not fork-safe once initialised).

    Worker events travel through a queue; a thread here hands them to ``say`` until the pool is done.
    """
    context = multiprocessing.get_context("spawn")
    events: Any = context.Queue()
    done = threading.Event()

    def drain() -> None:
        while not (done.is_set() and events.empty()):
            try:
                say(events.get(timeout=0.1))
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
                pool.submit(_build_one_shipped, _ship(m), options, cache_root, keys[m.name]): m for m in models
            }
            for future in concurrent.futures.as_completed(futures):
                model = futures[future]
                try:
                    yield future.result()
                except Exception as error:  # the worker process died (killed, out of memory)
                    problem = Problem(str(model.spec_file), model.spec_pointer,
                                      f"build process failed: {type(error).__name__}: {error}")
                    yield ModelResult(model.name, model.target, "failed", 0.0, keys[model.name], (), (problem,))
    finally:
        done.set()
        thread.join(timeout=5)
        events.close()
        events.join_thread()


def _ship(model: ModelPlan) -> tuple[ModelPlan, bytes]:
    """A model plan a spawned worker can unpickle: the ModelConfig travels as its serialized bytes.

    tritonclient's generated ``model_config_pb2`` classes cannot be pickled (their module is imported under a name
    pickle cannot find again).
    """
    return replace(model, config=None), model.config.SerializeToString(deterministic=True)


def _build_one_shipped(
    shipped: tuple[ModelPlan, bytes], options: BuildOptions, cache_root: Path, key: str
) -> ModelResult:
    """Worker entry point: rebuild the ModelConfig from its bytes, then :func:`_build_one`."""
    from tritonclient.grpc import model_config_pb2

    model, config = shipped
    return _build_one(replace(model, config=model_config_pb2.ModelConfig.FromString(config)), options, cache_root, key)


def _describe(result: ModelResult) -> str:
    if result.status == "failed":
        return f"failed after {result.seconds:.1f} s: " + "; ".join(p.message for p in result.problems)
    return f"{result.status} in {result.seconds:.1f} s"
