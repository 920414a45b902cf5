"""``gen-repo diff OLD NEW``: the client-visible changes between two repositories, each breaking or compatible.

Exit codes: 0 nothing breaking, 1 at least one breaking change, 2 bad input (a location that is not a repository or
version folder, an unreadable config or contract, one side a repository and the other a version folder), 3 the
storage endpoint cannot be reached.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from generator.cli._common import report_errors
from generator.errors import EXIT_FAILED, EXIT_OK, GenRepoError, Problem

if TYPE_CHECKING:
    from generator.contract_diff import ContractDiff


@click.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--json", "json_output", is_flag=True,
              help="Print the diff as JSON on stdout (schema gen-repo-diff/1, docs/diff.md).")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the diff as a Markdown document to this file.")
@click.option("--summary-md", "summary_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Append a short Markdown section (counts, breaking changes first) to this file, e.g. "
                   "$GITHUB_STEP_SUMMARY.")
@report_errors
def command(old: str, new: str, json_output: bool, markdown_file: Path | None, summary_file: Path | None) -> None:
    """Compare the model contracts of OLD and NEW as a client sees them.

    OLD and NEW are repository folders, s3:// or gs:// repositories, or one model's two version folders
    (old_repo/mlp/1 new_repo/mlp/1). Each model's contract is its served version's gen_repo/contract.json, or for a
    repository gen-repo did not build its config.pbtxt (the facts a config cannot tell are listed, not compared).
    Every change is breaking (a request valid before is refused now, or a response changes shape or type) or
    compatible. Exit status: 0 nothing breaking, 1 breaking changes, 2 bad input, 3 storage unreachable.
    """
    from generator.ci_summary import append_summary
    from generator.contract_diff import render_markdown, summary_section
    from generator.contract_sources import diff_locations

    diff = diff_locations(old, new)
    target = markdown_file
    try:
        if markdown_file is not None:
            markdown_file.write_text(render_markdown(diff), encoding="utf-8")
        target = summary_file
        if summary_file is not None:
            links = [("diff (Markdown)", str(markdown_file))] if markdown_file is not None else []
            append_summary(summary_file, summary_section(diff, links))
    except OSError as error:
        raise GenRepoError([Problem(str(target), "", f"cannot write: {error.strerror or error}")]) from error
    if json_output:
        click.echo(diff.render_json(), nl=False)
    else:
        _print_table(diff)
    sys.exit(EXIT_FAILED if diff.breaking else EXIT_OK)


def _print_table(diff: ContractDiff) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if diff.changes:
        table = Table(title=f"gen-repo diff {escape(diff.old)} -> {escape(diff.new)}")
        for column in ("model", "class", "kind", "subject", "change"):
            table.add_column(column, overflow="fold", no_wrap=column in ("model", "class", "kind"))
        for change in diff.changes:
            style = "red" if change.breaking else "green"
            table.add_row(escape(change.model), f"[{style}]{change.classification}[/{style}]", change.kind,
                          escape(change.subject) + ("" if change.axis is None else f" axis {change.axis}"),
                          escape(change.message))
        console.print(table)
    for fact in diff.unknown:
        console.print(f"not compared: {escape(fact.model)}: {fact.fact}: {escape(fact.why)}")
    console.print(f"{diff.breaking} breaking, {diff.compatible} compatible change(s); models: {len(diff.added)} "
                  f"added, {len(diff.removed)} removed, {len(diff.changed)} changed, {len(diff.unchanged)} unchanged",
                  markup=False)
