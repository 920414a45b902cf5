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

from generator.cli._common import OutputFile, report_errors, summary_md_option, write_output
from generator.cli._output import console, echo
from generator.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from generator.contracts.diff import ContractDiff


@click.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--json", "json_output", is_flag=True,
              help="Print the diff as JSON on stdout (schema gen-repo-diff/1, docs/diff.md).")
@click.option("--markdown", "markdown_file", type=OutputFile(),
              help="Also write the diff as a Markdown document to this file.")
@summary_md_option
@report_errors
def command(old: str, new: str, json_output: bool, markdown_file: Path | None, summary_md: Path | None = None) -> None:
    """Compare the model contracts of OLD and NEW as a client sees them.

    OLD and NEW are repository folders (or file:// URLs), s3:// or gs:// repositories, or one model's two version
    folders (old_repo/mlp/1 new_repo/mlp/1). Each model's contract is its served version's gen_repo/contract.json
    (stderr says which, unless --json), or for a repository gen-repo did not build its config.pbtxt (the facts a
    config cannot tell are listed, not compared). Every change is breaking (a request valid before is refused now, or a
    response changes shape or type) or compatible. Exit status: 0 nothing breaking, 1 breaking changes, 2 bad input,
    3 storage unreachable.
    """
    from generator.reports.markdown import append_summary
    from generator.reports.summaries import diff_markdown, diff_summary
    from generator.repository.contract_sources import diff_locations

    diff = diff_locations(old, new, say=None if json_output else lambda line: echo(line, err=True))
    if markdown_file is not None:
        write_output(markdown_file, diff_markdown(diff), "--markdown")
    if summary_md is not None:
        append_summary(summary_md, diff_summary(diff, [("diff (Markdown)", markdown_file)] if markdown_file else []),
                       [str(markdown_file)] if markdown_file else [])
    if json_output:
        echo(diff.render_json(), nl=False)
    else:
        _print_table(diff)
    sys.exit(EXIT_FAILED if diff.breaking else EXIT_OK)


def _print_table(diff: ContractDiff) -> None:
    from rich.table import Table
    from rich.text import Text

    out = console()
    if diff.changes:
        table = Table(title=f"gen-repo diff {diff.old} -> {diff.new}")
        for column in ("model", "class", "kind", "subject", "change"):
            table.add_column(column, overflow="fold", no_wrap=column in ("model", "class", "kind"))
        for change in diff.changes:
            style = "red" if change.breaking else "green"
            table.add_row(change.model, Text(change.classification, style=style), change.kind,
                          change.subject + ("" if change.axis is None else f" axis {change.axis}"), change.message)
        out.print(table)
    for fact in diff.unknown:
        out.print(f"not compared: {fact.model}: {fact.fact}: {fact.why}")
    out.print(f"{diff.breaking} breaking, {diff.compatible} compatible change(s); models: {len(diff.added)} added, "
              f"{len(diff.removed)} removed, {len(diff.changed)} changed, {len(diff.unchanged)} unchanged")
