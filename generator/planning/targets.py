"""Which target a model gets, and whether it can be built here: decided before anything is imported or exported.

:func:`plan_build` is what ``plan``, ``config`` and ``build`` share; :func:`preflight` refuses at once what cannot work
here. No build machinery, torch or onnx, so ``plan`` and ``config`` start fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from generator.dtypes import by_torch
from generator.errors import GenRepoError, Problem
from generator.manifest.entries import Manifest, ManifestModel, RefusedModel
from generator.manifest.loading import ManifestDocument, load_manifest
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan, RepositoryPlan, plan_repository


@dataclass(frozen=True, slots=True)
class TensorRTTarget:
    """What the tensorrt target builds with (found by :func:`preflight`; recorded in the lock file).

    ``engines`` maps each engine file of a model to the compute capability it is built for (None: built without a
    GPU, TensorRT-RTX on a CPU).
    """

    module: str
    version: str
    triton_plan: bool

    def lock_entry(self, engines: Mapping[str, str | None]) -> dict[str, Any]:
        """Return the lock file's ``tensorrt`` entry of one model."""
        return {
            "module": self.module,
            "version": self.version,
            "triton_plan": self.triton_plan,
            "engines": {name: {"compute_capability": cc} for name, cc in sorted(engines.items())},
        }


def tensorrt_available(module_name: str = "tensorrt") -> tuple[Any | None, str]:
    """Return the TensorRT module if it can build here, else None, with a sentence why.

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
    """``target: auto`` -> tensorrt where standard TensorRT and a GPU exist, else onnx; the reason goes to ``notes``.

    Only standard TensorRT counts: ``auto`` must give something Triton serves, and TensorRT-RTX engines are not
    Triton plans (``--target tensorrt --tensorrt-module tensorrt_rtx`` builds them on purpose). A model with a tensor
    TensorRT cannot carry (float64, int16, ...) gets onnx even there, with its own note (:func:`auto_target`).
    """
    cached: dict[str, str] = {}

    def resolve(model: ManifestModel) -> str:
        if "target" not in cached:
            trt, why = tensorrt_available("tensorrt")
            cached["target"] = "tensorrt" if trt is not None else "onnx"
            reason = f"TensorRT can build here ({why})" if trt is not None else f"no TensorRT plan possible: {why}"
            notes.append(f"target auto -> {cached['target']} ({reason})")
        target, note = auto_target(model, cached["target"] == "tensorrt")
        if note:
            notes.append(note)
        return target

    return resolve


def auto_target(model: ManifestModel, tensorrt_builds: bool) -> tuple[str, str | None]:
    """What ``target: auto`` gives ``model`` where TensorRT can (or cannot) build, and a note when it falls back.

    TensorRT carries none of some dtypes (:data:`generator.dtypes.DTYPES`): such a model would be refused as a
    tensorrt target, so ``auto`` gives it onnx, which Triton serves on the same GPU.
    """
    if not tensorrt_builds:
        return "onnx", None
    graph = model.graph
    for kind, meta in (("input", graph.input_spec), ("output", graph.output_spec)):
        for locator, spec in meta.tensor_data:
            entry = by_torch(spec.dtype)
            # Only where onnx serves it: a dtype no target serves (bfloat16) is refused by the plan, with why.
            if entry is not None and "tensorrt" not in entry.targets and "onnx" in entry.targets:
                return "onnx", (f"target auto -> onnx for model {model.name!r}: its {kind} {locator.display_path!r} is "
                                f"{spec.dtype}, which TensorRT does not carry")
    return "tensorrt", None


def _model_pointer(plan: RepositoryPlan, model: ModelPlan, *rest: str) -> str:
    """JSON pointer of a model's manifest entry."""
    return "/".join([model.manifest_pointer or f"/models/{plan.models.index(model)}", *rest])


def preflight(plan: RepositoryPlan, options: BuildOptions) -> TensorRTTarget | None:
    """Refuse, before anything is imported or exported, what cannot work; return the TensorRT in use (if any).

    Problems (all at once, exit code 2): a model without a source; a factory source without ``allow_code`` (the
    module is never imported); a tensorrt target when the TensorRT module cannot build here;
    ``compute_capabilities`` without a GPU of each capability (and with TensorRT-RTX, which cannot pick a GPU here).
    """
    file = str(plan.manifest_file)
    problems: list[Problem] = []
    for model in plan.models:
        if model.source is None:  # e.g. `gen-repo init` output, whose source lines are comments to fill in
            problems.append(Problem(file, _model_pointer(plan, model), f"model {model.name!r} has no source to build "
                                    "from: add `source: {onnx: model.onnx}`, `{pt2: model.pt2}` or `{factory: "
                                    "\"package.module:make\"}` (paths relative to the manifest)"))
        for key, code in (("source", model.source), ("samples", model.samples)):
            if code is not None and code.kind == "factory" and not options.allow_code:
                problems.append(
                    Problem(
                        file,
                        _model_pointer(plan, model, key, "factory"),
                        f"model {model.name!r}: {key} factory {code.factory!r} is user code and would be imported "
                        "and run; pass --allow-code to allow it (nothing was imported)",
                    )
                )
    trt_models = [m for m in plan.models if m.target == "tensorrt"]
    target: TensorRTTarget | None = None
    if trt_models:
        trt, why = tensorrt_available(options.tensorrt_module)
        if trt is None:
            hint = (
                "build on a machine with an NVIDIA GPU and TensorRT, or choose --target onnx (or python, which a CPU "
                "Triton serves); --tensorrt-module tensorrt_rtx exercises the engine build on a CPU"
            )
            for model in trt_models:
                problems.append(
                    Problem(
                        file,
                        _model_pointer(plan, model),
                        f"model {model.name!r} has target tensorrt, but {why}; {hint}",
                    )
                )
        else:
            target = TensorRTTarget(
                options.tensorrt_module, str(getattr(trt, "__version__", "?")), options.tensorrt_module == "tensorrt"
            )
            problems += _compute_capability_problems(plan, trt_models, options)
    if problems:
        raise GenRepoError(problems)
    return target


def _compute_capability_problems(
    plan: RepositoryPlan, models: Sequence[ModelPlan], options: BuildOptions
) -> list[Problem]:
    from generator.gpu import detect_gpus

    problems = []
    wanted = {m.name: sorted(m.config.cc_model_filenames) for m in models if m.config.cc_model_filenames}
    if not wanted:
        return []
    standard = options.tensorrt_module == "tensorrt"
    present = {g.compute_capability for g in detect_gpus() if g.compute_capability} if standard else set()
    for model in models:
        missing = [cc for cc in wanted.get(model.name, []) if cc not in present]
        if not missing:
            continue
        why = (f"no GPU of compute capability {', '.join(missing)} on this machine (found: "
               f"{', '.join(sorted(present)) or 'none'}); a plan runs only on the GPU kind it was built on"
               if standard else "one plan per compute capability needs standard TensorRT and a GPU of each "
               f"capability; {options.tensorrt_module} builds without choosing a GPU")
        problems.append(Problem(str(plan.manifest_file), _model_pointer(plan, model, "compute_capabilities"),
                                f"model {model.name!r}: {why}"))
    return problems


def engine_targets(model: ModelPlan) -> dict[str, str | None]:
    """Map each engine file to the compute capability it is built for.

    One per ``cc_model_filenames`` entry, else the default file for the GPU this process builds for (None without a
    GPU).
    """
    if model.config.cc_model_filenames:
        return {name: cc for cc, name in sorted(model.config.cc_model_filenames.items())}
    from generator.gpu import current_gpu, detect_gpus

    gpu = current_gpu(detect_gpus())
    return {model.config.default_model_filename or "model.plan": None if gpu is None else gpu.compute_capability}


# -- The plan for this machine ---------------------------------------------------------------------------------------
def plan_build(
    manifest_path: Path | ManifestDocument, options: BuildOptions, output_dir: Path | None = None, *,
    warmup_data: bool = True,
) -> tuple[RepositoryPlan, list[str]]:
    """Load (unless already read) and plan the manifest, resolving ``target: auto`` and ``--target`` for this machine.

    ``warmup_data``: warmup reads the data files the build writes (``False`` for configs alone). A model that cannot be
    planned is refused: without ``keep_going`` GenRepoError with every refused model's problems, with it
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
