"""``gen-repo check-request``: validate a request (arrays in an .npz) against a model's contract, client side."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from generator.cli._common import AT_LEAST_1, POSITIVE, report_errors
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_OK, GenRepoError, Problem

if TYPE_CHECKING:
    from generator.client import ModelContract


@click.command("check-request")
@click.option("--repo", "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), help="Model repository.")
@click.option("--url", help="Live server HOST:PORT (get_model_config).")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--version", "model_version", type=AT_LEAST_1, default=None,
              help="Model version (default: the served one).")
@click.option("--case", default=None, help="Only this case of a gen-repo reference.npz.")
@click.option("--timeout", type=POSITIVE, default=10.0, show_default=True, help="Seconds to wait for the server.")
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
    if (repo is None) == (url is None):
        raise click.UsageError("give exactly one of --repo DIR or --url HOST:PORT")
    contract, read = _contract(model, repo, url, protocol, model_version, timeout)
    payload = check_request_file(contract, npz_file, case)
    if read:
        payload["read"] = read
    if json_output:
        echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        if read:
            echo(read, err=True)
        for result in payload["cases"]:
            label = f"{model} [{result['case']}]"
            if result["ok"]:
                echo(f"valid: {label}")
            else:
                echo(f"invalid: {label}")
                for problem in result["problems"]:
                    echo(f"  {problem['kind']}: {problem['message']}")
    sys.exit(EXIT_OK if payload["ok"] else EXIT_FAILED)


def _contract(model: str, repo: Path | None, url: str | None, protocol: str, version: int | None,
              timeout: float) -> tuple[ModelContract, str]:
    """The contract to check against, and which version of the repository was read ("" for a server's)."""
    from generator.client import ModelContract  # numpy + tritonclient only; imported when the command runs
    from generator.contracts.served import FolderReader, read_served_model
    from generator.triton.connection import ServerUnreachableError

    if repo is not None:
        served = read_served_model(FolderReader(repo), model, version)
        return ModelContract.from_served(served), served.describe()
    assert url is not None
    try:
        return ModelContract.from_server(url, model, protocol=protocol, version=str(version or ""),
                                         timeout=timeout), ""
    except ServerUnreachableError:
        raise
    except Exception as error:  # the server answered: unknown model or version
        raise GenRepoError([Problem(url, "", f"get_model_config({model!r}) failed: {error}")]) from error


def check_request_file(contract: ModelContract, npz_file: Path, case: str | None = None) -> dict[str, Any]:
    """Check the requests in ``npz_file`` against ``contract``.

    Returns ``{"ok", "model", "source", "cases": [{"case", "ok", "problems"}]}``: a gen-repo reference.npz is
    checked case by case (see :func:`generator.contracts.reference_data.request_members`). GenRepoError when the file
    cannot be read within the limits of :mod:`generator.bounded` (exit 2). Arrays are read only when their headers fit
    the contract, or when their values can be judged within the ``request_check_bytes`` limit
    (:meth:`~generator.client.ModelContract.reads_values`).
    """
    from generator.contracts.array_files import open_array_file
    from generator.contracts.reference_data import request_members

    cases: list[dict[str, Any]] = []
    with open_array_file(npz_file, "npz") as arrays:
        for name, members in request_members(list(arrays.headers), case, str(npz_file)).items():
            inputs: dict[str, Any] = {}
            for tensor, member in members.items():
                header = arrays.headers[member]
                inputs[tensor] = arrays.read(member) if contract.reads_values(tensor, header) else header
            problems = contract.validate(inputs)
            cases.append({"case": name, "ok": not problems, "problems": [p.to_dict() for p in problems]})
    return {"ok": all(c["ok"] for c in cases), "model": contract.name, "source": contract.source, "cases": cases}
