"""What every command shares: turning GenRepoError into a readable error list and exit code 2."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from generator.errors import EXIT_USAGE, GenRepoError

F = TypeVar("F", bound=Callable[..., Any])


def report_errors(fn: F) -> F:
    """Decorator: a GenRepoError leaves the command as its problem list and exit code; no traceback.

    When the command was called with ``json_output=True`` (its ``--json`` flag) the problems go to stdout as JSON,
    otherwise one ``error: file: /pointer: message`` line each to stderr.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GenRepoError as error:
            if kwargs.get("json_output"):
                payload = {"ok": False, "errors": [p.to_dict() for p in error.problems]}
                if error.summary:
                    payload["summary"] = error.summary
                click.echo(json.dumps(payload, indent=2, sort_keys=True))
            else:
                for problem in error.problems:
                    click.echo(f"error: {problem}", err=True)
                click.echo(f"{len(error.problems)} error(s)" + (f"; {error.summary}" if error.summary else ""),
                           err=True)
            sys.exit(error.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


__all__ = ["EXIT_USAGE", "report_errors"]
