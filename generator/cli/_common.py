"""What every command shares: turning GenRepoError into a readable error list and exit code 2; ``--summary-md``."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from generator.cli._output import echo
from generator.errors import EXIT_USAGE, GenRepoError
from generator.reports.markdown import SummaryPathError, append_summary, check_summary_path

F = TypeVar("F", bound=Callable[..., Any])

#: The numeric option types: click refuses a value out of range naming the option and the value (exit 2).
POSITIVE = click.FloatRange(min=0, min_open=True)
NON_NEGATIVE = click.FloatRange(min=0)
AT_LEAST_1 = click.IntRange(min=1)

#: ``--summary-md FILE``, the same option on every command that takes it (its value arrives as ``summary_md``).
summary_md_option = click.option(
    "--summary-md", "summary_md", type=click.Path(path_type=Path), metavar="FILE",
    help="Append a Markdown section (counts, failures first, links to the files written) to FILE, e.g. "
         "$GITHUB_STEP_SUMMARY; also on failure and bad input. Never truncates FILE.")


def report_errors(fn: F) -> F:
    """Decorator: a GenRepoError leaves the command as its problem list and exit code; no traceback.

    When the command was called with ``json_output=True`` (its ``--json`` flag) the problems go to stdout as JSON,
    otherwise one ``error: file: /pointer: message`` line each to stderr. When it was called with ``summary_md``
    (its ``--summary-md FILE``), FILE is checked before the command runs (a bad one is the only error, and gets no
    section) and the problems are appended to it as a section too.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        summary_md = kwargs.get("summary_md")
        try:
            if summary_md is not None:
                check_summary_path(summary_md)  # before any work: a bad path must not cost a whole build
            return fn(*args, **kwargs)
        except GenRepoError as error:
            if summary_md is not None and not isinstance(error, SummaryPathError):
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
    except SummaryPathError as bad:
        error.problems += bad.problems


__all__ = ["AT_LEAST_1", "EXIT_USAGE", "NON_NEGATIVE", "POSITIVE", "report_errors", "summary_md_option"]
