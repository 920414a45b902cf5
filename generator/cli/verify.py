"""``gen-repo verify DIR``: check every artifact of a repository against its lock file.

Exit codes: 0 everything matches, 1 something differs (each difference listed), 2 bad usage (DIR is not a folder
or has no ``gen-repo.lock.json``; a bad URL, no such bucket, objects that are not a repository), 3 the storage
endpoint cannot be reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors, summary_md_option
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_OK
from generator.reports.markdown import append_summary
from generator.reports.summaries import verify_summary
from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.verify import verify_location


@click.command("verify")
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print the result as JSON on stdout.")
@summary_md_option
@report_errors
def command(directory: str, json_output: bool, summary_md: Path | None = None) -> None:
    """Check DIR's files (or those at an s3://, gs:// or file:// URL) against its gen-repo.lock.json (their sha256)."""
    result = verify_location(directory)
    if summary_md is not None:
        append_summary(summary_md, verify_summary(result))
    if json_output:
        payload = {
            "ok": not result.problems,
            "repository": result.location,
            "artifacts": result.artifacts,
            "problems": [p.to_dict() for p in result.problems],
        }
        echo(json.dumps(payload, indent=2, sort_keys=True))
    else:
        for problem in result.problems:
            echo(str(problem))
        if result.problems:
            echo(f"{len(result.problems)} difference(s) from {LOCK_FILE_NAME}")
        else:
            echo(f"ok: {result.artifacts} artifact(s) match {LOCK_FILE_NAME}")
    sys.exit(EXIT_FAILED if result.problems else EXIT_OK)

