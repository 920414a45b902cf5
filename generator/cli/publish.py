"""``gen-repo publish DIR URL``: publish to S3/GCS or a shared folder as new, verified, then visible versions.

Exit codes (docs/release-pipelines.md): 0 published or unchanged, 1 a check failed or another publisher holds the
lock (nothing new visible), 2 bad usage or input, 3 the storage endpoint cannot be reached.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from generator.cli._common import report_errors
from generator.cli._output import echo
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
@click.option("--allow-breaking", is_flag=True,
              help="Publish even when a model's new version breaks clients of the version served now (recorded in "
                   "the lock file with who allowed it).")
@click.option("--allowed-by", metavar="NAME",
              help="Who allowed the breaking changes, recorded with the version (default: $USER); needs "
                   "--allow-breaking.")
@click.option("--json", "json_output", is_flag=True, help="Print the publish report as JSON on stdout.")
@report_errors
def command(directory: Path, url: str, keep_versions: int, force: bool, owner: str | None, lock_ttl: float,
            allow_breaking: bool, allowed_by: str | None, json_output: bool) -> None:
    """Publish the repository DIR to URL: s3://bucket/prefix, s3://host:port/bucket/prefix, gs://bucket/prefix.

    Or to a shared folder Triton servers read (a path or file:///path; NFS, a Kubernetes volume): there each new
    version is written under a hidden name, read back, then renamed into place; the config and lock file switch by
    rename.

    Each changed model's contract is first compared with the version the bucket serves (as gen-repo diff does): a
    breaking change refuses the publish (exit 1, every change listed, nothing uploaded) unless --allow-breaking.
    """
    from generator.errors import GenRepoError, Problem
    from generator.repository.publish import publish

    if allowed_by is not None and not allow_breaking:
        raise GenRepoError([Problem("--allowed-by", "", "names who allowed breaking changes: it needs "
                                                        "--allow-breaking")])

    def say(model: str, message: str) -> None:
        echo(f"{model}: {message}", err=True)

    report = publish(directory, url, keep_versions=keep_versions, force=force, owner=owner, lock_ttl_s=lock_ttl,
                     progress=None if json_output else say, allow_breaking=allow_breaking, allowed_by=allowed_by)
    if json_output:
        echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        for model in report.models:
            echo(f"{model.name}: {model.status} (version {model.version}){_release_text(model.release)}")
        echo(f"published to {report.url}; serve it with tritonserver --model-repository={report.triton_url}")
    sys.exit(EXIT_OK)


def _release_text(release: Mapping[str, Any] | None) -> str:
    """``; 2 compatible change(s) against version 1`` (and who allowed breaking ones) for the summary line."""
    if not release:
        return ""
    changes = release.get("changes", [])
    breaking = sum(1 for c in changes if c["classification"] == "breaking")
    text = f"; {breaking} breaking, {len(changes) - breaking} compatible change(s) against version " \
           f"{release['from_version']}"
    if "not_compared" in release:
        text = f"; not compared with version {release['from_version']}"
    if "allowed_by" in release:
        text += f", allowed by {release['allowed_by']}"
    return text
