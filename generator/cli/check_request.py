"""``gen-repo check-request``: validate a request (arrays in an .npz) against a model's contract, client side."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import click
import numpy as np

from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, GenRepoError, Problem

#: gen-repo's reference.npz names arrays ``<case>/input/<tensor>`` and ``<case>/output/<tensor>``.
_CASE_KEY = re.compile(r"^(?P<case>[^/]+)/(?P<role>input|output)/(?P<tensor>.+)$")


class ServerUnreachableError(GenRepoError):
    """The server named by --url did not answer (exit 3)."""

    exit_code = EXIT_UNREACHABLE


def load_requests(path: Path, case: str | None) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    """Read the requests in an .npz: one per case for a gen-repo reference.npz, else the whole file as one request."""
    try:
        with np.load(path, allow_pickle=False) as npz:  # no pickles: an .npz from elsewhere must not run code
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise GenRepoError([Problem(str(path), "", f"cannot read as .npz: {error}")]) from error
    matches = {name: _CASE_KEY.match(name) for name in arrays}
    if arrays and all(matches.values()):
        requests: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
        for name, match in sorted(matches.items()):
            assert match is not None
            requests.setdefault(match["case"], {})
            if match["role"] == "input":
                requests[match["case"]][match["tensor"]] = arrays[name]
        if case is not None:
            if case not in requests:
                raise GenRepoError([Problem(str(path), "", f"no case {case!r}; cases are {', '.join(requests)}")])
            return {case: requests[case]}
        return requests
    if case is not None:
        raise GenRepoError([Problem(str(path), "", "--case needs arrays named <case>/input/<tensor>")])
    return {"request": arrays}


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
    from generator.client import ModelContract  # numpy + tritonclient only; imported when the command runs

    if (repo is None) == (url is None):
        raise click.UsageError("give exactly one of --repo DIR or --url HOST:PORT")
    if repo is not None:
        try:
            contract = ModelContract.from_repository(repo, model, version=model_version)
        except (OSError, ValueError, KeyError) as error:
            raise GenRepoError(
                [Problem(str(repo / model), "", f"cannot load the model's contract: {error}")]
            ) from error
    else:
        assert url is not None
        try:
            contract = ModelContract.from_server(
                url, model, protocol=protocol, version=str(model_version or ""), timeout=timeout
            )
        except Exception as error:  # tritonclient raises InferenceServerException and transport errors alike
            failure = [Problem(url, "", f"get_model_config({model!r}) failed: {error}")]
            text = str(error).lower()
            if isinstance(error, OSError) or any(
                w in text for w in ("unavailable", "connect", "deadline", "timed out")
            ):
                raise ServerUnreachableError(failure) from error
            raise GenRepoError(failure) from error  # the server answered: unknown model or version
    requests = load_requests(npz_file, case)
    results: list[dict[str, Any]] = []
    for name, inputs in requests.items():
        problems = contract.validate(inputs)
        results.append({"case": name, "ok": not problems, "problems": [p.to_dict() for p in problems]})
    ok = all(r["ok"] for r in results)
    if json_output:
        payload = {"ok": ok, "model": contract.name, "source": contract.source, "cases": results}
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for result in results:
            label = f"{model} [{result['case']}]"
            if result["ok"]:
                click.echo(f"valid: {label}")
            else:
                click.echo(f"invalid: {label}")
                for problem in result["problems"]:
                    click.echo(f"  {problem['kind']}: {problem['message']}")
    sys.exit(EXIT_OK if ok else EXIT_FAILED)
