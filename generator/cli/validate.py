"""``gen-repo validate SPEC...``: check GraphSpec files and show what gen-repo reads from them."""

from __future__ import annotations

import json
from typing import Any

import click

from generator.cli._common import report_errors
from generator.errors import GenRepoError, Problem


def _shape(values: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _batch_ranges(ranges: list[dict[str, int]]) -> str:
    parts = []
    for item in ranges:
        text = f"{item['min']}..{item['max']}"
        if item["multiplier"] != 1:
            text += f" (x{item['multiplier']})"
        parts.append(f"axis {item['axis']}: {text}")
    return "; ".join(parts) or "-"


def _print_tables(summaries: list[dict[str, Any]]) -> None:
    # rich only here: imported lazily so that `--json` and errors never pay for it.
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:
        # Logs and pipes: wide enough that shapes never wrap mid-table.
        console = Console(highlight=False, width=160)
    for summary in summaries:
        where = summary["file"] if summary["pointer"] in ("/", "/graph") else f"{summary['file']} {summary['pointer']}"
        module = f" module {summary['module_name']!r}" if summary["module_name"] else ""
        table = Table(title=f"{where}:{module} graph {summary['graph_name']!r}", title_justify="left")
        for column in ("input", "dtype", "min shape", "opt shape", "max shape", "batch range"):
            table.add_column(column, no_wrap=column != "batch range")
        for item in summary["inputs"]:
            table.add_row(
                item["name"] + (" (explicit)" if item["explicit_definition"] else ""),
                str(item["dtype"]),
                _shape(item["min_shape"]),
                _shape(item["opt_shape"]),
                _shape(item["max_shape"]),
                _batch_ranges(item["batch_ranges"]),
            )
        console.print(table)
        min_batch = summary["min_batch_size"]
        console.print(
            f"max batch size: {summary['max_batch_size']}  "
            f"normalized max batch size: {summary['max_batch_size_normalized']}  "
            f"min batch size: {'-' if min_batch is None else min_batch}"
        )
        for note in summary["assumptions"]:
            console.print(f"assumed: {note}")
        triton = summary["triton"]
        console.print(f"served as: max_batch_size {triton['max_batch_size']}")
        for decision in triton["decisions"]:
            console.print(f"  - {decision}")
        console.print()


@click.command("validate")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print a machine-readable result (sorted keys).")
@report_errors
def command(specs: tuple[str, ...], json_output: bool) -> None:
    """Validate GraphSpec files (JSON or YAML; AITune fixture, bare graph or tune report).

    Beyond the schema and AITune's rules, the rules `gen-repo plan` applies to serve a graph (dtypes Triton carries,
    scalars, axes that must agree), with the same messages. Exit 0 and a table per graph when every file is valid;
    exit 2 and every error of every file otherwise.
    """
    # The library is imported here so that `gen-repo --help` stays fast.
    from generator.schema import graph_summary, load_graphspecs
    from generator.tensors import servability

    problems: list[Problem] = []
    summaries: list[dict[str, Any]] = []
    for spec in specs:
        try:
            for loaded in load_graphspecs(spec):
                served = servability(loaded)
                problems.extend(served.problems)
                decisions = [d for d in served.decisions if not d.startswith("assumed: ")]
                summaries.append({**graph_summary(loaded), "triton": {
                    "max_batch_size": served.max_batch_size, "decisions": decisions}})
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    if json_output:
        click.echo(json.dumps({"ok": True, "graphs": summaries}, indent=2, sort_keys=True))
    else:
        _print_tables(summaries)
        click.echo(f"{len(summaries)} graph(s) in {len(specs)} file(s) valid")
