"""``gen-repo build``: manifest -> plan -> per-model artifacts (cached) -> staged repository -> atomic swap.

The pipeline passes plain data from stage to stage: :class:`~generator.plan.RepositoryPlan` in, one
:class:`ModelArtifacts` per model out of :func:`build_model_artifacts` (the only stage that runs torch, onnxruntime or
TensorRT, and the unit of parallelism and caching), then :func:`build_repository` stages everything with
:class:`~generator.repository.RepositoryWriter` and returns a :class:`BuildReport`. Failures are values until the
CLI: a failed model is a :class:`ModelResult` with its problems.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator import __version__
from generator.cache import BuildCache, default_cache_root, hash_bytes, hash_file
from generator.config import render_config
from generator.contract import contract_from_plan, render_contract
from generator.errors import GenRepoError, Problem
from generator.manifest import Manifest, ManifestModel, load_manifest
from generator.plan import ModelPlan, RepositoryPlan, plan_repository
from generator.resources import resource_dir

#: What ``target: auto`` may become, in order of preference (issue 4): a TensorRT plan where a GPU and TensorRT
#: exist, otherwise ONNX. ``python`` (what a CPU-only Triton serves) is chosen explicitly.
AUTO_TARGETS = ("tensorrt", "onnx")


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """How to build; everything that changes artifacts is part of the cache key."""

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


@dataclass(frozen=True, slots=True)
class ModelArtifacts:
    """One model's built files (relative to its version folder) in a folder, and what the build noticed."""

    folder: Path
    files: tuple[str, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelResult:
    """Outcome of one model: ``built``, ``cached``, ``failed`` or ``kept-previous`` (``--keep-going``)."""

    name: str
    target: str
    status: str
    seconds: float
    cache_key: str = ""
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()

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
        }


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build did: per-model results and whether the repository was swapped in."""

    output_dir: Path
    models: tuple[ModelResult, ...]
    committed: bool

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
            "models": [m.to_dict() for m in self.models],
        }


class BuildFailed(GenRepoError):
    """At least one model failed and ``--keep-going`` was not given: nothing was written."""

    exit_code = 1

    def __init__(self, report: BuildReport) -> None:
        self.report = report
        super().__init__([p for m in report.models for p in m.problems])


# --------------------------------------------------------------------------------------------------------------------
# Target resolution and tool versions
# --------------------------------------------------------------------------------------------------------------------
def tensorrt_available(module_name: str = "tensorrt") -> tuple[Any | None, str]:
    """The TensorRT module if it can build here, else None, with a sentence why.

    Standard TensorRT needs an NVIDIA GPU; the GPU is detected without creating a TensorRT runtime (a runtime
    created without a GPU can crash the process). TensorRT-RTX builds on a CPU.
    """
    from generator.gpu import detect_gpus, import_tensorrt

    try:
        trt = import_tensorrt(module_name)
    except ImportError as error:
        return None, f"{module_name} cannot be imported ({error})"
    if module_name == "tensorrt" and not detect_gpus():
        return None, "no NVIDIA GPU was found (checked nvidia-smi and /dev/nvidia*)"
    return trt, f"{module_name} {getattr(trt, '__version__', '?')}"


def make_target_resolver(options: BuildOptions, notes: list[str]) -> Callable[[ManifestModel], str]:
    """``target: auto`` -> tensorrt where TensorRT and a GPU exist, else onnx; the reason goes into ``notes``."""
    cached: dict[str, str] = {}

    def resolve(model: ManifestModel) -> str:
        if "target" not in cached:
            trt, why = tensorrt_available(options.tensorrt_module)
            cached["target"] = "tensorrt" if trt is not None else "onnx"
            notes.append(f"target auto -> {cached['target']}: {why}")
        return cached["target"]

    return resolve


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
def _import_factory(spec: str, allow_code: bool, where: Problem) -> Any:
    """Call ``module:callable`` (only with --allow-code) and return the nn.Module it makes."""
    if not allow_code:
        raise GenRepoError(
            [replace(where, message=f"source factory {spec!r} is user code; pass --allow-code to import and run it")]
        )
    module_name, _, attr = spec.partition(":")
    try:
        factory = importlib.import_module(module_name)
        for part in attr.split("."):
            factory = getattr(factory, part)
        module = factory()
    except Exception as error:  # user code: anything can happen; report it as the model's problem
        raise GenRepoError([replace(where, message=f"source factory {spec!r} failed: {type(error).__name__}: {error}")])
    return module


def _factory_fingerprint(spec: str) -> str:
    """Content hash of a factory's module file (part of the cache key); imports nothing but parent packages."""
    import importlib.util

    module_name = spec.partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.origin or not Path(found.origin).is_file():
        return f"unresolved:{spec}"
    return hash_file(found.origin)


def source_fingerprint(model: ModelPlan) -> str:
    """What identifies the model source's content for the cache key."""
    source = model.source
    if source is None:
        return "none"
    if source.kind == "factory":
        return f"factory:{source.factory}:{_factory_fingerprint(str(source.factory))}"
    assert source.path is not None
    return f"{source.kind}:{hash_file(source.path)}"


def model_cache_key(cache: BuildCache, model: ModelPlan, options: BuildOptions, versions: Mapping[str, str]) -> str:
    """Build-cache key: spec, source content, target, options, tool versions and (for TensorRT) the GPU."""
    gpu = ""
    if model.target == "tensorrt":
        from generator.gpu import detect_gpus

        gpu = ",".join(sorted({g.compute_capability or g.name for g in detect_gpus()}))
    return cache.key(
        spec=model.graph.to_dict(),
        source=source_fingerprint(model),
        target=model.target,
        name=model.name,
        contract=contract_from_plan(model),
        options=dict(model.options),
        tensorrt=dict(options.tensorrt) if model.target == "tensorrt" else {},
        tensorrt_module=options.tensorrt_module if model.target == "tensorrt" else "",
        tools=dict(versions),
        gpu=gpu,
    )


def build_model_artifacts(model: ModelPlan, options: BuildOptions, workdir: Path) -> ModelArtifacts:
    """Produce every file of ``<model>/<version>/`` for one model in ``workdir``; raise GenRepoError on failure."""
    from generator.export.onnx import check_onnx, constants_from_graph, export_onnx, load_pt2, prepare_source_onnx
    from generator.reference import make_reference_cases, write_reference

    where = Problem(str(model.spec_file), model.spec_pointer, "")
    notes: list[str] = []
    onnx_path = workdir / "model.onnx"
    source = model.source
    if source is None:
        raise GenRepoError([replace(where, message=f"model {model.name!r} has no source to build from")])
    forward_signature = model.graph.forward_signature
    constants = constants_from_graph(model.graph)
    module = None
    if source.kind == "onnx":
        assert source.path is not None
        prepare_source_onnx(source.path, onnx_path, model.inputs, model.outputs)
        notes.append("ONNX source used as is (I/O checked against the spec)")
    else:
        if source.kind == "pt2":
            assert source.path is not None
            module = load_pt2(source.path)
        else:
            module = _import_factory(str(source.factory), options.allow_code, where)
        result = export_onnx(
            module, onnx_path, model.inputs, model.outputs, forward_signature=forward_signature, constants=constants
        )
        notes.extend(result.notes)
        notes.append(f"exported with {result.exporter} in {result.seconds:.1f} s")

    if module is not None:
        cases = make_reference_cases(
            module,
            model.inputs,
            model.outputs,
            model_name=model.name,
            max_batch_size=model.max_batch_size,
            forward_signature=forward_signature,
            constants=constants,
        )
        # onnxruntime must reproduce torch at the min, opt and max shapes.
        check_onnx(onnx_path, model.inputs, model.outputs, cases)
    else:
        cases = _onnxruntime_reference_cases(model, onnx_path)
        notes.append("reference outputs come from onnxruntime (the source is ONNX; there is no torch module)")

    files = ["gen_repo/contract.json", "gen_repo/reference.json", "gen_repo/reference.npz"]
    (workdir / "gen_repo").mkdir(exist_ok=True)
    (workdir / "gen_repo" / "contract.json").write_text(render_contract(contract_from_plan(model)), encoding="utf-8")
    write_reference(workdir / "gen_repo", cases)

    if model.target == "python":
        shutil.copyfile(resource_dir("templates") / "python" / "model.py", workdir / "model.py")
        files += ["model.onnx", "model.py"]
    elif model.target == "onnx":
        files.append("model.onnx")
    elif model.target == "tensorrt":
        files += _build_plans(model, options, onnx_path, workdir, notes)
        onnx_path.unlink()
    return ModelArtifacts(workdir, tuple(sorted(files)), tuple(notes))


def _onnxruntime_reference_cases(model: ModelPlan, onnx_path: Path) -> list[Any]:
    """Reference cases for an ONNX source: inputs as for torch, outputs from onnxruntime."""
    import onnxruntime as ort

    from generator.reference import CASE_SHAPES, ReferenceCase, reference_inputs

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.outputs]
    cases = []
    for case in CASE_SHAPES:
        arrays = reference_inputs(model.inputs, model_name=model.name, case=case)
        values = session.run(names, arrays)
        batch = int(next(iter(arrays.values())).shape[0]) if model.max_batch_size > 0 and arrays else None
        cases.append(ReferenceCase(case, batch, arrays, dict(zip(names, values))))
    return cases


def _build_plans(model: ModelPlan, options: BuildOptions, onnx_path: Path, workdir: Path, notes: list[str]) -> list[str]:
    """TensorRT plan(s) with one optimization profile from the plan's effective shapes."""
    from generator.export.tensorrt import BuildOptions as TrtOptions
    from generator.export.tensorrt import build_engine, profile_shapes

    trt, why = tensorrt_available(options.tensorrt_module)
    if trt is None:
        raise GenRepoError([Problem(str(model.spec_file), model.spec_pointer, f"cannot build a TensorRT plan: {why}")])
    trt_options = TrtOptions(**dict(options.tensorrt)) if options.tensorrt else TrtOptions()
    result = build_engine(trt, onnx_path, profile_shapes(model.inputs), trt_options)
    filename = model.config.default_model_filename or "model.plan"
    (workdir / filename).write_bytes(result.plan_bytes)
    notes.append(result.summary())
    if options.tensorrt_module != "tensorrt":
        notes.append(f"built with {options.tensorrt_module}: the engine is not a Triton tensorrt_plan")
    return [filename]


def _build_one(model: ModelPlan, options: BuildOptions, cache_root: Path, key: str) -> ModelResult:
    """Worker: build (or find in the cache) one model's artifacts; failures come back as a result, not raised.

    Artifacts always go through the cache (content-addressed by ``key``): that is also how a worker process hands
    them to the process that stages the repository.
    """
    started = time.monotonic()
    cache = BuildCache(cache_root)
    try:
        if cache.get(key) is not None:
            return ModelResult(model.name, model.target, "cached", time.monotonic() - started, key)
        # Work beside the cache, not in /tmp: nothing is written outside the output and cache folders.
        cache_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=cache_root) as tmp:
            artifacts = build_model_artifacts(model, options, Path(tmp))
            cache.put(key, {name: artifacts.folder / name for name in artifacts.files})
        return ModelResult(model.name, model.target, "built", time.monotonic() - started, key, artifacts.notes)
    except GenRepoError as error:
        return ModelResult(model.name, model.target, "failed", time.monotonic() - started, key, (), tuple(error.problems))
    except Exception as error:  # a bug or a library failure: still one model's failure, reported with its type
        problem = Problem(str(model.spec_file), model.spec_pointer, f"build failed: {type(error).__name__}: {error}")
        return ModelResult(model.name, model.target, "failed", time.monotonic() - started, key, (), (problem,))


# --------------------------------------------------------------------------------------------------------------------
# The repository
# --------------------------------------------------------------------------------------------------------------------
Progress = Callable[[str, str], None]


def plan_build(manifest_path: Path, options: BuildOptions, output_dir: Path | None = None) -> tuple[RepositoryPlan, list[str]]:
    """Load and plan the manifest, resolving ``target: auto`` (and a ``--target`` override) for this machine."""
    notes: list[str] = []
    manifest: Manifest = load_manifest(manifest_path, allow_outside=options.allow_outside)
    if options.target:
        manifest = replace(manifest, models=tuple(replace(m, target=options.target) for m in manifest.models))
    plan = plan_repository(manifest, make_target_resolver(options, notes))
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

    Without ``keep_going`` any failed model raises :class:`BuildFailed` and the previous repository stays untouched;
    with it, failed models keep their previous build (if any) and the rest is swapped in.
    """
    from generator.repository import RepositoryWriter, build_lock

    say = progress or (lambda model, message: None)
    plan, notes = plan_build(Path(manifest_path), options, Path(output_dir) if output_dir is not None else None)
    for note in notes:
        say("*", note)
    cache_root = Path(options.cache_dir) if options.cache_dir is not None else default_cache_root()
    cache = BuildCache(cache_root)
    versions = tool_versions()
    keys = {m.name: model_cache_key(cache, m, options, versions) for m in plan.models}
    if not options.use_cache:
        for key in keys.values():
            shutil.rmtree(cache.entry_path(key), ignore_errors=True)

    results = _run_models(plan, options, cache_root, keys, say)
    failed = [r for r in results if r.status == "failed"]
    if failed and not options.keep_going:
        raise BuildFailed(BuildReport(plan.output_dir, tuple(results), committed=False))

    by_name = {m.name: m for m in plan.models}
    final: list[ModelResult] = []
    lock_models: dict[str, dict[str, Any]] = {}
    with RepositoryWriter(plan.output_dir) as writer:
        previous = (writer.previous_lock() or {}).get("models", {})
        for result in results:
            model = by_name[result.name]
            if result.status == "failed":
                kept = writer.adopt_previous(model.name)
                if kept is not None and model.name in previous:
                    lock_models[model.name] = previous[model.name]
                    result = replace(result, status="kept-previous")
                final.append(result)
                continue
            entry = cache.get(keys[model.name])
            if entry is None:  # evicted or damaged between build and staging
                raise GenRepoError([Problem(str(cache_root), "", f"cache entry for {model.name!r} vanished")])
            version_dir = writer.model_dir(model.name, model.version)
            shutil.copytree(entry, version_dir, dirs_exist_ok=True)
            (version_dir.parent / "config.pbtxt").write_text(render_config(model.config), encoding="utf-8")
            lock_models[model.name] = {
                "cache_key": keys[model.name],
                "spec_sha256": hash_bytes(_canonical_spec(model)),
                "target": model.target,
                "version": model.version,
            }
            final.append(result)
        writer.commit(build_lock(writer.root, versions, lock_models))
    return BuildReport(plan.output_dir, tuple(final), committed=True)


def _canonical_spec(model: ModelPlan) -> bytes:
    from generator.cache import canonical_json

    return canonical_json(model.graph.to_dict()).encode("utf-8")


def _run_models(
    plan: RepositoryPlan, options: BuildOptions, cache_root: Path, keys: Mapping[str, str], say: Progress
) -> list[ModelResult]:
    """Build every model, in parallel processes with ``jobs > 1`` (TensorRT builds run one at a time)."""
    results: dict[str, ModelResult] = {}
    parallel = [m for m in plan.models if m.target != "tensorrt"] if options.jobs > 1 else []
    serial = [m for m in plan.models if m not in parallel]
    if parallel:
        # spawn: torch and onnxruntime are not fork-safe once initialised.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=options.jobs, mp_context=context) as pool:
            futures = {}
            for model in parallel:
                say(model.name, f"building ({model.target})")
                futures[pool.submit(_build_one, model, options, cache_root, keys[model.name])] = model
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                results[result.name] = result
                say(result.name, _describe(result))
    for model in serial:
        say(model.name, f"building ({model.target})")
        result = _build_one(model, options, cache_root, keys[model.name])
        results[model.name] = result
        say(model.name, _describe(result))
    return [results[m.name] for m in plan.models]


def _describe(result: ModelResult) -> str:
    if result.status == "failed":
        return f"failed after {result.seconds:.1f} s: " + "; ".join(p.message for p in result.problems)
    return f"{result.status} in {result.seconds:.1f} s"
