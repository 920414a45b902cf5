"""``gen-repo build MANIFEST``: build every model and swap the repository in atomically."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from generator.build import BuildFailed, BuildOptions, BuildReport, build_repository
from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_OK


def _printer(plain: bool) -> tuple[object, object]:
    """A progress callback: rich status lines on a terminal, plain ``model: message`` lines in CI logs."""
    if plain:
        return (lambda model, message: click.echo(f"{model}: {message}", err=True)), None
    from rich.console import Console

    console = Console(stderr=True)
    return (lambda model, message: console.print(f"[bold]{model}[/bold]: {message}")), console


def _table(report: BuildReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gen-repo build -> {report.output_dir}")
    for column in ("model", "target", "status", "seconds", "notes"):
        table.add_column(column)
    for model in report.models:
        detail = "; ".join(p.message for p in model.problems) or "; ".join(model.notes)
        table.add_row(model.name, model.target, model.status, f"{model.seconds:.1f}", detail)
    Console(stderr=True).print(table)


@click.command("build")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Repository folder (default: the manifest's `output`).")
@click.option("--target", type=click.Choice(["auto", "tensorrt", "onnx", "python"]),
              help="Override every model's target. auto: tensorrt with a GPU and TensorRT, else onnx.")
@click.option("--allow-code", is_flag=True, help="Allow importing `module:callable` model factories (user code).")
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths outside the manifest's folder.")
@click.option("--keep-going", is_flag=True, help="Build what can be built; failed models keep their previous build.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Parallel export processes (TensorRT builds run one at a time).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Build cache folder (default: $GEN_REPO_CACHE or ~/.cache/gen-repo).")
@click.option("--no-cache", is_flag=True, help="Rebuild every model even when the cache has it.")
@click.option("--tensorrt-module", type=click.Choice(["tensorrt", "tensorrt_rtx"]), default="tensorrt",
              show_default=True, help="TensorRT flavour; tensorrt_rtx builds on a CPU but its engines are not Triton plans.")
@click.option("--workspace-mib", type=click.IntRange(1), help="TensorRT builder workspace limit in MiB.")
@click.option("--precision", multiple=True, type=click.Choice(["fp32", "tf32", "fp16", "bf16"]),
              help="TensorRT precisions to allow (repeat).")
@click.option("--json", "json_output", is_flag=True, help="Print the build report as JSON on stdout.")
@report_errors
def command(manifest: Path, output_dir: Path | None, target: str | None, allow_code: bool, allow_outside: bool,
            keep_going: bool, jobs: int, cache_dir: Path | None, no_cache: bool, tensorrt_module: str,
            workspace_mib: int | None, precision: tuple[str, ...], json_output: bool) -> None:
    """Build the Triton model repository described by MANIFEST."""
    tensorrt: dict[str, object] = {}
    if workspace_mib:
        tensorrt["workspace_bytes"] = workspace_mib * 1024 * 1024
    if precision:
        tensorrt["precision"] = tuple(precision)
    options = BuildOptions(allow_code=allow_code, keep_going=keep_going, jobs=jobs, cache_dir=cache_dir,
                           use_cache=not no_cache, target=target, allow_outside=allow_outside,
                           tensorrt_module=tensorrt_module, tensorrt=tensorrt)
    # torch.onnx warns about every missing optional operator library (torchvision); those lines are noise here.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    say, _ = _printer(plain=json_output or not sys.stderr.isatty())
    try:
        report = build_repository(manifest, options, output_dir, progress=say)  # type: ignore[arg-type]
    except BuildFailed as failed:
        if json_output:
            click.echo(json.dumps(failed.report.to_dict(), indent=2, sort_keys=True))
        else:
            _table(failed.report)
            for problem in failed.problems:
                click.echo(f"error: {problem}", err=True)
            click.echo("build failed: nothing was written (the previous repository is untouched)", err=True)
        sys.exit(EXIT_FAILED)
    if json_output:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        _table(report)
        click.echo(f"repository written to {report.output_dir}", err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)
