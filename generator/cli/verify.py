"""``gen-repo verify DIR``: check every artifact of a repository against its lock file.

Exit codes: 0 everything matches, 1 something differs (each difference listed), 2 bad usage (DIR is not a folder
or has no ``gen-repo.lock.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_OK, GenRepoError, Problem
from generator.repository import LOCK_FILE_NAME, read_lock, verify_repository


@click.command("verify")
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print the result as JSON on stdout.")
@report_errors
def command(directory: str | Path, json_output: bool) -> None:
    """Check DIR's files (or those at an s3:// or gs:// URL) against its gen-repo.lock.json (sha256 of each)."""
    if str(directory).startswith(("s3://", "gs://")):  # a published repository, read back to a temp folder
        import shutil
        import tempfile

        from generator.publish import download_repository

        tmp = tempfile.mkdtemp(prefix="gen-repo-verify-")
        click.get_current_context().call_on_close(lambda: shutil.rmtree(tmp, ignore_errors=True))
        directory = download_repository(str(directory), Path(tmp) / "repo")
    directory = Path(directory)
    if not directory.is_dir():
        raise GenRepoError([Problem(str(directory), "", "not a directory")])
    if not (directory / LOCK_FILE_NAME).is_file():
        raise GenRepoError([Problem(str(directory), "", f"not a gen-repo repository: it has no {LOCK_FILE_NAME}")])
    problems = verify_repository(directory)
    try:
        checked: int | None = len(read_lock(directory)["artifacts"])
    except GenRepoError:
        checked = None  # a corrupt lock file; verify_repository reported it
    if json_output:
        payload = {
            "ok": not problems,
            "repository": str(directory),
            "artifacts": checked,
            "problems": [p.to_dict() for p in problems],
        }
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for problem in problems:
            click.echo(str(problem))
        if problems:
            click.echo(f"{len(problems)} difference(s) from {LOCK_FILE_NAME}")
        else:
            click.echo(f"ok: {checked} artifact(s) match {LOCK_FILE_NAME}")
    sys.exit(EXIT_FAILED if problems else EXIT_OK)
