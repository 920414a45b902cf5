"""``gen-repo smoke``: check, model by model, that a Triton server serves what a repository promises.

Against a running server (``--url HOST:PORT``) or a local one started for the run (``--launch``, always stopped
afterwards, also on failure and Ctrl-C). The checks are :mod:`generator.smoke`'s.

Exit codes: 0 every check passed (or was skipped), 1 a check failed, 2 bad usage, 3 the server could not be reached
(or, with ``--launch``, did not start).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.errors import GenRepoError, Problem
from generator.smoke import CheckResult, SmokeOptions, SmokeReport, run_smoke, unreachable_report

#: How each status is shown.
_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow", "error": "bold magenta"}
_LABEL = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}


def _usage(message: str) -> GenRepoError:
    return GenRepoError([Problem("<gen-repo smoke>", "", message)])


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
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gen-repo smoke: {report.protocol} {report.server_url}")
    for column in ("model", "check", "status", "time (s)", "message"):
        table.add_column(column, overflow="fold", no_wrap=column in ("model", "check", "status"))
    for result in report.results:
        style = _STYLE[result.status]
        table.add_row(
            result.model,
            result.check,
            f"[{style}]{_LABEL[result.status]}[/{style}]",
            f"{result.duration_s:.3f}",
            result.message,
        )
    console = Console()
    console.print(table)
    console.print(_summary(report))


def _write_outputs(report: SmokeReport, json_file: Path | None, junit_file: Path | None) -> None:
    from generator.report import write_json, write_junit_xml

    if json_file is not None:
        write_json(report, json_file)
    if junit_file is not None:
        write_junit_xml(report, junit_file)


@click.command("smoke")
@click.option("--url", metavar="HOST:PORT",
              help="Server address HOST:PORT (the gRPC port for --protocol grpc, HTTP port for http).")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--repo", "repo_arg", metavar="DIR|URL",
              help="The model repository the server serves: a folder, or s3://... / gs://... as `gen-repo publish` "
                   "writes it (read to a temporary folder; --launch serves the URL itself).")
@click.option("--model", "models", multiple=True, metavar="NAME",
              help="Check only this model (repeatable). Default: every model.")
@click.option("--launch", is_flag=True, help="Start a local tritonserver on loopback with --repo for this run.")
@click.option("--tritonserver", type=click.Path(path_type=Path), help="tritonserver binary for --launch.")
@click.option("--ready-timeout", type=float, default=120.0, show_default=True,
              help="Seconds to wait for a launched server, and for a model load through the repository API.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds any one network call may take.")
@click.option("--burst", type=int, default=64, show_default=True, help="Requests in the concurrent burst.")
@click.option("--concurrency", type=int, default=16, show_default=True, help="Requests in flight during the burst.")
@click.option("--rtol", type=float, help="Relative tolerance for every output (default: by data type).")
@click.option("--atol", type=float, help="Absolute tolerance for every output (default: by data type).")
@click.option("--perf", is_flag=True, help="Report throughput and p50/p99 latency of the burst.")
@click.option("--json", "json_file", type=click.Path(path_type=Path), metavar="FILE",
              help="Write the report as JSON to FILE.")
@click.option("--junit-xml", "junit_file", type=click.Path(path_type=Path), metavar="FILE",
              help="Write JUnit XML to FILE.")
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
) -> None:
    """Smoke-test a model repository on a Triton server through tritonclient (exit 0/1/2/3)."""
    repo_url = repo_arg if repo_arg is not None and repo_arg.startswith(("s3://", "gs://")) else None
    repo = Path(repo_arg) if repo_arg is not None and repo_url is None else None
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
    for name, value in (("--timeout", timeout), ("--ready-timeout", ready_timeout)):
        if value <= 0:
            problems.append(f"{name} must be positive, not {value:g}")
    for name, count in (("--burst", burst), ("--concurrency", concurrency)):
        if count < 1:
            problems.append(f"{name} must be at least 1, not {count}")
    for name, tolerance in (("--rtol", rtol), ("--atol", atol)):
        if tolerance is not None and tolerance < 0:
            problems.append(f"{name} must not be negative, not {tolerance:g}")
    if problems:
        raise GenRepoError([Problem("<gen-repo smoke>", "", p) for p in problems])

    options = SmokeOptions(
        timeout_s=timeout, load_timeout_s=ready_timeout, burst=burst, concurrency=concurrency,
        rtol=rtol, atol=atol, perf=perf,
    )
    terminal = sys.stdout.isatty()
    progress: Callable[[CheckResult], None] | None = None if terminal else (
        lambda result: click.echo(_plain_line(result))
    )
    with contextlib.ExitStack() as stack:
        serve_from: Path | str | None = repo
        if repo_url is not None:
            from generator.publish import download_repository, parse_url

            # The checks need the repository's files (configs, contracts, references): read them from the bucket.
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gen-repo-smoke-")))
            repo = download_repository(repo_url, folder / "repo")
            serve_from = parse_url(repo_url).triton_url
        if launch:
            assert repo is not None and serve_from is not None
            report = _launch_and_run(repo, protocol, list(models), options, tritonserver, ready_timeout, progress,
                                     serve_from)
        else:
            assert url is not None
            report = run_smoke(url, protocol, repo, list(models) or None, options, progress)

    _write_outputs(report, json_file, junit_file)
    if terminal:
        _print_table(report)
    else:
        click.echo(_summary(report))
    sys.exit(report.exit_code)


def _launch_and_run(
    repo: Path,
    protocol: str,
    models: list[str],
    options: SmokeOptions,
    tritonserver: Path | None,
    ready_timeout: float,
    progress: Callable[[CheckResult], None] | None,
    serve_from: Path | str,
) -> SmokeReport:
    """Start a server on loopback (explicit model control: smoke loads each model and reports its load errors).

    ``serve_from`` is what tritonserver loads (``repo`` itself, or the object-storage URL ``repo`` was read from).
    """
    from generator.server import TritonNotReadyError, TritonStartError, launch
    from generator.smoke import repository_models

    names = models or repository_models(repo)
    try:
        with launch(serve_from, tritonserver=tritonserver, ready_timeout=ready_timeout,
                    model_control="explicit") as server:
            url = server.grpc_url if protocol == "grpc" else server.http_url
            click.echo(f"launched tritonserver {server.binary.describe()} at {url} ({protocol}) serving {serve_from}",
                       err=True)
            return run_smoke(url, protocol, repo, names or None, options, progress)
    except (TritonStartError, TritonNotReadyError) as error:
        message = "; ".join(p.message for p in error.problems)
        for problem in error.problems:
            click.echo(f"error: {problem}", err=True)
        report = unreachable_report("127.0.0.1", protocol, names, f"the launched server did not start: {message}")
        if progress is not None:
            for result in report.results:
                progress(result)
        return report
