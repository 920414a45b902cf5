"""``gen-repo lint DIR``: check a Triton model repository against Triton's rules (exit 1 on errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_OK


@click.command("lint")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_output", is_flag=True, help="Print the findings as JSON on stdout.")
@report_errors
def command(directory: Path, json_output: bool) -> None:
    """Lint the Triton model repository DIRECTORY.

    Checks the layout (model and version folders, the model file each platform/backend loads), that every
    config.pbtxt parses as ModelConfig, Triton's config rules, and that ONNX graphs agree with their configs.
    Prints one ``file:line:column: severity: message [rule]`` line per finding. Exit status: 0 when there are no
    errors (warnings alone pass), 1 when there are errors, 2 for bad usage.
    """
    from generator.lint import lint_repository  # the work is in the library; imported when the command runs

    findings = lint_repository(directory)
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    if json_output:
        payload = {
            "ok": errors == 0,
            "repository": str(directory),
            "summary": {"errors": errors, "warnings": warnings},
            "findings": [f.to_dict() for f in findings],
        }
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for finding in findings:
            click.echo(str(finding))
        click.echo(f"{errors} error(s), {warnings} warning(s) in {directory}", err=True)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)
