"""Load-test configuration bounded by each model's profile, and a bounded load loop for ``gen-repo perf``.

Two jobs:

- :func:`perf_config_files`: per model, perf_analyzer arguments (``-m``, ``-b``, ``--shape NAME:dims`` for every
  input with a dynamic dim, ``--input-data FILE.json``, ``--concurrency-range``, ``-i``, ``-u``), an ``--input-data``
  JSON per shape variant (min, opt and max of the TensorRT optimization profile) in perf_analyzer's format
  (``{"data": [{"INPUT": {"content": [...], "shape": [...]}}]}``, shapes without the batch axis), and one Model
  Analyzer config whose search space never leaves what the engine supports: ``max_batch_size`` and preferred batch
  sizes at most the profile's max batch, client batch sizes likewise, concurrency ranges that can still fill a batch.
  The source of truth is the model's ``gen_repo/contract.json`` (or the plan, which writes it).
- :func:`run_load`: throughput and p50/p99 latency of one model at one concurrency, with a bounded concurrent loop of
  tritonclient requests (threads; bounded by request count AND time; loopback servers only). :func:`find_perf_analyzer`
  says whether a real perf_analyzer binary runs here (PyPI's ``perf-analyzer`` 0.1.0 is a placeholder without one);
  :func:`run_perf_analyzer` drives it with the generated arguments when it does. :func:`run_perf` is all of
  ``gen-repo perf``: every model at every concurrency, on a running or launched server, every call with a deadline.

Everything written is deterministic (sorted keys, seeded data, no absolute paths): identical input, identical bytes.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import importlib.metadata
import io
import ipaddress
import json
import math
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.bounded import read_text
from generator.confinement import confined_file, confined_path
from generator.dtypes import by_triton
from generator.errors import GenRepoError, Problem
from generator.naming import version_folder
from generator.triton.connection import Connection, check_reachable, is_transport_error, unreachable_error

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2

    from generator.client import ModelContract
    from generator.planning.plan import RepositoryPlan

__all__ = [
    "MAX_CONCURRENCY",
    "VARIANTS",
    "LoadResult",
    "PerfAnalyzerStatus",
    "PerfModel",
    "PerfReport",
    "PerfRun",
    "PerfTensor",
    "Variant",
    "batch_size_candidates",
    "check_loopback",
    "concurrency_range",
    "concurrency_values",
    "find_perf_analyzer",
    "input_data_document",
    "model_analyzer_config",
    "models_from_plan",
    "models_from_repository",
    "perf_analyzer_args",
    "perf_config_files",
    "relative_path",
    "run_load",
    "run_perf",
    "run_perf_analyzer",
    "variants",
]

#: Shape variants written per model, in this order.
VARIANTS = ("min", "opt", "max")
#: Upper bound of any generated concurrency (more only queues requests on one server).
MAX_CONCURRENCY = 64
#: Above this many elements per tensor the input data is written as base64 (perf_analyzer's ``b64``), not a list.
_B64_ELEMENTS = 1 << 15
#: Float data is rounded so that the JSON stays small and identical across numpy versions' repr.
_FLOAT_DECIMALS = 4


# --------------------------------------------------------------------------------------------------------------------
# The models, from contract.json or the plan
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PerfTensor:
    """One input: config dims and the full request shapes (batch axis first when the model batches)."""

    name: str
    data_type: str
    dims: tuple[int, ...]
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]

    @property
    def dynamic(self) -> bool:
        """Whether a config dim is ``-1`` (perf_analyzer then needs ``--shape``)."""
        return any(d < 0 for d in self.dims)


@dataclass(frozen=True, slots=True)
class PerfModel:
    """What the load configuration needs about one model."""

    name: str
    version: int
    max_batch_size: int
    inputs: tuple[PerfTensor, ...]
    opt_batch_size: int = 1
    #: Instances serving the model (sum of the config's instance_group counts; 1 when unknown).
    instance_count: int = 1
    #: ``KIND_GPU``/``KIND_CPU``... of the first instance group (Model Analyzer's search keeps the kind).
    instance_kind: str = "KIND_AUTO"
    dynamic_batching: bool = False
    max_queue_delay_us: int = 0
    #: A Triton ensemble: Triton refuses instance groups and batching options on it, so nothing of its config varies.
    ensemble: bool = False

    @property
    def batching(self) -> bool:
        """Whether requests carry a batch axis first (``max_batch_size > 0``)."""
        return self.max_batch_size > 0


@dataclass(frozen=True, slots=True)
class Variant:
    """One shape variant: the batch size a request carries and each input's shape without the batch axis."""

    name: str
    batch_size: int
    item_shapes: Mapping[str, tuple[int, ...]]
    #: Full request shapes (batch axis first when batching): what the profile must contain.
    request_shapes: Mapping[str, tuple[int, ...]]


def _model_from_contract(
    doc: Mapping[str, Any], config: model_config_pb2.ModelConfig | None, source: str
) -> PerfModel:
    """A PerfModel from a ``gen-repo-contract/1`` document and (optionally) the model's ModelConfig."""
    if doc.get("format") != "gen-repo-contract/1":
        raise GenRepoError([Problem(source, "/format", f"expected 'gen-repo-contract/1', got {doc.get('format')!r}")])
    inputs = []
    for k, t in enumerate(doc.get("inputs", [])):
        try:
            inputs.append(
                PerfTensor(
                    name=str(t["name"]),
                    data_type=str(t["data_type"]),
                    dims=tuple(int(d) for d in t["dims"]),
                    min_shape=tuple(int(d) for d in t["min_shape"]),
                    opt_shape=tuple(int(d) for d in t.get("opt_shape", t["max_shape"])),
                    max_shape=tuple(int(d) for d in t["max_shape"]),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise GenRepoError([Problem(source, f"/inputs/{k}", f"malformed tensor entry: {error}")]) from None
    max_batch_size = int(doc.get("max_batch_size", 0))
    opt_batch = inputs[0].opt_shape[0] if inputs and max_batch_size > 0 else 1
    count, kind, dyn, delay = 1, "KIND_AUTO", False, 0
    if config is not None:
        if config.instance_group:
            from tritonclient.grpc import model_config_pb2 as pb

            count = sum(max(int(g.count), 1) for g in config.instance_group)
            kind = pb.ModelInstanceGroup.Kind.Name(config.instance_group[0].kind)
        dyn = config.HasField("dynamic_batching")
        delay = int(config.dynamic_batching.max_queue_delay_microseconds) if dyn else 0
    elif str(doc.get("platform", "")) == "tensorrt_plan":
        kind = "KIND_GPU"
    return PerfModel(
        name=str(doc["model"]),
        version=int(doc.get("version", 1)),
        max_batch_size=max_batch_size,
        inputs=tuple(inputs),
        opt_batch_size=max(1, min(opt_batch, max_batch_size)) if max_batch_size > 0 else 1,
        instance_count=count,
        instance_kind=kind,
        dynamic_batching=dyn,
        max_queue_delay_us=delay,
        ensemble=str(doc.get("platform", "")) == "ensemble",
    )


def models_from_repository(repo_dir: Path | str, names: Sequence[str] = ()) -> list[PerfModel]:
    """Every model of a gen-repo repository (or those named), from ``<model>/<version>/gen_repo/contract.json``.

    The highest numeric version folder is used. A model folder without a contract is a problem: only the contract
    knows the profile's ranges (a config's ``-1`` dims do not bound anything). So is a contract whose ``model`` is not
    its folder's name (:func:`generator.planning.contract.contract_model_problem`), and any file reached through a
    symlink leading out of the repository: the names written under ``-o`` are the repository's folder names.
    """
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as pb

    from generator.planning.contract import contract_model_problem

    root = Path(repo_dir)
    if not root.is_dir():
        raise GenRepoError([Problem(str(root), "", "model repository folder does not exist")])
    folders = sorted(p for p in root.iterdir() if p.is_dir() and (p / "config.pbtxt").is_file())
    wanted = list(names)
    problems: list[Problem] = []
    missing = sorted(set(wanted) - {p.name for p in folders})
    for name in missing:
        problems.append(Problem(str(root), "", f"no model {name!r} (models: {', '.join(p.name for p in folders)})"))
    models: list[PerfModel] = []
    for folder in folders:
        if wanted and folder.name not in wanted:
            continue
        try:
            model_dir = confined_path(root, folder.name)
            versions = sorted(n for v in model_dir.iterdir()
                              if v.is_dir() and (n := version_folder(v.name)) is not None)
            config_path = confined_path(root, folder.name, "config.pbtxt")
            contract = confined_path(root, folder.name, str(versions[-1]), "gen_repo", "contract.json") \
                if versions else None
        except ValueError as error:
            problems.append(Problem(str(folder), "", str(error)))
            continue
        if contract is None or not contract.is_file():
            problems.append(
                Problem(str(folder), "", "no <version>/gen_repo/contract.json: only gen-repo's contract knows the "
                        "profile's shape ranges (rebuild the repository with gen-repo)")
            )
            continue
        try:
            config = text_format.Parse(read_text(config_path, "config_bytes"), pb.ModelConfig())
        except text_format.ParseError as error:
            problems.append(Problem(str(config_path), "", f"does not parse: {error}"))
            continue
        try:
            doc = json.loads(read_text(contract))
            if not isinstance(doc, dict):
                problems.append(Problem(str(contract), "", "not a JSON object: not a gen-repo contract"))
                continue
            if (why := contract_model_problem(doc, folder.name)) is not None:
                problems.append(Problem(str(contract), "/model", why))
                continue
            models.append(_model_from_contract(doc, config, str(contract)))
        except json.JSONDecodeError as error:
            problems.append(Problem(str(contract), "", f"not JSON: {error}"))
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    if not models:
        raise GenRepoError([Problem(str(root), "", "no models (no <model>/config.pbtxt folders)")])
    return models


def models_from_plan(plan: RepositoryPlan, names: Sequence[str] = ()) -> list[PerfModel]:
    """The models and ensembles of a plan (what the build would write as contract.json and config.pbtxt)."""
    from generator.planning.contract import PlannedModel, contract_from_plan

    planned: list[PlannedModel] = [*plan.models, *plan.ensembles]
    known = [m.name for m in planned]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise GenRepoError(
            [Problem(str(plan.manifest_file), "", f"no model {n!r} (models: {', '.join(known)})") for n in unknown]
        )
    return [
        _model_from_contract(contract_from_plan(m), m.config, str(plan.manifest_file))
        for m in planned
        if not names or m.name in names
    ]


# --------------------------------------------------------------------------------------------------------------------
# Shapes, batch sizes and concurrency, all inside the profile
# --------------------------------------------------------------------------------------------------------------------
def variants(model: PerfModel) -> list[Variant]:
    """The min, opt and max variants: each input at that profile shape, the batch axis split off when batching."""
    out = []
    for name in VARIANTS:
        full = {t.name: tuple(getattr(t, f"{name}_shape")) for t in model.inputs}
        if model.batching:
            batch = full[model.inputs[0].name][0] if model.inputs else 1
            items = {k: s[1:] for k, s in full.items()}
        else:
            batch, items = 1, dict(full)
        out.append(Variant(name, int(batch), items, full))
    return out


def _powers_of_two(high: int) -> list[int]:
    return [1 << k for k in range(max(high, 1).bit_length()) if 1 << k <= high]


def batch_size_candidates(model: PerfModel) -> list[int]:
    """Client batch sizes worth sweeping, never above ``max_batch_size``.

    Powers of two up to the profile's max batch, plus opt and max; ``[1]`` when the model does not batch.
    """
    if not model.batching:
        return [1]
    return sorted({*_powers_of_two(model.max_batch_size), model.opt_batch_size, model.max_batch_size})


def _max_concurrency(model: PerfModel, batch_size: int) -> int:
    """Concurrency at which more requests can only queue.

    Enough in flight to fill the largest batch the dynamic batcher may form from ``batch_size``-item requests, on
    every instance, twice over (one batch executing, one being gathered); at least 2, at most
    :data:`MAX_CONCURRENCY`.
    """
    fill = max(1, model.max_batch_size // max(batch_size, 1)) if model.batching else 1
    return max(2, min(MAX_CONCURRENCY, 2 * fill * max(model.instance_count, 1)))


def concurrency_range(model: PerfModel, batch_size: int) -> tuple[int, int, int]:
    """perf_analyzer's ``--concurrency-range start:end:step`` for requests of ``batch_size`` items."""
    high = _max_concurrency(model, batch_size)
    step = max(1, high // 8)
    return 1, high, step


def concurrency_values(model: PerfModel, batch_size: int = 1) -> list[int]:
    """Model Analyzer's concurrency list: powers of two up to the same bound as :func:`concurrency_range`."""
    high = _max_concurrency(model, batch_size)
    return sorted({*_powers_of_two(high), high})


# --------------------------------------------------------------------------------------------------------------------
# perf_analyzer input data and arguments
# --------------------------------------------------------------------------------------------------------------------
def _values(tensor: PerfTensor, shape: tuple[int, ...], rng: np.random.Generator) -> dict[str, Any]:
    count = int(math.prod(shape))
    if tensor.data_type == "TYPE_STRING":
        return {"content": [f"text-{i}" for i in range(count)], "shape": list(shape)}
    entry = by_triton(tensor.data_type)
    if tensor.data_type == "TYPE_BOOL":
        array: np.ndarray[Any, Any] = rng.integers(0, 2, size=count).astype(bool)
    elif entry is not None and entry.floating:
        array = np.round(rng.standard_normal(size=count), _FLOAT_DECIMALS)
    else:
        # Small non-negative integers: safe as token ids, indices and masks.
        array = rng.integers(0, 8, size=count)
    # base64 holds raw bytes: only for types numpy holds natively (not BF16, whose bytes numpy cannot write).
    native = entry.native_numpy if entry is not None else None
    if count > _B64_ELEMENTS and native is not None:
        raw = array.astype(native).tobytes()
        return {"b64": base64.b64encode(raw).decode("ascii"), "shape": list(shape)}
    return {"content": array.tolist(), "shape": list(shape)}


def input_data_document(model: PerfModel, variant: Variant, seed: int = 0) -> dict[str, Any]:
    """perf_analyzer's ``--input-data`` JSON for one variant: one entry, each input's data at the variant's shape.

    Shapes leave the batch axis out (perf_analyzer adds it from ``-b``). Data is seeded: identical for identical
    input. Integers are 0..7 and floats standard normal rounded to 4 decimals.
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


# --------------------------------------------------------------------------------------------------------------------
# Model Analyzer
# --------------------------------------------------------------------------------------------------------------------
def _max_batch_candidates(model: PerfModel) -> list[int]:
    """max_batch_size values to try: powers of two from the opt batch up, and the profile's max; never above it."""
    low = model.opt_batch_size
    return sorted({*(p for p in _powers_of_two(model.max_batch_size) if p >= low), low, model.max_batch_size})


def model_analyzer_config(
    models: Sequence[PerfModel],
    model_repository: str,
    input_data: Mapping[str, str],
    *,
    protocol: str = "grpc",
) -> dict[str, Any]:
    """A Model Analyzer ``profile`` config whose search space stays inside each model's profile.

    Automatic search is disabled (``run_config_search_disable``): each model gets a manual space in which
    ``max_batch_size`` candidates are at most the profile's max batch and at least its opt batch, preferred batch
    sizes (the opt batch) never exceed the smallest ``max_batch_size`` candidate, client ``batch_sizes`` are at most
    the profile's max batch, and the concurrency list stops where more requests can only queue. Inputs are described
    with ``perf_analyzer_flags`` (``shape`` for each dynamic input at the opt shape, ``input-data`` the opt JSON).
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


# --------------------------------------------------------------------------------------------------------------------
# All files of ``gen-repo perf-config``
# --------------------------------------------------------------------------------------------------------------------
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

    - ``<model>/input_data.<variant>.json``: perf_analyzer input data per variant;
    - ``perf_analyzer.json``: per model and variant the batch size, shapes and argument list;
    - ``perf_analyzer.sh``: the same as commands (run from anywhere: it changes into its own folder first);
    - ``model_analyzer.yaml``: the bounded Model Analyzer config (paths relative to OUTDIR: run it from there).

    ``model_repository`` is written as given (callers pass it relative to OUTDIR to keep artifacts path-free).
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
            document = input_data_document(model, variant)
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
    analyzer = model_analyzer_config(models, model_repository, opt_data, protocol=protocol)
    files["model_analyzer.yaml"] = (
        "# Model Analyzer profile config generated by gen-repo perf-config: every batch size stays inside the\n"
        "# model's optimization profile. Run from this folder: model-analyzer profile -f model_analyzer.yaml\n"
        + yaml.safe_dump(analyzer, sort_keys=True, default_flow_style=None, width=120)
    )
    return files


def write_perf_config_files(out_dir: Path | str, files: Mapping[str, str]) -> list[Path]:
    """Write :func:`perf_config_files`' ``files`` under ``out_dir`` (folders made); the paths written, sorted.

    Every file's folder is checked to stay inside ``out_dir`` first (:func:`generator.confinement.confined_path`: no
    absolute path, no ``..``, no symlink leading out), all of them before anything is written: GenRepoError naming
    each one that does not. Each file is written whole and renamed into place, so a symlink at its own name is
    replaced, never followed (:func:`generator.atomic_write.write_atomically`); ``perf_analyzer.sh`` is executable.
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


# --------------------------------------------------------------------------------------------------------------------
# perf_analyzer detection and use
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PerfAnalyzerStatus:
    """Whether a working perf_analyzer binary exists; ``reason`` says why not (or which one runs)."""

    path: str | None
    usable: bool
    reason: str


def _glibc() -> str:
    import platform

    lib, version = platform.libc_ver()
    return f"{lib} {version}" if lib else "an unknown C library"


def find_perf_analyzer(explicit: str | None = None) -> PerfAnalyzerStatus:
    """Find a perf_analyzer that actually runs (``--help`` exits 0 within 10 s).

    Detects PyPI's ``perf-analyzer`` 0.1.0, a placeholder package without a binary that pip installs where the real
    wheels (manylinux_2_38) do not fit this machine's glibc, and says so.
    """
    path = explicit or shutil.which("perf_analyzer")
    try:
        installed = importlib.metadata.version("perf-analyzer")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if path is None:
        if installed == "0.1.0":
            return PerfAnalyzerStatus(
                None, False,
                "the installed PyPI perf-analyzer is the 0.1.0 placeholder without a binary (the real wheels need "
                f"glibc 2.38; this machine has {_glibc()}); using the built-in load loop",
            )
        return PerfAnalyzerStatus(None, False, "no perf_analyzer on PATH; using the built-in load loop")
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return PerfAnalyzerStatus(path, False, f"{path} does not run ({error}); using the built-in load loop")
    # perf_analyzer --help exits 0 or 1 depending on version; a loader failure (missing glibc symbols) exits 127.
    text = (done.stdout + done.stderr).decode("utf-8", "replace")
    if "perf_analyzer" not in text.lower() and "concurrency" not in text.lower():
        first = text.strip().splitlines()[0] if text.strip() else f"exit code {done.returncode}"
        return PerfAnalyzerStatus(path, False, f"{path} does not run: {first}; using the built-in load loop")
    return PerfAnalyzerStatus(path, True, f"perf_analyzer at {path}")


def run_perf_analyzer(
    binary: str, args: Sequence[str], *, duration_s: float, timeout_s: float | None = None
) -> list[dict[str, float]]:
    """Run perf_analyzer with ``args`` and a measurement window of ``duration_s``; one row per concurrency.

    Rows carry ``concurrency``, ``throughput`` (inferences/s), ``p50_ms``, ``p99_ms`` from its ``-f`` CSV.
    """
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        report = Path(tmp) / "report.csv"
        command = [binary, *args, "--measurement-interval", str(int(duration_s * 1000)), "-f", str(report)]
        done = subprocess.run(
            command, capture_output=True, timeout=timeout_s or max(60.0, duration_s * 20), check=False
        )
        if done.returncode != 0 or not report.is_file():
            tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()[-5:]
            raise GenRepoError([Problem(binary, "", f"perf_analyzer failed ({done.returncode}): {' | '.join(tail)}")])
        rows = list(csv.DictReader(io.StringIO(read_text(report))))
    return [
        {
            "concurrency": float(row["Concurrency"]),
            "throughput": float(row["Inferences/Second"]),
            "p50_ms": float(row["p50 latency"]) / 1000.0,
            "p99_ms": float(row["p99 latency"]) / 1000.0,
        }
        for row in rows
    ]


# --------------------------------------------------------------------------------------------------------------------
# The built-in load loop
# --------------------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class LoadResult:
    """One measurement: a model at one concurrency, with latencies of the successful requests."""

    model: str
    concurrency: int
    batch_size: int
    shape: str
    engine: str
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    throughput: float = 0.0  # inferences (batch items) per second
    requests_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    first_error: str | None = None
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``gen-repo perf --json``), latencies summarised."""
        return {
            "model": self.model,
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            "shape": self.shape,
            "engine": self.engine,
            "requests": self.requests,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "throughput": round(self.throughput, 2),
            "requests_per_s": round(self.requests_per_s, 2),
            "p50_ms": None if self.p50_ms is None else round(self.p50_ms, 3),
            "p99_ms": None if self.p99_ms is None else round(self.p99_ms, 3),
            "mean_ms": None if self.mean_ms is None else round(self.mean_ms, 3),
            "first_error": self.first_error,
        }


def check_loopback(url: str) -> None:
    """Refuse a server that is not on this machine's loopback (the load loop must never hit a remote host)."""
    host = url.rsplit(":", 1)[0] if url.count(":") == 1 or url.startswith("[") else url
    host = host.strip("[]")
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise GenRepoError([Problem(url, "", "the load loop only targets loopback servers (127.0.0.1, ::1, localhost)")])


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def run_load(
    url: str,
    model: str,
    inputs: Mapping[str, np.ndarray[Any, Any]],
    *,
    concurrency: int = 1,
    duration_s: float = 5.0,
    max_requests: int = 100_000,
    protocol: str = "grpc",
    batch_size: int = 1,
    shape: str = "opt",
    request_timeout_s: float = 30.0,
    datatypes: Mapping[str, str] | None = None,
) -> LoadResult:
    """Send ``inputs`` to ``model`` from ``concurrency`` threads; report throughput and latency percentiles.

    The loop stops when ``duration_s`` passed or ``max_requests`` were sent, whichever comes first. Throughput counts
    batch items per second.

    Each thread has its own client and sends one warmup request before the clock starts. Errors are counted, not
    raised; the first one is kept for the report.
    """
    check_loopback(url)
    if concurrency < 1 or duration_s <= 0 or max_requests < 1:
        raise ValueError("concurrency and max_requests must be >= 1 and duration_s > 0")
    from generator.client import to_infer_inputs

    result = LoadResult(model, concurrency, batch_size, shape, f"loop-{protocol}")
    lock = threading.Lock()
    budget = [max_requests]
    start_barrier = threading.Barrier(concurrency + 1)
    stop = threading.Event()
    per_thread: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    error_count = [0]

    def take() -> bool:
        with lock:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            return True

    def worker(index: int) -> None:
        connection = Connection(url, protocol, request_timeout_s)
        infer_inputs = to_infer_inputs(inputs, protocol=protocol, datatypes=datatypes)
        try:
            try:
                connection.send(model, infer_inputs)
            except Exception as error:  # the warmup failure is the measurement's first error
                with lock:
                    errors.append(str(error).splitlines()[0] if str(error) else type(error).__name__)
            start_barrier.wait()
            latencies = per_thread[index]
            while not stop.is_set() and take():
                begin = time.perf_counter()
                try:
                    connection.send(model, infer_inputs)
                except Exception as error:  # tritonclient raises InferenceServerException and transport errors
                    with lock:
                        error_count[0] += 1
                        if not errors:
                            errors.append(str(error).splitlines()[0] if str(error) else type(error).__name__)
                    continue
                latencies.append((time.perf_counter() - begin) * 1000.0)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    try:
        start_barrier.wait(timeout=request_timeout_s + 30)
    except threading.BrokenBarrierError:
        stop.set()
        raise GenRepoError([Problem(url, "", f"load threads for {model!r} did not start")]) from None
    began = time.perf_counter()
    deadline = began + duration_s
    while time.perf_counter() < deadline and any(t.is_alive() for t in threads):
        time.sleep(min(0.05, max(0.0, deadline - time.perf_counter())))
    stop.set()
    for thread in threads:
        thread.join(timeout=request_timeout_s + 5)
    elapsed = time.perf_counter() - began
    latencies = sorted(v for values in per_thread for v in values)
    result.requests = len(latencies)
    result.errors = error_count[0]
    result.seconds = elapsed
    result.first_error = errors[0] if errors else None
    result.latencies_ms = latencies
    if latencies and elapsed > 0:
        result.requests_per_s = len(latencies) / elapsed
        result.throughput = result.requests_per_s * batch_size
        result.p50_ms = _percentile(latencies, 50)
        result.p99_ms = _percentile(latencies, 99)
        result.mean_ms = sum(latencies) / len(latencies)
    return result


def relative_path(target: Path | str, base: Path | str) -> str:
    """``target`` relative to ``base`` as a POSIX path (what artifacts carry instead of absolute paths)."""
    return Path(os.path.relpath(Path(target).absolute(), Path(base).absolute())).as_posix()


# --------------------------------------------------------------------------------------------------------------------
# ``gen-repo perf``: every model at every concurrency, on a running or launched server
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PerfRun:
    """What ``gen-repo perf`` measures, where and how.

    ``url`` names a running (loopback) server; without it ``launch`` starts one on ``repo`` for the run. With
    ``repo`` the contracts (exact shapes) come from its contract.json files, otherwise from the server.
    ``timeout_s`` bounds every network call; ``engine`` is ``auto``, ``perf_analyzer`` or ``loop``.
    """

    url: str | None = None
    launch: bool = False
    repo: str | None = None
    models: tuple[str, ...] = ()
    protocol: str = "grpc"
    duration_s: float = 5.0
    concurrency: tuple[int, ...] = (1, 8)
    shape: str = "opt"
    max_requests: int = 100_000
    timeout_s: float = 30.0
    engine: str = "auto"
    perf_analyzer: str | None = None


@dataclass(slots=True)
class PerfReport:
    """The measurements of one ``gen-repo perf`` run (:meth:`LoadResult.to_dict` rows) and which engine made them."""

    engine: str
    engine_note: str
    results: list[dict[str, Any]] = field(default_factory=list)

    def failed_models(self) -> list[str]:
        """Models that answered no request at any concurrency (exit 1)."""
        return sorted({r["model"] for r in self.results if r["requests"] == 0 and r["throughput"] == 0})

    def to_json(self) -> str:
        """``gen-repo perf --json``: ``{"results": [...], "engine_note": ...}``."""
        return json.dumps({"results": self.results, "engine_note": self.engine_note}, indent=2, sort_keys=True)


def run_perf(run: PerfRun, on_engine: Callable[[str], None] | None = None) -> PerfReport:
    """Measure every model of ``run`` at every concurrency; ``on_engine`` hears which engine runs, before it does.

    Raises :class:`~generator.triton.connection.ServerUnreachableError` when the server does not answer within
    ``run.timeout_s``, GenRepoError for a remote URL, an unusable perf_analyzer or a server without ready models.
    """
    if run.url is not None:
        check_loopback(run.url)
    status = find_perf_analyzer(run.perf_analyzer)
    use_pa = run.engine == "perf_analyzer" or (run.engine == "auto" and status.usable)
    if use_pa and not status.usable:
        raise GenRepoError([Problem(run.perf_analyzer or "perf_analyzer", "", status.reason)])
    if use_pa and run.repo is None:
        raise GenRepoError([Problem("perf_analyzer", "", "perf_analyzer needs --repo (its arguments come from the "
                                    "repository's contracts)")])
    engine = "perf_analyzer" if use_pa else "loop"
    if on_engine is not None:
        on_engine(f"{engine} ({status.reason})")
    report = PerfReport(engine, status.reason)
    with _perf_server(run) as target:
        check_reachable(target, run.protocol, run.timeout_s)
        for contract in _perf_contracts(target, run):
            if use_pa:
                assert status.path is not None and run.repo is not None
                report.results.extend(_perf_analyzer_rows(status.path, run.repo, contract.name, target, run))
            else:
                report.results.extend(_loop_rows(contract, target, run))
    return report


@contextlib.contextmanager
def _perf_server(run: PerfRun) -> Iterator[str]:
    """Yield the URL to load: the given one, or a launched server's (stopped afterwards)."""
    if not run.launch:
        assert run.url is not None
        yield run.url
        return
    from generator.serving.server import launch

    assert run.repo is not None
    with launch(run.repo) as server:
        yield server.grpc_url if run.protocol == "grpc" else server.http_url


def _perf_contracts(url: str, run: PerfRun) -> list[ModelContract]:
    """ModelContracts for the models to load: from the repository's contract.json files, else from the server."""
    from generator.client import ModelContract

    if run.repo is not None:
        names = [m.name for m in models_from_repository(run.repo, run.models)]
        return [ModelContract.from_repository(run.repo, name) for name in names]
    names = list(run.models)
    if not names:
        with Connection(url, run.protocol, run.timeout_s) as connection:
            try:
                index = connection.index()
            except Exception as exc:  # tritonclient raises InferenceServerException and transport errors alike
                if is_transport_error(exc):
                    raise unreachable_error(url, "get_model_repository_index", exc) from exc
                raise
        # gRPC's JSON leaves an empty state out: a model listed without one counts as ready, as Triton lists it.
        names = sorted({m["name"] for m in index if m["state"] in ("READY", "")})
    if not names:
        raise GenRepoError([Problem(url, "", "the server has no ready models")])
    return [ModelContract.from_server(url, name, protocol=run.protocol, timeout=run.timeout_s) for name in names]


def _loop_rows(contract: ModelContract, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """The built-in load loop at each concurrency: one :meth:`LoadResult.to_dict` row each."""
    inputs = contract.example_inputs(run.shape)
    batch = int(next(iter(inputs.values())).shape[0]) if contract.batching and inputs else 1
    datatypes = {t.name: t.datatype for t in contract.inputs}
    return [
        run_load(url, contract.name, inputs, concurrency=level, duration_s=run.duration_s,
                 max_requests=run.max_requests, protocol=run.protocol, batch_size=batch, shape=run.shape,
                 request_timeout_s=run.timeout_s, datatypes=datatypes).to_dict()
        for level in run.concurrency
    ]


def _perf_analyzer_rows(binary: str, repo: str, model: str, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """perf_analyzer at each concurrency with gen-repo's arguments: one :meth:`LoadResult.to_dict` row per level."""
    (perf_model,) = models_from_repository(repo, [model])
    variant = {v.name: v for v in variants(perf_model)}[run.shape]
    out = []
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        files = perf_config_files([perf_model], repo, url=url, protocol=run.protocol)
        data_file = Path(tmp) / f"{model}.{run.shape}.json"
        data_file.write_text(files[f"{model}/input_data.{run.shape}.json"], encoding="utf-8")
        for level in run.concurrency:
            args = perf_analyzer_args(perf_model, variant, str(data_file), url=url, protocol=run.protocol,
                                      concurrency=(level, level, 1))
            for row in run_perf_analyzer(binary, args, duration_s=run.duration_s):
                # perf_analyzer reports rates, not a request count (-1) or a mean.
                result = LoadResult(
                    model, int(row["concurrency"]), variant.batch_size, run.shape, "perf_analyzer", requests=-1,
                    seconds=run.duration_s, throughput=row["throughput"],
                    requests_per_s=row["throughput"] / max(variant.batch_size, 1),
                    p50_ms=row["p50_ms"], p99_ms=row["p99_ms"],
                )
                out.append(result.to_dict())
    return out
