"""``gen-repo perf``: throughput and p50/p99 latency per model against a running or launched Triton server."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_USAGE, GenRepoError, Problem


@contextmanager
def _server(url: str | None, launch: bool, repo: str | None, protocol: str) -> Iterator[str]:
    """Yield the URL to load: the given one, or a launched server's (stopped afterwards)."""
    if not launch:
        assert url is not None
        yield url
        return
    from generator.server import launch as launch_server

    assert repo is not None
    with launch_server(repo) as server:
        yield server.grpc_url if protocol == "grpc" else server.http_url


def _contracts(url: str, repo: str | None, models: tuple[str, ...], protocol: str) -> list[Any]:
    """ModelContracts for the models to load: from the repository's contract.json files, else from the server."""
    from generator.client import ModelContract

    if repo is not None:
        from generator.perf import models_from_repository

        names = [m.name for m in models_from_repository(repo, models)]
        return [ModelContract.from_repository(repo, name) for name in names]
    names = list(models)
    if not names:
        if protocol == "grpc":
            import tritonclient.grpc as grpcclient

            client = grpcclient.InferenceServerClient(url)
            try:
                index = client.get_model_repository_index(as_json=True).get("models", [])
            finally:
                client.close()
        else:
            import tritonclient.http as httpclient

            hclient = httpclient.InferenceServerClient(url)
            try:
                index = hclient.get_model_repository_index()
            finally:
                hclient.close()
        names = sorted({m["name"] for m in index if m.get("state", "READY") == "READY"})
    if not names:
        raise GenRepoError([Problem(url, "", "the server has no ready models")])
    return [ModelContract.from_server(url, name, protocol=protocol) for name in names]


def _row(result: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (
        f"{result['model']:<20} {result['shape']:<5} {result['batch_size']:>5} {result['concurrency']:>5} "
        f"{result['requests']:>8} {result['errors']:>6} {result['throughput']:>10.1f} {ms(result['p50_ms']):>9} "
        f"{ms(result['p99_ms']):>9}  {result['engine']}"
    )


@click.command("perf")
@click.option("--url", default=None, help="A running server's HOST:PORT (loopback only; gRPC port with -i grpc).")
@click.option("--launch", is_flag=True, help="Start a local tritonserver on --repo for the measurement.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=str), default=None,
              help="The gen-repo repository (contracts give the exact shapes; required with --launch).")
@click.option("--model", "models", multiple=True, help="Only this model (repeatable; default: all).")
@click.option("-i", "--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--duration", type=float, default=5.0, show_default=True, help="Seconds per model and concurrency.")
@click.option("--concurrency", "concurrency", type=int, multiple=True, help="Concurrent requests (repeatable; "
              "default 1 and 8).")
@click.option("--shape", type=click.Choice(["min", "opt", "max"]), default="opt", show_default=True,
              help="Which profile shape the requests carry.")
@click.option("--max-requests", type=int, default=100_000, show_default=True,
              help="Upper bound of requests per measurement (the loop stops at this count or --duration).")
@click.option("--engine", type=click.Choice(["auto", "perf_analyzer", "loop"]), default="auto", show_default=True,
              help="perf_analyzer where its binary runs (auto), or the built-in tritonclient loop.")
@click.option("--perf-analyzer", "perf_analyzer_path", default=None, help="Path of a perf_analyzer binary.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write the results as JSON to this file ('-' for stdout instead of the table).")
@report_errors
def command(
    url: str | None,
    launch: bool,
    repo: str | None,
    models: tuple[str, ...],
    protocol: str,
    duration: float,
    concurrency: tuple[int, ...],
    shape: str,
    max_requests: int,
    engine: str,
    perf_analyzer_path: str | None,
    json_file: str | None,
) -> None:
    """Measure throughput (inferences/s) and p50/p99 latency per model and concurrency.

    Uses perf_analyzer with gen-repo's generated arguments where a working binary exists, otherwise a bounded
    concurrent loop of tritonclient requests (bounded by --duration and --max-requests). Exit 1 when a model
    answered no request.
    """
    from generator.perf import check_loopback, find_perf_analyzer

    if launch == (url is not None) or (launch and repo is None):
        click.echo("error: give --url HOST:PORT, or --launch with --repo DIR", err=True)
        raise SystemExit(EXIT_USAGE)
    if url is not None:
        check_loopback(url)
    levels = list(concurrency) or [1, 8]
    if any(c < 1 for c in levels) or duration <= 0 or max_requests < 1:
        click.echo("error: --concurrency and --max-requests must be >= 1, --duration > 0", err=True)
        raise SystemExit(EXIT_USAGE)
    quiet = json_file == "-"
    status = find_perf_analyzer(perf_analyzer_path)
    use_pa = engine == "perf_analyzer" or (engine == "auto" and status.usable)
    if use_pa and not status.usable:
        raise GenRepoError([Problem(perf_analyzer_path or "perf_analyzer", "", status.reason)])
    if use_pa and repo is None:
        raise GenRepoError([Problem("perf_analyzer", "", "perf_analyzer needs --repo (its arguments come from the "
                                    "repository's contracts)")])
    if not quiet:
        click.echo(f"engine: {'perf_analyzer' if use_pa else 'loop'} ({status.reason})", err=True)

    results: list[dict[str, Any]] = []
    with _server(url, launch, repo, protocol) as target:
        contracts = _contracts(target, repo, models, protocol)
        for contract in contracts:
            if use_pa:
                assert status.path is not None and repo is not None
                results.extend(_perf_analyzer(status.path, repo, contract.name, shape, levels, target, protocol,
                                              duration))
                continue
            results.extend(_loop(contract, target, protocol, shape, levels, duration, max_requests))
    if not quiet:
        click.echo(f"{'model':<20} {'shape':<5} {'batch':>5} {'conc':>5} {'requests':>8} {'errors':>6} "
                   f"{'infer/s':>10} {'p50 ms':>9} {'p99 ms':>9}  engine")
        for result in results:
            click.echo(_row(result))
            if result.get("first_error"):
                click.echo(f"  first error: {result['first_error']}", err=True)
    payload = json.dumps({"results": results, "engine_note": status.reason}, indent=2, sort_keys=True)
    if json_file == "-":
        click.echo(payload)
    elif json_file:
        Path(json_file).write_text(payload + "\n", encoding="utf-8")
    failed = sorted({r["model"] for r in results if r["requests"] == 0 and r["throughput"] == 0})
    if failed:
        click.echo(f"no successful request for: {', '.join(failed)}", err=True)
        raise SystemExit(EXIT_FAILED)


def _loop(contract: Any, url: str, protocol: str, shape: str, levels: list[int], duration: float,
          max_requests: int) -> list[dict[str, Any]]:
    from generator.perf import run_load

    inputs = contract.example_inputs(shape)
    batch = int(next(iter(inputs.values())).shape[0]) if contract.batching and inputs else 1
    datatypes = {t.name: t.datatype for t in contract.inputs}
    out = []
    for level in levels:
        result = run_load(url, contract.name, inputs, concurrency=level, duration_s=duration,
                          max_requests=max_requests, protocol=protocol, batch_size=batch, shape=shape,
                          datatypes=datatypes)
        out.append(result.to_dict())
    return out


def _perf_analyzer(binary: str, repo: str, model: str, shape: str, levels: list[int], url: str, protocol: str,
                   duration: float) -> list[dict[str, Any]]:
    from generator.perf import (
        models_from_repository,
        perf_analyzer_args,
        perf_config_files,
        run_perf_analyzer,
        variants,
    )

    (perf_model,) = models_from_repository(repo, [model])
    variant = {v.name: v for v in variants(perf_model)}[shape]
    out = []
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        files = perf_config_files([perf_model], repo, url=url, protocol=protocol)
        data_file = Path(tmp) / f"{model}.{shape}.json"
        data_file.write_text(files[f"{model}/input_data.{shape}.json"], encoding="utf-8")
        for level in levels:
            args = perf_analyzer_args(perf_model, variant, str(data_file), url=url, protocol=protocol,
                                      concurrency=(level, level, 1))
            for row in run_perf_analyzer(binary, args, duration_s=duration):
                out.append({
                    "model": model, "concurrency": int(row["concurrency"]), "batch_size": variant.batch_size,
                    "shape": shape, "engine": "perf_analyzer", "requests": -1, "errors": 0,
                    "seconds": duration, "throughput": row["throughput"],
                    "requests_per_s": row["throughput"] / max(variant.batch_size, 1),
                    "p50_ms": row["p50_ms"], "p99_ms": row["p99_ms"], "mean_ms": None, "first_error": None,
                })
    return out
