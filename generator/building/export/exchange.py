"""What the export stages exchange: tensor plans, the results, the errors.

A tensor plan is anything shaped like ``generator.planning.plan.TensorPlan``, so the build passes its plans as they
are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from generator.errors import GenRepoError, one_line
from generator.naming import SemanticPath
from generator.planning.values import ValueDomain

if TYPE_CHECKING:
    from generator.specs.graphspec import GraphSpec

__all__ = [
    "ANSI_ESCAPES",
    "CaseLike",
    "CaseResult",
    "ExportError",
    "ExportResult",
    "ForwardError",
    "InputPlanLike",
    "OnnxCheckError",
    "TensorPlanLike",
    "constants_from_graph",
    "dynamic_axes_of",
    "short_error",
]


# -- Plain data the stages exchange ----------------------------------------------------------------------------------
class TensorPlanLike(Protocol):
    """What this module reads from a tensor plan (``generator.planning.plan.TensorPlan`` satisfies it)."""

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
    """One reference case: inputs and torch's outputs by tensor name (``reference_data.ReferenceCase``)."""

    @property
    def name(self) -> str: ...  # noqa: D102

    @property
    def inputs(self) -> Mapping[str, np.ndarray]: ...  # noqa: D102

    @property
    def outputs(self) -> Mapping[str, np.ndarray]: ...  # noqa: D102


@dataclass(slots=True)
class ExportResult:
    """What :func:`~.onnx.export_onnx` produced: the file, which exporter made it, and anything to tell the user."""

    path: Path
    exporter: str  # "dynamo" or "legacy"
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, list[int]]
    seconds: float
    notes: list[str] = field(default_factory=list)
    #: Masks whose synthetic fill had to be flipped for forward to run (by input name): which value keeps a position.
    masks: dict[str, ValueDomain] = field(default_factory=dict)
    #: The example the graph was traced from: each input's shape, by name.
    example_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: The exporters tried before ``exporter`` and why each failed, in order.
    failed: tuple[tuple[str, str], ...] = ()


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


def constants_from_graph(graph: GraphSpec) -> dict[SemanticPath, Any]:
    """Return the spec's non-tensor input leaves (``other_data``) by path, to pass as ``constants`` to the wrapper."""
    return {locator.path: value for locator, value in graph.input_spec.other_data}


def dynamic_axes_of(plan: TensorPlanLike) -> list[int]:
    """Axes whose size may vary (min != max): dynamic in the ONNX graph; every other axis is static."""
    return [axis for axis, (lo, hi) in enumerate(zip(plan.min_shape, plan.max_shape, strict=True)) if lo != hi]


# -- Error text ------------------------------------------------------------------------------------------------------
ANSI_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")
def short_error(exc: BaseException) -> str:
    """An exporter error's root cause on one line (torch wraps it in pages of advice, some of it coloured)."""
    root = exc
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    return one_line(f"{type(root).__name__}: {ANSI_ESCAPES.sub('', str(root))}")
