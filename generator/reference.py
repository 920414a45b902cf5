"""Reference data for the smoke test: inputs at the min, opt and max shapes and torch's outputs for them.

Written at build time into ``<model>/<version>/gen_repo/`` as ``reference.npz`` (one array per case and tensor,
``<case>/input/<tensor>`` and ``<case>/output/<tensor>``) and ``reference.json`` (the index), exactly as
``docs/repository-layout.md`` defines them. Reading them back (:func:`read_reference`) needs numpy only.

Determinism: inputs are drawn from a generator seeded by (model name, case, tensor name), so the same plans give
the same arrays; the ``.npz`` is written by :func:`write_npz` with sorted member names, a fixed timestamp and no
compression, because ``numpy.savez`` stamps every member with the current time (numpy 1.26 ``_savez`` opens each
member with ``ZipFile.open(name, "w")``, which uses ``time.localtime()``).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.errors import GenRepoError, Problem

if TYPE_CHECKING:
    from generator.export.onnx import InputPlanLike, TensorPlanLike
    from generator.naming import SemanticPath
    from generator.spec import ForwardSignature

__all__ = [
    "CASE_SHAPES",
    "DEFAULT_INT_RANGE",
    "REFERENCE_FORMAT",
    "ReferenceCase",
    "ReferenceError",
    "make_reference_cases",
    "read_reference",
    "reference_index",
    "reference_inputs",
    "read_npz",
    "torch_outputs",
    "write_npz",
    "write_reference",
]

REFERENCE_FORMAT = "gen-repo-reference/1"
#: Case name -> the plan attribute holding its (full) input shape.
CASE_SHAPES = {"min": "min_shape", "opt": "opt_shape", "max": "max_shape"}
#: Integer inputs (token ids, indices) are drawn from [0, 10) unless a value range is given: valid for any
#: vocabulary of at least 10 entries.
DEFAULT_INT_RANGE = (0, 10)
#: 1980-01-01 00:00:00, the earliest time a zip entry can carry.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class ReferenceError(GenRepoError):
    """Reference data could not be made, written or read."""


@dataclass(slots=True)
class ReferenceCase:
    """One reference case: named inputs and torch's outputs (both by tensor name, in plan order)."""

    name: str
    batch_size: int | None
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray] = field(default_factory=dict)

    def index_entry(self) -> dict[str, Any]:
        """Return this case's entry in ``reference.json``."""
        return {"name": self.name, "batch_size": self.batch_size, "inputs": list(self.inputs),
                "outputs": list(self.outputs)}


# --------------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------------
def _seed(*parts: str) -> int:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _draw(
    name: str, dtype: str, shape: Sequence[int], rng: np.random.Generator, value_range: tuple[float, float] | None
) -> np.ndarray:
    """Draw valid values for one tensor: normal floats, small non-negative ints, and all-valid masks."""
    shape = tuple(int(s) for s in shape)
    is_mask = "mask" in name.lower()
    if dtype == "bool":
        if is_mask and value_range is None:
            return np.ones(shape, dtype=np.bool_)  # every position valid: no all-masked rows (NaN in softmax)
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype in ("float16", "float32", "float64"):
        if value_range is None:
            return rng.standard_normal(size=shape, dtype=np.float32).astype(dtype)
        lo, hi = value_range
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype == "bfloat16":
        raise ReferenceError(f"input {name!r}: bfloat16 tensors have no numpy dtype; reference data needs one")
    if is_mask and value_range is None:
        return np.ones(shape, dtype=dtype)
    lo_i, hi_i = (int(v) for v in (value_range or DEFAULT_INT_RANGE))
    info = np.iinfo(dtype)
    lo_i, hi_i = max(lo_i, int(info.min)), min(hi_i, int(info.max) + 1)
    if lo_i >= hi_i:
        raise ReferenceError(f"input {name!r}: empty value range [{lo_i}, {hi_i}) for {dtype}")
    return rng.integers(lo_i, hi_i, size=shape, dtype=np.int64).astype(dtype)


def reference_inputs(
    inputs: Sequence[InputPlanLike],
    *,
    model_name: str,
    case: str,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic inputs for ``case`` ("min", "opt" or "max") at that shape of every input plan.

    ``value_ranges`` maps a tensor name to ``[low, high)`` for integers (uniform ``[low, high)`` for floats);
    integers default to :data:`DEFAULT_INT_RANGE`, floats to a standard normal. Integer or bool tensors whose name
    contains "mask" are all ones (valid masks) unless a range is given.
    """
    from generator.export.onnx import normalize_dtype

    if case not in CASE_SHAPES:
        raise ReferenceError(f"unknown reference case {case!r}; expected one of {list(CASE_SHAPES)}")
    arrays = {}
    for plan in inputs:
        shape = getattr(plan, CASE_SHAPES[case])
        rng = np.random.default_rng(_seed(model_name, case, plan.name))
        value_range = (value_ranges or {}).get(plan.name)
        arrays[plan.name] = _draw(plan.name, normalize_dtype(plan.dtype), shape, rng, value_range)
    return arrays


# --------------------------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------------------------
def torch_outputs(
    module: Any,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    arrays: Mapping[str, np.ndarray],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Run torch on flat input arrays (by input name); return its outputs by output name.

    The same wrapper as the export flattens and re-nests the tensors.

    ``module`` may already be a :func:`generator.export.onnx.FlatModule`, which is used as is.
    """
    import torch

    from generator.export.onnx import FlatModule

    flat = module if hasattr(module, "flatten_outputs") else FlatModule(
        module, [p.path for p in inputs], [p.path for p in outputs],
        forward_signature=forward_signature, constants=constants,
    )
    tensors = [torch.from_numpy(np.ascontiguousarray(arrays[p.name])) for p in inputs]
    with torch.no_grad():
        result = flat(*tensors)
    out = {}
    for plan, value in zip(outputs, result, strict=True):
        if not isinstance(value, torch.Tensor):
            raise ReferenceError(f"output {plan.name!r}: forward returns {type(value).__name__}, not a tensor")
        if value.dtype == torch.bfloat16:
            raise ReferenceError(f"output {plan.name!r}: bfloat16 tensors have no numpy dtype")
        out[plan.name] = value.detach().cpu().contiguous().numpy().copy()
    return out


def make_reference_cases(
    module: Any,
    inputs: Sequence[InputPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    model_name: str,
    max_batch_size: int,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> list[ReferenceCase]:
    """Make the min, opt and max cases with torch's outputs.

    With ``max_batch_size > 0`` every tensor's axis 0 is the batch axis (Triton's rule) and ``batch_size`` is the
    first input's size there (1, opt and max); with 0 the model does not batch and ``batch_size`` is None.
    """
    from generator.export.onnx import FlatModule

    flat = FlatModule(module, [p.path for p in inputs], [p.path for p in outputs],
                      forward_signature=forward_signature, constants=constants)
    cases = []
    for case in CASE_SHAPES:
        arrays = reference_inputs(inputs, model_name=model_name, case=case, value_ranges=value_ranges)
        batch_size = int(next(iter(arrays.values())).shape[0]) if max_batch_size > 0 and arrays else None
        cases.append(ReferenceCase(case, batch_size, arrays, torch_outputs(flat, inputs, outputs, arrays)))
    return cases


# --------------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------------
def write_npz(path: Path | str, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write an ``.npz`` that ``numpy.load`` reads, byte-identical for identical arrays.

    Members in sorted key order, fixed timestamp and attributes, no compression, no pickles.
    """
    path = Path(path)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # unix: the same bytes whichever OS wrote them
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())
    return path


def read_npz(path: Path | str) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` (pickles refused)."""
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def reference_index(cases: Sequence[ReferenceCase]) -> dict[str, Any]:
    """Return the ``reference.json`` document for ``cases``."""
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReferenceError(f"reference case names must be unique; repeated: {duplicates}")
    return {"format": REFERENCE_FORMAT, "cases": [c.index_entry() for c in cases]}


def write_reference(folder: Path | str, cases: Sequence[ReferenceCase]) -> tuple[Path, Path]:
    """Write ``reference.npz`` and ``reference.json`` into ``folder`` (the version's ``gen_repo/``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = reference_index(cases)
    arrays = {}
    for case in cases:
        for kind, tensors in (("input", case.inputs), ("output", case.outputs)):
            for name, array in tensors.items():
                arrays[f"{case.name}/{kind}/{name}"] = array
    npz = write_npz(folder / "reference.npz", arrays)
    index_path = folder / "reference.json"
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return npz, index_path


def read_reference(folder: Path | str) -> list[ReferenceCase]:
    """Read the cases back from ``folder`` (the version's ``gen_repo/``); clear errors for missing or bad files."""
    folder = Path(folder)
    index_path, npz_path = folder / "reference.json", folder / "reference.npz"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError) as exc:
        raise ReferenceError([Problem(str(index_path), "", f"cannot read reference index: {exc}")]) from exc
    if not isinstance(index, dict) or index.get("format") != REFERENCE_FORMAT:
        raise ReferenceError([Problem(str(index_path), "/format", f"expected {REFERENCE_FORMAT!r}")])
    try:
        arrays = read_npz(npz_path)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ReferenceError([Problem(str(npz_path), "", f"cannot read reference arrays: {exc}")]) from exc
    cases, problems = [], []
    for i, entry in enumerate(index.get("cases", [])):
        tensors: dict[str, dict[str, np.ndarray]] = {"input": {}, "output": {}}
        for kind, key in (("input", "inputs"), ("output", "outputs")):
            for name in entry.get(key, []):
                member = f"{entry['name']}/{kind}/{name}"
                if member not in arrays:
                    problems.append(Problem(str(npz_path), "", f"array {member!r} listed in case {i} is missing"))
                else:
                    tensors[kind][name] = arrays[member]
        cases.append(ReferenceCase(entry["name"], entry.get("batch_size"), tensors["input"], tensors["output"]))
    if problems:
        raise ReferenceError(problems)
    return cases
