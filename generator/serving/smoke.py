"""Smoke-test a model repository through tritonclient against a live Triton server (``gen-repo smoke``).

Per model the checks of docs/release-pipelines.md, each a :class:`CheckResult`. Nothing hangs: once the server stops
answering, the remaining checks are errors naming where it was lost.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.utils import InferenceServerException

from generator.client import ModelContract, config_to_contract
from generator.contracts.served import FolderReader, read_served_model
from generator.errors import GenRepoError, one_line
from generator.naming import version_folder
from generator.planning.compare import DEFAULT_TOLERANCES, CompareSettings, compare_output, tolerance_for
from generator.serving.burst import burst, perf_figures, quiet_statistics, settled_statistics
from generator.serving.config_drift import config_differences, contract_differences, metadata_differences
from generator.serving.requests import exception_text, infer, out_of_range_inputs, output_problems
from generator.serving.smoke_results import CHECKS, SERVER, CheckResult, SmokeOptions, SmokeReport
from generator.triton.connection import Connection, is_transport_error
from generator.triton.proto import model_config_pb2

__all__ = [
    "DEFAULT_TOLERANCES",
    "ServerLostError",
    "missing_backend",
    "repository_models",
    "run_smoke",
    "tolerance_for",
    "unreachable_report",
]

#: Added to refusals of random inputs built from a config alone.
_RANGE_HINT = (
    " (inputs were random with size 1 for every -1 dim: a config alone gives no ranges; pass --repo with the "
    "repository gen-repo built, whose gen_repo/contract.json has them)"
)
#: How many failed burst requests a result quotes.
_QUOTED_FAILURES = 5
#: Bursts tried before "dynamic batching did not batch" is a failure (batching depends on request timing).
BURST_ATTEMPTS = 3


# -- The server lost, a model that does not load ---------------------------------------------------------------------
class ServerLostError(Exception):
    """The server stopped answering (transport error and a failed liveness probe)."""


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


# -- The reference comparison (tolerances and the element test: generator.planning.compare) --------------------------
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


# -- The repository side ---------------------------------------------------------------------------------------------
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
    #: Which version was read and why (:meth:`generator.contracts.served.ServedModel.describe`).
    read: str = ""
    problems: list[str] = field(default_factory=list)


def _model_side(repo_dir: Path | None, model: str) -> _ModelSide:
    """The served version's config, contract and reference settings (:mod:`generator.contracts.served`)."""
    side = _ModelSide()
    if repo_dir is None:
        return side
    try:
        served = read_served_model(FolderReader(repo_dir), model, reference=True)
        side.contract = ModelContract.from_served(served) if served.contract_doc is not None else None
    except GenRepoError as error:
        side.problems.extend(str(p) for p in error.problems)
        return side
    side.config, side.config_path, side.contract_path = served.config, served.config_where, served.contract_where
    side.read = served.describe()
    if served.compare is not None:
        side.reference_dir, side.compare = repo_dir / served.gen_repo, served.compare
    return side


@dataclass(slots=True)
class _State:
    """What one model's checks pass on: the server's config, the contract requests are built from, the answers."""

    contract: ModelContract
    served_config: model_config_pb2.ModelConfig | None = None
    #: The contract came from the server's config alone (no --repo contract): its ranges are the config's dims.
    config_only: bool = False
    #: The inference check's cases and answers; ``no_reference`` says why there is no reference to compare.
    cases: list[_Case] | None = None
    no_reference: str = ""
    responses: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


# -- Running the checks ----------------------------------------------------------------------------------------------
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
            status, message, details = "error", f"{type(exc).__name__}: {exception_text(exc)}", {}
            if is_transport_error(exc) and not self.alive():
                message = self.lose(f"during {model}/{name}", exc)
        duration = time.monotonic() - started
        return self.add(CheckResult(model, name, status, duration, message, details))

    def alive(self) -> bool:
        """Probe liveness once (with the timeout); False when the server does not answer or is not live."""
        try:
            return self.conn.live()
        except Exception:
            return False

    def lose(self, when: str, exc: BaseException | None = None) -> str:
        """Mark the server lost (every later check is not run) and return the message saying so."""
        self.lost = f"the server stopped answering {when}" + (f" ({exception_text(exc)})" if exc is not None else "")
        return f"server lost: {self.lost}"

    def transport(self, exc: BaseException, where: str) -> None:
        """Raise ServerLostError when ``exc`` is a transport error and the server no longer answers."""
        if is_transport_error(exc) and not self.alive():
            raise ServerLostError(self.lose(f"during {where}", exc)) from exc

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
        served: model_config_pb2.ModelConfig | None = None
        try:
            served = self.conn.config(model)
        except Exception as exc:
            if is_transport_error(exc) and not self.alive():
                self.lose(f"during {model}", exc)
            problem = self.lost or f"cannot get the server's config of '{model}': {exception_text(exc)}"
            if side.contract is None:  # nothing to build requests from
                for name in CHECKS[1:]:
                    self.add(CheckResult(model, name, "error", 0.0, f"not run: {problem}"))
                return
        if side.contract is not None:
            state = _State(side.contract, served)
        else:
            assert served is not None
            state = _State(config_to_contract(served, name=model, source=f"{self.protocol}://{self.url}"), served,
                           config_only=True)
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
            text = exception_text(exc)
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
    def check_config(self, model: str, side: _ModelSide, state: _State) -> Outcome:
        if self.repo_dir is None:
            return "skipped", "no --repo: no generated config to compare the server's with", {}
        if side.problems and side.config is None:
            return "failed", "; ".join(side.problems), {}
        if side.config is None:
            return "skipped", f"{self.repo_dir / model} has no config.pbtxt to compare with", {}
        served = self.conn.config(model)
        state.served_config = served
        problems = config_differences(side.config, served)
        problems += metadata_differences(side.config, self.conn.metadata(model))
        if side.contract is not None:
            problems += contract_differences(side.contract, served)
        details: dict[str, Any] = {"generated": side.config_path, "differences": problems, "read": side.read}
        if side.contract_path:
            details["contract"] = side.contract_path
        if problems:
            return "failed", f"the server's view differs from {side.config_path}: " + "; ".join(problems), details
        return "passed", f"server config and metadata agree with the generated config ({side.read})", details

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

    def check_inference(self, model: str, side: _ModelSide, state: _State) -> Outcome:
        contract = state.contract
        cases, why = self._cases(model, side, contract)
        state.cases, state.no_reference = cases, why
        datatypes = {t.name: t.datatype for t in contract.inputs}
        outputs = [t.name for t in contract.outputs]
        problems, per_case = [], []
        responses: dict[str, dict[str, np.ndarray]] = {}
        for case in cases:
            started = time.monotonic()
            entry: dict[str, Any] = {"case": case.name, "inputs": {n: list(a.shape) for n, a in case.inputs.items()}}
            try:
                result = infer(self.conn, model, case.inputs, outputs, datatypes)
            except Exception as exc:
                self.transport(exc, f"{model}/inference")
                problems.append(f"case {case.name}: request refused: {exception_text(exc)}")
                entry["error"] = exception_text(exc)
                per_case.append(entry)
                continue
            entry["latency_ms"] = round((time.monotonic() - started) * 1000, 3)
            entry["outputs"] = {n: list(a.shape) for n, a in result.items()}
            responses[case.name] = result
            problems += [f"case {case.name}: {p}" for p in output_problems(contract, case.inputs, result)]
            per_case.append(entry)
        state.responses = responses
        details: dict[str, Any] = {"cases": per_case}
        if why:
            details["inputs"] = "random inputs inside the config's dims"
        if problems:
            hint = _RANGE_HINT if side.contract is None and "error" in str(per_case) else ""
            return "failed", "; ".join(problems) + hint, details
        names = ", ".join(c.name for c in cases)
        source = "reference inputs" if not why else "random inputs"
        return "passed", f"served {len(cases)} requests ({names}) with {source}; outputs complete", details

    def check_reference(self, model: str, side: _ModelSide, state: _State) -> Outcome:
        if state.cases is None:
            return "skipped", "not run: the inference check did not run", {}
        if state.no_reference:
            return "skipped", f"reference comparison skipped: {state.no_reference}", {}
        responses = state.responses
        problems, compared = [], []
        for case in state.cases:
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
            result = infer(self.conn, model, inputs, [t.name for t in contract.outputs], datatypes)
        except Exception as exc:
            self.transport(exc, f"{model}/{check}")
            if is_transport_error(exc):
                raise
            details["server_error"] = exception_text(exc)
            if not self.alive():  # a "rejection" by a server that died answering is not a rejection
                raise ServerLostError(self.lose(f"after the {model}/{check} request")) from exc
            # Triton appends a long NOTE on max_batch_size to shape errors; the details keep the whole text.
            reason = exception_text(exc).split(" NOTE: ")[0]
            return "passed", f"rejected {what}: {one_line(reason)}", details
        details["served_outputs"] = {n: list(a.shape) for n, a in result.items()}
        return "failed", f"the server SERVED {what} instead of rejecting it", details

    def check_reject_batch(self, model: str, state: _State) -> Outcome:
        contract = state.contract
        if not contract.batching:
            return "skipped", "model does not batch (max_batch_size 0): no batch size is too large", {}
        size = contract.max_batch_size + 1
        inputs = {n: np.repeat(a[:1], size, axis=0) for n, a in contract.example_inputs("min").items()}
        return self._expect_rejection(
            model, "reject_batch", inputs, f"a request with batch {size} > max_batch_size {contract.max_batch_size}",
            contract,
        )

    def check_reject_shape(self, model: str, side: _ModelSide, state: _State) -> Outcome:
        contract = state.contract
        inputs, changes = out_of_range_inputs(contract)
        if not changes:
            return "skipped", "every non-batch axis is unbounded (-1 dims without a profile): no size is out of " \
                "range", {}
        where = "profile range" if side.contract is not None else "config dims"
        return self._expect_rejection(
            model, "reject_shape", inputs, f"a request outside the {where} ({'; '.join(changes)})", contract
        )

    # -- 5./6. burst --------------------------------------------------------------------------------------------------
    def check_burst(self, model: str, state: _State) -> Outcome:
        contract = state.contract
        options = self.options
        served = state.served_config or self.conn.config(model)
        dynamic = served.HasField("dynamic_batching") and contract.batching
        inputs = contract.example_inputs("opt", batch_size=1 if contract.batching else None, seed=options.seed)
        # Whether requests queue long enough to be batched depends on timing; a burst that happened not to batch is
        # repeated (at most BURST_ATTEMPTS in all) before dynamic batching is called broken.
        attempts = 0
        while True:
            attempts += 1
            read = functools.partial(self.conn.statistics, model)
            before = quiet_statistics(read, options.timeout_s)
            outcome = burst(self.url, self.protocol, model, contract, inputs, options)
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
        if options.perf and outcome.succeeded and not outcome.transport_error:
            details["perf"] = perf_figures(self.url, self.protocol, model, contract, inputs, options)
        if outcome.transport_error:
            self.transport(outcome.transport_error, f"{model}/burst")
        if outcome.failures:
            hint = _RANGE_HINT if state.config_only else ""
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
        if "throughput_infer_per_s" in details.get("perf", {}):
            perf = details["perf"]
            summary += (f"; {perf['throughput_infer_per_s']:.1f} infer/s, p50 {perf['latency_p50_ms'] or 0:.2f} ms, "
                        f"p99 {perf['latency_p99_ms'] or 0:.2f} ms")
        return "passed", summary, details


# -- Entry points ----------------------------------------------------------------------------------------------------
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
        return _emit(unreachable_report(url, protocol, names, f"cannot connect to {url}: {exception_text(exc)}"),
                     progress)
    try:
        try:
            live = run.conn.live()
        except Exception as exc:
            return _emit(unreachable_report(
                url, protocol, names,
                f"server not reachable at {url} over {protocol} (timeout {options.timeout_s:g} s): "
                f"{exception_text(exc)}",
            ), progress)
        if not live:
            return _emit(unreachable_report(url, protocol, names, f"server at {url} answers but is not live"),
                         progress)
        if not names:
            try:
                names = sorted({entry["name"] for entry in run.conn.index()})
            except Exception as exc:
                run.add(CheckResult(SERVER, "ready", "error", 0.0,
                                    f"cannot list the server's models: {exception_text(exc)}"))
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
