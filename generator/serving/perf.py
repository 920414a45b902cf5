"""``gen-repo perf``: every model at every concurrency, on a running or launched server, every call with a deadline.

The engine is a real perf_analyzer where one runs here (:mod:`generator.serving.perf_analyzer`, with the arguments
of :mod:`generator.serving.perf_config`), else the built-in load loop (:mod:`generator.serving.load`); the models
and their shapes come from the repository's contracts or from the server (:mod:`generator.serving.perf_models`).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.errors import GenRepoError, Problem
from generator.serving.load import LoadResult, check_loopback, run_load
from generator.serving.perf_analyzer import find_perf_analyzer, run_perf_analyzer
from generator.serving.perf_config import perf_analyzer_args, perf_config_files
from generator.serving.perf_models import models_from_repository, variants
from generator.triton.connection import Connection, check_reachable, is_transport_error, unreachable_error

if TYPE_CHECKING:
    from generator.client import ModelContract

__all__ = ["PerfReport", "PerfRun", "run_perf"]


# --------------------------------------------------------------------------------------------------------------------
# ``gen-repo perf``: every model at every concurrency, on a running or launched server
# --------------------------------------------------------------------------------------------------------------------
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


@dataclass(slots=True)
class PerfReport:
    """The measurements of one ``gen-repo perf`` run (:meth:`LoadResult.to_dict` rows) and which engine made them."""

    engine: str
    engine_note: str
    results: list[dict[str, Any]] = field(default_factory=list)

    def failed_models(self) -> list[str]:
        """Models that answered no request at any concurrency (exit 1)."""
        return sorted({r["model"] for r in self.results if r["requests"] == 0 and r["throughput"] == 0})

    def to_json(self) -> str:
        """``gen-repo perf --json``: ``{"results": [...], "engine_note": ...}``."""
        return json.dumps({"results": self.results, "engine_note": self.engine_note}, indent=2, sort_keys=True)


def run_perf(run: PerfRun, on_engine: Callable[[str], None] | None = None) -> PerfReport:
    """Measure every model of ``run`` at every concurrency; ``on_engine`` hears which engine runs, before it does.

    Raises :class:`~generator.triton.connection.ServerUnreachableError` when the server does not answer within
    ``run.timeout_s``, GenRepoError for a remote URL, an unusable perf_analyzer or a server without ready models.
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
        for contract in _perf_contracts(target, run):
            if use_pa:
                assert status.path is not None and run.repo is not None
                report.results.extend(_perf_analyzer_rows(status.path, run.repo, contract.name, target, run))
            else:
                report.results.extend(_loop_rows(contract, target, run))
    return report


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


def _perf_contracts(url: str, run: PerfRun) -> list[ModelContract]:
    """ModelContracts for the models to load: from the repository's contract.json files, else from the server."""
    from generator.client import ModelContract

    if run.repo is not None:
        names = [m.name for m in models_from_repository(run.repo, run.models)]
        return [ModelContract.from_repository(run.repo, name) for name in names]
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


def _loop_rows(contract: ModelContract, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """The built-in load loop at each concurrency: one :meth:`LoadResult.to_dict` row each."""
    inputs = contract.example_inputs(run.shape)
    batch = int(next(iter(inputs.values())).shape[0]) if contract.batching and inputs else 1
    datatypes = {t.name: t.datatype for t in contract.inputs}
    return [
        run_load(url, contract.name, inputs, concurrency=level, duration_s=run.duration_s,
                 max_requests=run.max_requests, protocol=run.protocol, batch_size=batch, shape=run.shape,
                 request_timeout_s=run.timeout_s, datatypes=datatypes).to_dict()
        for level in run.concurrency
    ]


def _perf_analyzer_rows(binary: str, repo: str, model: str, url: str, run: PerfRun) -> list[dict[str, Any]]:
    """perf_analyzer at each concurrency with gen-repo's arguments: one :meth:`LoadResult.to_dict` row per level."""
    (perf_model,) = models_from_repository(repo, [model])
    variant = {v.name: v for v in variants(perf_model)}[run.shape]
    out = []
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        files = perf_config_files([perf_model], repo, url=url, protocol=run.protocol)
        data_file = Path(tmp) / f"{model}.{run.shape}.json"
        data_file.write_text(files[f"{model}/input_data.{run.shape}.json"], encoding="utf-8")
        for level in run.concurrency:
            args = perf_analyzer_args(perf_model, variant, str(data_file), url=url, protocol=run.protocol,
                                      concurrency=(level, level, 1))
            for row in run_perf_analyzer(binary, args, duration_s=run.duration_s):
                # perf_analyzer reports rates, not a request count (-1) or a mean.
                result = LoadResult(
                    model, int(row["concurrency"]), variant.batch_size, run.shape, "perf_analyzer", requests=-1,
                    seconds=run.duration_s, throughput=row["throughput"],
                    requests_per_s=row["throughput"] / max(variant.batch_size, 1),
                    p50_ms=row["p50_ms"], p99_ms=row["p99_ms"],
                )
                out.append(result.to_dict())
    return out
