"""Real sample inputs (the manifest's ``samples:``): read, checked against the plan, fitted to the reference cases.

From ``.npz``/``.safetensors`` files or a factory (only with ``--allow-code``); a sample outside the plan's ranges is
skipped with a note, and :func:`fit_to_shapes` resizes only batch axes (docs/manifest.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.contracts.array_files import open_array_file
from generator.dtypes import by_torch
from generator.errors import GenRepoError, Problem
from generator.planning.contract import to_model
from generator.specs.paths import Locator
from generator.specs.sample_metadata import resize_axis

if TYPE_CHECKING:
    from generator.planning.tensors import TensorPlan
    from generator.specs.graphspec import GraphSpec

__all__ = ["Sample", "arrays_from_calls", "fit_to_shapes", "read_sample_file", "read_samples", "usable_samples"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One call's inputs, model-side, by input tensor name; ``name`` becomes the reference case ``sample_<name>``."""

    name: str
    arrays: dict[str, np.ndarray[Any, Any]]


def read_sample_file(path: Path, kind: str) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    """Calls in a sample file: ``{call: {tensor: array}}`` (one call named ``0`` when names have no ``/``).

    Read within the limits of :mod:`generator.contracts.array_files`; :func:`read_samples` also skips, unread, the
    arrays larger than a plan's inputs take.
    """
    calls, _ = read_samples(path, kind)
    return calls


def read_samples(
    path: Path, kind: str, inputs: Sequence[TensorPlan] = ()
) -> tuple[dict[str, dict[str, np.ndarray[Any, Any]]], list[str]]:
    """Calls in a sample file (see :func:`read_sample_file`), and a note for each call skipped unread.

    With ``inputs`` (the plan's), a call is skipped before any of its arrays is read when one of them declares more
    elements than its input's max shape holds: it could never fit the plan (see :func:`usable_samples`), and a
    hostile header must not make gen-repo allocate what it declares.
    """
    most = {plan.name: math.prod(plan.max_shape) for plan in inputs}
    try:
        with open_array_file(path, kind) as arrays:
            members: dict[str, dict[str, str]] = {}
            for key in sorted(arrays.headers):
                call, _, tensor = key.rpartition("/")
                members.setdefault(call or "0", {})[tensor] = key
            if not members:
                raise GenRepoError([Problem(str(path), "", "the samples file holds no arrays")])
            calls: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
            notes = []
            for call, tensors in members.items():
                over = [(tensor, arrays.headers[key]) for tensor, key in tensors.items()
                        if tensor in most and arrays.headers[key].size > most[tensor]]
                if over:
                    tensor, header = over[0]
                    notes.append(f"sample {call!r} skipped unread: {tensor!r} declares {header.describe()}, more than "
                                 f"the {most[tensor]} elements its input takes at most")
                    continue
                calls[call] = {tensor: arrays.read(key) for tensor, key in tensors.items()}
    except FileNotFoundError as error:
        raise GenRepoError([Problem(str(path), "", f"cannot read samples ({kind}): {error.strerror}")]) from None
    except GenRepoError as error:
        raise GenRepoError([Problem(p.file, p.pointer, f"cannot read samples ({kind}): {p.message}")
                            for p in error.problems]) from None
    return calls, notes


def arrays_from_calls(
    calls: Iterable[Any], graph: GraphSpec, inputs: Sequence[TensorPlan]
) -> tuple[dict[str, dict[str, np.ndarray[Any, Any]]], list[str]]:
    """Tensors of each ``(args, kwargs)`` call at the inputs' semantic paths, and notes on calls skipped."""
    out: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
    notes = []
    for index, call in enumerate(calls):
        try:
            args, kwargs = call
            bound = dict(graph.forward_signature.normalize(tuple(args), dict(kwargs)).arguments)
        except (TypeError, ValueError) as error:
            notes.append(f"sample call {index} skipped: it does not fit forward's signature ({error})")
            continue
        arrays, why = {}, ""
        for locator, value in graph.input_spec.other_data:
            try:
                given = locator.get_value(bound)
            except (KeyError, IndexError, TypeError):
                given = None
            if given != value:
                why = f"{locator} is {given!r} where the graph was recorded with {value!r} (another graph)"
                break
        for plan in inputs:
            if why:
                break
            try:
                value = Locator(plan.path).get_value(bound)
            except (KeyError, IndexError, TypeError):
                why = f"it has no tensor at {plan.access_path or plan.name}"
                break
            if not hasattr(value, "shape"):
                why = f"{plan.access_path or plan.name} is {type(value).__name__}, not a tensor"
                break
            if hasattr(value, "detach"):  # a torch tensor: numpy through its own method, no torch import here
                value = value.detach().cpu()
                if str(value.dtype) == "torch.bfloat16":
                    why = f"{plan.name} is bfloat16, which numpy cannot hold"
                    break
                value = value.numpy()
            arrays[plan.name] = np.asarray(value)
        if why:
            notes.append(f"sample call {index} skipped: {why}")
        else:
            out[str(index)] = arrays
    return out, notes


def usable_samples(
    calls: Mapping[str, Mapping[str, np.ndarray[Any, Any]]],
    inputs: Sequence[TensorPlan],
    max_batch_size: int,
    file: str,
) -> tuple[list[Sample], list[str]]:
    """Samples that fit the plan (model-side arrays), and a note for each call skipped.

    Raises GenRepoError when a call names tensors the model does not have, or its dtypes cannot be cast safely: a
    sample file that does not belong to this model.
    """
    by_name = {plan.name: plan for plan in inputs}
    problems: list[Problem] = []
    samples, notes = [], []
    for call, arrays in calls.items():
        unknown = sorted(set(arrays) - set(by_name))
        if unknown:
            problems.append(Problem(file, f"/{call}", f"sample {call!r} has tensors {unknown} that the model does "
                                                      f"not take (inputs: {', '.join(by_name)})"))
            continue
        missing = [name for name in by_name if name not in arrays]
        if missing:
            notes.append(f"sample {call!r} skipped: it lacks {missing}")
            continue
        cast = {name: _cast(plan, np.asarray(arrays[name])) for name, plan in by_name.items()}
        uncastable = [name for name, array in cast.items() if array is None]
        for name in uncastable:  # a file of other dtypes does not belong to this model: a problem, not a skip
            want = _numpy_dtype(by_name[name])
            problems.append(Problem(file, f"/{call}/{name}", f"sample {call!r}: dtype {arrays[name].dtype} of "
                                                             f"{name!r} cannot become {want}"))
        if uncastable:
            continue
        model_side = {name: _model_side(by_name[name], array) for name, array in cast.items() if array is not None}
        why = next((w for name, a in model_side.items() if (w := _range_problem(by_name[name], a))), "")
        if why:
            notes.append(f"sample {call!r} skipped: {why}")
            continue
        batches = {a.shape[0] for a in model_side.values()} if max_batch_size > 0 else set()
        if len(batches) > 1:
            notes.append(f"sample {call!r} skipped: its inputs disagree on the batch size {sorted(batches)}")
            continue
        samples.append(Sample(call, model_side))
    if problems:
        raise GenRepoError(problems)
    return samples, notes


def _numpy_dtype(plan: TensorPlan) -> np.dtype[Any]:
    entry = by_torch(plan.dtype)
    return np.dtype(entry.host_numpy if entry is not None else plan.dtype.removeprefix("torch."))


def _cast(plan: TensorPlan, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """``array`` in the input's dtype (a same-kind cast, e.g. int32 ids for an int64 input); None when unsafe."""
    want = _numpy_dtype(plan)
    if array.dtype == want:
        return array
    return array.astype(want) if np.can_cast(array.dtype, want, casting="same_kind") else None


def _model_side(plan: TensorPlan, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``array`` as the model sees it: a 0-d scalar as ``[1]``, a request-side per-item scalar ``[b, 1]`` as ``[b]``."""
    if plan.torch_scalar and array.ndim == 0:
        return array.reshape((1,))
    if plan.reshape is not None and array.ndim == len(plan.min_shape) + 1:
        return to_model(plan, array)
    return array


def _range_problem(plan: TensorPlan, array: np.ndarray[Any, Any]) -> str:
    """Why a model-side ``array`` is outside the plan's ranges ("" when it is inside)."""
    if array.ndim != len(plan.min_shape):
        return f"{plan.name!r} has rank {array.ndim}, the model takes rank {len(plan.min_shape)}"
    for axis, (size, low, high) in enumerate(zip(array.shape, plan.min_shape, plan.max_shape, strict=True)):
        if not low <= size <= high:
            return f"{plan.name!r} axis {axis} is {size}, outside {low}..{high}"
    return ""


def fit_to_shapes(sample: Sample, inputs: Sequence[Any], case: str) -> dict[str, np.ndarray[Any, Any]] | None:
    """``sample`` at the ``case`` ("min", "opt", "max") shapes, resizing batch axes only; None when it cannot be.

    ``inputs`` are tensor plans (``name``, ``<case>_shape`` and ``batch_axes``, which plans without it lack: then
    nothing is resized).
    """
    out = {}
    for plan in inputs:
        target = getattr(plan, f"{case}_shape")
        array = sample.arrays[plan.name]
        batch = dict(getattr(plan, "batch_axes", ()))
        for axis, size in enumerate(target):
            if array.shape[axis] == size:
                continue
            if axis not in batch:
                return None
            array = resize_axis(array, axis, size)
        out[plan.name] = np.ascontiguousarray(array)
    return out
