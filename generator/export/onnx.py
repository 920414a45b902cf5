"""torch module -> self-contained ONNX file with the spec's dynamic axes, and the checks that the file is right.

Inputs and outputs are described by *tensor plans*: any objects with ``name``, ``path`` (semantic path), ``dtype``,
``min_shape``/``max_shape`` (full shapes as a request carries them) and, for inputs, ``opt_shape`` — exactly what
``generator.plan.TensorPlan`` carries, so the build passes its plans as they are. :func:`io_from_graph` makes them
from a bare GraphSpec (:class:`TensorIO`).

- Nested inputs: the exported graph takes flat tensors named by the plan, in plan order; a wrapper
  (:class:`FlatModule`) re-nests them by semantic path into forward's parameters (dicts for string keys, tuples for
  indices) and flattens forward's result by the output plans' paths.
- Axes whose min and max differ are dynamic (``torch.export.Dim.DYNAMIC`` bounded by min/max, so torch.export
  itself works out which axes are equal, e.g. a shared batch or sequence axis); the others are static.
- The exporter is ``torch.onnx.export(dynamo=True)``; when it fails (constraint violations included) or its graph
  does not have the plan's dynamic axes, the TorchScript-based exporter with ``dynamic_axes`` is tried, and the
  result keeps both reasons (``ExportResult.exporter``/``notes``). A module holding an ``nn.RNNBase`` with a
  dynamic non-batch axis goes the other way round (:func:`exporter_order`): torch.export fixes an RNN's sequence
  axis, so the dynamo attempt would only cost seconds before failing. The manifest's ``export.exporter`` may pin
  either exporter (:data:`EXPORTER_CHOICES`).
- torch 2.13's dynamo exporter writes weights to ``<file>.data`` by default; here the file is written
  self-contained (``external_data=False``, and re-saved inline if any initializer is still external) and
  :func:`onnx_io_problems` refuses a file that references external data.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from generator.atomic_write import replacing
from generator.bounded import read_bytes
from generator.compare import DEFAULT_TOLERANCES, CompareSettings, compare_output, tolerance_for
from generator.dtypes import by_onnx, normalize_dtype
from generator.errors import GenRepoError, Problem
from generator.naming import SemanticPath, format_tensor_name
from generator.values import ValueDomain, is_mask_like

if TYPE_CHECKING:
    import torch

    from generator.spec import ForwardSignature, GraphSpec

__all__ = [
    "CaseLike",
    "CaseResult",
    "DEFAULT_TOLERANCES",
    "EXPORTERS",
    "EXPORTER_CHOICES",
    "EXPORTER_NAMES",
    "ExportError",
    "ExportResult",
    "ForwardError",
    "FlatModule",
    "InputPlanLike",
    "OnnxCheckError",
    "TensorIO",
    "TensorPlanLike",
    "check_onnx",
    "constants_from_graph",
    "compare_with_onnxruntime",
    "copy_onnx_self_contained",
    "dynamic_axes_of",
    "example_inputs",
    "export_onnx",
    "exporter_order",
    "flat_module_for",
    "io_from_graph",
    "load_pt2",
    "normalize_dtype",
    "onnx_io_problems",
    "prepare_source_onnx",
    "tolerance_for",
]

_log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------------------------------------------------
# Plain data the stages exchange
# --------------------------------------------------------------------------------------------------------------------
class TensorPlanLike(Protocol):
    """What this module reads from a tensor plan (``generator.plan.TensorPlan`` satisfies it)."""

    @property
    def name(self) -> str: ...  # noqa: D102

    @property
    def path(self) -> SemanticPath: ...  # noqa: D102

    @property
    def dtype(self) -> Any: ...  # noqa: D102

    @property
    def min_shape(self) -> Sequence[int]: ...  # noqa: D102

    @property
    def max_shape(self) -> Sequence[int]: ...  # noqa: D102


class InputPlanLike(TensorPlanLike, Protocol):
    """An input plan also has the opt shape (the TensorRT profile's opt)."""

    @property
    def opt_shape(self) -> Sequence[int]: ...  # noqa: D102


class CaseLike(Protocol):
    """One reference case: inputs and torch's outputs by tensor name (``generator.reference.ReferenceCase``)."""

    @property
    def name(self) -> str: ...  # noqa: D102

    @property
    def inputs(self) -> Mapping[str, np.ndarray]: ...  # noqa: D102

    @property
    def outputs(self) -> Mapping[str, np.ndarray]: ...  # noqa: D102


@dataclass(frozen=True, slots=True)
class TensorIO:
    """A minimal tensor plan: name, semantic path, dtype and full min/opt/max shapes."""

    name: str
    path: SemanticPath
    dtype: str
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    batch_axis: int | None = None
    #: forward takes (returns) a 0-d tensor here; the graph's I/O carries it as [1] (``generator.plan.TensorPlan``).
    torch_scalar: bool = False


@dataclass(slots=True)
class ExportResult:
    """What :func:`export_onnx` produced: the file, which exporter made it, and anything worth telling the user."""

    path: Path
    exporter: str  # "dynamo" or "legacy"
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, list[int]]
    seconds: float
    notes: list[str] = field(default_factory=list)
    #: Masks whose synthetic fill had to be flipped for forward to run (by input name): which value keeps a position.
    masks: dict[str, ValueDomain] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """onnxruntime against torch for one case and output: the largest errors and whether they are in tolerance."""

    case: str
    output: str
    max_abs_error: float
    max_rel_error: float
    rtol: float
    atol: float
    ok: bool
    #: Elements left out: positions the padding mask marks.
    left_out: int = 0


class ExportError(GenRepoError):
    """torch -> ONNX export failed (with both exporters), or the model does not fit its plan."""


class ForwardError(ExportError):
    """The model's forward raises on the example inputs (before any exporter runs)."""


class OnnxCheckError(GenRepoError):
    """An ONNX file does not match its plan, or onnxruntime disagrees with torch."""


# --------------------------------------------------------------------------------------------------------------------
# dtypes (the table is generator.dtypes; tolerances and the comparison are generator.compare)
# --------------------------------------------------------------------------------------------------------------------
def _torch_dtype(dtype: Any) -> torch.dtype:
    import torch

    return getattr(torch, normalize_dtype(dtype))


# --------------------------------------------------------------------------------------------------------------------
# Plans from a GraphSpec
# --------------------------------------------------------------------------------------------------------------------
def io_from_graph(graph: GraphSpec, *, widen_batch_min: bool = True) -> tuple[list[TensorIO], list[TensorIO]]:
    """Input and output plans of a GraphSpec with AITune's tensor names.

    Inputs take min/opt/max from ``get_effective_input_shapes``; outputs min/max from the output spec (opt = max).
    With ``widen_batch_min`` a batch axis's minimum becomes its multiplier (batch size 1), as Triton's dynamic
    batcher may form any batch from 1 (see the config issue). For the build, pass ``generator.plan``'s plans instead.
    """
    inputs = []
    for locator, spec in graph.input_spec.tensor_data:
        lo, opt, hi = graph.get_effective_input_shapes(locator, spec)
        definition = graph.get_shape_definition(locator)
        if definition is not None:
            from generator.spec import BatchDim

            batch_axes = {i: 1 for i, d in enumerate(definition) if isinstance(d, BatchDim)}
        else:
            batch_axes = spec.get_batch_axis_multipliers()
        if widen_batch_min:
            for axis, multiplier in batch_axes.items():
                lo[axis] = min(lo[axis], multiplier)
        first = min(batch_axes, default=None)
        inputs.append(
            TensorIO(
                format_tensor_name(locator.path, "input"),
                locator.path,
                normalize_dtype(spec.dtype),
                tuple(lo),
                tuple(opt),
                tuple(hi),
                first,
            )
        )
    outputs = []
    for locator, spec in graph.output_spec.tensor_data:
        lo, hi = list(spec.min_shape), list(spec.max_shape)
        batch_axes = spec.get_batch_axis_multipliers()
        if widen_batch_min:
            for axis, multiplier in batch_axes.items():
                lo[axis] = min(lo[axis], multiplier)
        outputs.append(
            TensorIO(
                format_tensor_name(locator.path, "output"),
                locator.path,
                normalize_dtype(spec.dtype),
                tuple(lo),
                tuple(hi),
                tuple(hi),
                min(batch_axes, default=None),
            )
        )
    return inputs, outputs


def constants_from_graph(graph: GraphSpec) -> dict[SemanticPath, Any]:
    """Return the spec's non-tensor input leaves (``other_data``) by path, to pass as ``constants`` to the wrapper."""
    return {locator.path: value for locator, value in graph.input_spec.other_data}


def dynamic_axes_of(plan: TensorPlanLike) -> list[int]:
    """Axes whose size may vary (min != max): dynamic in the ONNX graph; every other axis is static."""
    return [axis for axis, (lo, hi) in enumerate(zip(plan.min_shape, plan.max_shape, strict=True)) if lo != hi]


# --------------------------------------------------------------------------------------------------------------------
# Flat wrapper
# --------------------------------------------------------------------------------------------------------------------
def _steps(path: SemanticPath) -> tuple[str | int, ...]:
    return path if isinstance(path, tuple) else (path,)


def _nest(leaves: Sequence[tuple[tuple[str | int, ...], Any]]) -> Any:
    """Build nested dicts (string keys) and tuples (int indices) from ``(steps, value)`` pairs."""
    if len(leaves) == 1 and not leaves[0][0]:
        return leaves[0][1]
    children: dict[str | int, list[tuple[tuple[str | int, ...], Any]]] = {}
    for steps, value in leaves:
        if not steps:
            raise ExportError("a tensor path is both a leaf and a container")
        children.setdefault(steps[0], []).append((steps[1:], value))
    keys = list(children)
    if all(isinstance(k, int) for k in keys):
        indices = sorted(keys)
        if indices != list(range(len(indices))):
            raise ExportError(f"sequence indices {indices} are not 0..{len(indices) - 1}")
        return tuple(_nest(children[i]) for i in indices)
    return {k: _nest(v) for k, v in children.items()}


def _bind_arguments(
    signature: inspect.Signature, arguments: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword arguments for forward from values keyed by parameter name."""
    ordered = {p: arguments[p] for p in signature.parameters if p in arguments}
    bound = inspect.BoundArguments(signature, ordered)
    return bound.args, bound.kwargs


def _forward_signature(module: Any, forward_signature: ForwardSignature | None) -> inspect.Signature:
    if forward_signature is not None:
        kinds = {kind.name: kind for kind in inspect._ParameterKind}
        return inspect.Signature(
            [
                inspect.Parameter(p.name, kinds[p.kind], default=None if p.has_default else inspect.Parameter.empty)
                for p in forward_signature.parameters
            ]
        )
    return inspect.signature(module.forward)


def _make_flat_module_class() -> type:
    import torch

    class _FlatModule(torch.nn.Module):
        """``forward(*inputs)`` with flat tensors in plan order -> tuple of output tensors in plan order."""

        def __init__(
            self,
            module: torch.nn.Module,
            input_paths: Sequence[SemanticPath],
            output_paths: Sequence[SemanticPath],
            signature: inspect.Signature,
            constants: Mapping[SemanticPath, Any] | None = None,
            scalars: tuple[Sequence[bool], Sequence[bool]] = ((), ()),
        ) -> None:
            super().__init__()
            self.module = module
            # 0-d tensors travel as [1] (Triton never carries a 0-d tensor): squeezed in, unsqueezed out.
            self.scalar_inputs = [bool(flag) for flag in scalars[0]]
            self.scalar_outputs = [bool(flag) for flag in scalars[1]]
            _set_eval(module)
            self.training = False
            self.input_paths = [_steps(p) for p in input_paths]
            self.output_paths = [_steps(p) for p in output_paths]
            self.signature = signature
            self.constants = [(_steps(p), v) for p, v in (constants or {}).items()]
            unknown = {s[0] for s in self.input_paths} - set(signature.parameters)
            if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
                raise ExportError(f"input paths start at {sorted(map(str, unknown))}, which forward does not take")

        def nest_inputs(self, flat: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            """Return forward's (args, kwargs) from flat tensors in plan order."""
            leaves = list(zip(self.input_paths, flat, strict=True)) + self.constants
            roots: dict[str | int, list[tuple[tuple[str | int, ...], Any]]] = {}
            for steps, value in leaves:
                roots.setdefault(steps[0], []).append((steps[1:], value))
            arguments = {str(k): _nest(v) for k, v in roots.items()}
            return _bind_arguments(self.signature, arguments)

        def flatten_outputs(self, result: Any) -> tuple[Any, ...]:
            """Return forward's result as a tuple in output-plan order."""
            out = []
            for steps in self.output_paths:
                value = result
                for depth, step in enumerate(steps):
                    container_ok = isinstance(value, Mapping) if isinstance(step, str) else (
                        isinstance(value, (tuple, list)) and step < len(value)
                    )
                    if not container_ok or (isinstance(value, Mapping) and step not in value):
                        shown = "output" + "".join(f"[{s!r}]" for s in steps[: depth + 1])
                        raise ExportError(f"forward's result has no {shown} (found {type(value).__name__} there)")
                    value = value[step]
                out.append(value)
            return tuple(out)

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            flat = [t.reshape(()) if i < len(self.scalar_inputs) and self.scalar_inputs[i] else t
                    for i, t in enumerate(inputs)]
            args, kwargs = self.nest_inputs(flat)
            result = self.flatten_outputs(self.module(*args, **kwargs))
            return tuple(
                value.reshape((1,)) if i < len(self.scalar_outputs) and self.scalar_outputs[i]
                and isinstance(value, torch.Tensor) else value
                for i, value in enumerate(result)
            )

    return _FlatModule


_FLAT_CLASS: type | None = None


def FlatModule(  # noqa: N802 (a class factory: torch is imported lazily)
    module: Any,
    input_paths: Sequence[SemanticPath],
    output_paths: Sequence[SemanticPath],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
    scalars: tuple[Sequence[bool], Sequence[bool]] = ((), ()),
) -> Any:
    """Wrap ``module`` as an ``nn.Module`` taking flat tensors (``input_paths`` order) and returning a tuple.

    ``forward_signature`` (the GraphSpec's) decides how parameters are passed; by default ``module.forward``'s own.
    ``constants`` are non-tensor leaves (the spec's ``other_data``) placed at their paths on every call.
    ``scalars`` flags, per input and per output, a 0-d tensor of forward that the wrapper carries as ``[1]``.
    """
    global _FLAT_CLASS
    if _FLAT_CLASS is None:
        _FLAT_CLASS = _make_flat_module_class()
    signature = _forward_signature(module, forward_signature)
    return _FLAT_CLASS(module, input_paths, output_paths, signature, constants, scalars)


def flat_module_for(
    module: Any,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
) -> Any:
    """:func:`FlatModule` for tensor plans: their paths, and their 0-d tensors carried as ``[1]``."""
    return FlatModule(
        module, [p.path for p in inputs], [p.path for p in outputs], forward_signature=forward_signature,
        constants=constants,
        scalars=([getattr(p, "torch_scalar", False) for p in inputs], [getattr(p, "torch_scalar", False)
                                                                       for p in outputs]),
    )


# --------------------------------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------------------------------
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

    ``module`` is an ``nn.Module`` (use :func:`load_pt2` for a ``.pt2`` archive). The graph's inputs are the plans'
    tensors, flat, in plan order; its outputs the output plans' tensors in order. ``example`` overrides the traced
    inputs (default :func:`example_inputs`). ``exporter`` is a key of :data:`EXPORTER_CHOICES`; its exporters are
    tried in :func:`exporter_order`'s order until one gives a file with the plans' I/O and dynamic axes; each failure
    before it is a note, and so is an exporter left untried. Raises :class:`ExportError` with every exporter's reason
    when none succeeds. Writes through a temporary file in the same folder, so a failed export leaves no file.
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
                        masks)


def exporter_order(module: Any, inputs: Sequence[InputPlanLike], choice: str = "auto") -> tuple[tuple[str, ...],
                                                                                                   str | None]:
    """The exporters to try for ``choice`` (a key of :data:`EXPORTER_CHOICES`), in order, and why dynamo is not first.

    ``auto`` tries the TorchScript-based exporter first (dynamo stays the fallback) when ``module`` holds an
    ``nn.RNNBase`` (LSTM, GRU, RNN) and an input has a dynamic axis that is not a batch axis: torch 2.13's
    torch.export specialises an RNN's sequence axis, so the dynamo attempt fails after seconds of tracing (a
    constraint violation, or a graph with the axis fixed). The reason is None when the order is the usual one.
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
        message = _ANSI.sub("", str(exc))
        if any(marker in message for marker in _CONSTRAINT_MARKERS):
            detail = next((ln.strip() for ln in message.splitlines() if "Dim" in ln or "dynamic" in ln), "")
            return (f"the model does not allow the plan's dynamic axes {dict(dynamic)} within their ranges; "
                    f"{detail or _short(exc)}")
        return f"failed ({_short(exc)})"
    problems = onnx_io_problems(staged, inputs, outputs, allow_external_data=True)
    if problems:
        return "its graph does not fit the plan: " + "; ".join(p.message for p in problems)
    return None


def _set_eval(module: Any) -> None:
    """Inference mode for export and references; a torch.export ``.module()`` refuses ``train()``/``eval()``."""
    with contextlib.suppress(NotImplementedError):
        module.eval()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: torch.export's words for "the model cannot be dynamic where the plan asks it to be" (the next exporter may be).
_CONSTRAINT_MARKERS = ("Constraints violated", "conflicts between user-specified", "specialized it to be a constant")


def _short(exc: BaseException, limit: int = 600) -> str:
    """Summarise an exporter error's root cause in a few lines (torch wraps it in pages of advice)."""
    root = exc
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    lines = [ln.strip() for ln in _ANSI.sub("", str(root)).splitlines() if ln.strip()]
    text = f"{type(root).__name__}: {' '.join(lines[:3])}".strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        raise ForwardError(f"the model's forward fails on the example inputs: {_short(exc)}") from exc
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

    The same model exported from two checkouts must give byte-identical files without absolute paths
    (tests/test_safety.py, determinism).
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
        raise ExportError([Problem(str(path), "", f"cannot load torch.export archive: {_short(exc)}")]) from exc
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


# --------------------------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------------------------
def _value_info_dims(value_info: Any) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def onnx_io_problems(
    onnx_model: Path | str | Any,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    allow_external_data: bool = False,
) -> list[Problem]:
    """Everything wrong with an ONNX graph's inputs/outputs against the plans (empty when it fits).

    Checks names and order, element types, ranks, that static axes have the plan's size and that dynamic axes
    (min != max) are not fixed, and (unless ``allow_external_data``) that no initializer lives in an external file.
    """
    import onnx

    if isinstance(onnx_model, (str, Path)):
        file = str(onnx_model)
        try:
            model = onnx.load_model_from_string(read_bytes(file, "onnx_bytes"))
        except Exception as exc:
            return [Problem(file, "", f"not a readable ONNX file: {_short(exc)}")]
    else:
        file, model = "<onnx>", onnx_model
    problems: list[Problem] = []
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    for kind, plans, values in (("input", inputs, graph_inputs), ("output", outputs, list(model.graph.output))):
        expected = [p.name for p in plans]
        actual = [v.name for v in values]
        if sorted(expected) != sorted(actual):
            missing = [n for n in expected if n not in actual]
            extra = [n for n in actual if n not in expected]
            text = f"graph {kind}s are {actual}, the plan expects {expected}"
            if missing:
                text += f"; missing {missing}"
            if extra:
                text += f"; unexpected {extra}"
            problems.append(Problem(file, f"/graph/{kind}", text))
        elif expected != actual:
            problems.append(
                Problem(file, f"/graph/{kind}", f"graph {kind}s are in order {actual}, the plan expects {expected}")
            )
        by_name = {v.name: (i, v) for i, v in enumerate(values)}
        for plan in plans:
            if plan.name not in by_name:
                continue
            index, value = by_name[plan.name]
            pointer = f"/graph/{kind}/{index}"
            elem = value.type.tensor_type.elem_type
            want = normalize_dtype(plan.dtype)
            found = by_onnx(elem)
            if found is None or found.numpy != want:
                # Named as numpy names it where torch has the type; else the bare element number (strings too).
                shown = found.numpy if found is not None and found.torch is not None else elem
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"{kind} {plan.name!r} has element type {shown}, the plan expects {want}",
                    )
                )
            dims = _value_info_dims(value)
            if len(dims) != len(plan.max_shape):
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"{kind} {plan.name!r} has rank {len(dims)} "
                        f"({dims}), the plan expects rank {len(plan.max_shape)}",
                    )
                )
                continue
            dynamic = set(dynamic_axes_of(plan))
            for axis, dim in enumerate(dims):
                if axis in dynamic and isinstance(dim, int):
                    problems.append(
                        Problem(
                            file,
                            pointer,
                            f"{kind} {plan.name!r} axis {axis} is fixed to {dim}, "
                            f"the plan lets it vary {plan.min_shape[axis]}..{plan.max_shape[axis]}",
                        )
                    )
                elif axis not in dynamic and isinstance(dim, int) and dim != plan.max_shape[axis]:
                    problems.append(
                        Problem(
                            file,
                            pointer,
                            f"{kind} {plan.name!r} axis {axis} has size {dim}, the plan says {plan.max_shape[axis]}",
                        )
                    )
    if not allow_external_data:
        external = [i.name for i in model.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL]
        if external:
            problems.append(
                Problem(
                    file,
                    "/graph/initializer",
                    f"{len(external)} initializer(s) keep their data in "
                    f"an external file (e.g. {external[0]!r}); the file must be self-contained",
                )
            )
    return problems


def _session(onnx_path: Path | str, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])


def compare_with_onnxruntime(
    onnx_path: Path | str,
    cases: Sequence[CaseLike],
    *,
    compare: CompareSettings | None = None,
    threads: int = 1,
    inputs: Sequence[TensorPlanLike] = (),
    outputs: Sequence[TensorPlanLike] = (),
) -> tuple[list[CaseResult], list[Problem]]:
    """Run every case in onnxruntime and compare with its stored (torch) outputs (:mod:`generator.compare`).

    An element passes when ``|ort - torch| <= atol + rtol * |torch|`` with the tolerances of ``compare`` (the
    manifest's) or the dtype table's; integers and bool must be equal; shapes and dtypes must match; positions a
    padding mask marks are left out. Cases hold request-side arrays (``generator.contract``); the plans in
    ``inputs``/``outputs`` (where given) turn them into the graph's model-side shapes and back. Returns per-output
    results and the problems (empty when all pass).
    """
    from generator.contract import to_model, to_request

    settings = compare or CompareSettings()
    in_plans = {p.name: p for p in inputs}
    out_plans = {p.name: p for p in outputs}
    file = str(onnx_path)
    try:
        session = _session(onnx_path, threads)
    except Exception as exc:
        return [], [Problem(file, "", f"onnxruntime cannot load the model: {_short(exc)}")]
    output_names = [o.name for o in session.get_outputs()]
    results: list[CaseResult] = []
    problems: list[Problem] = []
    for case in cases:
        pointer = f"/cases/{case.name}"
        feed = {n: to_model(in_plans[n], a) if n in in_plans else a for n, a in case.inputs.items()}
        try:
            got = dict(zip(output_names, session.run(output_names, feed), strict=True))
            got = {n: to_request(out_plans[n], a) if n in out_plans else a for n, a in got.items()}
        except Exception as exc:
            problems.append(Problem(file, pointer, f"onnxruntime fails on case {case.name!r}: {_short(exc)}"))
            continue
        for name, want in case.outputs.items():
            want = np.asarray(want)
            if name not in got:
                problems.append(Problem(file, pointer, f"case {case.name!r}: onnxruntime gives no output {name!r}"))
                continue
            have = np.asarray(got[name])
            if have.shape != want.shape or have.dtype != want.dtype:
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"case {case.name!r} output {name!r}: onnxruntime gives "
                        f"{have.dtype}{list(have.shape)}, torch {want.dtype}{list(want.shape)}",
                    )
                )
                continue
            compared, rtol, atol, problem = compare_output(settings, name, have, want, case.inputs)
            if compared is not None:
                results.append(CaseResult(case.name, name, compared.max_abs_error or 0.0,
                                          compared.max_rel_error or 0.0, rtol, atol, compared.ok, compared.left_out))
            if problem:
                problems.append(Problem(file, pointer, f"case {case.name!r} output {name!r}: onnxruntime differs "
                                        f"from torch: {problem}" if compared is not None else
                                        f"case {case.name!r} output {name!r}: {problem}"))
    return results, problems


def check_onnx(
    onnx_path: Path | str,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    cases: Sequence[CaseLike] = (),
    *,
    compare: CompareSettings | None = None,
    threads: int = 1,
) -> list[CaseResult]:
    """Check an ONNX file against its plans and torch's outputs; raise :class:`OnnxCheckError` with every problem.

    I/O first (:func:`onnx_io_problems`); then, if that passed, each case through onnxruntime
    (:func:`compare_with_onnxruntime`). Returns the comparison results.
    """
    problems = onnx_io_problems(onnx_path, inputs, outputs)
    if problems:
        raise OnnxCheckError(problems)
    results, problems = compare_with_onnxruntime(onnx_path, cases, compare=compare, threads=threads,
                                                 inputs=inputs, outputs=outputs)
    if problems:
        raise OnnxCheckError(problems)
    return results
