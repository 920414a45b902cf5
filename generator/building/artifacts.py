"""One model's artifacts: source -> ONNX -> reference data -> checks -> (TensorRT plans), in a work folder.

The only stage that runs user code, torch, onnxruntime or TensorRT, and the unit of parallelism and caching (local
workers or Ray tasks). A failure is a :class:`StageFailed` naming its stage.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.bounded import read_bytes
from generator.building.engines import build_engines
from generator.building.factories import import_factory
from generator.building.results import BuildEvent, ModelArtifacts, Progress
from generator.contracts.request_schema import write_contract_files
from generator.errors import GenRepoError, Problem, one_line
from generator.planning.model_files import contract_text
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan, OutputRange, with_output_ranges
from generator.planning.targets import TensorRTTarget
from generator.repository.cache import BuildCache
from generator.resources import resource_dir

__all__ = [
    "StageFailed",
    "build_model_artifacts",
    "data_dependent_axes",
    "derive_output_ranges",
    "locate_build_problems",
]


@contextlib.contextmanager
def about_source(where: Problem) -> Iterator[None]:
    """Report every failure inside as a problem of the model's source entry in the manifest.

    ``where`` names the manifest file and ``/models/<i>/source/<kind>``, what the user edits; the source file's location
    (and pointer inside it, e.g. ``/graph/input``) starts the message.
    """
    try:
        yield
    except GenRepoError as error:
        raise GenRepoError([
            problem if problem.file == where.file else
            replace(where, message=f"{problem.file}{' ' + problem.pointer if problem.pointer else ''}: "
                                   f"{problem.message}", severity=problem.severity)
            for problem in error.problems
        ]) from error
    except Exception as error:  # a library or the disk while reading the source: still the source's problem
        raise GenRepoError([replace(where, message=f"{type(error).__name__}: {error}")]) from error


class StageFailed(GenRepoError):  # noqa: N818 (a failed stage, like BuildFailed)
    """One stage of one model failed; every problem message starts with the stage (``export: ...``).

    ``raw`` is the exception when it was not a GenRepoError (user code, a library, the node's disk or memory).
    :func:`build_model_artifacts` raises it with every problem located by :func:`locate_build_problems`.
    """

    def __init__(self, stage: str, problems: list[Problem], raw: BaseException | None = None, *,
                 located: bool = False) -> None:
        self.stage = stage
        self.raw = raw
        super().__init__(problems if located else [
            replace(p, message=p.message if p.message.startswith(f"{stage}") else f"{stage}: {p.message}")
            for p in problems])


#: Where a problem has no file of its own (a string error, a plan-level check): located at the manifest entry.
_NO_FILE = ("", "<gen-repo>", "<plan>", "<onnx>")


def locate_build_problems(
    problems: Sequence[Problem],
    *,
    name: str,
    stage: str,
    manifest_file: Path | str,
    pointer: str,
    kind: str = "model",
    workdir: Path | None = None,
    kept: Mapping[str, str] | None = None,
) -> list[Problem]:
    """A failed build's problems as a user acts on them: each names the model (or ensemble) and the stage.

    Located in the manifest (``file: /models/<i>...``) unless already at a manifest line or a file the user owns; the
    message then names the entry. A path in ``workdir`` (deleted after the build) appears only where the file was kept
    for inspection (``kept``: work path -> kept path).
    """
    manifest_file = str(manifest_file)
    kept = dict(kept or {})
    work = str(workdir) if workdir is not None else None
    out = []
    for problem in problems:
        message, file, where = problem.message, problem.file, problem.pointer
        for prefix in (f"{kind} {name!r}, stage {stage}: ", f"{stage}: "):
            message = message.removeprefix(prefix)
        for old, new in kept.items():
            if old in message or file == old:
                message = message.replace(old, new) + f" ({Path(new).name} is kept for inspection: {new})"
        if work is not None:
            message = message.replace(work + os.sep, "").replace(work, "the build's work folder (deleted)")
        if file in _NO_FILE or (work is not None and file.startswith(work)):  # what the user edits: the entry
            file, where = manifest_file, pointer
        elif file != manifest_file:  # a spec or source file: keep its location, say which manifest entry it is
            message = f"(manifest {Path(manifest_file).name} {pointer}) {message}"
        elif not where.startswith(pointer):
            message = f"(manifest entry {pointer}) {message}"
        out.append(replace(problem, file=file, pointer=where, message=f"{kind} {name!r}, stage {stage}: {message}"))
    return out


def build_model_artifacts(
    model: ModelPlan,
    options: BuildOptions,
    workdir: Path,
    progress: Progress | None = None,
    tensorrt: TensorRTTarget | None = None,
    cache_root: Path | None = None,
) -> ModelArtifacts:
    """Produce every file of ``<model>/<version>/`` for one model in ``workdir``; raise :class:`StageFailed`.

    ``progress`` hears when each stage starts. ``cache_root`` holds the TensorRT timing cache and keeps the exported
    ONNX of a model that failed later (``<cache>/failed/<model>/model.onnx``). A failure names the model, its entry, the
    stage and any tensor (:func:`locate_build_problems`).
    """
    enter = _Stage(model.name, progress)
    try:
        return _build_stages(model, options, workdir, enter, tensorrt, cache_root)
    except Exception as error:  # a GenRepoError, or user code or a library: still this model's failure
        raw = None if isinstance(error, GenRepoError) else getattr(error, "raw", error)
        problems = error.problems if isinstance(error, GenRepoError) else [_failure_problem(model, enter, error)]
        located = locate_build_problems([*problems, *_made_up_problems(model, enter)], name=model.name,
                                        stage=enter.name, manifest_file=model.manifest_file or model.spec_file,
                                        pointer=model.manifest_pointer or model.spec_pointer, workdir=workdir,
                                        kept=_keep_for_inspection(model, workdir, cache_root))
        raise StageFailed(enter.name, located, raw, located=True) from error


class _Stage:
    """The stage a model's build is in (told to ``progress`` on entry), and whether it runs on made-up data."""

    def __init__(self, model_name: str, progress: Progress | None) -> None:
        self.model_name = model_name
        self.progress = progress
        self.name = "source"
        #: Whether the current stage runs the model on synthetic inputs (a failure then names them).
        self.made_up = False
        #: The value domains the synthetic data was drawn from (found in the graph), once known.
        self.domains: Mapping[str, Any] = {}

    def __call__(self, name: str, message: str, *, made_up: bool = False) -> None:
        self.name, self.made_up = name, made_up
        if self.progress is not None:
            self.progress(BuildEvent(self.model_name, name, message))


def _made_up_problems(model: ModelPlan, stage: _Stage) -> list[Problem]:
    """When the failed stage ran on synthetic inputs: one problem at the manifest's ``inputs``, naming each.

    Each made-up input with what it was given and the manifest line that gives it real values (a mask's line names
    the value that keeps a position, the other way round from what was tried).
    """
    from generator.dtypes import normalize_dtype
    from generator.planning.values import is_mask_like

    if not stage.made_up:
        return []
    parts = []
    for tensor in model.inputs:
        if tensor.values is not None:  # the manifest's own values: nothing made up
            continue
        key = tensor.access_path or tensor.name
        dtype = normalize_dtype(tensor.dtype)
        domain = stage.domains.get(tensor.name)
        if domain is not None and domain.mask_keep is not None:
            keep = str(domain.mask_keep).lower()
            other = "true" if keep == "false" else "false" if keep == "true" else str(1 - int(domain.mask_keep))
            parts.append(f"{tensor.name!r} was all {keep} ({domain.source}); if {other} keeps a position: "
                         f"`inputs: {{{key}: {{values: [{other}]}}}}`")
        elif dtype == "bool" or (is_mask_like(tensor.name) and dtype.startswith(("int", "uint"))):
            keep, other = ("true", "false") if dtype == "bool" else ("1", "0")
            parts.append(f"{tensor.name!r} was all {keep} (a guess: a mask that keeps every position); if {other} "
                         f"keeps a position: `inputs: {{{key}: {{values: [{other}]}}}}`")
        elif domain is not None:
            parts.append(f"{tensor.name!r} was drawn from {domain.describe()} ({domain.source}): "
                         f"`inputs: {{{key}: {{value_range: [LOW, HIGH]}}}}`")
        elif dtype.startswith(("int", "uint")):
            parts.append(f"{tensor.name!r} was drawn from 0..7 (a guess): `inputs: {{{key}: {{value_range: [LOW, "
                         "HIGH]}}`")
        else:
            parts.append(f"{tensor.name!r} was standard normal (a guess): `inputs: {{{key}: {{value_range: [LOW, "
                         "HIGH]}}`")
    if not parts:
        return []
    where = str(model.manifest_file or model.spec_file)
    return [Problem(where, model.manifest_pointer + "/inputs",
                    "this stage ran the model on made-up inputs; give each the values it really takes in the "
                    "manifest (or real calls under samples:): " + "; ".join(parts))]


def _keep_for_inspection(model: ModelPlan, workdir: Path, cache_root: Path | None) -> dict[str, str]:
    """Keep the exported ONNX of a failed build in the cache folder: work path -> kept path (empty: nothing kept).

    The work folder is deleted after the build; the next failure of the model replaces the kept copy.
    """
    onnx_path = workdir / "model.onnx"
    if cache_root is None or not onnx_path.is_file():
        return {}
    kept = BuildCache(cache_root).failed_path(model.name) / "model.onnx"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_path, kept)
    return {str(onnx_path): str(kept)}


def _failure_problem(model: ModelPlan, state: _Stage, error: BaseException) -> Problem:
    """The problem of an exception from user code or a library, with the reference case it happened on.

    For an index error, the likely causes are named and the problem is located where the range came from.
    """
    from generator.building.reference import ReferenceCaseError

    case = error.case if isinstance(error, ReferenceCaseError) else None
    cause = error.__cause__ if case is not None and error.__cause__ is not None else error
    detail = f" on reference case {case!r} ({error.shapes})" if isinstance(error, ReferenceCaseError) else ""
    message = f"failed{detail}: {type(cause).__name__}: {one_line(cause)}"
    entry = Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer or model.spec_pointer, "")
    if isinstance(cause, IndexError) or "index" in str(cause).lower():
        hint, where = _index_hint(model, state.domains, case)
        return replace(where or entry, message=message + hint)
    return replace(entry, message=message)


def _index_hint(model: ModelPlan, domains: Mapping[str, Any], case: str | None) -> tuple[str, Problem | None]:
    """For an index error: the integer inputs' value domains and the dynamic axes' ranges, each with its origin.

    Also returns the location to blame (an axis declared beyond the recording), if any.
    """
    from generator.planning.plan import axis_origin

    values = []
    for tensor in model.inputs:
        if not tensor.dtype.startswith(("torch.int", "torch.uint")):
            continue
        domain = tensor.values or domains.get(tensor.name)
        values.append(f"input {tensor.name!r} takes {domain.describe()} ({domain.source})" if domain is not None
                      else f"input {tensor.name!r} has no declared or found domain")
    recorded = {locator.path: spec for locator, spec in model.graph.input_spec.tensor_data}
    axes, blame = [], None
    for tensor in model.inputs:
        for axis, (low, high) in enumerate(zip(tensor.min_shape, tensor.max_shape, strict=True)):
            if low == high or axis == tensor.batch_axis:
                continue
            file, pointer, what = axis_origin(model, tensor, axis)
            spec = recorded.get(tensor.path)
            seen = spec.max_shape[axis] if spec is not None and axis < len(spec.max_shape) else None
            beyond = seen is not None and high > seen and what != "the recorded calls"
            axes.append(f"input {tensor.name!r} axis {axis} takes {low}..{high} ({what}, {Path(file).name} "
                        f"{pointer}{f'; recorded up to {seen}' if beyond else ''})")
            if beyond and blame is None:
                blame = Problem(file, pointer, "")
    on = f" in case {case!r}" if case else ""
    hint = f" -- an index was out of range{on}: an integer input may take values beyond a table it indexes"
    hint += f" ({'; '.join(values)}; set them in the manifest's inputs:)" if values else ""
    if axes:
        hint += (", or an axis may be longer than a table indexed by position (e.g. position embeddings, "
                 f"RoBERTa's with their offset): {'; '.join(axes)}; lower its max where it is declared")
    return hint, blame


@dataclass
class _Work:
    """What one model's stages hand on: the plan, the work folder, what each stage made."""

    model: ModelPlan
    options: BuildOptions
    workdir: Path
    enter: _Stage
    #: The manifest's ``/models/<i>/source/<kind>``: where a problem of the source is located.
    where: Problem
    notes: list[str] = field(default_factory=list)
    module: Any = None
    samples: list[Any] = field(default_factory=list)
    export: Any = None
    graph: Any = None
    cases: list[Any] = field(default_factory=list)
    onnx_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.onnx_path = self.workdir / "model.onnx"


def _build_stages(
    model: ModelPlan,
    options: BuildOptions,
    workdir: Path,
    enter: _Stage,
    tensorrt: TensorRTTarget | None,
    cache_root: Path | None,
) -> ModelArtifacts:
    """The stages in order; each tells ``enter`` its name first, so a failure names it."""
    if model.source is None:
        raise GenRepoError([Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/source",
                                    f"model {model.name!r} has no source to build from")])
    where = Problem(str(model.manifest_file or model.spec_file),
                    f"{model.manifest_pointer}/source/{model.source.kind}", "")
    work = _Work(model, options, workdir, enter, where)
    _load_source(work)
    _export(work)
    _reference(work)
    _check(work)
    ranges, range_notes = derive_output_ranges(work.model, work.cases, data_dependent_axes(work.graph))
    work.model = with_output_ranges(work.model, ranges)  # the files are written from the plan with these ranges
    work.notes.extend(range_notes)
    files = _write_files(work)
    if work.model.target == "tensorrt":
        enter("tensorrt", f"{options.tensorrt_module} engine build")
        files += build_engines(work.model, options, work.onnx_path, workdir, work.notes, tensorrt, cache_root)
        work.onnx_path.unlink()
    return ModelArtifacts(workdir, tuple(sorted(files)), tuple(work.notes), enter.domains, ranges)


# The stages import torch, onnx and onnxruntime where they run: importing this module stays light.
def _load_source(work: _Work) -> None:
    """The torch module of a ``pt2`` or ``factory`` source (none for ONNX), and the manifest's samples."""
    from generator.building.export.onnx import load_pt2

    source = work.model.source
    assert source is not None
    work.enter("source", f"{source.kind} source")
    if source.kind == "pt2":
        assert source.path is not None
        with about_source(work.where):
            work.module = load_pt2(source.path)
    elif source.kind == "factory":
        work.module = import_factory(str(source.factory), work.options, work.where)
    work.samples = _read_samples(work.model, work.options, work.notes)


def _export(work: _Work) -> None:
    """``model.onnx``: the ONNX source checked and copied, or the torch module exported."""
    from generator.building.export.exchange import ForwardError, constants_from_graph
    from generator.building.export.onnx import EXPORTER_NAMES, export_onnx, prepare_source_onnx

    model, source = work.model, work.model.source
    assert source is not None
    if source.kind == "onnx":
        assert source.path is not None
        with about_source(work.where):
            prepare_source_onnx(source.path, work.onnx_path, model.inputs, model.outputs)
        work.notes.append("ONNX source used as is (I/O checked against the spec)")
        return
    work.enter("export", "torch -> ONNX")
    _quiet_torch_onnx_logs()
    example = _export_example(work.samples, model.inputs) if work.module is not None else None
    try:
        export = export_onnx(
            work.module, work.onnx_path, model.inputs, model.outputs,
            forward_signature=model.graph.forward_signature, constants=constants_from_graph(model.graph),
            example=example, exporter=model.exporter,
        )
    except ForwardError:
        work.enter.made_up = example is None  # the forward raised on the made-up example
        raise
    work.export = export
    work.notes.extend(export.notes)
    work.notes.append(f"exported with {EXPORTER_NAMES[export.exporter]} in {export.seconds:.1f} s")
    work.notes.extend(f"export example: input {name!r} is {mask.source}" for name, mask in export.masks.items())


def _reference(work: _Work) -> None:
    """The value domains found in the graph, and the reference cases with the source's outputs."""
    work.enter("reference", "reference inputs and outputs at the min, opt and max shapes")
    import onnx

    work.graph = onnx.load_model_from_string(read_bytes(work.onnx_path, "onnx_bytes"))  # once: domains, sizes
    tried = work.export.masks if work.export is not None else {}  # masks the export's example had to flip
    work.enter.domains = _value_domains(work.model, work.graph, work.notes, tried)
    work.enter.made_up = True  # from here on the model runs on the cases' inputs, made up where no sample fits
    work.cases, case_notes = _reference_cases(work)
    work.notes.extend(case_notes)


def _reference_cases(work: _Work) -> tuple[list[Any], list[str]]:
    """Run the source (torch, else onnxruntime) on the min, opt, max and sample cases."""
    from generator.building.export.exchange import constants_from_graph
    from generator.building.reference import make_reference_cases

    model = work.model
    return make_reference_cases(
        work.module, model.inputs, model.outputs, model_name=model.name, max_batch_size=model.max_batch_size,
        forward_signature=model.graph.forward_signature, constants=constants_from_graph(model.graph),
        domains=work.enter.domains, samples=work.samples,
        run=None if work.module is not None else _onnxruntime_runner(model, work.onnx_path), profiles=model.profiles,
    )


def _check(work: _Work) -> None:
    """Check onnxruntime against torch on every case; a failure says whom to blame (:func:`_blame`)."""
    from generator.building.export.exchange import OnnxCheckError
    from generator.building.export.onnx_checks import check_onnx

    model = work.model
    if work.module is None or work.export is None:
        work.notes.append("reference outputs come from onnxruntime (the source is ONNX; there is no torch module)")
        return
    work.enter("check", "onnxruntime against torch")
    try:
        results = check_onnx(work.onnx_path, model.inputs, model.outputs, work.cases, compare=model.compare)
    except OnnxCheckError as error:
        raise OnnxCheckError([*error.problems, _blame(work, error.problems)]) from error
    padding = model.compare.padding
    if padding is not None:
        left_out = sum(r.left_out for r in results)
        work.notes.append(f"check: {left_out} output elements at positions {padding.mask!r} marks as padding (value "
                          f"{padding.value!r}) left out of the comparison")


def _blame(work: _Work, problems: Sequence[Problem]) -> Problem:
    """The model's fault if torch disagrees with itself on a second run, else the export's (never the data's)."""
    from generator.building.export.diagnosis import export_fault

    model = work.model
    return _unrepeatable(model, work.cases, _reference_cases(work)[0]) or export_fault(
        problems, work.cases, work.export, model.exporter, replace(work.where, pointer=model.manifest_pointer
                                                                   + "/export"))


def _write_files(work: _Work) -> list[str]:
    """The contract, the reference data, the warmup data and the target's model files; their relative paths."""
    from generator.contracts.reference_data import write_reference

    model, workdir = work.model, work.workdir
    files = [*write_contract_files(workdir, contract_text(model, work.enter.domains)), "gen_repo/reference.json",
             "gen_repo/reference.npz"]
    write_reference(workdir / "gen_repo", work.cases, model.compare)
    files += _write_warmup_data(model, work.cases, workdir)
    if model.target == "python":
        shutil.copyfile(resource_dir("templates") / "python" / "model.py", workdir / "model.py")
        files += ["model.onnx", "model.py"]
    elif model.target == "onnx":
        files.append("model.onnx")
    return files


def _unrepeatable(model: ModelPlan, cases: Sequence[Any], again: Sequence[Any]) -> Problem | None:
    """A problem when torch gave other outputs the second time it ran the same cases (None when it repeats itself).

    Such a module is not deterministic (dropout left on, sampling): no export can match it.
    """
    import numpy as np

    from generator.planning.compare import compare_output

    for first, second in zip(cases, again, strict=True):
        for name, want in first.outputs.items():
            problem = compare_output(model.compare, name, np.asarray(second.outputs[name]), np.asarray(want),
                                     first.inputs)[3]
            if problem:
                return Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/source",
                               f"the model is at fault, not the export: torch gives other outputs for the same inputs "
                               f"when run again (case {first.name!r} output {name!r}: {problem}); it is not "
                               "deterministic (dropout or sampling left on?), so onnxruntime cannot reproduce it")
    return None


def derive_output_ranges(
    model: ModelPlan, cases: Sequence[Any], data_dependent: Mapping[str, set[int]] | None = None
) -> tuple[dict[str, OutputRange], list[str]]:
    """Each output's shape range over the whole input range, and a note for each one wider than the recording.

    The reference cases run the model at every input range's min and max (and on every sample), so their outputs widen
    the recording's range. An axis in ``data_dependent`` (:func:`data_dependent_axes`) is ``-1`` in the config and
    unbounded (``0..``, max ``-1`` as :class:`generator.client.TensorContract` reads it): other data gives other sizes.
    """
    from generator.planning.contract import to_model

    symbolic = data_dependent or {}
    ranges: dict[str, OutputRange] = {}
    notes: list[str] = []
    for tensor in model.outputs:
        low, high = list(tensor.min_shape), list(tensor.max_shape)
        for case in cases:
            array = case.outputs.get(tensor.name)
            if array is None:
                continue
            shape = to_model(tensor, array).shape
            if len(shape) != len(low):
                continue  # a rank the plan does not expect: the check reports it
            low = [min(a, b) for a, b in zip(low, shape, strict=True)]
            high = [max(a, b) for a, b in zip(high, shape, strict=True)]
        first = 1 if tensor.batch_axis is not None else 0
        dims = list(tensor.dims)
        if tensor.reshape is None and not tensor.torch_scalar and len(dims) == len(low) - first:
            dims = [-1 if lo != hi or axis in symbolic.get(tensor.name, ()) else hi
                    for axis, (lo, hi) in enumerate(zip(low, high, strict=True)) if axis >= first]
        unbounded = sorted(a for a in symbolic.get(tensor.name, ()) if first <= a < len(low))
        for axis in unbounded:
            notes.append(f"output {tensor.name!r} axis {axis}: its size depends on the data (the reference cases gave "
                         f"{low[axis]}..{high[axis]}), so the contract says 0.. with no upper bound")
            low[axis], high[axis] = 0, -1
        ranges[tensor.name] = OutputRange(tuple(low), tuple(high), tuple(dims))
        if unbounded:
            continue
        if (tuple(low), tuple(high)) != (tensor.min_shape, tensor.max_shape):
            notes.append(f"output {tensor.name!r}: shapes {low}..{high} over the input range (the reference cases "
                         f"at min, opt and max and the samples); from the recording alone {list(tensor.min_shape)}.."
                         f"{list(tensor.max_shape)}")
        elif tuple(dims) != tensor.dims:
            notes.append(f"output {tensor.name!r}: dims {dims}: the exported graph leaves an axis the recording saw "
                         "at one size symbolic (its size depends on the data)")
    return ranges, notes


#: torch.export's name for a size only the data decides (an "unbacked" symbol: u0, u1, ...), as the dynamo exporter
#: writes it into an output's dim_param.
_DATA_DEPENDENT_SIZE = re.compile(r"\bu\d+\b")


def data_dependent_axes(onnx_model: Any) -> dict[str, set[int]]:
    """Per graph output of a loaded ONNX model, the axes whose size depends on the data (an unbacked dim_param).

    Other symbolic dims follow the input shapes (the reference cases at min and max bound them); the TorchScript
    exporter names even static axes symbolically, so only torch.export's data-dependent symbols count.
    """
    return {output.name: {axis for axis, dim in enumerate(output.type.tensor_type.shape.dim)
                          if _DATA_DEPENDENT_SIZE.search(dim.dim_param)} for output in onnx_model.graph.output}


def _write_warmup_data(model: ModelPlan, cases: Sequence[Any], workdir: Path) -> list[str]:
    """The files the config's warmup reads (``input_data_file``), in ``workdir/warmup/``; staging moves them.

    One request item of the opt reference case per input, raw and row-major as Triton reads it; Triton repeats
    it ``batch_size`` times. Nothing when the config warms up with zeros or random bytes (or not at all).
    """
    import numpy as np

    from generator.naming import WARMUP_FOLDER

    named = [(name, entry) for warmup in model.config.model_warmup for name, entry in sorted(warmup.inputs.items())
             if entry.input_data_file]
    if not named:
        return []
    opt = next(case for case in cases if case.name == "opt")
    folder = workdir / WARMUP_FOLDER
    written = []
    for name, entry in named:
        array = opt.inputs[name]
        item = array[0] if model.max_batch_size > 0 else array
        if list(item.shape) != list(entry.dims):
            raise GenRepoError([Problem(str(model.spec_file), model.spec_pointer,
                                        f"input {name!r}: the opt case's item has shape {list(item.shape)}, the "
                                        f"config's warmup dims are {list(entry.dims)}")])
        path = folder / entry.input_data_file
        path.parent.mkdir(parents=True, exist_ok=True)
        # Triton reads the bytes as they are: little-endian, C order (what the server's CPU and tensors use).
        path.write_bytes(np.ascontiguousarray(item, dtype=item.dtype.newbyteorder("<")).tobytes())
        written.append(path.relative_to(workdir).as_posix())
    return written


def _read_samples(model: ModelPlan, options: BuildOptions, notes: list[str]) -> list[Any]:
    """The manifest's samples that fit the plan (model-side), with a note for each call skipped."""
    from generator.building.samples import arrays_from_calls, read_samples, usable_samples

    source = model.samples
    if source is None:
        return []
    if source.kind == "factory":
        where = Problem(str(model.manifest_file or model.spec_file), model.manifest_pointer + "/samples/factory", "")
        calls, skipped = arrays_from_calls(
            import_factory(str(source.factory), options, where, what="samples factory"), model.graph, model.inputs)
        file = str(source.factory)
    else:
        assert source.path is not None
        calls, skipped = read_samples(source.path, source.kind, model.inputs)
        file = str(source.path)
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

    from generator.building.export.exchange import dynamic_axes_of

    for sample in samples:
        if all(sample.arrays[p.name].shape[axis] >= 2 or p.max_shape[axis] < 2
               for p in inputs for axis in dynamic_axes_of(p)):
            return [torch.from_numpy(sample.arrays[p.name].copy()) for p in inputs]
    return None


def _value_domains(model: ModelPlan, graph: Any, notes: list[str],
                   tried: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Value domains found in the graph (index inputs, masks) for inputs the manifest says nothing about.

    A manifest domain that exceeds the table its input indexes is refused: those values would fail in the model.
    A mask's polarity comes from the graph (:mod:`generator.building.export.onnx_masks`), else from the export's example
    (``tried``: masks that had to be flipped for forward to run).
    """
    import numpy as np

    from generator.building.export.onnx_indices import index_domains
    from generator.building.export.onnx_masks import mask_domains
    from generator.dtypes import normalize_dtype

    found = index_domains(graph, [t.name for t in model.inputs])
    undeclared = [t for t in model.inputs if t.values is None and t.name not in found]
    masks = {**(tried or {}), **mask_domains(graph, [(t.name, normalize_dtype(t.dtype)) for t in undeclared])}
    for tensor in undeclared:
        if tensor.name in masks:
            found[tensor.name] = masks[tensor.name]
            notes.append(f"input {tensor.name!r} is {masks[tensor.name].source}; synthetic data keeps every position "
                         f"(all {str(masks[tensor.name].mask_keep).lower()})")
    problems = []
    for tensor in model.inputs:
        domain = found.get(tensor.name)
        if domain is None or domain.mask_keep is not None:
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
