"""Smoke-test a model repository through tritonclient against a live Triton server (``gen-repo smoke``).

Every check is a named :class:`CheckResult` with its duration; :func:`run_smoke` returns them in a
:class:`SmokeReport` whose :attr:`~SmokeReport.exit_code` a release pipeline acts on. The checks, per model:

``ready``
    the server is live; the model is ready, or is loaded through the repository API (explicit model control).
    Fails with the server's own reason (repository index or load error) when the model does not load.
``config``
    the server's view (``get_model_config``) agrees with ``<repo>/<model>/config.pbtxt`` on max_batch_size, inputs
    and outputs (names, data types, dims, reshape), dynamic batching and instance groups; ``get_model_metadata``
    agrees with it too; and so does ``gen_repo/contract.json`` when there is one. Skipped without ``--repo``.
``inference``
    requests at the min, opt and max shapes (batch sizes 1, opt and max) are served, with every output present at
    the right data type and shape. Inputs are the stored reference inputs (``gen_repo/reference.npz``), or random
    inputs inside the config's dims for repositories gen-repo did not build.
``reference``
    those outputs match the stored references within dtype-aware tolerances (overridable). Skipped, with the
    reason, when the repository has no reference data.
``reject_batch`` / ``reject_shape``
    a request with batch ``max_batch_size + 1`` and one with a dim outside the profile range (or a static dim
    changed) are *rejected* by the server; a served request fails the check.
``burst``
    ``burst`` requests with ``concurrency`` in flight all succeed; with dynamic batching on, the model statistics
    show fewer executions than inferences over the burst. With ``perf`` the details carry throughput and
    p50/p99 latency.

Nothing hangs: every call carries a timeout (gRPC ``client_timeout``, HTTP connection/network timeouts), and once
the server stops answering (a transport error and a failed liveness probe) every remaining check is reported as an
``error`` naming where the server was lost, without waiting on it again.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

from generator.bounded import read_text
from generator.client import ModelContract, config_to_contract, to_infer_inputs, wire_datatype
from generator.confinement import confined_path
from generator.errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, GenRepoError
from generator.naming import version_folder
from generator.planning.compare import DEFAULT_TOLERANCES, CompareSettings, compare_output, tolerance_for
from generator.triton.connection import Connection, is_transport_error

__all__ = [
    "CHECKS",
    "DEFAULT_TOLERANCES",
    "STATUSES",
    "CheckResult",
    "SmokeOptions",
    "SmokeReport",
    "config_differences",
    "repository_models",
    "run_smoke",
    "tolerance_for",
    "unreachable_report",
]

#: Checks in the order they run for each model.
CHECKS = ("ready", "config", "inference", "reference", "reject_batch", "reject_shape", "burst")
STATUSES = ("passed", "failed", "skipped", "error")
#: Pseudo model name for results about the server itself (unreachable, nothing to check).
SERVER = "(server)"

#: Triton prefixes request errors with the request id; ours are anonymous, so the prefix is noise.
_REQUEST_ID = re.compile(r"^\[request id: [^\]]*\]\s*")
#: Added to refusals of random inputs built from a config alone.
_RANGE_HINT = (
    " (inputs were random with size 1 for every -1 dim: a config alone gives no ranges; pass --repo with the "
    "repository gen-repo built, whose gen_repo/contract.json has them)"
)
#: How many failed burst requests a result quotes.
_QUOTED_FAILURES = 5
#: Bursts tried before "dynamic batching did not batch" is a failure (batching depends on request timing).
BURST_ATTEMPTS = 3


# --------------------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SmokeOptions:
    """How hard to check.

    ``timeout_s`` bounds every network call; ``load_timeout_s`` a model load through the repository API. ``rtol`` /
    ``atol`` (when set) replace the dtype-aware defaults for every output. ``perf`` adds throughput and latency
    figures to the burst's details.
    """

    timeout_s: float = 10.0
    load_timeout_s: float = 120.0
    burst: int = 64
    concurrency: int = 16
    rtol: float | None = None
    atol: float | None = None
    perf: bool = False
    seed: int = 0


@dataclass(slots=True)
class CheckResult:
    """One check of one model: ``status`` is ``passed``, ``failed``, ``skipped`` or ``error`` (could not run)."""

    model: str
    check: str
    status: str
    duration_s: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (plain types only)."""
        return {
            "model": self.model,
            "check": self.check,
            "status": self.status,
            "duration_s": round(self.duration_s, 4),
            "message": self.message,
            "details": _jsonable(self.details),
        }


@dataclass(slots=True)
class SmokeReport:
    """Every result of a smoke run, and where it ran."""

    results: list[CheckResult]
    server_url: str
    protocol: str
    reachable: bool = True
    #: Non-empty when the server stopped answering during the run: where and why.
    server_lost: str = ""

    @property
    def exit_code(self) -> int:
        """0 when every check passed or was skipped, 1 when one failed or errored, 3 when the server was unreachable."""
        if not self.reachable:
            return EXIT_UNREACHABLE
        if any(r.status in ("failed", "error") for r in self.results):
            return EXIT_FAILED
        return EXIT_OK

    @property
    def models(self) -> list[str]:
        """Model names in the order they were checked."""
        return list(dict.fromkeys(r.model for r in self.results))

    def counts(self) -> dict[str, int]:
        """Count the results per status (every status present, zero when none)."""
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def for_model(self, model: str) -> dict[str, CheckResult]:
        """Return the results of one model, by check name."""
        return {r.check: r for r in self.results if r.model == model}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``--json``)."""
        return {
            "format": "gen-repo-smoke/1",
            "server_url": self.server_url,
            "protocol": self.protocol,
            "reachable": self.reachable,
            "server_lost": self.server_lost,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# --------------------------------------------------------------------------------------------------------------------
# Talking to the server
# --------------------------------------------------------------------------------------------------------------------
class ServerLostError(Exception):
    """The server stopped answering (transport error and a failed liveness probe)."""


def _infer(
    connection: Connection,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    datatypes: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Run one request of numpy arrays; return every requested output by name (raises when refused)."""
    infer_inputs = to_infer_inputs(inputs, protocol=connection.protocol, datatypes=datatypes)
    return connection.infer(model, infer_inputs, outputs)


# --------------------------------------------------------------------------------------------------------------------
# Comparing configs
# --------------------------------------------------------------------------------------------------------------------
def _io_differences(kind: str, expected: Sequence[Any], served: Sequence[Any]) -> list[str]:
    problems = []
    want = {io.name: io for io in expected}
    have = {io.name: io for io in served}
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing:
        problems.append(f"{kind}s missing on the server: {missing}")
    if extra:
        problems.append(f"{kind}s the generated config does not have: {extra}")
    for name in [n for n in want if n in have]:
        a, b = want[name], have[name]
        if a.data_type != b.data_type:
            problems.append(
                f"{kind} '{name}' data_type: generated {model_config_pb2.DataType.Name(a.data_type)}, "
                f"server {model_config_pb2.DataType.Name(b.data_type)}"
            )
        if list(a.dims) != list(b.dims):
            problems.append(f"{kind} '{name}' dims: generated {list(a.dims)}, server {list(b.dims)}")
        if a.HasField("reshape") != b.HasField("reshape") or list(a.reshape.shape) != list(b.reshape.shape):
            shown = [list(m.reshape.shape) if m.HasField("reshape") else None for m in (a, b)]
            problems.append(f"{kind} '{name}' reshape: generated {shown[0]}, server {shown[1]}")
    return problems


def _message_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def config_differences(expected: model_config_pb2.ModelConfig, served: model_config_pb2.ModelConfig) -> list[str]:
    """List what differs between a generated config and the server's view of it; empty when they agree.

    Compared: max_batch_size, platform/backend (where the generated config sets them), inputs and outputs (names,
    data types, dims, reshape), dynamic batching (every field; ``preferred_batch_size`` only when the generated
    config sets it, because Triton fills it in otherwise) and instance groups (count, kind unless ``KIND_AUTO``,
    gpus where set; names and server defaults for a config without groups are not compared).
    """
    problems: list[str] = []
    if expected.max_batch_size != served.max_batch_size:
        problems.append(f"max_batch_size: generated {expected.max_batch_size}, server {served.max_batch_size}")
    for attribute in ("platform", "backend"):
        want, have = getattr(expected, attribute), getattr(served, attribute)
        if want and want != have:
            problems.append(f"{attribute}: generated {want!r}, server {have!r}")
    problems += _io_differences("input", expected.input, served.input)
    problems += _io_differences("output", expected.output, served.output)

    if expected.HasField("dynamic_batching") != served.HasField("dynamic_batching"):
        state = {True: "on", False: "off"}
        problems.append(
            f"dynamic_batching: generated {state[expected.HasField('dynamic_batching')]}, "
            f"server {state[served.HasField('dynamic_batching')]}"
        )
    elif expected.HasField("dynamic_batching"):
        want_db, have_db = _message_dict(expected.dynamic_batching), _message_dict(served.dynamic_batching)
        if "preferred_batch_size" not in want_db:
            have_db.pop("preferred_batch_size", None)
        for key in sorted(set(want_db) | set(have_db)):
            if want_db.get(key) != have_db.get(key):
                problems.append(f"dynamic_batching.{key}: generated {want_db.get(key)}, server {have_db.get(key)}")

    if expected.instance_group:
        if len(expected.instance_group) != len(served.instance_group):
            problems.append(
                f"instance_group: generated {len(expected.instance_group)} group(s), "
                f"server {len(served.instance_group)}"
            )
        for i, (want_ig, have_ig) in enumerate(zip(expected.instance_group, served.instance_group, strict=False)):
            kind = model_config_pb2.ModelInstanceGroup.Kind.Name
            if max(want_ig.count, 1) != have_ig.count:
                problems.append(f"instance_group[{i}].count: generated {want_ig.count}, server {have_ig.count}")
            if want_ig.kind != model_config_pb2.ModelInstanceGroup.KIND_AUTO and want_ig.kind != have_ig.kind:
                problems.append(
                    f"instance_group[{i}].kind: generated {kind(want_ig.kind)}, server {kind(have_ig.kind)}"
                )
            if list(want_ig.gpus) and list(want_ig.gpus) != list(have_ig.gpus):
                problems.append(
                    f"instance_group[{i}].gpus: generated {list(want_ig.gpus)}, server {list(have_ig.gpus)}"
                )
    return problems


def _metadata_differences(expected: model_config_pb2.ModelConfig, metadata: Mapping[str, Any]) -> list[str]:
    """Whether ``get_model_metadata`` describes the generated config's tensors (shape = [-1] + dims when batching)."""
    problems = []
    batch = [-1] if expected.max_batch_size > 0 else []
    for kind, ios, key in (("input", expected.input, "inputs"), ("output", expected.output, "outputs")):
        served = {t["name"]: t for t in metadata.get(key, [])}
        for io in ios:
            entry = served.get(io.name)
            if entry is None:
                problems.append(f"metadata: {kind} '{io.name}' missing")
                continue
            want_type = wire_datatype(model_config_pb2.DataType.Name(io.data_type))
            if entry["datatype"] != want_type:
                problems.append(f"metadata: {kind} '{io.name}' datatype {entry['datatype']}, expected {want_type}")
            want_shape = batch + list(io.dims)
            if entry["shape"] != want_shape:
                problems.append(f"metadata: {kind} '{io.name}' shape {entry['shape']}, expected {want_shape}")
        extra = sorted(set(served) - {io.name for io in ios})
        if extra:
            problems.append(f"metadata: unexpected {kind}s {extra}")
    return problems


def _contract_differences(contract: ModelContract, served: model_config_pb2.ModelConfig) -> list[str]:
    """Whether ``gen_repo/contract.json`` (what requests are built from) matches the server's config."""
    problems = []
    view = config_to_contract(served, name=contract.name)
    if contract.max_batch_size != view.max_batch_size:
        problems.append(f"contract.json max_batch_size {contract.max_batch_size}, server {view.max_batch_size}")
    for kind, want, have in (("input", contract.inputs, view.inputs), ("output", contract.outputs, view.outputs)):
        served_tensors = {t.name: t for t in have}
        for tensor in want:
            other = served_tensors.get(tensor.name)
            if other is None:
                problems.append(f"contract.json {kind} '{tensor.name}' is not on the server")
            elif (tensor.data_type, tensor.dims) != (other.data_type, other.dims):
                problems.append(
                    f"contract.json {kind} '{tensor.name}' is {tensor.data_type} {list(tensor.dims)}, "
                    f"server {other.data_type} {list(other.dims)}"
                )
    return problems


#: How Triton says that a model's backend is not installed (core ``backend_manager.cc``).
_MISSING_BACKEND = re.compile(r"unable to find backend library for backend '(?P<backend>[^']+)'")


def missing_backend(text: str, side: _ModelSide | None, details: dict[str, Any]) -> str:
    """For a load failure because the server lacks the model's backend: what to do, as a sentence ("" otherwise).

    Names the backend (and the config's platform), and the two ways on: a Triton with that backend, or a build for
    Triton's Python backend (``--target python``: the same ONNX run by onnxruntime inside it), which a CPU-only Triton
    such as the one in ``nvidia-pytriton`` serves. ``details`` gains ``missing_backend``.
    """
    match = _MISSING_BACKEND.search(text)
    if match is None:
        return ""
    backend = match["backend"]
    details["missing_backend"] = backend
    config = side.config if side is not None else None
    asks = f"platform '{config.platform}'" if config is not None and config.platform else f"backend '{backend}'"
    return (f" -- this server has no '{backend}' backend, and the model's config asks for it ({asks}): serve the "
            f"repository with a Triton that has the {backend} backend (NVIDIA's tritonserver containers ship it), or "
            "build the model for Triton's Python backend, which CPU-only Triton builds such as nvidia-pytriton's have: "
            "`gen-repo build MANIFEST --target python` (the same ONNX, run by onnxruntime inside the Python backend)")


# --------------------------------------------------------------------------------------------------------------------
# The reference comparison (tolerances and the element test: generator.planning.compare)
# --------------------------------------------------------------------------------------------------------------------
def _compare(settings: CompareSettings, output: str, have: np.ndarray, want: np.ndarray,
             inputs: Mapping[str, np.ndarray], options: SmokeOptions) -> tuple[dict[str, Any], str]:
    """The reference check's record of one output and its problem ("" when it matches).

    :func:`generator.planning.compare.compare_output` with the build's settings (``reference.json``'s ``compare``); the
    smoke options' ``rtol``/``atol`` win where given.
    """
    compared, rtol, atol, problem = compare_output(settings, output, have, want, inputs, rtol=options.rtol,
                                                   atol=options.atol)
    entry: dict[str, Any] = {"rtol": rtol, "atol": atol, "shape": list(have.shape)}
    if compared is None:
        entry.update(ok=False, problem=problem)
    else:
        entry.update(compared.to_json())
    return entry, problem


# --------------------------------------------------------------------------------------------------------------------
# The repository side
# --------------------------------------------------------------------------------------------------------------------
def repository_models(repo_dir: Path | str) -> list[str]:
    """Model folders of a repository (those holding a ``config.pbtxt`` or a numeric version folder), sorted."""
    root = Path(repo_dir)
    names = []
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        if not child.is_dir() or child.name.startswith("."):
            continue
        if (child / "config.pbtxt").is_file() or any(p.is_dir() and version_folder(p.name) is not None
                                                      for p in child.iterdir()):
            names.append(child.name)
    return names


@dataclass(slots=True)
class _Case:
    """One request the inference check sends: inputs, and reference outputs when known."""

    name: str
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray] | None = None


@dataclass(slots=True)
class _ModelSide:
    """What the repository says about one model (all optional: a run without ``--repo`` knows nothing)."""

    config: model_config_pb2.ModelConfig | None = None
    config_path: str = ""
    contract: ModelContract | None = None
    contract_path: str = ""
    reference_dir: Path | None = None
    #: How the build compared the outputs (tolerances, padding mask): smoke compares the same way.
    compare: CompareSettings = field(default_factory=CompareSettings)
    problems: list[str] = field(default_factory=list)


def _model_side(repo_dir: Path | None, model: str) -> _ModelSide:
    side = _ModelSide()
    if repo_dir is None:
        return side
    # The name comes from the server or the command line, and every file is the repository's: each path must stay in
    # the repository (no '..', no symlink leading out) before anything is read.
    try:
        model_dir = confined_path(repo_dir, model)
        config_path = confined_path(repo_dir, model, "config.pbtxt")
    except ValueError as error:
        side.problems.append(f"model {model!r}: {error}")
        return side
    if not model_dir.is_dir():
        side.problems.append(f"model '{model}' has no folder in {repo_dir}")
        return side
    if config_path.is_file():
        try:
            side.config = text_format.Parse(read_text(config_path, "config_bytes"), model_config_pb2.ModelConfig())
            side.config_path = str(config_path)
        except (text_format.ParseError, OSError) as exc:
            side.problems.append(f"{config_path}: cannot parse: {exc}")
    versions = sorted(v for p in model_dir.iterdir() if p.is_dir() and (v := version_folder(p.name)) is not None)
    if versions:
        try:
            gen_repo = confined_path(repo_dir, model, str(versions[-1]), "gen_repo")
            contract_path = confined_path(gen_repo, "contract.json")
            for name in ("reference.json", "reference.npz"):  # what the reference readers open in gen_repo
                confined_path(gen_repo, name)
        except ValueError as error:
            side.problems.append(f"model {model!r}: {error}")
            return side
        if contract_path.is_file():
            try:
                side.contract = ModelContract.from_contract_json(contract_path, config=side.config, model=model)
                side.contract_path = str(contract_path)
            except (ValueError, KeyError, OSError) as exc:
                side.problems.append(f"{contract_path}: cannot read: {exc}")
        if (gen_repo / "reference.json").is_file():
            side.reference_dir = gen_repo
            from generator.contracts.reference_data import read_compare_settings

            try:
                side.compare = read_compare_settings(gen_repo)
            except GenRepoError as exc:
                side.problems.extend(str(p) for p in exc.problems)
    return side


# --------------------------------------------------------------------------------------------------------------------
# Running the checks
# --------------------------------------------------------------------------------------------------------------------
Outcome = tuple[str, str, dict[str, Any]]
Progress = Callable[[CheckResult], None]


class _Run:
    """One smoke run: the connection, the options, the results so far and whether the server was lost."""

    def __init__(
        self, url: str, protocol: str, repo_dir: Path | None, options: SmokeOptions, progress: Progress | None
    ) -> None:
        self.url, self.protocol, self.repo_dir, self.options = url, protocol, repo_dir, options
        self.progress = progress
        self.results: list[CheckResult] = []
        self.lost = ""
        self.conn = Connection(url, protocol, options.timeout_s)

    # -- bookkeeping --------------------------------------------------------------------------------------------------
    def add(self, result: CheckResult) -> CheckResult:
        self.results.append(result)
        if self.progress is not None:
            self.progress(result)
        return result

    def check(self, model: str, name: str, body: Callable[[], Outcome]) -> CheckResult:
        """Run one check: its outcome, or ``error`` with the exception; a transport error probes the server."""
        if self.lost:
            return self.add(CheckResult(model, name, "error", 0.0, f"not run: {self.lost}"))
        started = time.monotonic()
        try:
            status, message, details = body()
        except ServerLostError as exc:
            status, message, details = "error", str(exc), {}
        except Exception as exc:
            status, message, details = "error", f"{type(exc).__name__}: {_exception_text(exc)}", {}
            if is_transport_error(exc) and not self.alive():
                self.lost = f"the server stopped answering during {model}/{name} ({_exception_text(exc)})"
                message = f"server lost: {self.lost}"
        duration = time.monotonic() - started
        return self.add(CheckResult(model, name, status, duration, message, details))

    def alive(self) -> bool:
        """Probe liveness once (with the timeout); False when the server does not answer or is not live."""
        try:
            return self.conn.live()
        except Exception:
            return False

    def transport(self, exc: BaseException, where: str) -> None:
        """Raise ServerLostError when ``exc`` is a transport error and the server no longer answers."""
        if is_transport_error(exc) and not self.alive():
            self.lost = f"the server stopped answering during {where} ({_exception_text(exc)})"
            raise ServerLostError(f"server lost: {self.lost}") from exc

    # -- one model --------------------------------------------------------------------------------------------------
    def run_model(self, model: str) -> None:
        side = _model_side(self.repo_dir, model)
        ready = self.check(model, "ready", lambda: self.check_ready(model, side))
        if ready.status != "passed":
            status = "skipped" if ready.status == "failed" else "error"
            reason = f"model '{model}' is not ready" if ready.status == "failed" else (
                self.lost or ready.message.removeprefix("not run: ")
            )
            for name in CHECKS[1:]:
                self.add(CheckResult(model, name, status, 0.0, f"not run: {reason}"))
            return
        state: dict[str, Any] = {}
        try:
            state["served_config"] = self.conn.config(model)
        except Exception as exc:
            if is_transport_error(exc) and not self.alive():
                self.lost = f"the server stopped answering during {model} ({_exception_text(exc)})"
            problem = self.lost or f"cannot get the server's config of '{model}': {_exception_text(exc)}"
            if side.contract is None:  # nothing to build requests from
                for name in CHECKS[1:]:
                    self.add(CheckResult(model, name, "error", 0.0, f"not run: {problem}"))
                return
        served = state.get("served_config")
        state["config_only"] = side.contract is None
        state["contract"] = side.contract or config_to_contract(served, name=model, source=f"{self.protocol}://{self.url}")
        self.check(model, "config", lambda: self.check_config(model, side, state))
        self.check(model, "inference", lambda: self.check_inference(model, side, state))
        self.check(model, "reference", lambda: self.check_reference(model, side, state))
        self.check(model, "reject_batch", lambda: self.check_reject_batch(model, state))
        self.check(model, "reject_shape", lambda: self.check_reject_shape(model, side, state))
        self.check(model, "burst", lambda: self.check_burst(model, state))

    # -- 1. ready -----------------------------------------------------------------------------------------------------
    def check_ready(self, model: str, side: _ModelSide | None = None) -> Outcome:
        details: dict[str, Any] = {"server_live": self.conn.live()}
        if not details["server_live"]:
            return "failed", "the server answers but does not report live", details
        details["server_ready"] = self.conn.ready()
        if self.conn.model_ready(model):
            details["model_ready"] = True
            note = "" if details["server_ready"] else " (the server as a whole is not ready: another model failed?)"
            return "passed", f"model '{model}' is ready{note}", details
        entry = self._index_entry(model)
        if entry.get("state") == "LOADING":  # poll/none mode still loading: wait for it, bounded
            deadline = time.monotonic() + self.options.load_timeout_s
            while time.monotonic() < deadline and self._index_entry(model).get("state") == "LOADING":
                time.sleep(0.25)
            if self.conn.model_ready(model):
                details["model_ready"] = True
                return "passed", f"model '{model}' is ready (after loading)", details
        try:
            self.conn.load(model, self.options.load_timeout_s)
        except InferenceServerException as exc:
            self.transport(exc, f"{model}/ready")
            text = _exception_text(exc)
            details["load_error"] = text
            entry = self._index_entry(model)
            details.update({"state": entry.get("state", ""), "reason": entry.get("reason", "")})
            if "explicit model load" in text or "not allowed" in text:
                why = entry.get("reason") or entry.get("state") or "not in the server's repository index"
                return "failed", f"model '{model}' is not ready and the server does not load models on request: " \
                    f"{why}{missing_backend(why, side, details)}", details
            return "failed", f"model '{model}' failed to load: {text}{missing_backend(text, side, details)}", details
        details["loaded_through_repository_api"] = True
        details["model_ready"] = self.conn.model_ready(model)
        if not details["model_ready"]:
            entry = self._index_entry(model)
            return "failed", f"model '{model}' was loaded but is not ready: {entry.get('reason', '')}", details
        return "passed", f"model '{model}' loaded through the repository API and ready", details

    def _index_entry(self, model: str) -> dict[str, str]:
        try:
            entries = [e for e in self.conn.index() if e["name"] == model]
        except Exception:
            return {}
        # Several versions: the first one that is not READY explains a failure best.
        entries.sort(key=lambda e: e.get("state") == "READY")
        return entries[0] if entries else {"state": "", "reason": "not in the server's repository index"}

    # -- 2. config ----------------------------------------------------------------------------------------------------
    def check_config(self, model: str, side: _ModelSide, state: dict[str, Any]) -> Outcome:
        if self.repo_dir is None:
            return "skipped", "no --repo: no generated config to compare the server's with", {}
        if side.problems and side.config is None:
            return "failed", "; ".join(side.problems), {}
        if side.config is None:
            return "skipped", f"{self.repo_dir / model} has no config.pbtxt to compare with", {}
        served = self.conn.config(model)
        state["served_config"] = served
        problems = config_differences(side.config, served)
        problems += _metadata_differences(side.config, self.conn.metadata(model))
        if side.contract is not None:
            problems += _contract_differences(side.contract, served)
        details: dict[str, Any] = {"generated": side.config_path, "differences": problems}
        if side.contract_path:
            details["contract"] = side.contract_path
        if problems:
            return "failed", f"the server's view differs from {side.config_path}: " + "; ".join(problems), details
        return "passed", "server config and metadata agree with the generated config", details

    # -- 3. inference and reference -----------------------------------------------------------------------------------
    def _cases(self, model: str, side: _ModelSide, contract: ModelContract) -> tuple[list[_Case], str]:
        """Return the reference cases if stored, else random inputs at min/opt/max; and why there is no reference."""
        if side.reference_dir is not None:
            from generator.contracts.reference_data import read_reference

            stored = read_reference(side.reference_dir)
            return [_Case(c.name, dict(c.inputs), dict(c.outputs)) for c in stored], ""
        if self.repo_dir is None:
            why = "no --repo: no reference data to compare with"
        elif (self.repo_dir / model).is_dir():
            why = f"{self.repo_dir / model} has no gen_repo/reference.json (a repository gen-repo did not build)"
        else:
            why = f"model '{model}' is not in {self.repo_dir}"
        cases = []
        for i, shape in enumerate(("min", "opt", "max")):
            cases.append(_Case(shape, contract.example_inputs(shape, seed=self.options.seed + i)))
        return cases, why

    def check_inference(self, model: str, side: _ModelSide, state: dict[str, Any]) -> Outcome:
        contract: ModelContract = state["contract"]
        cases, why = self._cases(model, side, contract)
        state["cases"], state["no_reference"] = cases, why
        datatypes = {t.name: t.datatype for t in contract.inputs}
        outputs = [t.name for t in contract.outputs]
        problems, per_case = [], []
        responses: dict[str, dict[str, np.ndarray]] = {}
        for case in cases:
            started = time.monotonic()
            entry: dict[str, Any] = {"case": case.name, "inputs": {n: list(a.shape) for n, a in case.inputs.items()}}
            try:
                result = _infer(self.conn, model, case.inputs, outputs, datatypes)
            except Exception as exc:
                self.transport(exc, f"{model}/inference")
                problems.append(f"case {case.name}: request refused: {_exception_text(exc)}")
                entry["error"] = _exception_text(exc)
                per_case.append(entry)
                continue
            entry["latency_ms"] = round((time.monotonic() - started) * 1000, 3)
            entry["outputs"] = {n: list(a.shape) for n, a in result.items()}
            responses[case.name] = result
            problems += [f"case {case.name}: {p}" for p in _output_problems(contract, case.inputs, result)]
            per_case.append(entry)
        state["responses"] = responses
        details: dict[str, Any] = {"cases": per_case}
        if why:
            details["inputs"] = "random inputs inside the config's dims"
        if problems:
            hint = _RANGE_HINT if side.contract is None and "error" in str(per_case) else ""
            return "failed", "; ".join(problems) + hint, details
        names = ", ".join(c.name for c in cases)
        source = "reference inputs" if not why else "random inputs"
        return "passed", f"served {len(cases)} requests ({names}) with {source}; outputs complete", details

    def check_reference(self, model: str, side: _ModelSide, state: dict[str, Any]) -> Outcome:
        if "cases" not in state:
            return "skipped", "not run: the inference check did not run", {}
        if state["no_reference"]:
            return "skipped", f"reference comparison skipped: {state['no_reference']}", {}
        responses: dict[str, dict[str, np.ndarray]] = state.get("responses", {})
        problems, compared = [], []
        for case in state["cases"]:
            if case.name not in responses:
                problems.append(f"case {case.name}: no response to compare (see the inference check)")
                continue
            for name, want in (case.reference or {}).items():
                have = responses[case.name].get(name)
                if have is None:
                    problems.append(f"case {case.name}: output '{name}' missing")
                    continue
                record, problem = _compare(side.compare, name, have, want, case.inputs, self.options)
                compared.append({"case": case.name, "output": name, **record})
                if problem:
                    problems.append(f"case {case.name}: output '{name}' differs from the reference: {problem}")
        details = {"comparisons": compared}
        if problems:
            return "failed", "; ".join(problems), details
        return "passed", f"{len(compared)} outputs match the stored references", details

    # -- 4. rejections ------------------------------------------------------------------------------------------------
    def _expect_rejection(self, model: str, check: str, inputs: dict[str, np.ndarray], what: str,
                          contract: ModelContract) -> Outcome:
        details: dict[str, Any] = {"request": {n: list(a.shape) for n, a in inputs.items()}}
        datatypes = {t.name: t.datatype for t in contract.inputs}
        try:
            result = _infer(self.conn, model, inputs, [t.name for t in contract.outputs], datatypes)
        except Exception as exc:
            self.transport(exc, f"{model}/{check}")
            if is_transport_error(exc):
                raise
            details["server_error"] = _exception_text(exc)
            if not self.alive():  # a "rejection" by a server that died answering is not a rejection
                self.lost = f"the server stopped answering after the {model}/{check} request"
                raise ServerLostError(f"server lost: {self.lost}") from exc
            # Triton appends a long NOTE on max_batch_size to shape errors; the details keep the whole text.
            reason = _exception_text(exc).split(" NOTE: ")[0]
            return "passed", f"rejected {what}: {_short(reason)}", details
        details["served_outputs"] = {n: list(a.shape) for n, a in result.items()}
        return "failed", f"the server SERVED {what} instead of rejecting it", details

    def check_reject_batch(self, model: str, state: dict[str, Any]) -> Outcome:
        contract: ModelContract = state["contract"]
        if not contract.batching:
            return "skipped", "model does not batch (max_batch_size 0): no batch size is too large", {}
        size = contract.max_batch_size + 1
        inputs = {n: np.repeat(a[:1], size, axis=0) for n, a in contract.example_inputs("min").items()}
        return self._expect_rejection(
            model, "reject_batch", inputs, f"a request with batch {size} > max_batch_size {contract.max_batch_size}",
            contract,
        )

    def check_reject_shape(self, model: str, side: _ModelSide, state: dict[str, Any]) -> Outcome:
        contract: ModelContract = state["contract"]
        inputs, changes = _out_of_range_inputs(contract)
        if not changes:
            return "skipped", "every non-batch axis is unbounded (-1 dims without a profile): no size is out of " \
                "range", {}
        where = "profile range" if side.contract is not None else "config dims"
        return self._expect_rejection(
            model, "reject_shape", inputs, f"a request outside the {where} ({'; '.join(changes)})", contract
        )

    # -- 5./6. burst --------------------------------------------------------------------------------------------------
    def check_burst(self, model: str, state: dict[str, Any]) -> Outcome:
        contract: ModelContract = state["contract"]
        options = self.options
        served = state.get("served_config") or self.conn.config(model)
        dynamic = served.HasField("dynamic_batching") and contract.batching
        inputs = contract.example_inputs("opt", batch_size=1 if contract.batching else None, seed=options.seed)
        # Whether requests queue long enough to be batched depends on timing; a burst that happened not to batch is
        # repeated (at most BURST_ATTEMPTS in all) before dynamic batching is called broken.
        attempts = 0
        while True:
            attempts += 1
            read = functools.partial(self.conn.statistics, model)
            before = quiet_statistics(read, options.timeout_s)
            outcome = _burst(self.url, self.protocol, model, contract, inputs, options)
            try:
                after = settled_statistics(read, before, outcome.succeeded, options.timeout_s)
            except Exception as exc:
                self.transport(exc, f"{model}/burst")
                raise
            inferences, executions = after[0] - before[0], after[1] - before[1]
            batched = executions < inferences
            if not dynamic or batched or outcome.failures or outcome.transport_error or attempts >= BURST_ATTEMPTS:
                break
        details: dict[str, Any] = {
            "requests": options.burst,
            "concurrency": min(options.concurrency, options.burst),
            "succeeded": outcome.succeeded,
            "failed": len(outcome.failures),
            "inference_count": inferences,
            "execution_count": executions,
            "dynamic_batching": dynamic,
            "attempts": attempts,
        }
        if outcome.failures:
            details["failures"] = outcome.failures[:_QUOTED_FAILURES]
        if options.perf and outcome.latencies:
            details["perf"] = _perf(outcome)
        if outcome.transport_error:
            self.transport(outcome.transport_error, f"{model}/burst")
        if outcome.failures:
            hint = _RANGE_HINT if state.get("config_only") else ""
            return "failed", (
                f"{len(outcome.failures)} of {options.burst} requests failed "
                f"({min(options.concurrency, options.burst)} in flight); first: {outcome.failures[0]}{hint}"
            ), details
        if outcome.succeeded != options.burst:
            return "failed", f"only {outcome.succeeded} of {options.burst} requests ran", details
        summary = f"{options.burst} requests ({details['concurrency']} in flight) succeeded"
        if dynamic:
            if executions >= inferences:
                return "failed", (
                    f"{summary}, but dynamic batching is on and the server ran {executions} executions for "
                    f"{inferences} inferences: requests were not batched (in {attempts} bursts)"
                ), details
            summary += f"; batched: {inferences} inferences in {executions} executions"
        if "perf" in details:
            perf = details["perf"]
            summary += (f"; {perf['throughput_infer_per_s']:.1f} infer/s, p50 {perf['latency_p50_ms']:.2f} ms, "
                        f"p99 {perf['latency_p99_ms']:.2f} ms")
        return "passed", summary, details


def _exception_text(exc: BaseException) -> str:
    text = str(exc.message() or exc) if isinstance(exc, InferenceServerException) else str(exc)
    text = _REQUEST_ID.sub("", " ".join((text or type(exc).__name__).split()))
    return text


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _output_problems(
    contract: ModelContract, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]
) -> list[str]:
    """Missing outputs, wrong dtypes, shapes that do not fit the config dims or the request's batch size."""
    problems = []
    batch = next(iter(inputs.values())).shape[0] if contract.batching and inputs else None
    for tensor in contract.outputs:
        array = outputs.get(tensor.name)
        if array is None:
            problems.append(f"output '{tensor.name}' missing")
            continue
        if tensor.data_type != "TYPE_STRING" and array.dtype != tensor.dtype:
            problems.append(f"output '{tensor.name}' has dtype {array.dtype}, expected {tensor.dtype}")
        shape = list(array.shape)
        want = ([batch] if batch is not None else []) + list(tensor.dims)
        if len(shape) != len(want) or any(w >= 0 and s != w for s, w in zip(shape, want, strict=False)):
            shown = ["-1" if w < 0 else str(w) for w in want]
            problems.append(f"output '{tensor.name}' has shape {shape}, expected [{', '.join(shown)}]")
    return problems


def _out_of_range_inputs(contract: ModelContract) -> tuple[dict[str, np.ndarray], list[str]]:
    """Return opt-shape inputs with each input's first bounded non-batch axis just outside its range.

    One above the maximum, or one below the minimum when unbounded above; with a description of each change. No
    changes when no axis is bounded.
    """
    base = contract.example_inputs("opt", batch_size=1 if contract.batching else None)
    first_axis = 1 if contract.batching else 0
    changed: dict[str, np.ndarray] = {}
    changes = []
    for tensor in contract.inputs:
        array = base[tensor.name]
        for axis in range(first_axis, tensor.rank):
            low, high = tensor.min_shape[axis], tensor.max_shape[axis]
            if high is not None:
                size = high + 1
            elif low > 1:
                size = low - 1
            else:
                continue
            shape = list(array.shape)
            shape[axis] = size
            changed[tensor.name] = _fill(array, tuple(shape))
            allowed = f"{low}..{'' if high is None else high}" if low != high else f"exactly {low}"
            changes.append(f"input '{tensor.name}' axis {axis} = {size}, allowed {allowed}")
            break
    return {**base, **changed}, changes


def _fill(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Return an array of ``shape`` with ``array``'s dtype and values (repeated), so ids and masks stay valid."""
    if array.size == 0:
        return np.zeros(shape, dtype=array.dtype)
    return np.resize(array, shape).astype(array.dtype, copy=False)


# --------------------------------------------------------------------------------------------------------------------
# The burst
# --------------------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _BurstOutcome:
    succeeded: int = 0
    failures: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    transport_error: BaseException | None = None


Counts = tuple[int, int]


def quiet_statistics(read: Callable[[], Counts], timeout_s: float) -> Counts:
    """A model's (inference_count, execution_count) from ``read`` once two readings 20 ms apart agree.

    Triton counts a request after it has sent the response (see :func:`settled_statistics`), so earlier requests
    may still be being counted; counted into a burst's, they would inflate it. Polled for at most ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = read()
        if now == last:
            break
        last = now
    return last


def settled_statistics(read: Callable[[], Counts], before: Counts, succeeded: int, timeout_s: float) -> Counts:
    """The counts from ``read`` once they include the ``succeeded`` requests sent since ``before``.

    A client that has every response can still read counts without the last requests; a burst's counts read then
    would be short, and the next burst's would include the rest. Polled for at most ``timeout_s``; the last reading
    is returned either way.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        after = read()
        if after[0] - before[0] >= succeeded or time.monotonic() >= deadline:
            return after
        time.sleep(0.01)


def _open_connection(url: str, protocol: str, timeout_s: float) -> Connection:
    """A connection whose channel is open (a liveness call made), closed again when that fails."""
    connection = Connection(url, protocol, timeout_s)
    try:
        connection.live()  # gRPC opens its channel lazily: a burst's first requests would pay for it
    except BaseException:
        connection.close()
        raise
    return connection


def _burst(
    url: str, protocol: str, model: str, contract: ModelContract, inputs: dict[str, np.ndarray], options: SmokeOptions
) -> _BurstOutcome:
    """Send ``options.burst`` requests from ``options.concurrency`` threads (one connection each).

    Stops handing out requests after the first transport error. Worker threads are daemons and every request has
    the timeout, so the join below is bounded even when the server hangs.
    """
    outcome = _BurstOutcome()
    lock = threading.Lock()
    counter = itertools.count()
    abort = threading.Event()
    datatypes = {t.name: t.datatype for t in contract.inputs}
    outputs = [t.name for t in contract.outputs]
    thread_count = max(1, min(options.concurrency, options.burst))
    # Every thread connects first and then all send at once: requests that trickle in while threads still connect
    # (slow on a loaded machine) are each executed alone, and dynamic batching would look broken when it is not.
    start_line = threading.Barrier(thread_count)

    def worker() -> None:
        try:
            connection = _open_connection(url, protocol, options.timeout_s)
        except Exception as exc:
            with lock:
                outcome.failures.append(f"cannot connect: {_exception_text(exc)}")
                outcome.transport_error = outcome.transport_error or exc
            abort.set()
            start_line.abort()
            return
        with contextlib.suppress(threading.BrokenBarrierError):
            start_line.wait(options.timeout_s)
        with connection:
            while not abort.is_set():
                with lock:
                    index = next(counter)
                if index >= options.burst:
                    return
                started = time.monotonic()
                try:
                    result = _infer(connection, model, inputs, outputs, datatypes)
                except Exception as exc:
                    with lock:
                        outcome.failures.append(f"request {index}: {_exception_text(exc)}")
                        if is_transport_error(exc):
                            outcome.transport_error = outcome.transport_error or exc
                            abort.set()
                    continue
                elapsed = time.monotonic() - started
                problems = _output_problems(contract, inputs, result)
                with lock:
                    if problems:
                        outcome.failures.append(f"request {index}: {'; '.join(problems)}")
                    else:
                        outcome.succeeded += 1
                        outcome.latencies.append(elapsed)

    workers = [threading.Thread(target=worker, daemon=True, name=f"smoke-burst-{i}") for i in range(thread_count)]
    started = time.monotonic()
    for thread in workers:
        thread.start()
    # Each request is bounded by the timeout; a whole burst by (requests / threads + 2) timeouts.
    deadline = started + options.timeout_s * (math.ceil(options.burst / len(workers)) + 2)
    try:
        for thread in workers:
            thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        abort.set()
    outcome.wall_s = time.monotonic() - started
    if any(thread.is_alive() for thread in workers):
        with lock:
            outcome.failures.append("requests still running after the burst's deadline")
    return outcome


def _perf(outcome: _BurstOutcome) -> dict[str, float]:
    latencies_ms = np.array(outcome.latencies) * 1000.0
    return {
        "throughput_infer_per_s": round(outcome.succeeded / outcome.wall_s, 3) if outcome.wall_s > 0 else 0.0,
        "latency_p50_ms": round(float(np.percentile(latencies_ms, 50)), 3),
        "latency_p99_ms": round(float(np.percentile(latencies_ms, 99)), 3),
        "latency_mean_ms": round(float(latencies_ms.mean()), 3),
        "wall_s": round(outcome.wall_s, 4),
    }


# --------------------------------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------------------------------
def unreachable_report(url: str, protocol: str, models: Sequence[str], message: str) -> SmokeReport:
    """Build the report for a server that could not be reached: one ``ready`` error per model (exit code 3)."""
    names = list(models) or [SERVER]
    results = [CheckResult(name, "ready", "error", 0.0, message) for name in names]
    return SmokeReport(results, url, protocol, reachable=False)


def run_smoke(
    url: str,
    protocol: str = "grpc",
    repo_dir: Path | str | None = None,
    models: Sequence[str] | None = None,
    options: SmokeOptions | None = None,
    progress: Progress | None = None,
) -> SmokeReport:
    """Run every check for every model against the server at ``url`` (``host:port``) and return the report.

    Models: ``models`` if given, else the model folders of ``repo_dir``, else the server's repository index.
    ``progress`` is called with each result as soon as it is known. Never raises for server trouble: an unreachable
    server gives a report with exit code 3, a server lost mid-run ``error`` results naming where.
    """
    options = options or SmokeOptions()
    if protocol not in ("grpc", "http"):
        raise ValueError(f"protocol must be 'grpc' or 'http', not {protocol!r}")
    if options.burst < 1 or options.concurrency < 1:
        raise ValueError("burst and concurrency must be at least 1")
    repo = Path(repo_dir) if repo_dir is not None else None
    names = list(models) if models else (repository_models(repo) if repo is not None else [])
    try:
        run = _Run(url, protocol, repo, options, progress)
    except Exception as exc:  # a malformed URL
        return _emit(unreachable_report(url, protocol, names, f"cannot connect to {url}: {_exception_text(exc)}"),
                     progress)
    try:
        try:
            live = run.conn.live()
        except Exception as exc:
            return _emit(unreachable_report(
                url, protocol, names,
                f"server not reachable at {url} over {protocol} (timeout {options.timeout_s:g} s): "
                f"{_exception_text(exc)}",
            ), progress)
        if not live:
            return _emit(unreachable_report(url, protocol, names, f"server at {url} answers but is not live"),
                         progress)
        if not names:
            try:
                names = sorted({entry["name"] for entry in run.conn.index()})
            except Exception as exc:
                run.add(CheckResult(SERVER, "ready", "error", 0.0,
                                    f"cannot list the server's models: {_exception_text(exc)}"))
        if not names and not run.results:
            run.add(CheckResult(SERVER, "ready", "failed", 0.0, "no models to check (empty repository index)"))
        for name in names:
            run.run_model(name)
    finally:
        run.conn.close()
    return SmokeReport(run.results, url, protocol, reachable=True, server_lost=run.lost)


def _emit(report: SmokeReport, progress: Progress | None) -> SmokeReport:
    if progress is not None:
        for result in report.results:
            progress(result)
    return report
