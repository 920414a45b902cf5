"""``gen-repo report REPO -o report.html``: one self-contained HTML page about a model repository."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from generator.cli._common import OutputFile, report_errors, write_output
from generator.cli._output import echo, visible
from generator.errors import GenRepoError, Problem


@click.command("report")
@click.argument("repository", type=str)
@click.option("-o", "--output", type=OutputFile(dash=True), required=True,
              help="The HTML file to write ('-' for stdout).")
@click.option("--smoke", "smoke_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="`gen-repo smoke --json` output: each check with its time.")
@click.option("--perf", "perf_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="`gen-repo perf --json` output: throughput and latency against concurrency, charted.")
@click.option("--diff", "diff_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="`gen-repo diff --json` output: the breaking and compatible changes.")
@click.option("--tune", "tune_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="`gen-repo tune --json` output: every candidate's p99 latency against its throughput, charted.")
@click.option("--manifest", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="The manifest the repository was built from: shows the plan's decisions (why it batches or "
                   "not), as `gen-repo plan` printed them for that build (each model's target from the lock file).")
@report_errors
def command(repository: str, output: Path, smoke_file: str | None, perf_file: str | None, diff_file: str | None,
            tune_file: str | None, manifest: str | None) -> None:
    """Write one HTML page about REPOSITORY (a folder, file://, s3:// or gs://) to --output.

    The page holds a summary (models, targets, versions, the lock check of `verify`, `lint`'s findings, the smoke
    result), per model its contract, a chart of its first inputs' min/opt/max per axis, batching, value domains,
    warmup and instance groups, per ensemble its wiring as a picture, and what --smoke, --perf, --diff and --tune
    give. It is self-contained: no scripts, no external styles, fonts or images; the same inputs give the same bytes.
    Exit 2 for bad input (every problem of every file at once; nothing written), 3 when the storage cannot be
    reached.
    """
    # matplotlib writes its font cache into MPLCONFIGDIR (else ~/.cache or ~/.config) when it is first imported:
    # a temporary folder for the run, so nothing lands beside the named output.
    with tempfile.TemporaryDirectory(prefix="gen-repo-mpl-") as cache, _environment(MPLCONFIGDIR=cache):
        _write_report(repository, output, (smoke_file, perf_file, diff_file, tune_file), manifest)


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _write_report(repository: str, output: Path, files: tuple[str | None, str | None, str | None, str | None],
                  manifest: str | None) -> None:
    try:
        from generator.reports.html_page import build_report, load_inputs
    except ImportError as error:  # the `report` extra (Jinja2, matplotlib) is not installed
        raise GenRepoError([Problem("gen-repo report", "", f"needs {error.name}: pip install 'gen-repo[report]'")]
                           ) from None

    inputs = load_inputs(*files)
    # Control characters are not valid in HTML anyway: the page, on stdout or in its file, shows them as escapes.
    page = visible(build_report(repository, inputs, manifest))
    if str(output) == "-":
        echo(page, nl=False)
        return
    # Written whole to a new file beside it, then renamed into place: a reader never sees half a page, and nothing
    # planted beside it (a symlink at a temporary name or at the page's own name) is written through.
    write_output(output, page, "--output")
    echo(f"report written to {output}", err=True)
