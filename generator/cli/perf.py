"""``gen-repo perf``: throughput and p50/p99 latency per model against a running or launched Triton server."""

from __future__ import annotations

from typing import Any

import click

from generator.cli._common import AT_LEAST_1, POSITIVE, OutputFile, report_errors, write_output
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_USAGE


def _row(result: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (
        f"{result['model']:<20} {result['shape']:<5} {result['batch_size']:>5} {result['concurrency']:>5} "
        f"{result['requests']:>8} {result['errors']:>6} {result['throughput']:>10.1f} "
        f"{result['throughput_noise']:>6.1%} {ms(result['p50_ms']):>9} "
        f"{ms(result['p99_ms']):>9}  {result['engine']}"
    )


@click.command("perf")
@click.option("--url", default=None, help="A running server's HOST:PORT (loopback only; gRPC port with -i grpc).")
@click.option("--launch", is_flag=True, help="Start a local tritonserver on --repo for the measurement.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=str), default=None,
              help="The gen-repo repository (contracts give the exact shapes; required with --launch).")
@click.option("--model", "models", multiple=True, help="Only this model (repeatable; default: all).")
@click.option("-i", "--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--duration", type=POSITIVE, default=5.0, show_default=True, help="Seconds per model and concurrency.")
@click.option("--concurrency", "concurrency", type=AT_LEAST_1, multiple=True, help="Concurrent requests (repeatable; "
              "default 1 and 8).")
@click.option("--shape", type=click.Choice(["min", "opt", "max"]), default="opt", show_default=True,
              help="Which profile shape the requests carry.")
@click.option("--max-requests", type=AT_LEAST_1, default=100_000, show_default=True,
              help="Upper bound of requests per measurement (the loop stops at this count or --duration).")
@click.option("--engine", type=click.Choice(["auto", "perf_analyzer", "loop"]), default="auto", show_default=True,
              help="perf_analyzer where its binary runs (auto), or the built-in load generator (tune's).")
@click.option("--perf-analyzer", "perf_analyzer_path", default=None, help="Path of a perf_analyzer binary.")
@click.option("--timeout", type=POSITIVE, default=30.0, show_default=True,
              help="Seconds any one network call may take.")
@click.option("--json", "json_file", type=OutputFile(dash=True, path_type=str), default=None,
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
    timeout: float,
    json_file: str | None,
) -> None:
    """Measure throughput (inferences/s) and p50/p99 latency per model and concurrency.

    Uses perf_analyzer with gen-repo's generated arguments where a working binary exists, otherwise the load
    generator `tune` measures with (--duration in windows of about 1 s; their spread is the noise reported). Exit 1
    when a model answered no request, 3 when the server does not answer within --timeout.
    """
    from generator.serving.perf import PerfRun, run_perf

    if launch == (url is not None) or (launch and repo is None):
        echo("error: give --url HOST:PORT, or --launch with --repo DIR", err=True)
        raise SystemExit(EXIT_USAGE)
    levels = tuple(concurrency) or (1, 8)
    quiet = json_file == "-"
    run = PerfRun(url=url, launch=launch, repo=repo, models=models, protocol=protocol, duration_s=duration,
                  concurrency=levels, shape=shape, max_requests=max_requests, timeout_s=timeout, engine=engine,
                  perf_analyzer=perf_analyzer_path)
    report = run_perf(run, on_engine=None if quiet else lambda line: echo(f"engine: {line}", err=True),
                      on_read=lambda line: echo(line, err=True))
    if not quiet:
        echo(f"{'model':<20} {'shape':<5} {'batch':>5} {'conc':>5} {'requests':>8} {'errors':>6} "
             f"{'infer/s':>10} {'noise':>6} {'p50 ms':>9} {'p99 ms':>9}  engine")
        for result in report.results:
            echo(_row(result))
            if result.get("first_error"):
                echo(f"  first error: {result['first_error']}", err=True)
    if json_file == "-":
        echo(report.to_json())
    elif json_file:
        write_output(json_file, report.to_json() + "\n", "--json")
    failed = report.failed_models()
    if failed:
        echo(f"no successful request for: {', '.join(failed)}", err=True)
        raise SystemExit(EXIT_FAILED)
