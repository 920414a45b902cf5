"""A model's contract (``<model>/<version>/gen_repo/contract.json``), as docs/repository-layout.md describes it.

Shapes are request-side (batch axis first); :func:`to_request` and :func:`to_model` move arrays between the request
and the model side (a per-item scalar is ``[b, 1]`` in a request, ``[b]`` in the model).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from generator.planning.tensors import TensorPlan
    from generator.planning.values import ValueDomain
    from generator.triton.proto import model_config_pb2


class PlannedModel(Protocol):
    """What a contract is made from: a planned model (``ModelPlan``) or ensemble (``EnsemblePlan``)."""

    @property
    def name(self) -> str:
        """The model name."""

    @property
    def version(self) -> int:
        """Its version folder."""

    @property
    def max_batch_size(self) -> int:
        """Triton's max_batch_size (0: no batching)."""

    @property
    def inputs(self) -> Sequence[TensorPlan]:
        """Input tensors in config order."""

    @property
    def outputs(self) -> Sequence[TensorPlan]:
        """Output tensors in config order."""

    @property
    def config(self) -> model_config_pb2.ModelConfig:
        """Its ModelConfig."""


__all__ = [
    "CONTRACT_FORMAT", "PlannedModel", "contract_from_plan", "contract_model_problem", "render_contract",
    "request_shape", "to_model", "to_request",
]

CONTRACT_FORMAT = "gen-repo-contract/1"


def request_shape(tensor: TensorPlan, shape: tuple[int, ...]) -> list[int]:
    """Return the shape a request carries for a model-side ``shape`` (per-item scalars gain their ``[1]``)."""
    if tensor.reshape is not None and tensor.batch_axis is not None:
        return [shape[0], *tensor.dims]
    return list(shape)


def to_request(tensor: object, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A model-side array as a request carries it (a per-item scalar ``[b]`` becomes ``[b, 1]``).

    ``tensor`` is a tensor plan; one without a ``reshape`` (or a batch axis) leaves the array as it is.
    """
    if getattr(tensor, "reshape", None) is not None and getattr(tensor, "batch_axis", None) is not None:
        return array.reshape((array.shape[0], *getattr(tensor, "dims")))  # noqa: B009 (only plans with a reshape)
    return array


def to_model(tensor: object, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A request-side array as the model sees it (Triton's ``reshape``: ``[b, 1]`` becomes ``[b]``)."""
    reshape = getattr(tensor, "reshape", None)
    if reshape is not None and getattr(tensor, "batch_axis", None) is not None:
        return array.reshape((array.shape[0], *reshape))
    return array


def _tensor(tensor: TensorPlan, with_opt: bool, values: ValueDomain | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tensor.name,
        "data_type": tensor.data_type,
        "dims": list(tensor.dims),
        "min_shape": request_shape(tensor, tensor.min_shape),
        "max_shape": request_shape(tensor, tensor.max_shape),
    }
    if with_opt:
        entry["opt_shape"] = request_shape(tensor, tensor.opt_shape)
    if tensor.reshape is not None:
        entry["reshape"] = list(tensor.reshape)
    if values is not None:
        entry.update(values.to_json())
    return entry


def contract_from_plan(model_plan: PlannedModel, values: Mapping[str, ValueDomain] | None = None) -> dict[str, Any]:
    """Build the contract of one planned model as plain data.

    ``values`` are input value domains found by the build (an index input's table size); the manifest's own
    (``TensorPlan.values``) win.
    """
    config = model_plan.config
    found = values or {}
    contract: dict[str, Any] = {
        "format": CONTRACT_FORMAT,
        "model": model_plan.name,
        "version": model_plan.version,
        "max_batch_size": model_plan.max_batch_size,
        "inputs": [_tensor(t, True, t.values or found.get(t.name)) for t in model_plan.inputs],
        "outputs": [_tensor(t, False) for t in model_plan.outputs],
    }
    profiles = getattr(model_plan, "profiles", ())  # an ensemble has none
    if profiles:
        contract["optimization_profiles"] = [
            {"index": k, "name": profile.name,
             "inputs": [{"name": t.name, **{f"{which}_shape": request_shape(t, getattr(t, f"{which}_shape"))
                                            for which in ("min", "opt", "max")}} for t in profile.inputs]}
            for k, profile in enumerate(profiles)
        ]
    if config.platform:
        contract["platform"] = config.platform
    else:
        contract["backend"] = config.backend
    return contract


def contract_model_problem(contract: Mapping[str, Any], folder: str) -> str | None:
    """Why a contract read from the model folder ``folder`` does not describe that model; None when it does.

    Its ``model`` must be the folder's name: Triton serves a model by its folder's name, and whatever a command
    derives from the contract (perf-config's ``<model>/`` files, request targets) must not be steered by a string in
    a file to another model, or to another path. The problem is located at the contract's ``/model``.
    """
    model = contract.get("model")
    if isinstance(model, str) and model == folder:
        return None
    shown = repr(model[:120] + "..." if isinstance(model, str) and len(model) > 120 else model)
    return (f"names the model {shown}, but the contract lies in the model folder {folder!r}: a contract describes "
            "the model of its own folder (the name Triton serves it by)")


#: Compact JSON with sorted keys: ``json``'s C encoder (an ``indent`` makes it fall back to pure Python, which was 90%
#: of rendering a config and contract per model; bench/bench_cli.py). Keys and strings go straight to its C string
#: encoder.
_encode = json.JSONEncoder(sort_keys=True).encode
_encode_string = json.encoder.encode_basestring_ascii


def render_contract(contract: Mapping[str, Any]) -> str:
    """``contract.json`` text, byte-identical for identical input: keys sorted, one per line, each tensor on a line.

    A valid JSON document (``json.loads`` reads it back as ``contract``) laid out for reading and diffing::

        {
          "format": "gen-repo-contract/1",
          "inputs": [
            {"data_type": "TYPE_FP32", "dims": [-1, 8], "max_shape": [4, 64, 8], ...}
          ],
          ...
        }
    """
    lines = []
    for key in sorted(contract):
        value = contract[key]
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            items = ",\n".join(f"    {_encode(item)}" for item in value)
            lines.append(f"  {_encode_string(key)}: [\n{items}\n  ]")
        else:
            text = _encode_string(value) if isinstance(value, str) else _encode(value)
            lines.append(f"  {_encode_string(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
