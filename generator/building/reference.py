"""Reference data for the smoke test: inputs at the min, opt and max shapes (and real samples) with torch's outputs.

Written at build time into ``<model>/<version>/gen_repo/`` as ``reference.npz`` (one array per case and tensor,
``<case>/input/<tensor>`` and ``<case>/output/<tensor>``) and ``reference.json`` (the index), exactly as
``docs/repository-layout.md`` defines them. Every stored array is request-side (what a client sends and receives:
a per-item scalar is ``[b, 1]``, see :mod:`generator.planning.contract`), so smoke and ``check-request`` use them as
they are. Reading them back (:func:`read_reference`) needs numpy only.

Inputs: a real sample where one fits the case's shapes (:mod:`generator.building.samples`), otherwise valid synthetic
data (:func:`generator.planning.values.draw`: inside each input's value domain). Every usable sample is also a case of
its own, ``sample_<name>``.

Determinism: synthetic inputs are drawn from a generator seeded by (model name, case, tensor name), so the same
plans give the same arrays; the ``.npz`` is written by :func:`write_npz` with sorted member names, a fixed timestamp
and no compression, because ``numpy.savez`` stamps every member with the current time (numpy 1.26 ``_savez`` opens
each member with ``ZipFile.open(name, "w")``, which uses ``time.localtime()``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.bounded import read_text
from generator.contracts.array_files import open_array_file, read_arrays
from generator.dtypes import normalize_dtype
from generator.errors import GenRepoError, Problem
from generator.planning.compare import CompareSettings
from generator.planning.contract import to_request
from generator.planning.values import ValueDomain, draw

if TYPE_CHECKING:
    from generator.building.export.onnx import InputPlanLike, TensorPlanLike
    from generator.building.samples import Sample
    from generator.naming import SemanticPath
    from generator.specs.graphspec import ForwardSignature

__all__ = [
    "CASE_SHAPES",
    "REFERENCE_FORMAT",
    "ReferenceCase",
    "ReferenceCaseError",
    "ReferenceDataError",
    "load_requests",
    "make_reference_cases",
    "read_reference",
    "reference_index",
    "reference_inputs",
    "read_compare_settings",
    "read_npz",
    "reference_key",
    "request_members",
    "torch_outputs",
    "write_npz",
    "write_reference",
]

REFERENCE_FORMAT = "gen-repo-reference/1"
#: Case name -> the plan attribute holding its (full) input shape.
CASE_SHAPES = {"min": "min_shape", "opt": "opt_shape", "max": "max_shape"}
#: 1980-01-01 00:00:00, the earliest time a zip entry can carry.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class ReferenceDataError(GenRepoError):
    """Reference data could not be made, written or read."""


class ReferenceCaseError(Exception):
    """The model failed on one reference case (``case``, with its input ``shapes`` in words); the cause is chained."""

    def __init__(self, case: str, shapes: str, cause: BaseException) -> None:
        self.case = case
        self.shapes = shapes
        super().__init__(f"case {case!r} ({shapes}): {type(cause).__name__}: {cause}")


@dataclass(slots=True)
class ReferenceCase:
    """One reference case: named inputs and torch's outputs (both by tensor name, in plan order, request-side)."""

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


def reference_inputs(
    inputs: Sequence[InputPlanLike],
    *,
    model_name: str,
    case: str,
    domains: Mapping[str, ValueDomain] | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic model-side inputs for ``case`` ("min", "opt" or "max") at that shape of every input plan.

    Values come from each input's domain: the plan's own (``values``, the manifest's) or ``domains`` (found in the
    graph); see :func:`generator.planning.values.draw` for inputs without one.
    """
    if case not in CASE_SHAPES:
        raise ReferenceDataError(f"unknown reference case {case!r}; expected one of {list(CASE_SHAPES)}")
    arrays = {}
    for plan in inputs:
        shape = getattr(plan, CASE_SHAPES[case])
        rng = np.random.default_rng(_seed(model_name, case, plan.name))
        domain = getattr(plan, "values", None) or (domains or {}).get(plan.name)
        dtype = normalize_dtype(plan.dtype)
        if dtype == "bfloat16":
            raise ReferenceDataError(f"input {plan.name!r}: bfloat16 tensors have no numpy dtype; reference data "
                                     "needs one")
        arrays[plan.name] = draw(rng, plan.name, dtype, shape, domain)
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
    """Run torch on flat model-side input arrays (by input name); return its model-side outputs by output name.

    The same wrapper as the export flattens and re-nests the tensors. ``module`` may already be a
    :func:`generator.building.export.onnx.FlatModule`, which is used as is.
    """
    import torch

    from generator.building.export.onnx import flat_module_for

    flat = module if hasattr(module, "flatten_outputs") else flat_module_for(
        module, inputs, outputs, forward_signature=forward_signature, constants=constants)
    tensors = [torch.from_numpy(np.ascontiguousarray(arrays[p.name])) for p in inputs]
    with torch.no_grad():
        result = flat(*tensors)
    out = {}
    for plan, value in zip(outputs, result, strict=True):
        if not isinstance(value, torch.Tensor):
            raise ReferenceDataError(f"output {plan.name!r}: forward returns {type(value).__name__}, not a tensor")
        if value.dtype == torch.bfloat16:
            raise ReferenceDataError(f"output {plan.name!r}: bfloat16 tensors have no numpy dtype")
        out[plan.name] = value.detach().cpu().contiguous().numpy().copy()
    return out


def case_inputs(
    inputs: Sequence[InputPlanLike],
    *,
    model_name: str,
    domains: Mapping[str, ValueDomain] | None = None,
    samples: Sequence[Sample] = (),
) -> tuple[list[tuple[str, dict[str, np.ndarray]]], list[str]]:
    """The model-side inputs of every case, and notes saying which cases came from samples.

    min, opt and max (from the first sample that fits, else synthetic), then each sample as ``sample_<name>``.
    """
    from generator.building.samples import fit_to_shapes

    cases: list[tuple[str, dict[str, np.ndarray]]] = []
    notes = []
    for case in CASE_SHAPES:
        fitted = next(((s.name, a) for s in samples if (a := fit_to_shapes(s, inputs, case)) is not None), None)
        if fitted is not None:
            notes.append(f"reference case {case!r} uses sample {fitted[0]!r}")
            cases.append((case, fitted[1]))
        else:
            cases.append((case, reference_inputs(inputs, model_name=model_name, case=case, domains=domains)))
    cases.extend((f"sample_{s.name}", dict(s.arrays)) for s in samples)
    return cases, notes


def make_reference_cases(
    module: Any,
    inputs: Sequence[InputPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    model_name: str,
    max_batch_size: int,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
    domains: Mapping[str, ValueDomain] | None = None,
    samples: Sequence[Sample] = (),
    run: Any = None,
) -> tuple[list[ReferenceCase], list[str]]:
    """Make the reference cases (:func:`case_inputs`) with outputs, stored request-side; and notes.

    Outputs come from torch (``module``), or from ``run(arrays) -> outputs`` (model-side, by name) when given (an
    ONNX source has no torch module). With ``max_batch_size > 0`` every tensor's axis 0 is the batch axis (Triton's
    rule) and ``batch_size`` is the first input's size there; with 0 the model does not batch and it is None.
    """
    from generator.building.export.onnx import flat_module_for

    if run is None:
        flat = flat_module_for(module, inputs, outputs, forward_signature=forward_signature, constants=constants)

        def run(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return torch_outputs(flat, inputs, outputs, arrays)

    planned, notes = case_inputs(inputs, model_name=model_name, domains=domains, samples=samples)
    cases = []
    for name, arrays in planned:
        batch_size = int(next(iter(arrays.values())).shape[0]) if max_batch_size > 0 and arrays else None
        try:
            produced = run(arrays)
        except GenRepoError:
            raise
        except Exception as error:  # the model on this case: say which case and which shapes
            shapes = ", ".join(f"{p.name} {list(arrays[p.name].shape)}" for p in inputs)
            raise ReferenceCaseError(name, shapes, error) from error
        cases.append(ReferenceCase(
            name, batch_size,
            {p.name: to_request(p, arrays[p.name]) for p in inputs},
            {p.name: to_request(p, produced[p.name]) for p in outputs},
        ))
    return cases, notes


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
    """All arrays of an ``.npz``, read within the limits of :mod:`generator.contracts.array_files` (pickles refused)."""
    return read_arrays(path, "npz")


def reference_index(cases: Sequence[ReferenceCase], compare: CompareSettings | None = None) -> dict[str, Any]:
    """Return the ``reference.json`` document for ``cases`` (with ``compare``, how outputs are compared, when set)."""
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReferenceDataError(f"reference case names must be unique; repeated: {duplicates}")
    index: dict[str, Any] = {"format": REFERENCE_FORMAT, "cases": [c.index_entry() for c in cases]}
    settings = compare.to_json() if compare is not None else {}
    if settings:
        index["compare"] = settings
    return index


def write_reference(
    folder: Path | str, cases: Sequence[ReferenceCase], compare: CompareSettings | None = None
) -> tuple[Path, Path]:
    """Write ``reference.npz`` and ``reference.json`` into ``folder`` (the version's ``gen_repo/``).

    ``compare`` (the manifest's tolerances and padding mask) goes into ``reference.json``, so smoke compares as the
    build did.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = reference_index(cases, compare)
    arrays = {}
    for case in cases:
        for kind, tensors in (("input", case.inputs), ("output", case.outputs)):
            for name, array in tensors.items():
                arrays[reference_key(case.name, kind, name)] = array
    npz = write_npz(folder / "reference.npz", arrays)
    index_path = folder / "reference.json"
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return npz, index_path


def read_compare_settings(folder: Path | str) -> CompareSettings:
    """How the build compared this model's outputs (``reference.json``'s ``compare``; nothing set when absent)."""
    index_path = Path(folder) / "reference.json"
    try:
        index = json.loads(read_text(index_path))
        return CompareSettings.from_json(index.get("compare") if isinstance(index, dict) else None)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ReferenceDataError([Problem(str(index_path), "/compare", f"cannot read: {exc}")]) from exc


def read_reference(folder: Path | str) -> list[ReferenceCase]:
    """Read the cases back from ``folder`` (the version's ``gen_repo/``); clear errors for missing or bad files."""
    folder = Path(folder)
    index_path, npz_path = folder / "reference.json", folder / "reference.npz"
    try:
        index = json.loads(read_text(index_path))
    except (OSError, ValueError) as exc:
        raise ReferenceDataError([Problem(str(index_path), "", f"cannot read reference index: {exc}")]) from exc
    if not isinstance(index, dict) or index.get("format") != REFERENCE_FORMAT:
        raise ReferenceDataError([Problem(str(index_path), "/format", f"expected {REFERENCE_FORMAT!r}")])
    try:
        arrays = read_npz(npz_path)
    except FileNotFoundError as exc:
        raise ReferenceDataError([Problem(str(npz_path), "", f"cannot read reference arrays: {exc}")]) from exc
    except GenRepoError as exc:
        raise ReferenceDataError([Problem(p.file, p.pointer, f"cannot read reference arrays: {p.message}")
                                  for p in exc.problems]) from exc
    cases, problems = [], []
    for i, entry in enumerate(index.get("cases", [])):
        tensors: dict[str, dict[str, np.ndarray]] = {"input": {}, "output": {}}
        for kind, key in (("input", "inputs"), ("output", "outputs")):
            for name in entry.get(key, []):
                member = reference_key(entry["name"], kind, name)
                if member not in arrays:
                    problems.append(Problem(str(npz_path), "", f"array {member!r} listed in case {i} is missing"))
                else:
                    tensors[kind][name] = arrays[member]
        cases.append(ReferenceCase(entry["name"], entry.get("batch_size"), tensors["input"], tensors["output"]))
    if problems:
        raise ReferenceDataError(problems)
    return cases


# --------------------------------------------------------------------------------------------------------------------
# The array names of reference.npz, and requests read from any .npz
# --------------------------------------------------------------------------------------------------------------------
#: reference.npz names arrays ``<case>/input/<tensor>`` and ``<case>/output/<tensor>``.
_CASE_KEY = re.compile(r"^(?P<case>[^/]+)/(?P<role>input|output)/(?P<tensor>.+)$")


def reference_key(case: str, role: str, tensor: str) -> str:
    """The name of one array in ``reference.npz``: ``<case>/<role>/<tensor>``, ``role`` being input or output."""
    return f"{case}/{role}/{tensor}"


def request_members(names: Sequence[str], case: str | None, file: str) -> dict[str, dict[str, str]]:
    """The requests an .npz with arrays ``names`` holds: ``{case: {input tensor: array name}}``.

    One per case for a gen-repo reference.npz (arrays ``<case>/input/<tensor>``; its outputs are not requests),
    else the whole file as one request named ``request``. ``case`` picks one case; GenRepoError (at ``file``) when
    there is no such case or the file is not a reference.
    """
    matches = {name: _CASE_KEY.match(name) for name in names}
    if names and all(matches.values()):
        requests: dict[str, dict[str, str]] = {}
        for name, match in sorted(matches.items()):
            assert match is not None
            requests.setdefault(match["case"], {})
            if match["role"] == "input":
                requests[match["case"]][match["tensor"]] = name
        if case is not None:
            if case not in requests:
                raise GenRepoError([Problem(file, "", f"no case {case!r}; cases are {', '.join(requests)}")])
            return {case: requests[case]}
        return requests
    if case is not None:
        raise GenRepoError([Problem(file, "", "--case needs arrays named <case>/input/<tensor>")])
    return {"request": {name: name for name in names}}


def load_requests(path: Path, case: str | None) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    """Read an .npz's requests (see :func:`request_members`) within :mod:`generator.contracts.array_files`' limits."""
    with open_array_file(path, "npz") as arrays:
        return {name: {tensor: arrays.read(member) for tensor, member in members.items()}
                for name, members in request_members(list(arrays.headers), case, str(path)).items()}
