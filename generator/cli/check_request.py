"""``gen-repo check-request``: validate a request (arrays in an .npz) against a model's contract, client side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_OK


@click.command("check-request")
@click.option("--repo", "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), help="Model repository.")
@click.option("--url", help="Live server HOST:PORT (get_model_config).")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--version", "model_version", type=int, default=None, help="Model version (default: latest).")
@click.option("--case", default=None, help="Only this case of a gen-repo reference.npz.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the server.")
@click.option("--json", "json_output", is_flag=True, help="Print the result as JSON on stdout.")
@click.argument("model")
@click.argument("npz_file", metavar="FILE.npz", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@report_errors
def command(
    repo: Path | None,
    url: str | None,
    protocol: str,
    model_version: int | None,
    case: str | None,
    timeout: float,
    json_output: bool,
    model: str,
    npz_file: Path,
) -> None:
    """Check that the arrays in FILE.npz form a valid request for MODEL.

    The contract comes from --repo (gen_repo/contract.json when present, else config.pbtxt) or from a live server
    (--url). A gen-repo reference.npz (arrays named <case>/input/<tensor>) is checked case by case. Exit status: 0
    valid, 1 invalid (the problems are listed), 2 bad usage, 3 server unreachable.
    """
    from generator.client import check_request_file  # numpy + tritonclient only; imported when the command runs

    if (repo is None) == (url is None):
        raise click.UsageError("give exactly one of --repo DIR or --url HOST:PORT")
    payload = check_request_file(model, npz_file, repo=repo, url=url, protocol=protocol, version=model_version,
                                 case=case, timeout=timeout)
    if json_output:
        echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for result in payload["cases"]:
            label = f"{model} [{result['case']}]"
            if result["ok"]:
                echo(f"valid: {label}")
            else:
                echo(f"invalid: {label}")
                for problem in result["problems"]:
                    echo(f"  {problem['kind']}: {problem['message']}")
    sys.exit(EXIT_OK if payload["ok"] else EXIT_FAILED)
