"""``gen-repo publish DIR URL``: upload a repository to S3/GCS as new, verified, then visible model versions.

Exit codes: 0 published (or nothing changed), 1 a check failed, a served version's objects do not match the lock
file, or another publisher holds the lock (nothing new was made visible), 2 bad usage (DIR does not match its lock
file or its lock does not describe a publishable repository, a bad URL, no such bucket, access refused, s3fs/gcsfs
missing), 3 the storage endpoint cannot be reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.errors import EXIT_OK


@click.command("publish")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("url")
@click.option("--keep-versions", type=click.IntRange(1), default=2, show_default=True,
              help="Versions kept per model after a publish (the new one and older ones a server may still use).")
@click.option("--force", is_flag=True, help="Publish a new version even of models whose content is unchanged.")
@click.option("--owner", help="Name recorded in the publishers' lock object (default: user@host).")
@click.option("--lock-ttl", type=click.FloatRange(min=1), default=3600.0, show_default=True,
              help="Seconds after which a publisher's lock counts as abandoned and may be taken over.")
@click.option("--json", "json_output", is_flag=True, help="Print the publish report as JSON on stdout.")
@report_errors
def command(directory: Path, url: str, keep_versions: int, force: bool, owner: str | None, lock_ttl: float,
            json_output: bool) -> None:
    """Publish the repository DIR to URL (s3://bucket/prefix, s3://host:port/bucket/prefix, gs://bucket/prefix)."""
    from generator.publish import publish

    def say(model: str, message: str) -> None:
        click.echo(f"{model}: {message}", err=True)

    report = publish(directory, url, keep_versions=keep_versions, force=force, owner=owner, lock_ttl_s=lock_ttl,
                     progress=None if json_output else say)
    if json_output:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        for model in report.models:
            click.echo(f"{model.name}: {model.status} (version {model.version})")
        click.echo(f"published to {report.url}; serve it with tritonserver --model-repository={report.triton_url}")
    sys.exit(EXIT_OK)
