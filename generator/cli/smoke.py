"""``gen-repo smoke``: check, model by model, that a Triton server serves what a repository promises.

Against a running server (``--url``) or one started for the run (``--launch``, always stopped afterwards).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from generator.cli._common import (
    AT_LEAST_1,
    NON_NEGATIVE,
    POSITIVE,
    OutputFile,
    report_errors,
    summary_md_option,
    write_output,
)
from generator.cli._output import console, echo
from generator.errors import GenRepoError, Problem
from generator.serving.smoke_results import CheckResult, SmokeOptions, SmokeReport
from generator.serving.smoke_session import smoke_session

#: How each status is shown.
_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow", "error": "bold magenta"}
_LABEL = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}


def _plain_line(result: CheckResult) -> str:
    return f"{_LABEL[result.status]:<5} {result.model} {result.check} ({result.duration_s:.3f} s): {result.message}"


def _summary(report: SmokeReport) -> str:
    counts = report.counts()
    text = ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "error", "skipped"))
    where = f"{report.protocol} {report.server_url}"
    if not report.reachable:
        return f"smoke: server unreachable ({where}); {text}"
    lost = f"; server lost: {report.server_lost}" if report.server_lost else ""
    return f"smoke: {text} ({where}){lost}"


def _print_table(report: SmokeReport) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"gen-repo smoke: {report.protocol} {report.server_url}")
    for column in ("model", "check", "status", "time (s)", "message"):
        table.add_column(column, overflow="fold", no_wrap=column in ("model", "check", "status"))
    for result in report.results:
        style = _STYLE[result.status]
        table.add_row(
            result.model,
            result.check,
            Text(_LABEL[result.status], style=style),
            f"{result.duration_s:.3f}",
            result.message,
        )
    out = console()
    out.print(table)
    out.print(_summary(report))


def _write_outputs(report: SmokeReport, json_file: Path | None, junit_file: Path | None,
                   summary_md: Path | None) -> None:
    from generator.reports.junit import json_report, junit_xml

    written: list[tuple[str, Path]] = []
    for label, option, path, render in (("JSON report", "--json", json_file, json_report),
                                        ("JUnit XML", "--junit-xml", junit_file, junit_xml)):
        if path is not None:
            written.append((label, write_output(path, render(report), option, [str(p) for _, p in written])))
    if summary_md is not None:
        from generator.reports.markdown import append_summary
        from generator.reports.summaries import smoke_summary

        append_summary(summary_md, smoke_summary(report, written), [str(p) for _, p in written])


@click.command("smoke")
@click.option("--url", metavar="HOST:PORT",
              help="Server address HOST:PORT (the gRPC port for --protocol grpc, HTTP port for http).")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--repo", "repo_arg", metavar="DIR|URL",
              help="The model repository the server serves: a folder (or file:///path), or s3://... / gs://... as "
                   "`gen-repo publish` writes it (read to a temporary folder; --launch serves the URL itself).")
@click.option("--model", "models", multiple=True, metavar="NAME",
              help="Check only this model (repeatable). Default: every model.")
@click.option("--launch", is_flag=True, help="Start a local tritonserver on loopback with --repo for this run.")
@click.option("--tritonserver", type=click.Path(path_type=Path), help="tritonserver binary for --launch.")
@click.option("--ready-timeout", type=POSITIVE, default=120.0, show_default=True,
              help="Seconds to wait for a launched server, and for a model load through the repository API.")
@click.option("--timeout", type=POSITIVE, default=10.0, show_default=True,
              help="Seconds any one network call may take.")
@click.option("--burst", type=AT_LEAST_1, default=64, show_default=True, help="Requests in the concurrent burst.")
@click.option("--concurrency", type=AT_LEAST_1, default=16, show_default=True,
              help="Requests in flight during the burst.")
@click.option("--rtol", type=NON_NEGATIVE, help="Relative tolerance for every output (default: by data type).")
@click.option("--atol", type=NON_NEGATIVE, help="Absolute tolerance for every output (default: by data type).")
@click.option("--perf", is_flag=True, help="Report throughput and p50/p99 latency at the burst's "
              "concurrency (the load generator of perf).")
@click.option("--json", "json_file", type=OutputFile(), metavar="FILE",
              help="Write the report as JSON to FILE.")
@click.option("--junit-xml", "junit_file", type=OutputFile(), metavar="FILE",
              help="Write JUnit XML to FILE.")
@summary_md_option
@report_errors
def command(
    url: str | None,
    protocol: str,
    repo_arg: str | None,
    models: tuple[str, ...],
    launch: bool,
    tritonserver: Path | None,
    ready_timeout: float,
    timeout: float,
    burst: int,
    concurrency: int,
    rtol: float | None,
    atol: float | None,
    perf: bool,
    json_file: Path | None,
    junit_file: Path | None,
    summary_md: Path | None = None,
) -> None:
    """Smoke-test a model repository on a Triton server through tritonclient (exit 0/1/2/3)."""
    from generator.repository.storage_urls import local_location

    repo_arg = local_location(repo_arg) if repo_arg is not None else None  # file:///path is the folder it names
    bucket = repo_arg is not None and repo_arg.startswith(("s3://", "gs://"))
    repo = Path(repo_arg) if repo_arg is not None and not bucket else None
    problems = []
    if launch and url:
        problems.append("give either --url (a running server) or --launch (start one), not both")
    if not launch and not url:
        problems.append("give --url HOST:PORT of a running server, or --launch to start one with --repo")
    if launch and repo_arg is None:
        problems.append("--launch needs --repo DIR|URL (the repository to serve)")
    if repo is not None and not repo.is_dir():
        problems.append(f"--repo {repo}: not a directory")
    if tritonserver is not None and not launch:
        problems.append("--tritonserver only applies with --launch")
    if problems:
        raise GenRepoError([Problem("<gen-repo smoke>", "", p) for p in problems])

    options = SmokeOptions(
        timeout_s=timeout, load_timeout_s=ready_timeout, burst=burst, concurrency=concurrency,
        rtol=rtol, atol=atol, perf=perf,
    )
    terminal = sys.stdout.isatty()
    progress: Callable[[CheckResult], None] | None = None if terminal else (
        lambda result: echo(_plain_line(result))
    )
    report = smoke_session(repo_arg, url=url, protocol=protocol, models=models, options=options,
                           tritonserver=tritonserver, ready_timeout=ready_timeout, progress=progress,
                           announce=lambda line: echo(line, err=True))
    _write_outputs(report, json_file, junit_file, summary_md)
    if terminal:
        _print_table(report)
    else:
        echo(_summary(report))
    sys.exit(report.exit_code)

