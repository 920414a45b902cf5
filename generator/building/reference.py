"""Reference data for the smoke test: inputs at the min, opt and max shapes (and real samples) with torch's outputs.

Inputs are a real sample where one fits the case, else synthetic data inside each input's value domain, drawn from a
generator seeded by (model, case, tensor), so the same plans give the same arrays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.contracts.reference_data import ReferenceCase, ReferenceDataError
from generator.dtypes import normalize_dtype
from generator.errors import GenRepoError
from generator.planning.contract import to_request
from generator.planning.values import ValueDomain, draw

if TYPE_CHECKING:
    from generator.building.export.exchange import InputPlanLike, TensorPlanLike
    from generator.building.samples import Sample
    from generator.naming import SemanticPath
    from generator.planning.profiles import OptimizationProfile
    from generator.specs.sample_metadata import ForwardSignature

__all__ = ["CASE_SHAPES", "ReferenceCaseError", "make_reference_cases", "reference_inputs"]

#: Case name -> the plan attribute holding its (full) input shape.
CASE_SHAPES = {"min": "min_shape", "opt": "opt_shape", "max": "max_shape"}


class ReferenceCaseError(Exception):
    """The model failed on one reference case (``case``, with its input ``shapes`` in words); the cause is chained."""

    def __init__(self, case: str, shapes: str, cause: BaseException) -> None:
        self.case = case
        self.shapes = shapes
        super().__init__(f"case {case!r} ({shapes}): {type(cause).__name__}: {cause}")


# -- Inputs ----------------------------------------------------------------------------------------------------------
def _seed(*parts: str) -> int:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def reference_inputs(
    inputs: Sequence[InputPlanLike],
    *,
    model_name: str,
    case: str,
    domains: Mapping[str, ValueDomain] | None = None,
    shape: str | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic model-side inputs for ``case`` at every input plan's ``shape`` (min, opt, max; default ``case``).

    Values come from each input's domain: the plan's own (``values``, the manifest's) or ``domains`` (found in the
    graph); see :func:`generator.planning.values.draw` for inputs without one. The case name seeds them.
    """
    shape = shape or case
    if shape not in CASE_SHAPES:
        raise ReferenceDataError(f"unknown reference case shape {shape!r}; expected one of {list(CASE_SHAPES)}")
    arrays = {}
    for plan in inputs:
        size = getattr(plan, CASE_SHAPES[shape])
        rng = np.random.default_rng(_seed(model_name, case, plan.name))
        domain = getattr(plan, "values", None) or (domains or {}).get(plan.name)
        dtype = normalize_dtype(plan.dtype)
        if dtype == "bfloat16":
            raise ReferenceDataError(f"input {plan.name!r}: bfloat16 tensors have no numpy dtype; reference data "
                                     "needs one")
        arrays[plan.name] = draw(rng, plan.name, dtype, size, domain)
    return arrays


# -- Outputs ---------------------------------------------------------------------------------------------------------
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
    :func:`generator.building.export.flat_module.FlatModule`, which is used as is.
    """
    import torch

    from generator.building.export.flat_module import flat_module_for

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
    profiles: Sequence[OptimizationProfile] = (),
) -> tuple[list[tuple[str, dict[str, np.ndarray]]], list[str]]:
    """The model-side inputs of every case, and notes saying which cases came from samples.

    min, opt and max of the inputs' range, then ``<profile>.min``, ``.opt`` and ``.max`` of each optimization
    profile (from the first sample that fits, else synthetic), then each sample as ``sample_<name>``.
    """
    from generator.building.samples import fit_to_shapes

    cases: list[tuple[str, dict[str, np.ndarray]]] = []
    notes = []
    ranges = [("", inputs), *((f"{p.name}.", p.inputs) for p in profiles)]
    for prefix, plans in ranges:
        for shape in CASE_SHAPES:
            case = prefix + shape
            fitted = next(((s.name, a) for s in samples if (a := fit_to_shapes(s, plans, shape)) is not None), None)
            if fitted is not None:
                notes.append(f"reference case {case!r} uses sample {fitted[0]!r}")
                cases.append((case, fitted[1]))
            else:
                cases.append((case, reference_inputs(plans, model_name=model_name, case=case, domains=domains,
                                                     shape=shape)))
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
    profiles: Sequence[OptimizationProfile] = (),
) -> tuple[list[ReferenceCase], list[str]]:
    """Make the reference cases (:func:`case_inputs`) with outputs, stored request-side; and notes.

    Outputs come from torch (``module``), or from ``run(arrays) -> outputs`` (model-side, by name) when given (an
    ONNX source has no torch module). With ``max_batch_size > 0`` every tensor's axis 0 is the batch axis (Triton's
    rule) and ``batch_size`` is the first input's size there; with 0 the model does not batch and it is None.
    """
    from generator.building.export.flat_module import flat_module_for

    if run is None:
        flat = flat_module_for(module, inputs, outputs, forward_signature=forward_signature, constants=constants)

        def run(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return torch_outputs(flat, inputs, outputs, arrays)

    planned, notes = case_inputs(inputs, model_name=model_name, domains=domains, samples=samples, profiles=profiles)
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
