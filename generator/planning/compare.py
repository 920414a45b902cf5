"""Outputs against their references: the tolerances, the positions left out, and the one element test.

The build's check, the ensemble's check and ``gen-repo smoke`` all judge an output here, with the manifest's
``compare:`` settings (docs/manifest.md) stored beside the reference data, so smoke applies what the build applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator.dtypes import normalize_dtype
from generator.errors import Problem, json_pointer

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_TOLERANCES",
    "CompareSettings",
    "Comparison",
    "Padding",
    "compare_arrays",
    "compare_output",
    "resolve_compare",
    "tolerance_for",
]

#: (rtol, atol) per numpy dtype name: onnxruntime/TensorRT against torch, a server against the references. Integers
#: and bool compare exactly. float32's atol allows for accumulation order.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One output against its reference: whether every compared element is in tolerance, and the errors.

    ``max_abs_error``: the largest finite ``|have - want|``; ``max_rel_error``: the largest ``|have - want| / |want|``
    where ``|want| > atol`` (never a division by zero). Both None for strings. ``compared``, ``left_out`` (padding) and
    ``mismatched`` count elements; ``worst`` is the element furthest out, as (index, have, want).
    """

    ok: bool
    max_abs_error: float | None
    max_rel_error: float | None
    compared: int = 0
    mismatched: int = 0
    left_out: int = 0
    worst: tuple[tuple[int, ...], float, float] | None = None

    def describe(self, rtol: float, atol: float) -> str:
        """A sentence for a failed comparison: how many elements, the worst one and the largest errors."""
        if self.max_abs_error is None:
            return "the strings differ"
        text = f"{self.mismatched} of {self.compared} compared elements out of tolerance"
        if self.worst is not None:
            index, have, want = self.worst
            text += f" (worst at {list(index)}: {have:.6g}, reference {want:.6g})"
        text += (f"; max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error or 0.0:.3g} where "
                 f"|reference| > atol; allowed rtol={rtol:g}, atol={atol:g}")
        if self.left_out:
            text += f"; {self.left_out} padded elements left out"
        return text

    def to_json(self) -> dict[str, Any]:
        """The JSON-able record (smoke details, build notes)."""
        entry: dict[str, Any] = {"ok": self.ok}
        if self.max_abs_error is not None:
            entry.update(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error, compared=self.compared,
                         mismatched=self.mismatched)
        if self.left_out:
            entry["left_out"] = self.left_out
        if self.worst is not None:
            entry["worst"] = {"index": list(self.worst[0]), "value": self.worst[1], "reference": self.worst[2]}
        return entry


def tolerance_for(
    dtype: Any,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of ``dtype``: the table's, (0, 0) for integers, bool and strings.

    ``overrides`` replace table entries by dtype name; ``rtol``/``atol`` replace the result for every dtype. A numpy
    dtype is looked up by its name; any other spelling (torch, Triton) through :func:`generator.dtypes.normalize_dtype`,
    which refuses a type torch has no tensors of.
    """
    import numpy as np  # here: the plan resolves settings without numpy

    name = dtype.name if isinstance(dtype, np.dtype) else normalize_dtype(dtype)
    default = {**DEFAULT_TOLERANCES, **(overrides or {})}.get(name, (0.0, 0.0))
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def compare_arrays(
    have: np.ndarray, want: np.ndarray, rtol: float, atol: float, compared: np.ndarray | None = None
) -> Comparison:
    """Compare two arrays of one shape element by element: ``|have - want| <= atol + rtol * |want|``.

    ``compared`` (a bool array broadcastable to the shape) selects the elements judged; the others are left out of
    the verdict and the errors. NaN matches NaN and an infinity the same infinity. Integers and bool under a zero
    tolerance must be equal (compared as integers: float64 would round values above 2**53); strings must be equal.
    """
    import numpy as np

    keep = None if compared is None else np.broadcast_to(np.asarray(compared, dtype=bool), want.shape)
    left_out = 0 if keep is None else int(keep.size - np.count_nonzero(keep))
    if have.dtype.kind in "OSU" or want.dtype.kind in "OSU":
        same = have == want if keep is None else (have == want) | ~keep
        return Comparison(bool(np.all(same)), None, None, int(want.size) - left_out, int(np.size(same) -
                          np.count_nonzero(same)), left_out)
    if have.size == 0:
        return Comparison(True, 0.0, 0.0)
    a, b = have.astype(np.float64), want.astype(np.float64)
    if have.dtype.kind in "biu" and want.dtype.kind in "biu" and rtol == 0 and atol == 0:
        close = have == want
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    judged = np.ones(want.shape, dtype=bool) if keep is None else keep
    bad = judged & ~close
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: left out of the errors, matched above
        diff = np.abs(a - b)
    finite = judged & np.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    scale = np.abs(b)
    relevant = finite & (scale > atol) & (scale > 0)
    max_rel = float((diff[relevant] / scale[relevant]).max()) if relevant.any() else 0.0
    worst = None
    mismatched = int(np.count_nonzero(bad))
    if mismatched:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            excess = np.where(bad, np.nan_to_num(diff / (atol + rtol * scale), nan=np.inf, posinf=np.inf), -1.0)
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), want.shape))
        worst = (index, float(a[index]), float(b[index]))
    return Comparison(mismatched == 0, max_abs, max_rel, int(np.count_nonzero(judged)), mismatched, left_out, worst)


# -- What a user tunes: the manifest's compare: ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Padding:
    """Positions an input marks as padding, left out of the comparison of ``outputs``.

    ``mask`` is the input tensor (request-side name); ``value`` the mask's value at padded positions (0 for Hugging
    Face's ``attention_mask``, True for a PyTorch ``key_padding_mask``). ``outputs`` None: every output whose leading
    axes have the mask's shape (the others are compared whole).
    """

    mask: str
    value: float | int | bool = 0
    outputs: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class CompareSettings:
    """How a model's outputs are compared: tolerances (model-wide and per output) and a padding mask."""

    rtol: float | None = None
    atol: float | None = None
    #: Output name -> (rtol, atol), either None where the model's (or the dtype table's) applies.
    outputs: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    padding: Padding | None = None

    def tolerance(self, output: str, dtype: Any, *, rtol: float | None = None,
                  atol: float | None = None) -> tuple[float, float]:
        """(rtol, atol) for ``output``.

        ``rtol``/``atol`` given here (smoke's options) win, then the output's own, the model's and the dtype table's.
        """
        own_rtol, own_atol = self.outputs.get(output, (None, None))
        return tolerance_for(
            dtype,
            rtol=next((v for v in (rtol, own_rtol, self.rtol) if v is not None), None),
            atol=next((v for v in (atol, own_atol, self.atol) if v is not None), None),
        )

    def compared_positions(
        self, output: str, shape: tuple[int, ...], inputs: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray | None, str]:
        """The elements of ``output`` to compare (None: all), and why padding cannot apply ("" when it can).

        The mask ``inputs[padding.mask]`` must be the leading axes of the output; its padded positions are left out
        across the trailing axes.
        """
        import numpy as np

        padding = self.padding
        if padding is None or (padding.outputs is not None and output not in padding.outputs):
            return None, ""
        mask = inputs.get(padding.mask)
        if mask is None:
            return None, f"the padding mask input {padding.mask!r} is not in the case"
        mask = np.asarray(mask)
        if tuple(shape[: mask.ndim]) != mask.shape:
            if padding.outputs is None:
                return None, ""  # not an output the mask's axes lead: compared whole
            return None, (f"output {output!r} has shape {list(shape)}, which does not start with the shape "
                          f"{list(mask.shape)} of the padding mask {padding.mask!r}")
        keep = mask != padding.value
        return keep.reshape(keep.shape + (1,) * (len(shape) - mask.ndim)), ""

    def to_json(self) -> dict[str, Any]:
        """The ``compare`` entry of ``reference.json`` (empty when nothing is set)."""
        entry: dict[str, Any] = {}
        if self.rtol is not None:
            entry["rtol"] = self.rtol
        if self.atol is not None:
            entry["atol"] = self.atol
        if self.outputs:
            entry["outputs"] = {name: {k: v for k, v in (("rtol", r), ("atol", a)) if v is not None}
                                for name, (r, a) in sorted(self.outputs.items())}
        if self.padding is not None:
            entry["padding"] = {"mask": self.padding.mask, "value": self.padding.value}
            if self.padding.outputs is not None:
                entry["padding"]["outputs"] = list(self.padding.outputs)
        return entry

    @classmethod
    def from_json(cls, entry: Mapping[str, Any] | None) -> CompareSettings:
        """Read :meth:`to_json`'s form back (a missing entry: nothing set)."""
        if not entry:
            return cls()
        outputs = {str(name): (_number(t.get("rtol")), _number(t.get("atol")))
                   for name, t in dict(entry.get("outputs") or {}).items()}
        raw = entry.get("padding")
        padding = None
        if raw:
            listed = raw.get("outputs")
            names = None if listed is None else tuple(map(str, listed))
            padding = Padding(str(raw["mask"]), raw.get("value", 0), names)
        return cls(_number(entry.get("rtol")), _number(entry.get("atol")), outputs, padding)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def resolve_compare(
    raw: Mapping[str, Any] | None,
    inputs: Iterable[tuple[str, Iterable[str]]],
    outputs: Iterable[tuple[str, Iterable[str]]],
    file: str,
    pointer: str,
) -> tuple[CompareSettings, list[Problem]]:
    """The manifest's ``compare:`` (at ``file`` ``pointer``) with tensors resolved to their Triton names.

    ``inputs``/``outputs`` are (name, keys the manifest may use: the name, the access path, AITune's default name).
    A key naming no tensor (or several) is a located problem.
    """
    if not raw:
        return CompareSettings(), []
    problems: list[Problem] = []

    def find(key: str, tensors: Sequence[tuple[str, set[str]]], kind: str, *where: str | int) -> str | None:
        found = sorted({name for name, keys in tensors if key in keys})
        if len(found) == 1:
            return found[0]
        known = ", ".join(name for name, _ in tensors)
        what = f"no {kind} {key!r}" if not found else f"{key!r} names more than one {kind}"
        problems.append(Problem(file, pointer + json_pointer(where), f"{what} in this graph ({kind}s: {known})"))
        return None

    ins = [(name, {name, *keys}) for name, keys in inputs]
    outs = [(name, {name, *keys}) for name, keys in outputs]
    per_output: dict[str, tuple[float | None, float | None]] = {}
    for key, body in dict(raw.get("outputs") or {}).items():
        name = find(str(key), outs, "output", "outputs", str(key))
        if name is not None:
            per_output[name] = (_number(body.get("rtol")), _number(body.get("atol")))
    padding = None
    raw_padding = raw.get("padding")
    if raw_padding:
        mask = find(str(raw_padding["mask"]), ins, "input", "padding", "mask")
        listed = raw_padding.get("outputs")
        names = None if listed is None else tuple(
            n for i, key in enumerate(listed) if (n := find(str(key), outs, "output", "padding", "outputs", i)))
        if mask is not None:
            padding = Padding(mask, raw_padding.get("value", 0), names)
    return CompareSettings(_number(raw.get("rtol")), _number(raw.get("atol")), per_output, padding), problems


def compare_output(
    settings: CompareSettings,
    output: str,
    have: np.ndarray,
    want: np.ndarray,
    inputs: Mapping[str, np.ndarray],
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[Comparison | None, float, float, str]:
    """One output of one case against its reference, with ``settings`` (and any ``rtol``/``atol`` given here).

    Returns the comparison (None when it could not be made), the tolerances applied and the problem in words ("" when
    the output matches): a shape or dtype mismatch, a padding mask that cannot apply, or the elements out of
    tolerance.
    """
    rtol_used, atol_used = settings.tolerance(output, want.dtype, rtol=rtol, atol=atol)
    if have.shape != want.shape:
        return None, rtol_used, atol_used, f"shape {list(have.shape)}, reference {list(want.shape)}"
    positions, why = settings.compared_positions(output, tuple(want.shape), inputs)
    if why:
        return None, rtol_used, atol_used, why
    comparison = compare_arrays(have, want, rtol_used, atol_used, positions)
    return comparison, rtol_used, atol_used, "" if comparison.ok else comparison.describe(rtol_used, atol_used)
