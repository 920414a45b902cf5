"""Reference data files: ``reference.npz`` and ``reference.json`` in ``<model>/<version>/gen_repo/``.

Written at build time, read by smoke and ``check-request`` (docs/repository-layout.md). The ``.npz`` has sorted members,
a fixed timestamp and no compression, so it is deterministic.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from generator.contracts.array_files import read_arrays
from generator.errors import GenRepoError, Problem
from generator.json_reader import read_json
from generator.planning.compare import CompareSettings

__all__ = [
    "ReferenceCase",
    "ReferenceDataError",
    "read_npz",
    "read_reference",
    "request_members",
    "write_npz",
    "write_reference",
]

REFERENCE_FORMAT = "gen-repo-reference/1"
#: 1980-01-01 00:00:00, the earliest time a zip entry can carry.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class ReferenceDataError(GenRepoError):
    """Reference data could not be made, written or read."""


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


# -- Files -----------------------------------------------------------------------------------------------------------
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
        index = read_json(index_path)
        return CompareSettings.from_json(index.get("compare") if isinstance(index, dict) else None)
    except GenRepoError as exc:  # not JSON, nested too deep, a key twice: located by the reader
        raise ReferenceDataError(exc.problems) from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ReferenceDataError([Problem(str(index_path), "/compare", f"cannot read: {exc}")]) from exc


def read_reference(folder: Path | str) -> list[ReferenceCase]:
    """Read the cases back from ``folder`` (the version's ``gen_repo/``); clear errors for missing or bad files."""
    folder = Path(folder)
    index_path, npz_path = folder / "reference.json", folder / "reference.npz"
    try:
        index = read_json(index_path)
    except GenRepoError as exc:  # not JSON, nested too deep, a key twice: located by the reader
        raise ReferenceDataError(exc.problems) from None
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


# -- The array names of reference.npz, and requests read from any .npz -----------------------------------------------
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
