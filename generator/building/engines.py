"""A model's TensorRT engines: the plan's optimization profiles, one engine per compute capability.

Each engine of a ``cc_model_filenames`` config is built in a fresh process pinned to a GPU of its capability; the
timing cache lives in the build cache. The builder itself is :mod:`generator.building.export.tensorrt`.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from pathlib import Path

from generator.errors import GenRepoError, Problem
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan
from generator.planning.targets import TensorRTTarget, engine_targets, tensorrt_available
from generator.repository.cache import BuildCache

__all__ = ["build_engines"]


def build_engines(
    model: ModelPlan,
    options: BuildOptions,
    onnx_path: Path,
    workdir: Path,
    notes: list[str],
    tensorrt: TensorRTTarget | None,
    cache_root: Path | None,
) -> list[str]:
    """TensorRT engine(s) with the plan's optimization profiles (the manifest's, else one over the inputs' range).

    One engine per ``cc_model_filenames`` entry, each built in a fresh process pinned (``CUDA_VISIBLE_DEVICES``) to
    a GPU of that compute capability, one after the other; otherwise one engine for this process's GPU. The timing
    cache lives in the cache folder (one file per TensorRT version and GPU kind) and is reused by later builds.
    """
    from generator.building.export.tensorrt import engine_bytes, profile_shapes, tensorrt_build_options

    trt, why = tensorrt_available(options.tensorrt_module)
    if trt is None:
        raise GenRepoError([Problem(str(model.spec_file), model.spec_pointer, f"cannot build a TensorRT plan: {why}")])
    version = str(getattr(trt, "__version__", "?"))
    cache = BuildCache(cache_root) if cache_root is not None else None
    profiles = [profile_shapes(inputs) for inputs in model.engine_profiles()]
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
        if model.profiles:
            notes.append(f"{filename}: {len(summary['profiles'])} optimization profiles, "
                         + ", ".join(f"{k} {p.name!r}" for k, p in enumerate(model.profiles))
                         + ": the builder config holds each input's min/opt/max as planned (read back)")
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
