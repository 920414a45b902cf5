"""``gen-repo lint REPO [REPO...]``: check Triton model repositories against Triton's rules (exit 1 on errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors, summary_md_option
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_OK
from generator.lint.environment import RATE_LIMIT_MODES, Environment, RateLimitResource, parse_rate_limit_resource


def _resources(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[RateLimitResource, ...]:
    """--rate-limit-resource values as tritonserver parses them (a malformed one is bad usage, exit 2)."""
    try:
        return tuple(parse_rate_limit_resource(value) for value in values)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


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
@click.option("--disable-auto-complete-config", "disable_auto_complete", is_flag=True,
              help="The server runs with tritonserver's --disable-auto-complete-config (or the deprecated "
                   "--strict-model-config=true): a model folder without config.pbtxt is an error. Triton's default, "
                   "auto-complete on, lets python, onnxruntime, tensorrt and openvino models load without one.")
@click.option("--rate-limit", type=click.Choice(RATE_LIMIT_MODES), default="off", show_default=True,
              help="The server's --rate-limit: with execution_count, a resource declared global in one instance "
                   "group and device-specific in another (of any model) is an error; off ignores every resource.")
@click.option("--rate-limit-resource", "rate_limit_resources", multiple=True, metavar="NAME:COUNT[:DEVICE]",
              callback=_resources,
              help="The server's --rate-limit-resource (repeatable): with --rate-limit execution_count, an instance "
                   "group needing more of a resource than given (or one not given at all) is an error.")
@click.option("--json", "json_output", is_flag=True, help="Print the findings as JSON on stdout.")
@summary_md_option
@report_errors
def command(repositories: tuple[Path, ...], external_models: tuple[str, ...], gpus: int | None,
            backends: tuple[str, ...], url: str | None, protocol: str, disable_auto_complete: bool, rate_limit: str,
            rate_limit_resources: tuple[RateLimitResource, ...], json_output: bool,
            summary_md: Path | None = None) -> None:
    """Lint the Triton model repositories REPOSITORIES, served together (like repeated --model-repository).

    Checks the layout (model and version folders, the files configs name), every config.pbtxt against ModelConfig,
    the platform and backend Triton infers, Triton's model-configuration rules, ensembles across all repositories,
    and that ONNX graphs agree with their configs; with --gpus, --backends or --url also what the target machine
    must have (those rules are skipped otherwise, and the output says so). The server's options that decide some
    refusals are given as tritonserver takes them, with its defaults (--disable-auto-complete-config, --rate-limit,
    --rate-limit-resource). docs/lint-rules.md lists every rule.
    Prints one ``file:line:column: severity: message [rule]`` line per finding. Exit status: 0 when there are no
    errors (warnings alone pass), 1 when there are errors, 2 for bad usage, 3 when --url does not answer.
    """
    from generator.lint import environment_from_server, lint, parse_backends

    seen = environment_from_server(url, protocol) if url else Environment()
    given = ("--gpus" if gpus is not None else "", "--backends" if backends else "", seen.source)
    environment = Environment(gpus=gpus, backends=parse_backends(backends) if backends else None, absent=seen.absent,
                              source=", ".join(s for s in given if s), auto_complete=not disable_auto_complete,
                              rate_limit=rate_limit, rate_limit_resources=rate_limit_resources)
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
        echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for finding in report.findings:
            echo(str(finding))
        for rule, needs in sorted(report.skipped.items()):
            echo(f"skipped {rule}: needs {needs}", err=True)
        echo(f"{errors} error(s), {warnings} warning(s) in {shown}", err=True)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)
