"""``gen-repo perf-config``'s files: perf_analyzer arguments and input data, and a Model Analyzer config.

Per model the perf_analyzer arguments, an ``--input-data`` JSON per shape (min, opt, max) and a Model Analyzer search
space that stays inside what the engine supports; deterministic bytes.
"""

from __future__ import annotations

import base64
import json
import math
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from generator.confinement import confined_file
from generator.dtypes import by_triton
from generator.errors import GenRepoError, Problem
from generator.planning.values import draw
from generator.serving.perf_models import (
    PerfModel,
    PerfTensor,
    Variant,
    batch_size_candidates,
    concurrency_range,
    concurrency_values,
    powers_of_two,
    variants,
)

__all__ = [
    "perf_analyzer_args",
    "perf_config_files",
    "relative_path",
    "write_perf_config_files",
]

#: Above this many elements per tensor the input data is written as base64 (perf_analyzer's ``b64``), not a list.
_B64_ELEMENTS = 1 << 15

#: Float data is rounded so that the JSON stays small and identical across numpy versions' repr.
_FLOAT_DECIMALS = 4


def _values(tensor: PerfTensor, shape: tuple[int, ...], rng: np.random.Generator) -> dict[str, Any]:
    """One input's data: :func:`generator.planning.values.draw` inside its domain (floats rounded, kept inside)."""
    count = int(math.prod(shape))
    if tensor.data_type == "TYPE_STRING":
        return {"content": [f"text-{i}" for i in range(count)], "shape": list(shape)}
    entry = by_triton(tensor.data_type)
    native = entry.native_numpy if entry is not None else None
    array: np.ndarray[Any, Any] = draw(rng, tensor.name, native or "float32", (count,), tensor.values)
    if array.dtype.kind == "f":
        array = np.round(array.astype(np.float64), _FLOAT_DECIMALS)
        domain = tensor.values
        if domain is not None and domain.values is None and domain.low is not None and domain.high is not None:
            array = np.clip(array, domain.low, domain.high)  # rounding must not step out of the range
    # base64 holds raw bytes: only for types numpy holds natively (not BF16, whose bytes numpy cannot write).
    if count > _B64_ELEMENTS and native is not None:
        raw = array.astype(native).tobytes()
        return {"b64": base64.b64encode(raw).decode("ascii"), "shape": list(shape)}
    return {"content": array.tolist(), "shape": list(shape)}


def _input_data_document(model: PerfModel, variant: Variant, seed: int = 0) -> dict[str, Any]:
    """perf_analyzer's ``--input-data`` JSON for one variant: one entry, each input's data at the variant's shape.

    Shapes leave the batch axis out (perf_analyzer adds it from ``-b``). Data is seeded: identical for identical
    input, and inside each input's value domain (:mod:`generator.planning.values`); floats rounded to 4 decimals.
    """
    rng = np.random.default_rng(seed)
    entry = {t.name: _values(t, variant.item_shapes[t.name], rng) for t in model.inputs}
    return {"data": [entry]}


def _shape_flag(name: str, shape: Sequence[int]) -> str:
    return f"{name}:{','.join(str(d) for d in shape)}"


def perf_analyzer_args(
    model: PerfModel,
    variant: Variant,
    input_data: str,
    *,
    url: str = "127.0.0.1:8001",
    protocol: str = "grpc",
    concurrency: tuple[int, int, int] | None = None,
) -> list[str]:
    """perf_analyzer's arguments for one model and variant (without the program name).

    ``--shape`` is given for every input with a dynamic dim (perf_analyzer refuses variable-size inputs without it),
    at the variant's shape without the batch axis; ``-b`` is the variant's batch size (1 without batching).
    """
    low, high, step = concurrency or concurrency_range(model, variant.batch_size)
    args = ["-m", model.name, "-x", str(model.version), "-b", str(variant.batch_size)]
    for tensor in model.inputs:
        if tensor.dynamic:
            args += ["--shape", _shape_flag(tensor.name, variant.item_shapes[tensor.name])]
    args += [
        "--input-data", input_data,
        "--concurrency-range", f"{low}:{high}:{step}",
        "-i", protocol,
        "-u", url,
    ]
    return args


def _max_batch_candidates(model: PerfModel) -> list[int]:
    """max_batch_size values to try: powers of two from the opt batch up, and the profile's max; never above it."""
    low = model.opt_batch_size
    return sorted({*(p for p in powers_of_two(model.max_batch_size) if p >= low), low, model.max_batch_size})


def _model_analyzer_config(
    models: Sequence[PerfModel],
    model_repository: str,
    input_data: Mapping[str, str],
    *,
    protocol: str = "grpc",
) -> dict[str, Any]:
    """A Model Analyzer ``profile`` config whose search space stays inside each model's profile.

    Automatic search is off: per model, ``max_batch_size`` candidates lie between the profile's opt and max batch,
    preferred sizes (the opt batch) never exceed the smallest candidate, client ``batch_sizes`` stay within the max
    batch and concurrency stops where requests only queue. ``perf_analyzer_flags`` give the opt shapes and input data.
    """
    profile: dict[str, Any] = {}
    for model in models:
        entry: dict[str, Any] = {}
        if not model.ensemble:
            instance_counts = sorted({1, 2, max(model.instance_count, 1)})
            mcp: dict[str, Any] = {
                "instance_group": [{"kind": model.instance_kind, "count": instance_counts}],
            }
            if model.batching:
                mcp["max_batch_size"] = _max_batch_candidates(model)
                delays = sorted({0, 100, 1000, model.max_queue_delay_us})
                mcp["dynamic_batching"] = {
                    "preferred_batch_size": [[model.opt_batch_size]],
                    "max_queue_delay_microseconds": delays,
                }
            entry["model_config_parameters"] = mcp
        entry["parameters"] = {
            "batch_sizes": batch_size_candidates(model),
            "concurrency": concurrency_values(model, 1),
        }
        opt = variants(model)[1]
        flags: dict[str, Any] = {"input-data": input_data[model.name]}
        shapes = [_shape_flag(t.name, opt.item_shapes[t.name]) for t in model.inputs if t.dynamic]
        if shapes:
            flags["shape"] = shapes
        entry["perf_analyzer_flags"] = flags
        profile[model.name] = entry
    return {
        "model_repository": model_repository,
        "client_protocol": protocol,
        "run_config_search_disable": True,
        "override_output_model_repository": True,
        "output_model_repository_path": "model_analyzer_output",
        "export_path": "model_analyzer_results",
        "profile_models": profile,
    }


def _json_text(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def perf_config_files(
    models: Sequence[PerfModel],
    model_repository: str,
    *,
    url: str = "127.0.0.1:8001",
    protocol: str = "grpc",
) -> dict[str, str]:
    """Every file ``gen-repo perf-config`` writes, as OUTDIR-relative POSIX path -> text (pure, deterministic).

    ``<model>/input_data.<variant>.json`` (perf_analyzer input data), ``perf_analyzer.json`` (per model and variant the
    batch size, shapes and arguments), ``perf_analyzer.sh`` (the same as commands, run from anywhere) and
    ``model_analyzer.yaml`` (paths relative to OUTDIR). ``model_repository`` is written as given.
    """
    import yaml

    files: dict[str, str] = {}
    commands: dict[str, Any] = {}
    lines = [
        "#!/usr/bin/env bash",
        "# perf_analyzer commands generated by gen-repo perf-config; shapes stay inside each model's profile.",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
    ]
    opt_data: dict[str, str] = {}
    for model in models:
        per_variant: dict[str, Any] = {}
        for variant in variants(model):
            data_file = f"{model.name}/input_data.{variant.name}.json"
            # Compact: input data can be large and nobody reads it by eye.
            document = _input_data_document(model, variant)
            files[data_file] = json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"
            args = perf_analyzer_args(model, variant, data_file, url=url, protocol=protocol)
            per_variant[variant.name] = {
                "args": args,
                "batch_size": variant.batch_size,
                "input_data": data_file,
                "request_shapes": {k: list(v) for k, v in variant.request_shapes.items()},
            }
            lines.append(f"# {model.name}: {variant.name} shapes, batch size {variant.batch_size}")
            lines.append(shlex.join(["perf_analyzer", *args]))
            if variant.name == "opt":
                opt_data[model.name] = data_file
        commands[model.name] = {
            "max_batch_size": model.max_batch_size,
            "version": model.version,
            "variants": per_variant,
        }
    files["perf_analyzer.json"] = _json_text({"format": "gen-repo-perf/1", "models": commands})
    files["perf_analyzer.sh"] = "\n".join(lines) + "\n"
    analyzer = _model_analyzer_config(models, model_repository, opt_data, protocol=protocol)
    files["model_analyzer.yaml"] = (
        "# Model Analyzer profile config generated by gen-repo perf-config: every batch size stays inside the\n"
        "# model's optimization profile. Run from this folder: model-analyzer profile -f model_analyzer.yaml\n"
        + yaml.safe_dump(analyzer, sort_keys=True, default_flow_style=None, width=120)
    )
    return files


def write_perf_config_files(out_dir: Path | str, files: Mapping[str, str]) -> list[Path]:
    """Write :func:`perf_config_files`' ``files`` under ``out_dir`` (folders made); the paths written, sorted.

    Every file's folder is checked to stay inside ``out_dir`` (:func:`generator.confinement.confined_path`) before
    anything is written: GenRepoError naming each that does not. Each file is written by
    :func:`generator.atomic_write.write_atomically`; ``perf_analyzer.sh`` is executable.
    """
    from generator.atomic_write import write_atomically

    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)

    def confined(relative: str) -> Path:
        try:  # the folders stay inside root; the file's own name is replaced by the rename (a link there included)
            return confined_file(root, relative)
        except ValueError as error:
            raise GenRepoError([Problem(str(root / relative), "", f"refused: {error}")]) from None

    problems = []
    for relative in files:
        try:
            confined(relative)
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    written = []
    for relative in sorted(files):
        confined(relative).parent.mkdir(parents=True, exist_ok=True)
        target = confined(relative)  # again: a folder swapped for a link meanwhile is refused, not written through
        written.append(write_atomically(target, files[relative],
                                        mode=0o755 if relative == "perf_analyzer.sh" else None))
    return written


def relative_path(target: Path | str, base: Path | str) -> str:
    """``target`` relative to ``base`` as a POSIX path (what artifacts carry instead of absolute paths)."""
    return Path(os.path.relpath(Path(target).absolute(), Path(base).absolute())).as_posix()
