"""torch module -> self-contained ONNX file with the spec's dynamic axes; ONNX and ``.pt2`` sources.

The dynamo exporter first, the TorchScript one when it fails or loses a dynamic axis (RNNs the other way round), and
the result keeps both reasons; docs/manifest.md ("Export: one exporter, then the other") says when and why.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.atomic_write import replacing
from generator.bounded import read_bytes
from generator.building.export.exchange import (
    ANSI_ESCAPES,
    ExportError,
    ExportResult,
    ForwardError,
    InputPlanLike,
    OnnxCheckError,
    TensorPlanLike,
    dynamic_axes_of,
    short_error,
)
from generator.building.export.flat_module import flat_module_for
from generator.building.export.onnx_checks import onnx_io_problems
from generator.dtypes import normalize_dtype
from generator.errors import GenRepoError, Problem
from generator.naming import SemanticPath
from generator.planning.values import ValueDomain, is_mask_like

if TYPE_CHECKING:
    import torch

    from generator.specs.sample_metadata import ForwardSignature

__all__ = [
    "EXPORTER_CHOICES",
    "EXPORTER_NAMES",
    "example_inputs",
    "export_onnx",
    "exporter_order",
    "load_pt2",
    "normalize_dtype",
    "prepare_source_onnx",
]

_log = logging.getLogger(__name__)

#: torch.export's words for "the model cannot be dynamic where the plan asks it to be" (the next exporter may be).
_CONSTRAINT_MARKERS = ("Constraints violated", "conflicts between user-specified", "specialized it to be a constant")
#: The exporters :func:`export_onnx` tries, in order: torch.export-based, then the TorchScript-based one, which keeps
#: axes dynamic where torch.export specialises them (``nn.LSTM``/``nn.GRU`` sequence axes) and traces through
#: data-dependent Python control flow.
EXPORTERS = ("dynamo", "legacy")
#: How notes and errors name each exporter.
EXPORTER_NAMES = {"dynamo": "torch.onnx.export(dynamo=True)",
                  "legacy": "the TorchScript-based exporter torch.onnx.export(dynamo=False)"}
#: The manifest's ``export: {exporter: ...}`` values (schemas/manifest.schema.json lists the same) and the exporters
#: each allows: ``auto`` the chain (:func:`exporter_order` may put the TorchScript-based one first), the others one.
EXPORTER_CHOICES = {"auto": EXPORTERS, "dynamo": ("dynamo",), "torchscript": ("legacy",)}


# -- dtypes (the table is generator.dtypes; tolerances and the comparison are generator.planning.compare) ------------
def _torch_dtype(dtype: Any) -> torch.dtype:
    import torch

    return getattr(torch, normalize_dtype(dtype))


# -- Export ----------------------------------------------------------------------------------------------------------
def example_inputs(inputs: Sequence[InputPlanLike], seed: int = 0) -> list[torch.Tensor]:
    """Tensors to trace with: the opt shape, with dynamic axes of size 0/1 raised to 2 where the range allows.

    torch.export specialises sizes 0 and 1, so a dynamic axis must not be traced at 1. Integers are 0 (valid as
    an index into any embedding), bool True (an all-valid mask), floats standard normal; an input with a declared
    value domain (``values``) takes its smallest value.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for plan in inputs:
        shape = list(plan.opt_shape)
        for axis in dynamic_axes_of(plan):
            if shape[axis] < 2 <= plan.max_shape[axis]:
                shape[axis] = 2
        dtype = _torch_dtype(plan.dtype)
        domain = getattr(plan, "values", None)
        if domain is not None:
            low = min(domain.values) if domain.values is not None else domain.low
            tensors.append(torch.full(shape, low, dtype=dtype))
        elif dtype.is_floating_point:
            tensors.append(torch.randn(shape, generator=generator).to(dtype))
        elif dtype == torch.bool:
            tensors.append(torch.ones(shape, dtype=dtype))
        else:
            tensors.append(torch.zeros(shape, dtype=dtype))
    return tensors


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """Collect the exporters' prints and warnings instead of spraying them over a progress display."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield buffer


def export_onnx(
    module: Any,
    onnx_path: Path | str,
    inputs: Sequence[InputPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
    example: Sequence[Any] | None = None,
    opset_version: int | None = None,
    exporter: str = "auto",
) -> ExportResult:
    """Export ``module`` to a self-contained ONNX file at ``onnx_path`` with the plans' names and dynamic axes.

    ``module``: an ``nn.Module`` (:func:`load_pt2` loads a ``.pt2``). The graph takes the plans' tensors flat, in plan
    order, and returns the output plans' tensors. ``example``: the traced inputs (default :func:`example_inputs`).
    ``exporter``: a key of :data:`EXPORTER_CHOICES`, tried in :func:`exporter_order`'s order until one gives the plans'
    I/O; each failure is a note. :class:`ExportError` with every reason when none succeeds; a failed export leaves no
    file.
    """
    onnx_path = Path(onnx_path)
    started = time.monotonic()
    _check_plans(inputs, outputs)
    wrapper = flat_module_for(module, inputs, outputs, forward_signature=forward_signature, constants=constants)
    input_names = [p.name for p in inputs]
    output_names = [p.name for p in outputs]
    dynamic = {p.name: dynamic_axes_of(p) for p in inputs}
    masks: dict[str, ValueDomain] = {}
    if example is not None:
        tensors = list(example)
        _check_forward(wrapper, tensors, outputs)
    else:
        tensors, masks = _working_example(wrapper, inputs, outputs)

    chain, reordered = exporter_order(module, inputs, exporter)
    onnx_path.parent.mkdir(parents=True, exist_ok=True)
    failures: list[tuple[str, str]] = []
    workdir = Path(tempfile.mkdtemp(prefix=f".{onnx_path.name}.", dir=onnx_path.parent))
    try:
        # Export under the final file name (in a private folder): external data, if any, is then named after it.
        staged = workdir / onnx_path.name
        for used in chain:
            for leftover in workdir.iterdir():
                leftover.unlink()
            reason = _try_exporter(used, wrapper, tensors, staged, inputs, outputs, input_names, output_names,
                                   dynamic, opset_version)
            if reason is None:
                break
            failures.append((used, reason))
        else:
            pinned = "" if exporter == "auto" else f" (export.exporter is {exporter!r}; 'auto' tries both exporters)"
            raise ExportError([Problem(str(onnx_path), "", f"{EXPORTER_NAMES[e]}: {why}{pinned}")
                               for e, why in failures])
        _save_self_contained(staged, staged.with_name(staged.name + ".inline"), strip_stack_traces=True)
        os.replace(staged.with_name(staged.name + ".inline"), onnx_path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # Every exporter that failed before the one that worked, with its reason: the build notes keep them all.
    notes = [f"{EXPORTER_NAMES[e]}: {why}; tried the next exporter" for e, why in failures]
    for note in notes:
        _log.warning("%s: %s", onnx_path.name, note)
    if reordered is not None:
        # Account for the dynamo exporter too: skipped (the usual case), or tried after the other one failed.
        notes.insert(0, f"{EXPORTER_NAMES['dynamo']}: not tried: {reordered}" if used != "dynamo" else
                     f"{EXPORTER_NAMES['legacy']} tried first: {reordered}")
    return ExportResult(onnx_path, used, input_names, output_names, dynamic, time.monotonic() - started, notes,
                        masks, {name: tuple(t.shape) for name, t in zip(input_names, tensors, strict=True)},
                        tuple(failures))


def exporter_order(module: Any, inputs: Sequence[InputPlanLike], choice: str = "auto") -> tuple[tuple[str, ...],
                                                                                                   str | None]:
    """The exporters to try for ``choice`` (a key of :data:`EXPORTER_CHOICES`), in order, and why dynamo is not first.

    ``auto`` tries the TorchScript-based exporter first when ``module`` holds an ``nn.RNNBase`` and an input has a
    dynamic non-batch axis: torch.export specialises an RNN's sequence axis, so dynamo would fail after seconds of
    tracing. The reason is None for the usual order.
    """
    if choice not in EXPORTER_CHOICES:
        raise ValueError(f"exporter {choice!r} is not one of {sorted(EXPORTER_CHOICES)}")
    chain = EXPORTER_CHOICES[choice]
    if choice != "auto":
        return chain, None
    rnn = _rnn_layer(module)
    axis = _dynamic_non_batch_axis(inputs)
    if rnn is None or axis is None:
        return chain, None
    return ("legacy", "dynamo"), (f"the module holds nn.{rnn[1]} ({rnn[0]!r}) and input {axis[0]!r} axis {axis[1]} "
                                  "is dynamic; torch.export fixes an RNN's sequence axis")


def _rnn_layer(module: Any) -> tuple[str, str] | None:
    """The first ``nn.RNNBase`` submodule of ``module``: its name (``""`` for the module itself) and class name."""
    import torch

    named = getattr(module, "named_modules", None)
    if named is None:  # not an nn.Module
        return None
    return next(((name, type(layer).__name__) for name, layer in named() if isinstance(layer, torch.nn.RNNBase)),
                None)


def _dynamic_non_batch_axis(inputs: Sequence[InputPlanLike]) -> tuple[str, int] | None:
    """The first input axis whose size varies and that is no batch axis (a sequence axis, typically)."""
    for plan in inputs:
        batch = {getattr(plan, "batch_axis", None), *(a for a, _ in getattr(plan, "batch_axes", ()))}
        axis = next((a for a in dynamic_axes_of(plan) if a not in batch), None)
        if axis is not None:
            return plan.name, axis
    return None


def _guessed_masks(inputs: Sequence[InputPlanLike]) -> list[InputPlanLike]:
    """Inputs whose synthetic example is a guess about a mask: bool inputs and mask-like integers, no domain given."""
    return [p for p in inputs if getattr(p, "values", None) is None and
            (normalize_dtype(p.dtype) == "bool" or (is_mask_like(p.name) and
                                                    np.dtype(normalize_dtype(p.dtype)).kind in "iu"))]


def _working_example(
    wrapper: Any, inputs: Sequence[InputPlanLike], outputs: Sequence[TensorPlanLike]
) -> tuple[list[Any], dict[str, ValueDomain]]:
    """The synthetic example, tried both ways for its masks: all ones (true) first, then all zeros (false).

    A PyTorch key-padding mask is true where a position is padding: all true pads every position and forward raises
    (``nn.TransformerEncoder``). When only the flipped masks run, their domains say so (``mask_keep``).
    """
    import torch

    tensors = example_inputs(inputs)
    try:
        _check_forward(wrapper, tensors, outputs)
        return tensors, {}
    except ForwardError as error:
        first = error
        guessed = _guessed_masks(inputs)
        if not guessed:
            raise
        flip = {p.name for p in guessed}
        flipped = [torch.zeros_like(t) if p.name in flip else t for p, t in zip(inputs, tensors, strict=True)]
        names = ", ".join(repr(p.name) for p in guessed)
        try:
            _check_forward(wrapper, flipped, outputs)
        except ForwardError as second:
            raise ForwardError([
                *first.problems,
                *(replace(problem, message=f"with {names} all false (0) instead: {problem.message}")
                  for problem in second.problems),
            ]) from second
    why = first.problems[0].message.removeprefix("the model's forward fails on the example inputs: ")
    masks = {p.name: ValueDomain(0, 1, mask_keep=False if normalize_dtype(p.dtype) == "bool" else 0,
                                 source=f"a mask: forward fails with it all true ({why}) and runs with it all false")
             for p in guessed}
    return flipped, masks


def _try_exporter(
    exporter: str,
    wrapper: Any,
    tensors: Sequence[Any],
    staged: Path,
    inputs: Sequence[InputPlanLike],
    outputs: Sequence[TensorPlanLike],
    input_names: list[str],
    output_names: list[str],
    dynamic: Mapping[str, list[int]],
    opset_version: int | None,
) -> str | None:
    """Export with one exporter into ``staged``; None when the file has the plan's I/O, else why not.

    A failure of either exporter is a reason to try the next one, constraint violations included: torch.export
    specialises an axis (``nn.LSTM``'s sequence axis) where the TorchScript-based exporter keeps it dynamic. A file
    whose graph fixes an axis the plan lets vary fails here too, before any later stage.
    """
    try:
        if exporter == "dynamo":
            _export_dynamo(wrapper, tensors, staged, inputs, input_names, output_names, opset_version)
        else:
            _export_legacy(wrapper, tensors, staged, input_names, output_names, dynamic, opset_version)
    except GenRepoError:
        raise
    except Exception as exc:
        message = ANSI_ESCAPES.sub("", str(exc))
        if any(marker in message for marker in _CONSTRAINT_MARKERS):
            detail = next((ln.strip() for ln in message.splitlines() if "Dim" in ln or "dynamic" in ln), "")
            return (f"the model does not allow the plan's dynamic axes {dict(dynamic)} within their ranges; "
                    f"{detail or short_error(exc)}")
        return f"failed ({short_error(exc)})"
    problems = onnx_io_problems(staged, inputs, outputs, allow_external_data=True)
    if problems:
        return "its graph does not fit the plan: " + "; ".join(p.message for p in problems)
    return None


def _check_plans(inputs: Sequence[TensorPlanLike], outputs: Sequence[TensorPlanLike]) -> None:
    problems = []
    names = [p.name for p in (*inputs, *outputs)]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(Problem("<plan>", "", f"tensor name {name!r} is used more than once"))
    for kind, plans in (("input", inputs), ("output", outputs)):
        for index, plan in enumerate(plans):
            pointer = f"/{kind}s/{index}"
            if len(plan.min_shape) != len(plan.max_shape):
                problems.append(Problem("<plan>", pointer, f"{plan.name}: min_shape and max_shape ranks differ"))
            elif any(lo > hi or lo < 0 for lo, hi in zip(plan.min_shape, plan.max_shape, strict=True)):
                problems.append(Problem("<plan>", pointer, f"{plan.name}: min_shape is not <= max_shape"))
            try:
                normalize_dtype(plan.dtype)
            except GenRepoError as exc:
                problems.append(Problem("<plan>", pointer, f"{plan.name}: {exc.problems[0].message}"))
    if problems:
        raise ExportError(problems)


def _check_forward(wrapper: Any, tensors: Sequence[Any], outputs: Sequence[TensorPlanLike]) -> None:
    """Run forward once in eager mode: clear errors for wrong paths and non-tensor outputs before exporting."""
    import torch

    try:
        with torch.no_grad():
            result = wrapper(*tensors)
    except GenRepoError as exc:
        raise ExportError(exc.problems) from exc
    except Exception as exc:
        raise ForwardError(f"the model's forward fails on the example inputs: {short_error(exc)}") from exc
    problems = []
    for index, (plan, value) in enumerate(zip(outputs, result, strict=False)):
        if not isinstance(value, torch.Tensor):
            problems.append(
                Problem(
                    "<plan>",
                    f"/outputs/{index}",
                    f"{plan.name}: forward returns {type(value).__name__} there, not a tensor",
                )
            )
        elif value.dim() != len(plan.max_shape):
            problems.append(
                Problem(
                    "<plan>",
                    f"/outputs/{index}",
                    f"{plan.name}: forward returns rank {value.dim()}, the plan says {len(plan.max_shape)}",
                )
            )
    if problems:
        raise ExportError(problems)


def _export_dynamo(
    wrapper: Any,
    tensors: Sequence[Any],
    path: Path,
    inputs: Sequence[InputPlanLike],
    input_names: list[str],
    output_names: list[str],
    opset_version: int | None,
) -> None:
    import torch
    from torch.export import Dim

    shapes = []
    for plan in inputs:
        shapes.append(
            {
                axis: Dim.DYNAMIC(min=int(plan.min_shape[axis]), max=int(plan.max_shape[axis]))
                for axis in dynamic_axes_of(plan)
            }
            or None
        )
    with _quiet():
        torch.onnx.export(
            wrapper,
            tuple(tensors),
            str(path),
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes={"inputs": tuple(shapes)},
            dynamo=True,
            external_data=False,
            opset_version=opset_version,
            verbose=False,
        )


def _export_legacy(
    wrapper: Any,
    tensors: Sequence[Any],
    path: Path,
    input_names: list[str],
    output_names: list[str],
    dynamic: Mapping[str, list[int]],
    opset_version: int | None,
) -> None:
    import torch

    axes = {name: {a: f"{name}_dim{a}" for a in dims} for name, dims in dynamic.items() if dims}
    with _quiet():
        torch.onnx.export(
            wrapper,
            tuple(tensors),
            str(path),
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=axes,
            dynamo=False,
            opset_version=opset_version or 17,
        )


#: Node metadata torch's exporter fills with Python stack traces: absolute paths of the exporting machine.
_STACK_TRACE_KEYS = frozenset({"pkg.torch.onnx.stack_trace"})


def _strip_stack_traces(model: Any) -> None:
    """Drop stack-trace metadata from every node, in subgraphs and functions too.

    The same model exported from two checkouts must give byte-identical files without absolute paths.
    """
    graphs = [model.graph, *model.functions]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            kept = [p for p in node.metadata_props if p.key not in _STACK_TRACE_KEYS]
            if len(kept) != len(node.metadata_props):
                del node.metadata_props[:]
                node.metadata_props.extend(kept)
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else [])
                graphs.extend(attribute.graphs)


def _save_self_contained(source: Path, target: Path, *, strip_stack_traces: bool = False) -> None:
    """Write ``source`` (and any external data next to it) as one inline ONNX file ``target``."""
    import onnx

    model = onnx.load_model_from_string(read_bytes(source, "onnx_bytes"))
    onnx.load_external_data_for_model(model, str(source.parent))  # what onnx.load(load_external_data=True) does
    if strip_stack_traces:
        _strip_stack_traces(model)
    if model.ByteSize() >= 2**31 - 1:
        raise ExportError(f"{source.name}: the model is over 2 GB and cannot be saved as one ONNX file")
    onnx.save_model(model, str(target), save_as_external_data=False)


def copy_onnx_self_contained(source: Path | str, target: Path | str) -> Path:
    """Copy an ONNX file to ``target`` as one self-contained file (external data inlined); return ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as temporary:
        _save_self_contained(Path(source), temporary)
    return target


def load_pt2(path: Path | str) -> Any:
    """Return the ``nn.Module`` of a torch.export ``.pt2`` archive (``torch.export.load(path).module()``).

    The result takes forward's original (nested) arguments, so it exports like the eager module.
    """
    import torch

    try:
        program = torch.export.load(str(path))
    except Exception as exc:
        raise ExportError([Problem(str(path), "", f"cannot load torch.export archive: {short_error(exc)}")]) from exc
    return program.module()


def prepare_source_onnx(
    source: Path | str,
    target: Path | str,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
) -> Path:
    """Use an existing ONNX file as the model: check its I/O against the plans, then copy it self-contained."""
    problems = onnx_io_problems(source, inputs, outputs, allow_external_data=True)
    if problems:
        raise OnnxCheckError(problems)
    return copy_onnx_self_contained(source, target)
