"""``gen-repo validate SPEC...``: check GraphSpec files and show what gen-repo reads from them."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from generator.cli._common import report_errors
from generator.cli._output import console, echo
from generator.errors import EXIT_USAGE, GenRepoError

if TYPE_CHECKING:
    from generator.planning.validation import Summaries, ValidatedFile


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
    from rich.table import Table

    out = console()  # logs and pipes: as wide as a line gets, so shapes never wrap mid-table
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
        out.print(table)
        min_batch = summary["min_batch_size"]
        out.print(
            f"max batch size: {summary['max_batch_size']}  "
            f"normalized max batch size: {summary['max_batch_size_normalized']}  "
            f"min batch size: {'-' if min_batch is None else min_batch}"
        )
        for note in summary["assumptions"]:
            out.print(f"assumed: {note}")
        triton = summary["triton"]
        out.print(f"served as: max_batch_size {triton['max_batch_size']}")
        for decision in triton["decisions"]:
            out.print(f"  - {decision}")
        out.print()


#: Up to this many files, every graph is shown as a table (and ``--json`` is indented throughout); beyond it, one line
#: per file (and one line per graph in ``--json``), so a CI log of thousands of specs stays readable and fast.
FEW_FILES = 5


def _file_line(result: ValidatedFile) -> str:
    """``file: N graph(s), max_batch_size B[, B...]: valid|N error(s)``: Triton's max_batch_size per graph."""
    sizes = dict.fromkeys(f"{size}{' (no batching)' if size == 0 else ''}" for size in result.max_batch_sizes)
    verdict = "valid" if result.ok else f"{len(result.problems)} error(s)"
    return f"{result.file}: {len(result.max_batch_sizes)} graph(s), max_batch_size {', '.join(sizes) or '-'}: {verdict}"


def _json_lines(lines: list[str], errors: list[dict[str, str]] | None = None) -> str:
    """The ``--json`` document for many files: each graph one line of compact JSON (encoded by the workers).

    Indenting thousands of graphs goes through the json module's pure-Python encoder, about 6x slower than its C
    encoder; one line per graph keeps the output fast and line-oriented for logs, and the same JSON. ``errors``:
    the invalid files' problems, listed before the valid files' graphs (sorted keys, as with few files).
    """
    head = ""
    if errors:
        head = '  "errors": ' + json.dumps(errors, indent=2, sort_keys=True).replace("\n", "\n  ") + ",\n"
    graphs = '[\n    ' + ",\n    ".join(lines) + '\n  ]' if lines else "[]"
    return '{\n' + head + '  "graphs": ' + graphs + ',\n  "ok": ' + ("false" if errors else "true") + '\n}'


@click.command("validate")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print a machine-readable result (sorted keys).")
@click.option("-v", "--verbose", is_flag=True, help=f"A table per graph even for more than {FEW_FILES} files.")
@report_errors
def command(specs: tuple[str, ...], json_output: bool, verbose: bool) -> None:
    """Validate GraphSpec files (JSON or YAML; AITune fixture, bare graph or tune report).

    Beyond the schema and AITune's rules, the rules `gen-repo plan` applies to serve a graph (dtypes Triton carries,
    scalars, axes that must agree), with the same messages. Up to 5 files (or with --verbose): a table per graph;
    more: one line per file (graphs, Triton max batch size, verdict). Exit 0 when every file is valid; exit 2 and
    every error of every file otherwise.
    """
    # The library is imported here so that `gen-repo --help` stays fast.
    from generator.planning.validation import validate_files

    few = len(specs) <= FEW_FILES or verbose
    wanted: Summaries = "data" if few else "json" if json_output else "none"
    results = validate_files(specs, summaries=wanted)
    problems = [p for result in results for p in result.problems]
    if not few and not json_output:
        echo("\n".join(map(_file_line, results)))  # one write: thousands of echo calls flush thousands of times
    summaries: list[Any] = [summary for result in results for summary in result.summaries]
    if json_output:
        # The documented document at any count: the valid files' graphs stay beside the invalid files' errors.
        errors = [p.to_dict() for p in problems]
        if few:
            document: dict[str, Any] = {"graphs": summaries, "ok": not errors}
            if errors:
                document["errors"] = errors
            echo(json.dumps(document, indent=2, sort_keys=True))
        else:
            echo(_json_lines(summaries, errors))
        if problems:
            sys.exit(EXIT_USAGE)
        return
    if problems:
        raise GenRepoError(problems)
    if few:
        _print_tables(summaries)
    count = sum(len(result.max_batch_sizes) for result in results)
    echo(f"{count} graph(s) in {len(specs)} file(s) valid")
