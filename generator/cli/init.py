"""``gen-repo init SPEC_OR_TUNE_REPORT... [-o gen-repo.yaml]``: write a starter manifest, one model per graph."""

from __future__ import annotations

import click

from generator.cli._common import OutputFile, report_errors
from generator.cli._output import echo


@click.command("init")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", default="gen-repo.yaml", show_default=True, type=OutputFile(path_type=str),
              help="The manifest to write; never overwritten. Spec paths are written relative to its folder.")
@click.option("--allow-outside", is_flag=True,
              help="Refer to specs outside the manifest's folder with '..' paths (plan and build then need it too).")
@report_errors
def command(specs: tuple[str, ...], output: str, allow_outside: bool) -> None:
    """Write a starter manifest for every graph in SPEC files and AITune tune reports.

    One model per graph (names from the graph and module names, Triton-safe and unique), target auto, every other
    option as a comment with its default. Spec paths are relative to OUTPUT's folder, wherever the command runs; a
    spec outside that folder is refused unless --allow-outside. `gen-repo plan` accepts it unchanged; `gen-repo
    build` also needs each model's `source:` (see the file's header). Exit 2 without writing anything when a spec
    is invalid or OUTPUT exists.
    """
    from generator.manifest.starter import write_starter_manifest

    path, count, outside = write_starter_manifest(specs, output, allow_outside=allow_outside)
    echo(f"wrote {path}: {count} model(s); next: gen-repo plan {'--allow-outside ' if outside else ''}{path}")
