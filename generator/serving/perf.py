"""``gen-repo perf``: every model at every concurrency, on a running or launched server, every call with a deadline.

A real perf_analyzer where one runs here, else the one load generator (:mod:`generator.serving.loadgen`); models and
shapes come from the repository's contracts or from the server.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator.errors import GenRepoError, Problem
from generator.serving.ceiling import Ceiling, fraction, measure_ceiling
from generator.serving.loadgen import Measurement, Windows, check_loopback, measure_model
from generator.serving.perf_analyzer import find_perf_analyzer, run_perf_analyzer
from generator.serving.perf_models import served_models
from generator.triton.connection import Connection, check_reachable, is_transport_error, unreachable_error

if TYPE_CHECKING:
    from generator.client import ModelContract

__all__ = ["PerfReport", "PerfRun", "run_perf"]

#: perf_analyzer's own stability bound (its ``--stability-percentage`` default, 10%): the noise its figures carry.
_PA_STABILITY = 0.10


# -- ``gen-repo perf``: every model at every concurrency, on a running or launched server ----------------------------
@dataclass(frozen=True, slots=True)
class PerfRun:
    """What ``gen-repo perf`` measures, where and how.

    ``url`` names a running (loopback) server; without it ``launch`` starts one on ``repo`` for the run. With
    ``repo`` the contracts (exact shapes) come from its contract.json files, otherwise from the server.
    ``timeout_s`` bounds every network call; ``engine`` is ``auto``, ``perf_analyzer`` or ``loop``.
    """

    url: str | None = None
    launch: bool = False
    repo: str | None = None
    models: tuple[str, ...] = ()
    protocol: str = "grpc"
    duration_s: float = 5.0
    concurrency: tuple[int, ...] = (1, 8)
    shape: str = "opt"
    max_requests: int = 100_000
    timeout_s: float = 30.0
    engine: str = "auto"
    perf_analyzer: str | None = None
    #: Also measure each model's runtime alone (:mod:`generator.serving.ceiling`), once per model, before its load.
    ceiling: bool = True


@dataclass(slots=True)
class PerfReport:
    """The measurements of one ``gen-repo perf`` run (:func:`_row` rows) and which engine made them."""

    engine: str
    engine_note: str
    results: list[dict[str, Any]] = field(default_factory=list)
    ceilings: list[Ceiling] = field(default_factory=list)

    def failed_models(self) -> list[str]:
        """Models that answered no request at any concurrency (exit 1)."""
        return sorted({r["model"] for r in self.results if r["requests"] == 0 and r["throughput"] == 0})

    def to_json(self) -> str:
        """``gen-repo perf --json``: ``{"results": [...], "engine_note": ..., "ceilings": [...]}``."""
        return json.dumps({"results": self.results, "engine_note": self.engine_note,
                           "ceilings": [c.to_dict() for c in self.ceilings]}, indent=2, sort_keys=True)


def run_perf(run: PerfRun, on_engine: Callable[[str], None] | None = None,
             on_read: Callable[[str], None] | None = None) -> PerfReport:
    """Measure every model of ``run`` at every concurrency.

    ``on_engine`` hears which engine runs; ``on_read`` which version of each model is measured (the one Triton serves).
    Raises :class:`~generator.triton.connection.ServerUnreachableError` when the server does not answer within
    ``run.timeout_s``, GenRepoError for a remote URL, an unusable perf_analyzer or no ready models.
    """
    if run.url is not None:
        check_loopback(run.url)
    status = find_perf_analyzer(run.perf_analyzer)
    use_pa = run.engine == "perf_analyzer" or (run.engine == "auto" and status.usable)
    if use_pa and not status.usable:
        raise GenRepoError([Problem(run.perf_analyzer or "perf_analyzer", "", status.reason)])
    if use_pa and run.repo is None:
        raise GenRepoError([Problem("perf_analyzer", "", "perf_analyzer needs --repo (its arguments come from the "
                                    "repository's contracts)")])
    engine = "perf_analyzer" if use_pa else "loop"
    if on_engine is not None:
        on_engine(f"{engine} ({status.reason})")
    report = PerfReport(engine, status.reason)
    with _perf_server(run) as target:
        check_reachable(target, run.protocol, run.timeout_s)
        for contract in _perf_contracts(target, run, on_read):
            ceiling = _ceiling(run, contract.name)
            if use_pa:
                assert status.path is not None and run.repo is not None
                rows = _perf_analyzer_rows(status.path, run.repo, contract.name, target, run)
            else:
                rows = _loop_rows(contract, target, run)
            if ceiling is not None:
                report.ceilings.append(ceiling)
                for row in rows:
                    row["ceiling_fraction"] = fraction(row["throughput"], ceiling)
            report.results.extend(rows)
    return report


def _ceiling(run: PerfRun, model: str) -> Ceiling | None:
    """The model's runtime alone, measured before any load (None when not asked for)."""
    if not run.ceiling:
        return None
    if run.repo is None:
        return Ceiling(model, "unknown", skipped="no --repo: the model's own files are not here")
    return measure_ceiling(run.repo, model, seconds=min(3.0, run.duration_s))


@contextlib.contextmanager
def _perf_server(run: PerfRun) -> Iterator[str]:
    """Yield the URL to load: the given one, or a launched server's (stopped afterwards)."""
    if not run.launch:
        assert run.url is not None
        yield run.url
        return
    from generator.serving.server import launch

    assert run.repo is not None
    with launch(run.repo) as server:
        yield server.grpc_url if run.protocol == "grpc" else server.http_url


def _perf_contracts(url: str, run: PerfRun, on_read: Callable[[str], None] | None) -> list[ModelContract]:
    """ModelContracts for the models to load: the served versions' contract.json files, else from the server."""
    from generator.client import ModelContract

    if run.repo is not None:
        served = served_models(run.repo, run.models)
        for model in served:
            if on_read is not None:
                on_read(model.describe())
        return [ModelContract.from_served(model) for model in served]
    names = list(run.models)
    if not names:
        with Connection(url, run.protocol, run.timeout_s) as connection:
            try:
                index = connection.index()
            except Exception as exc:  # tritonclient raises InferenceServerException and transport errors alike
                if is_transport_error(exc):
                    raise unreachable_error(url, "get_model_repository_index", exc) from exc
                raise
        # gRPC's JSON leaves an empty state out: a model listed without one counts as ready, as Triton lists it.
        names = sorted({m["name"] for m in index if m["state"] in ("READY", "")})
    if not names:
        raise GenRepoError([Problem(url, "", "the server has no ready models")])
    return [ModelContract.from_server(url, name, protocol=run.protocol, timeout=run.timeout_s) for name in names]


def _row(model: str, concurrency: int, batch_size: int, shape: str, engine: str, done: Measurement) -> dict[str, Any]:
    """One ``gen-repo perf --json`` row (``requests`` -1: perf_analyzer reports rates, not a count)."""

    def rounded(value: float | None, digits: int) -> float | None:
        return None if value is None else round(value, digits)

    return {
        "model": model, "concurrency": concurrency, "batch_size": batch_size, "shape": shape, "engine": engine,
        "requests": done.requests, "errors": done.errors, "seconds": round(done.seconds, 3),
        "throughput": round(done.throughput, 2), "throughput_noise": round(done.noise, 4),
        "requests_per_s": round(done.throughput / max(batch_size, 1), 2), "p50_ms": rounded(done.p50_ms, 3),
        "p99_ms": rounded(done.p99_ms, 3), "mean_ms": rounded(done.mean_ms, 3), "first_error": done.first_error,
    }


def _windows(duration_s: float) -> Windows:
    """``--duration`` as windows of about 1 s, every one kept (their spread is the noise reported)."""
    count = max(1, round(duration_s))
    return Windows(window_s=duration_s / count, agree=count, max_windows=count)


def _loop_rows(contract: ModelContract, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """The load generator at each concurrency: one :func:`_row` each."""
    inputs = contract.example_inputs(run.shape)
    batch = int(next(iter(inputs.values())).shape[0]) if contract.batching and inputs else 1
    datatypes = {t.name: t.datatype for t in contract.inputs}
    return [
        _row(contract.name, level, batch, run.shape, f"loop-{run.protocol}",
                 measure_model(url, contract.name, inputs, datatypes, concurrency=level,
                               windows=_windows(run.duration_s), batch=batch, protocol=run.protocol,
                               timeout_s=run.timeout_s, max_requests=run.max_requests))
        for level in run.concurrency
    ]


def _perf_analyzer_rows(binary: str, repo: str, model: str, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """perf_analyzer at each concurrency with gen-repo's arguments: one :func:`_row` per level."""
    out = []
    for level in run.concurrency:
        batch, rows = run_perf_analyzer(binary, repo, model, url, protocol=run.protocol, shape=run.shape,
                                        concurrency=level, duration_s=run.duration_s)
        out += [_row(model, row.concurrency, batch, run.shape, "perf_analyzer",
                         Measurement(row.throughput, _PA_STABILITY, row.p50_ms, row.p99_ms, requests=-1,
                                     seconds=run.duration_s)) for row in rows]
    return out
