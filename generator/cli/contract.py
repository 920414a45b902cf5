"""``gen-repo contract REPO MODEL``: a model's contract, or the JSON Schema of a valid KServe v2 JSON request."""

from __future__ import annotations

from pathlib import Path

import click

from generator.cli._common import AT_LEAST_1, report_errors
from generator.cli._output import echo


@click.command("contract")
@click.argument("repo", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("model")
@click.option("--format", "output_format", type=click.Choice(["json", "jsonschema"]), default="json",
              show_default=True,
              help="json: the contract as generator.client reads it; jsonschema: a valid KServe v2 JSON request as a "
                   "JSON Schema (Draft 2020-12), the bytes of the build's gen_repo/request.schema.json.")
@click.option("--version", "model_version", type=AT_LEAST_1, default=None,
              help="Model version (default: the served one).")
@report_errors
def command(repo: Path, model: str, output_format: str, model_version: int | None) -> None:
    """Print MODEL's contract from the model repository REPO.

    The version Triton serves (the config's version_policy, else the highest version folder; stderr says which):
    its gen_repo/contract.json when present, else config.pbtxt (ranges from dims alone, docs/client.md). Exit status:
    0 printed, 2 no such model or an unreadable contract.
    """
    # numpy + tritonclient only; imported when the command runs.
    from generator.client import ModelContract
    from generator.contracts.request_schema import render_request_schema
    from generator.contracts.served import FolderReader, read_served_model
    from generator.planning.contract import render_contract

    served = read_served_model(FolderReader(repo), model, model_version)
    contract = ModelContract.from_served(served).to_dict()
    echo(served.describe(), err=True)
    text = render_request_schema(contract) if output_format == "jsonschema" else render_contract(contract)
    echo(text, nl=False)
