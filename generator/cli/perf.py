"""``gen-repo perf``: throughput and p50/p99 latency per model against a running or launched Triton server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from generator.cli._common import AT_LEAST_1, POSITIVE, OutputFile, report_errors, summary_md_option, write_output
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_USAGE


def _row(result: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    share = result.get("ceiling_fraction")
    return (
        f"{result['model']:<20} {result['shape']:<5} {result['batch_size']:>5} {result['concurrency']:>5} "
        f"{result['requests']:>8} {result['errors']:>6} {result['throughput']:>10.1f} "
        f"{result['throughput_noise']:>6.1%} {'-' if share is None else f'{share:.2f}':>8} {ms(result['p50_ms']):>9} "
        f"{ms(result['p99_ms']):>9}  {result['engine']}"
    )


def _section(report: Any) -> Any:
    """The --summary-md section: per model its best throughput and that figure's fraction of the ceiling."""
    from generator.reports.markdown import SummaryRow, SummarySection

    ceilings = {c.model: c for c in report.ceilings}
    rows = []
    for model in dict.fromkeys(r["model"] for r in report.results):
        best = max((r for r in report.results if r["model"] == model), key=lambda r: r["throughput"])
        failed = best["throughput"] == 0
        share = best.get("ceiling_fraction")
        ceiling = ceilings.get(model)
        detail = (f"{best['throughput']:.1f}/s +-{best['throughput_noise']:.0%} at concurrency {best['concurrency']}"
                  + ("" if share is None else f", {share:.2f} of the ceiling")
                  + ("" if ceiling is None else f"; {ceiling.describe()}"))
        rows.append(SummaryRow(model, "failed" if failed else "measured", detail, failed))
    return SummarySection("gen-repo perf", {"measured": sum(not r.failed for r in rows),
                                            "failed": sum(r.failed for r in rows)}, rows,
                          ok=not any(r.failed for r in rows), note=f"engine {report.engine}: {report.engine_note}",
                          columns=("model", "status", "best throughput"))


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
@click.option("--ceiling/--no-ceiling", default=True, show_default=True,
              help="Also measure each model's runtime alone (onnxruntime in-process; TensorRT where a GPU is) and show "
                   "every figure as a fraction of it (needs --repo).")
@click.option("--json", "json_file", type=OutputFile(dash=True, path_type=str), default=None,
              help="Also write the results as JSON to this file ('-' for stdout instead of the table).")
@summary_md_option
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
    ceiling: bool,
    json_file: str | None,
    summary_md: Path | None = None,
) -> None:
    """Measure throughput (inferences/s) and p50/p99 latency per model and concurrency.

    Uses perf_analyzer with gen-repo's generated arguments where a working binary exists, otherwise the load
    generator `tune` measures with (--duration in windows of about 1 s; their spread is the noise reported). With
    --repo each model's runtime alone is measured first (the ceiling) and every figure shown as its fraction. Exit 1
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
                  perf_analyzer=perf_analyzer_path, ceiling=ceiling)
    report = run_perf(run, on_engine=None if quiet else lambda line: echo(f"engine: {line}", err=True),
                      on_read=lambda line: echo(line, err=True))
    if not quiet:
        echo(f"{'model':<20} {'shape':<5} {'batch':>5} {'conc':>5} {'requests':>8} {'errors':>6} "
             f"{'infer/s':>10} {'noise':>6} {'of ceil':>8} {'p50 ms':>9} {'p99 ms':>9}  engine")
        for result in report.results:
            echo(_row(result))
            if result.get("first_error"):
                echo(f"  first error: {result['first_error']}", err=True)
        for measured in report.ceilings:
            echo(f"{measured.model}: {measured.describe()}")
    if json_file == "-":
        echo(report.to_json())
    elif json_file:
        write_output(json_file, report.to_json() + "\n", "--json")
    if summary_md is not None:
        from generator.reports.markdown import append_summary

        append_summary(summary_md, _section(report), [json_file] if json_file and json_file != "-" else [])
    failed = report.failed_models()
    if failed:
        echo(f"no successful request for: {', '.join(failed)}", err=True)
        raise SystemExit(EXIT_FAILED)
