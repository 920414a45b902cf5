"""A model's contract: what a request must look like, the checks Triton applies to one, and example requests.

From a gen-repo repository (exact ranges), any ``config.pbtxt`` (a ``-1`` dim allows any size ``>= 0``, the batch axis
``1..max_batch_size``) or a live server. Published as :mod:`generator.client`.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.bounded import limit
from generator.contracts.array_files import ArrayHeader
from generator.contracts.request_schema import request_schema
from generator.contracts.served import FolderReader, ServedModel, read_served_model
from generator.contracts.tensor_contract import Shape, TensorContract, range_text, tensor_shape_text
from generator.dtypes import config_data_type
from generator.errors import GenRepoError, Problem
from generator.json_reader import read_json
from generator.number_limits import INT64_MAX, element_count
from generator.number_limits import shape_text as count_shape_text
from generator.planning.contract import CONTRACT_FORMAT, contract_model_problem
from generator.planning.values import ValueDomain, draw
from generator.triton.connection import Connection, is_transport_error, unreachable_error
from generator.triton.proto import model_config_pb2

if TYPE_CHECKING:
    from generator.contracts.diff import ModelComparison

__all__ = [
    "ContractShapeError",
    "ModelContract",
    "RequestProblem",
    "RequestProblemKind",
    "RequestValidationError",
    "config_to_contract",
    "contract_shape",
    "to_infer_inputs",
]


class RequestProblemKind(str, enum.Enum):
    """What is wrong with one input of a request."""

    MISSING = "missing"  # a required input is not in the request
    UNKNOWN = "unknown"  # the request names an input the model does not have
    DTYPE = "dtype"  # numpy dtype does not match the input's data type
    RANK = "rank"  # number of axes differs from the full shape (batch axis included when batching)
    BATCH_TOO_LARGE = "batch_too_large"  # batch axis above max_batch_size
    BATCH_MISMATCH = "batch_mismatch"  # inputs disagree on the batch size (Triton needs one batch size per request)
    DIM_OUT_OF_RANGE = "dim_out_of_range"  # an axis outside its allowed range
    VALUE_OUT_OF_RANGE = "value_out_of_range"  # a value outside the input's domain (e.g. an index past its table)


@dataclass(frozen=True, slots=True)
class RequestProblem:
    """One problem with a request, as data; ``message`` is the readable form naming input, axis, value and range."""

    kind: RequestProblemKind
    input: str
    message: str
    axis: int | None = None
    value: int | None = None
    allowed: tuple[int, int | None] | None = None

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``check-request --json``)."""
        return {
            "kind": self.kind.value,
            "input": self.input,
            "message": self.message,
            "axis": self.axis,
            "value": self.value,
            "allowed": list(self.allowed) if self.allowed is not None else None,
        }


class RequestValidationError(ValueError):
    """Raised by ``validate(..., raise_on_error=True)``; carries every problem found."""

    def __init__(self, model: str, problems: Sequence[RequestProblem]) -> None:
        self.model = model
        self.problems = list(problems)
        lines = "\n".join(f"  - {p.message}" for p in self.problems)
        super().__init__(f"request for model '{model}' is invalid ({len(self.problems)} problem(s)):\n{lines}")


class ContractShapeError(ValueError):
    """A contract's shape that is not a list of integers, or whose elements outgrow int64: at ``pointer``."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer


def contract_shape(tensor: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    """``tensor[key]`` as a shape; ContractShapeError where gen-repo cannot count it.

    Dims arithmetic stays within int64 (:func:`generator.number_limits.element_count`).
    """
    value = tensor[key]
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise ContractShapeError(f"{where}/{key}", f"not a shape: {key} must be a list of integers")
    if element_count(d for d in value if d > 0) is None:
        raise ContractShapeError(f"{where}/{key}", f"shape {count_shape_text(value)} holds more elements than "
                                                   f"int64 counts ({INT64_MAX})")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class ModelContract:
    """What a request to one model must look like; build with the ``from_*`` loaders."""

    name: str
    max_batch_size: int
    inputs: tuple[TensorContract, ...]
    outputs: tuple[TensorContract, ...] = ()
    version: int | None = None
    platform: str = ""
    backend: str = ""
    source: str = field(default="", compare=False)

    # ------------------------------------------------------------------ loaders
    @classmethod
    def from_contract_json(cls, path: str | Path, config: model_config_pb2.ModelConfig | None = None,
                           model: str | None = None) -> ModelContract:
        """Load gen-repo's ``gen_repo/contract.json``; ``config`` (when given) adds each input's ``optional`` flag.

        ``model``: the name of the model folder it was read from; a contract naming another model is a ValueError
        (:func:`generator.planning.contract.contract_model_problem`).
        """
        doc = read_json(path)
        if model is not None and isinstance(doc, Mapping) and (why := contract_model_problem(doc, model)) is not None:
            raise ValueError(f"{path}: /model: {why}")
        return cls.from_contract_dict(doc, source=str(path), config=config)

    @classmethod
    def from_contract_dict(
        cls, doc: Mapping[str, Any], source: str = "", config: model_config_pb2.ModelConfig | None = None
    ) -> ModelContract:
        """Build from a contract.json document (format ``gen-repo-contract/1``)."""
        fmt = doc.get("format")
        if fmt != CONTRACT_FORMAT:
            raise ValueError(f"{source or 'contract'}: format is {fmt!r}, expected {CONTRACT_FORMAT!r}")
        optional = {i.name for i in config.input if i.optional} if config is not None else set()

        def tensor(t: Mapping[str, Any], where: str) -> TensorContract:
            opt = t.get("opt_shape")
            return TensorContract(
                name=str(t["name"]),
                data_type=config_data_type(str(t["data_type"])),
                dims=contract_shape(t, "dims", where),
                min_shape=contract_shape(t, "min_shape", where),
                max_shape=tuple(None if d < 0 else d for d in contract_shape(t, "max_shape", where)),
                opt_shape=contract_shape(t, "opt_shape", where) if opt is not None else None,
                optional=bool(t.get("optional", False)) or t["name"] in optional,
                values=ValueDomain.from_json(t) if "value_range" in t or "values" in t else None,
            )

        return cls(
            name=str(doc["model"]),
            max_batch_size=int(doc.get("max_batch_size", 0)),
            inputs=tuple(tensor(t, f"/inputs/{i}") for i, t in enumerate(doc.get("inputs", []))),
            outputs=tuple(tensor(t, f"/outputs/{i}") for i, t in enumerate(doc.get("outputs", []))),
            version=int(doc["version"]) if doc.get("version") is not None else None,
            platform=str(doc.get("platform", "")),
            backend=str(doc.get("backend", "")),
            source=source,
        )

    @classmethod
    def from_config(cls, config: model_config_pb2.ModelConfig, name: str = "", source: str = "") -> ModelContract:
        """Build from a parsed ``ModelConfig`` (ranges from dims, see the module docstring)."""
        return config_to_contract(config, name=name, source=source)

    @classmethod
    def from_served(cls, served: ServedModel) -> ModelContract:
        """The contract of the version Triton serves (:func:`generator.contracts.served.read_served_model`).

        Its contract.json where the build wrote one, else its config; GenRepoError naming the file otherwise.
        """
        doc, where = served.contract_doc, served.contract_where
        if doc is None:
            assert served.config is not None, "read_served_model refuses a model with neither"
            contract = config_to_contract(served.config, name=served.name, source=served.config_where)
            return dataclasses.replace(contract, version=served.version)
        try:
            contract = cls.from_contract_dict(doc, source=where, config=served.config)
        except KeyError as error:
            raise GenRepoError([Problem(where, f"/{error.args[0]}", "missing: a gen-repo contract needs it")]) \
                from error
        except ContractShapeError as error:
            raise GenRepoError([Problem(where, error.pointer, str(error))]) from error
        except (ValueError, TypeError, AttributeError) as error:
            raise GenRepoError([Problem(where, "", f"not a gen-repo contract: {error}")]) from error
        return dataclasses.replace(contract, name=served.name, version=served.version)

    @classmethod
    def from_repository(cls, repo_dir: str | Path, model: str, version: int | None = None) -> ModelContract:
        """Contract of ``model`` in a model repository folder, at the version Triton serves (or ``version``).

        ``<model>/<version>/gen_repo/contract.json`` when present (exact ranges), else ``<model>/config.pbtxt``. The
        version is the one the config's ``version_policy`` serves, else the highest version folder. GenRepoError
        naming the file when there is no such model or its files do not read.
        """
        return cls.from_served(read_served_model(FolderReader(Path(repo_dir)), model, version))

    @classmethod
    def from_server(
        cls, url: str, model: str, protocol: str = "grpc", version: str = "", timeout: float = 10.0
    ) -> ModelContract:
        """Ask a live server (``get_model_config``) over ``"grpc"`` or ``"http"``; ``url`` is ``host:port``.

        Raises :class:`~generator.triton.connection.ServerUnreachableError` when the server does not answer within
        ``timeout`` seconds (or refuses the connection), and tritonclient's ``InferenceServerException`` when it
        answers no (an unknown model or version).
        """
        with Connection(url, protocol, timeout) as connection:
            try:
                config = connection.config(model, version)
            except Exception as exc:  # tritonclient raises InferenceServerException and transport errors alike
                if is_transport_error(exc):
                    raise unreachable_error(url, f"get_model_config({model!r})", exc) from exc
                raise
        contract = config_to_contract(config, name=config.name or model, source=f"{protocol}://{url}")
        return dataclasses.replace(contract, version=int(version) if version else None)

    # ------------------------------------------------------------------ queries
    def input(self, name: str) -> TensorContract:
        """Return the input called ``name`` (KeyError naming the known inputs otherwise)."""
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        raise KeyError(f"model '{self.name}' has no input {name!r}; inputs are {[t.name for t in self.inputs]}")

    @property
    def batching(self) -> bool:
        """True when requests carry a batch axis first (``max_batch_size > 0``)."""
        return self.max_batch_size > 0

    def to_dict(self) -> dict[str, Any]:
        """contract.json-like form (``max_shape`` -1 where unbounded)."""
        out: dict[str, Any] = {
            "format": CONTRACT_FORMAT,
            "model": self.name,
            "max_batch_size": self.max_batch_size,
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
        }
        if self.version is not None:
            out["version"] = self.version
        if self.platform:
            out["platform"] = self.platform
        if self.backend:
            out["backend"] = self.backend
        return out

    def request_schema(self) -> dict[str, Any]:
        """The JSON Schema (Draft 2020-12) of a valid KServe v2 JSON request to this model.

        What :meth:`validate` checks, but for the JSON form of a request, except what JSON Schema cannot express
        (``docs/client.md``); the same schema as the build's ``gen_repo/request.schema.json``
        (:func:`generator.contracts.request_schema.request_schema`).
        """
        return request_schema(self.to_dict())

    def compatible_with(self, other: ModelContract) -> ModelComparison:
        """How ``other`` (e.g. the live server's, :meth:`from_server`) changes this contract (the one a client pinned).

        Every client-visible change, each breaking or compatible, and the facts that could not be compared (a side
        derived from a config knows no value domains); ``.compatible`` is True when nothing breaks this client.
        The same classification as ``gen-repo diff`` (:func:`generator.contracts.diff.diff_models`).
        """
        from generator.contracts.diff import diff_models

        return diff_models(self, other)

    # ------------------------------------------------------------------ validation
    def validate(self, inputs: Mapping[str, Any], raise_on_error: bool = False) -> list[RequestProblem]:
        """Every problem Triton would reject ``inputs`` (name -> numpy array) for; empty when the request is valid.

        Checks names (missing required, unknown), dtype, rank, the batch axis (``1..max_batch_size``, one batch size
        for all inputs), each axis against its range and, where the contract gives an input's values (an index into
        a table, or the manifest's ``inputs:``), the values. ``raise_on_error`` raises
        :class:`RequestValidationError`. Every problem is found in one pass: values are judged even when the same input
        has a wrong dtype or shape, and one input's problems never hide another's. An
        :class:`~generator.contracts.array_files.ArrayHeader` may stand for an array that was not read (see
        :meth:`reads_values`): its dtype and shape are checked, its values cannot be.
        """
        problems: list[RequestProblem] = []
        known = {t.name for t in self.inputs}
        for name in sorted(inputs):
            if name not in known:
                problems.append(
                    RequestProblem(
                        RequestProblemKind.UNKNOWN,
                        name,
                        f"input '{name}' is not an input of model '{self.name}'; "
                        f"inputs are {', '.join(sorted(known)) or '(none)'}",
                    )
                )
        batch_sizes: dict[str, int] = {}
        for tensor in self.inputs:
            if tensor.name not in inputs:
                if not tensor.optional:
                    problems.append(
                        RequestProblem(
                            RequestProblemKind.MISSING,
                            tensor.name,
                            f"input '{tensor.name}' is missing (required by model '{self.name}', "
                            f"{tensor.data_type}, shape {tensor_shape_text(tensor)})",
                        )
                    )
                continue
            given = inputs[tensor.name]
            value = given if isinstance(given, ArrayHeader) else np.asarray(given)
            problems.extend(self._check_tensor(tensor, value, batch_sizes))
        if len(set(batch_sizes.values())) > 1:
            listed = ", ".join(f"'{n}' has {b}" for n, b in sorted(batch_sizes.items()))
            first = sorted(batch_sizes)[0]
            problems.append(
                RequestProblem(
                    RequestProblemKind.BATCH_MISMATCH,
                    first,
                    f"inputs disagree on the batch size (axis 0): {listed}; "
                    "Triton needs one batch size for every input of a request",
                    axis=0,
                )
            )
        if problems and raise_on_error:
            raise RequestValidationError(self.name, problems)
        return problems

    def refuses_header(self, name: str, header: ArrayHeader) -> bool:
        """Whether an array declared as ``header`` (dtype and shape, not read yet) for input ``name`` is refused.

        True for a name that is not an input, or a dtype or shape outside the contract: :meth:`validate` then
        reports it from the header alone, so an array far beyond what the model takes is never allocated.
        """
        tensor = next((t for t in self.inputs if t.name == name), None)
        return tensor is None or bool(self._check_tensor(tensor, header, {}))

    def reads_values(self, name: str, header: ArrayHeader) -> bool:
        """Whether an array declared as ``header`` for input ``name`` is worth reading for :meth:`validate`.

        An array that fits the contract is read; one it refuses is read too when the input has a value domain its dtype
        can be judged against and it takes at most ``request_check_bytes`` (:data:`generator.bounded.LIMITS`). Anything
        larger is judged from its header alone.
        """
        if not self.refuses_header(name, header):
            return True
        tensor = next((t for t in self.inputs if t.name == name), None)
        return (tensor is not None and tensor.values is not None and header.dtype.kind in "biuf"
                and header.nbytes <= limit("request_check_bytes"))

    def _check_tensor(
        self, tensor: TensorContract, value: np.ndarray[Any, Any] | ArrayHeader, batch_sizes: dict[str, int]
    ) -> list[RequestProblem]:
        problems: list[RequestProblem] = []
        name = tensor.name
        if not _dtype_ok(tensor, value.dtype):
            expected = "object (bytes/str) or bytes_" if tensor.data_type == "TYPE_STRING" else str(tensor.dtype)
            problems.append(
                RequestProblem(
                    RequestProblemKind.DTYPE,
                    name,
                    f"input '{name}' has dtype {value.dtype}, expected {expected} ({tensor.data_type})",
                )
            )
        # Values are judged whatever else is wrong (a wrong dtype or shape, checked below): one pass lists every
        # problem, and an index past its table is as wrong in a [4, 70] array as in a [4, 64] one.
        if tensor.values is not None and isinstance(value, np.ndarray):
            outside = tensor.values.array_problem(value)
            if outside is not None:
                source = f" ({tensor.values.source})" if tensor.values.source else ""
                problems.append(RequestProblem(RequestProblemKind.VALUE_OUT_OF_RANGE, name,
                                               f"input '{name}': {outside}{source}"))
        shape = tuple(int(d) for d in value.shape)
        if len(shape) != tensor.rank:
            batch_note = " (batch axis first, max_batch_size > 0)" if self.batching else ""
            problems.append(
                RequestProblem(
                    RequestProblemKind.RANK,
                    name,
                    f"input '{name}' has {len(shape)} axes (shape {list(shape)}), expected {tensor.rank}: "
                    f"shape {tensor_shape_text(tensor)}{batch_note}",
                    value=len(shape),
                    allowed=(tensor.rank, tensor.rank),
                )
            )
            return problems
        for axis, size in enumerate(shape):
            low, high = tensor.min_shape[axis], tensor.max_shape[axis]
            if self.batching and axis == 0:
                batch_sizes[name] = size
                if size > self.max_batch_size:
                    problems.append(
                        RequestProblem(
                            RequestProblemKind.BATCH_TOO_LARGE,
                            name,
                            f"input '{name}' axis 0 (batch) is {size}, above max_batch_size {self.max_batch_size} "
                            f"(allowed {range_text(low, high)})",
                            axis=0,
                            value=size,
                            allowed=(low, high),
                        )
                    )
                    continue
            if size < low or (high is not None and size > high):
                what = "axis 0 (batch)" if self.batching and axis == 0 else f"axis {axis}"
                problems.append(
                    RequestProblem(
                        RequestProblemKind.DIM_OUT_OF_RANGE,
                        name,
                        f"input '{name}' {what} is {size}, allowed {range_text(low, high)} "
                        f"(shape {list(shape)}, expected {tensor_shape_text(tensor)})",
                        axis=axis,
                        value=size,
                        allowed=(low, high),
                    )
                )
        return problems

    # ------------------------------------------------------------------ examples
    def example_inputs(
        self, shape: str = "opt", batch_size: int | None = None, seed: int = 0
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Random inputs that :meth:`validate` accepts, at the ``"min"``, ``"opt"`` or ``"max"`` shape.

        Unbounded axes use their minimum, at least 1 (also ``"opt"`` without an opt shape); ``batch_size`` overrides the
        batch axis (ValueError out of range or without batching). Values come from each input's domain
        (:func:`generator.planning.values.draw`), else small non-negative integers and all-ones masks.
        """
        if shape not in ("min", "opt", "max"):
            raise ValueError(f"shape must be 'min', 'opt' or 'max', not {shape!r}")
        if batch_size is not None:
            if not self.batching:
                raise ValueError(f"model '{self.name}' does not batch (max_batch_size 0); batch_size must be None")
            if not 1 <= batch_size <= self.max_batch_size:
                raise ValueError(f"batch_size {batch_size} outside 1..{self.max_batch_size} for model '{self.name}'")
        rng = np.random.default_rng(seed)
        out: dict[str, np.ndarray[Any, Any]] = {}
        for tensor in self.inputs:
            dims = list(_pick_shape(tensor, shape))
            if batch_size is not None:
                low, high = tensor.min_shape[0], tensor.max_shape[0]
                if batch_size < low or (high is not None and batch_size > high):
                    raise ValueError(
                        f"batch_size {batch_size} outside input '{tensor.name}' batch range {range_text(low, high)}"
                    )
                dims[0] = batch_size
            out[tensor.name] = _random_array(rng, tensor, tuple(dims))
        return out

    def to_infer_inputs(self, inputs: Mapping[str, np.ndarray[Any, Any]], protocol: str = "grpc") -> list[Any]:
        """Build tritonclient ``InferInput``s with this model's wire datatypes (see :func:`to_infer_inputs`)."""
        datatypes = {t.name: t.datatype for t in self.inputs}
        return to_infer_inputs(inputs, protocol=protocol, datatypes=datatypes)


def to_infer_inputs(
    inputs: Mapping[str, np.ndarray[Any, Any]], protocol: str = "grpc", datatypes: Mapping[str, str] | None = None
) -> list[Any]:
    """Turn ``name -> array`` into ``tritonclient.grpc.InferInput`` or ``tritonclient.http.InferInput`` objects.

    The wire datatype comes from ``datatypes`` (name -> ``"FP32"``) when given, else from the array's dtype.
    """
    if protocol not in ("grpc", "http"):
        raise ValueError(f"protocol must be 'grpc' or 'http', not {protocol!r}")
    # Imported on demand: the HTTP client pulls gevent, which a gRPC-only caller should not pay for.
    client_module: Any = importlib.import_module(f"tritonclient.{protocol}")
    from tritonclient.utils import np_to_triton_dtype

    result = []
    for name in inputs:
        array = np.asarray(inputs[name])
        datatype = (datatypes or {}).get(name) or np_to_triton_dtype(array.dtype)
        if datatype is None:
            raise ValueError(f"input '{name}': numpy dtype {array.dtype} has no Triton datatype")
        infer_input = client_module.InferInput(name, list(array.shape), datatype)
        infer_input.set_data_from_numpy(array)
        result.append(infer_input)
    return result


def config_to_contract(config: model_config_pb2.ModelConfig, name: str = "", source: str = "") -> ModelContract:
    """Contract from a ``ModelConfig``: ``-1`` dims allow any size >= 0, the batch axis ``1..max_batch_size``."""
    max_batch_size = int(config.max_batch_size)

    def tensor(io: Any, is_input: bool) -> TensorContract:
        dims = tuple(int(d) for d in io.dims)
        min_shape: list[int] = []
        max_shape: list[int | None] = []
        if max_batch_size > 0:
            min_shape.append(1)
            max_shape.append(max_batch_size)
        for d in dims:
            min_shape.append(0 if d < 0 else d)
            max_shape.append(None if d < 0 else d)
        return TensorContract(
            name=io.name,
            data_type=model_config_pb2.DataType.Name(io.data_type),
            dims=dims,
            min_shape=tuple(min_shape),
            max_shape=tuple(max_shape),
            opt_shape=None,
            optional=bool(getattr(io, "optional", False)) if is_input else False,
        )

    return ModelContract(
        name=name or config.name,
        max_batch_size=max_batch_size,
        inputs=tuple(tensor(io, True) for io in config.input),
        outputs=tuple(tensor(io, False) for io in config.output),
        version=None,
        platform=config.platform,
        backend=config.backend,
        source=source,
    )


# ---------------------------------------------------------------------------- helpers
def _dtype_ok(tensor: TensorContract, dtype: np.dtype[Any]) -> bool:
    if tensor.data_type == "TYPE_STRING":
        # tritonclient serialises object arrays (bytes or str) and bytes_ arrays; unicode arrays ('U') it refuses.
        return dtype == np.dtype(object) or dtype.kind == "S"
    return dtype == tensor.dtype


def _pick_shape(tensor: TensorContract, which: str) -> Shape:
    at_least_one = tuple(max(d, 1) for d in tensor.min_shape)
    if which == "min":
        return at_least_one
    if which == "opt":
        return tensor.opt_shape if tensor.opt_shape is not None else at_least_one
    return tuple(lo if hi is None else hi for lo, hi in zip(at_least_one, tensor.max_shape, strict=True))


def _random_array(rng: np.random.Generator, tensor: TensorContract, shape: Shape) -> np.ndarray[Any, Any]:
    if tensor.data_type == "TYPE_STRING":
        flat = np.array([f"text-{i}".encode() for i in range(int(np.prod(shape, dtype=np.int64)))], dtype=object)
        return flat.reshape(shape)
    if tensor.data_type == "TYPE_BF16":
        return rng.standard_normal(size=shape).astype(tensor.dtype)
    return draw(rng, tensor.name, str(tensor.dtype), shape, tensor.values)
