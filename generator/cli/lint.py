"""``gen-repo lint REPO [REPO...]``: check Triton model repositories against Triton's rules (exit 1 on errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors, summary_md_option
from generator.errors import EXIT_FAILED, EXIT_OK


@click.command("lint")
@click.argument("repositories", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--external-model", "external_models", multiple=True, metavar="NAME",
              help="A model the server loads from elsewhere (another repository): ensemble steps may name it. "
                   "Repeatable.")
@click.option("--gpus", type=click.IntRange(min=0), default=None,
              help="GPUs on the target machine (ids 0..N-1): checks KIND_GPU instance groups and their gpu ids.")
@click.option("--backends", "backends", multiple=True, metavar="LIST",
              help="Backends installed on the target machine, comma-separated (e.g. python,onnxruntime): checks "
                   "that each model's backend is there. Repeatable.")
@click.option("--url", metavar="HOST:PORT", default=None,
              help="A running server to read the environment from (backends it refused models for).")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True,
              help="Protocol of --url.")
@click.option("--json", "json_output", is_flag=True, help="Print the findings as JSON on stdout.")
@summary_md_option
@report_errors
def command(repositories: tuple[Path, ...], external_models: tuple[str, ...], gpus: int | None,
            backends: tuple[str, ...], url: str | None, protocol: str, json_output: bool,
            summary_md: Path | None = None) -> None:
    """Lint the Triton model repositories REPOSITORIES, served together (like repeated --model-repository).

    Checks the layout (model and version folders, the files configs name), every config.pbtxt against ModelConfig,
    the platform and backend Triton infers, Triton's model-configuration rules, ensembles across all repositories,
    and that ONNX graphs agree with their configs; with --gpus, --backends or --url also what the target machine
    must have (those rules are skipped otherwise, and the output says so). docs/lint-rules.md lists every rule.
    Prints one ``file:line:column: severity: message [rule]`` line per finding. Exit status: 0 when there are no
    errors (warnings alone pass), 1 when there are errors, 2 for bad usage, 3 when --url does not answer.
    """
    from generator.lint import Environment, environment_from_server, lint, parse_backends

    environment = None
    if gpus is not None or backends or url:
        seen = environment_from_server(url, protocol) if url else Environment()
        given = ("--gpus" if gpus is not None else "", "--backends" if backends else "", seen.source)
        sources = [s for s in given if s]
        environment = Environment(gpus=gpus, backends=parse_backends(backends) if backends else None,
                                  absent=seen.absent, source=", ".join(sources))
    report = lint(repositories, external_models=external_models, environment=environment)
    errors, warnings = report.errors, report.warnings
    if summary_md is not None:
        from generator.reports.markdown import append_summary
        from generator.reports.summaries import lint_summary

        append_summary(summary_md, lint_summary(report, repositories))
    shown = ", ".join(str(r) for r in repositories)
    if json_output:
        payload = {
            "ok": errors == 0,
            "repositories": [str(r) for r in repositories],
            "summary": {"errors": errors, "warnings": warnings},
            "skipped": report.skipped,
            "findings": [f.to_dict() for f in report.findings],
        }
        if len(repositories) == 1:
            payload["repository"] = str(repositories[0])
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for finding in report.findings:
            click.echo(str(finding))
        for rule, needs in sorted(report.skipped.items()):
            click.echo(f"skipped {rule}: needs {needs}", err=True)
        click.echo(f"{errors} error(s), {warnings} warning(s) in {shown}", err=True)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)
