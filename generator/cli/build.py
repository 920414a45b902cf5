"""``gen-repo build MANIFEST``: build every model and swap the repository in atomically.

Progress goes to stderr: progress bars on a terminal, one plain line per event otherwise and with ``--json`` (whose
report goes to stdout).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from generator.building.results import FINAL_STAGES, OK_STATUSES, STAGES, BuildEvent, BuildFailed, BuildReport, Progress
from generator.cli._common import report_errors, summary_md_option
from generator.cli._output import console, echo
from generator.errors import EXIT_FAILED, EXIT_OK
from generator.planning.options import BuildOptions


class _RichProgress:
    """One progress bar per model; the bar advances with each stage and fills when the model is done."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.fields[model]}", style="bold", markup=False),
            BarColumn(bar_width=20),
            TextColumn("{task.fields[stage]}", markup=False),
            TimeElapsedColumn(),
            console=console,
        )
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: BuildEvent) -> None:
        if event.model == "*":
            from rich.text import Text

            self.console.print(Text.assemble(("note", "cyan"), f": {event.message}"))
            return
        task = self.tasks.get(event.model)
        if task is None:
            task = self.tasks[event.model] = self.progress.add_task(
                event.model, total=len(STAGES) + 1, model=event.model, stage=""
            )
        if event.stage in FINAL_STAGES:
            self.progress.update(task, completed=len(STAGES) + 1, stage=event.message)
            self.progress.stop_task(task)
        else:
            done = STAGES.index(event.stage) if event.stage in STAGES else 0
            self.progress.update(task, completed=done, stage=f"{event.stage}: {event.message}")

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self.progress:
            yield


def _plain(event: BuildEvent) -> None:
    echo(str(event), err=True)


def _table(report: BuildReport) -> None:
    from rich.table import Table

    table = Table(title=f"gen-repo build -> {report.output_dir}")
    for column in ("model", "target", "status", "seconds"):
        table.add_column(column)
    for model in report.models:
        table.add_row(model.name, model.target, model.status, f"{model.seconds:.1f}")
    out = console(stderr=True)
    out.print(table)
    # Notes and problems after the table, a line each: in a column the longest one stretched every row.
    for model in report.models:
        for line in [p.message for p in model.problems] or model.notes:
            out.print(f"{model.name}: {line}")


def _append_summary(summary_md: Path | None, report: BuildReport) -> None:
    if summary_md is not None:
        from generator.reports.markdown import append_summary
        from generator.reports.summaries import build_summary

        written = [f"the repository {report.output_dir}"] if report.committed else []
        append_summary(summary_md, build_summary(report), written)


@click.command("build")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Repository folder (default: the manifest's `output`).")
@click.option("--target", type=click.Choice(["auto", "tensorrt", "onnx", "python"]),
              help="Override every model's target. auto: tensorrt with a GPU and TensorRT, else onnx (it says which); "
                   "python: ONNX run by onnxruntime in Triton's Python backend (what a CPU-only Triton serves).")
@click.option("--allow-code", is_flag=True, help="Allow importing `module:callable` model factories (user code).")
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths outside the manifest's folder.")
@click.option("--keep-going", is_flag=True, help="Build what can be built; failed models keep their previous build.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Parallel export processes (TensorRT builds run one at a time).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Build cache folder (default: $GEN_REPO_CACHE or ~/.cache/gen-repo).")
@click.option("--no-cache", is_flag=True, help="Rebuild every model even when the cache has it.")
@click.option("--tensorrt-module", type=click.Choice(["tensorrt", "tensorrt_rtx"]), default="tensorrt",
              show_default=True,
              help="TensorRT flavour for --target tensorrt; tensorrt_rtx builds on a CPU but its engines are NOT "
                   "Triton plans (a test of the build path).")
@click.option("--workspace-mib", type=click.IntRange(1), help="TensorRT builder workspace limit in MiB.")
@click.option("--precision", multiple=True, type=click.Choice(["fp32", "tf32", "fp16", "bf16"]),
              help="TensorRT precisions to allow (repeat).")
@click.option("--builder-optimization-level", type=click.IntRange(0, 5), help="TensorRT builder optimization level.")
@click.option("--plain", is_flag=True, help="Plain progress lines even on a terminal.")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS",
              help="Build on a Ray cluster: `auto` (the running one) or its address (pip install 'gen-repo[ray]').")
@click.option("--json", "json_output", is_flag=True, help="Print the build report as JSON on stdout.")
@summary_md_option
@report_errors
def command(manifest: Path, output_dir: Path | None, target: str | None, allow_code: bool, allow_outside: bool,
            keep_going: bool, jobs: int, cache_dir: Path | None, no_cache: bool, tensorrt_module: str,
            workspace_mib: int | None, precision: tuple[str, ...], builder_optimization_level: int | None,
            plain: bool, json_output: bool, ray_address: str | None = None, summary_md: Path | None = None) -> None:
    """Build the Triton model repository described by MANIFEST."""
    from generator.building.pipeline import (
        build_repository,  # the work is in the library; imported when the command runs
    )

    tensorrt: dict[str, object] = {}
    if workspace_mib:
        tensorrt["workspace_bytes"] = workspace_mib * 1024 * 1024
    if precision:
        tensorrt["precision"] = tuple(precision)
    if builder_optimization_level is not None:
        tensorrt["builder_optimization_level"] = builder_optimization_level
    options = BuildOptions(allow_code=allow_code, keep_going=keep_going, jobs=jobs, cache_dir=cache_dir,
                           use_cache=not no_cache, target=target, allow_outside=allow_outside,
                           tensorrt_module=tensorrt_module, tensorrt=tensorrt, ray_address=ray_address)
    say: Progress
    running: contextlib.AbstractContextManager[Any]
    if json_output or plain or not sys.stderr.isatty():
        say, running = _plain, contextlib.nullcontext()
    else:
        rich_progress = _RichProgress(console(stderr=True))
        say, running = rich_progress, rich_progress.running()
    try:
        with running:
            report = build_repository(manifest, options, output_dir, progress=say)
    except BuildFailed as failed:
        _append_summary(summary_md, failed.report)
        if json_output:
            echo(json.dumps(failed.report.to_dict(), indent=2, sort_keys=True))
        else:
            _table(failed.report)
            for problem in failed.problems:
                echo(f"error: {problem}", err=True)
            echo("build failed: nothing was written (the previous repository is untouched)", err=True)
        sys.exit(EXIT_FAILED)
    _append_summary(summary_md, report)
    if json_output:
        echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        _table(report)
        for note in report.notes:
            echo(f"note: {note}", err=True)
        if tensorrt_module != "tensorrt" and any(m.target == "tensorrt" for m in report.models):
            echo(f"note: engines built with {tensorrt_module} are NOT Triton plans: Triton cannot load this "
                 "repository's tensorrt models", err=True)
        failed_models = [m.name for m in report.models if m.status not in OK_STATUSES]
        if failed_models:
            echo(f"--keep-going: {', '.join(failed_models)} failed (see above); the rest was written to "
                 f"{report.output_dir}", err=True)
        else:
            echo(f"repository written to {report.output_dir}", err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)
