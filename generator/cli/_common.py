"""What every command shares: turning GenRepoError into a readable error list and exit code 2; its output files."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from generator.atomic_write import SinkError, sink_failed, sink_problem, write_atomically
from generator.cli._output import echo
from generator.errors import EXIT_USAGE, GenRepoError, Problem
from generator.reports.markdown import append_summary

F = TypeVar("F", bound=Callable[..., Any])

#: The numeric option types: click refuses a value out of range naming the option and the value (exit 2).
POSITIVE = click.FloatRange(min=0, min_open=True)
NON_NEGATIVE = click.FloatRange(min=0)
AT_LEAST_1 = click.IntRange(min=1)

class OutputFile(click.Path):
    """The type of every option naming a file a command writes; :func:`report_errors` checks it before the work.

    ``append``: the file is appended to (``--summary-md``), not replaced whole; ``dash``: ``-`` means stdout.
    """

    def __init__(self, *, append: bool = False, dash: bool = False, path_type: type = Path) -> None:
        super().__init__(allow_dash=dash, path_type=path_type)  # the one rule (sink_problem) checks the kind
        self.append = append


#: ``--summary-md FILE``, the same option on every command that takes it (its value arrives as ``summary_md``).
summary_md_option = click.option(
    "--summary-md", "summary_md", type=OutputFile(append=True), metavar="FILE",
    help="Append a Markdown section (counts, failures first, links to the files written) to FILE, e.g. "
         "$GITHUB_STEP_SUMMARY; also on failure and bad input. Never truncates FILE.")


def write_output(path: Path | str, text: str, option: str, written: Sequence[str] = ()) -> Path:
    """Write an output file whole (:func:`write_atomically`); a failure says what was ``written`` before it."""
    try:
        return write_atomically(path, text)
    except OSError as error:
        raise sink_failed(path, option, error, written) from None


def _refused_outputs(kwargs: dict[str, Any]) -> list[Problem]:
    """Every output option of the running command whose file cannot be written (nothing is opened: no blocking)."""
    problems = []
    for param in click.get_current_context().command.params:
        value = kwargs.get(param.name or "")
        if not isinstance(param.type, OutputFile) or value is None or (param.type.allow_dash and str(value) == "-"):
            continue
        reason = sink_problem(value, append=param.type.append)
        if reason is not None:
            problems.append(Problem(str(value), "", f"{param.opts[-1]}: cannot write this file: {reason}"))
    return problems


def report_errors(fn: F) -> F:
    """Decorator: a GenRepoError leaves the command as its problem list and exit code; no traceback.

    Every output file option (:class:`OutputFile`) is checked before the command runs: a bad one is exit 2 with
    nothing written. When the command was called with ``json_output=True`` (its ``--json`` flag) the problems go to
    stdout as JSON, otherwise one ``error: file: /pointer: message`` line each to stderr. When it was called with
    ``summary_md`` (its ``--summary-md FILE``), the problems are appended to it as a section too.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        summary_md = kwargs.get("summary_md")
        try:
            refused = _refused_outputs(kwargs)
            if refused:  # before any work: a bad path must not cost a whole build
                raise SinkError(refused)
            return fn(*args, **kwargs)
        except GenRepoError as error:
            if summary_md is not None and not isinstance(error, SinkError):
                _append_error_summary(summary_md, error)
            if kwargs.get("json_output"):
                payload = {"ok": False, "errors": [p.to_dict() for p in error.problems]}
                if error.summary:
                    payload["summary"] = error.summary
                echo(json.dumps(payload, indent=2, sort_keys=True))
            else:
                for problem in error.problems:
                    echo(f"error: {problem}", err=True)
                echo(f"{len(error.problems)} error(s)" + (f"; {error.summary}" if error.summary else ""),
                     err=True)
            sys.exit(error.exit_code)
        except KeyboardInterrupt:
            echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def _append_error_summary(summary_md: Path, error: GenRepoError) -> None:
    """The section of a command stopped by ``error``; a summary file that fails now adds its own problem."""
    from generator.reports.summaries import error_summary

    try:
        append_summary(summary_md, error_summary(click.get_current_context().command.name or "", error))
    except SinkError as bad:
        error.problems += bad.problems


__all__ = ["AT_LEAST_1", "EXIT_USAGE", "NON_NEGATIVE", "POSITIVE", "OutputFile", "report_errors", "summary_md_option",
           "write_output"]
