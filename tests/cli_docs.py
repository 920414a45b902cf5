"""docs/cli.md, written from click's own command tree: every command, argument, option and exit code.

``python -m tests.cli_docs`` rewrites docs/cli.md; ``tests/test_docs.py`` fails when the file differs from what this
renders, so a command or option added without regenerating it is caught.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from generator.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"

#: Exit codes per command (their meaning is shared: see generator/errors.py). Held by the commands' tests.
EXIT_CODES: dict[str, str] = {
    "init": "0 written; 2 a spec is invalid or OUTPUT exists (nothing written)",
    "validate": "0 every file valid; 2 a file is invalid (every error of every file)",
    "plan": "0 the plan; 2 a model is refused or the manifest is invalid",
    "config": "0 written; 2 a model has a problem (nothing written)",
    "build": "0 built; 1 a model failed (nothing written without --keep-going); 2 bad input; 130 interrupted",
    "verify": ("0 every file matches the lock file; 1 a file differs or is missing; 2 bad usage, a bad URL, no such "
               "bucket or a bucket that is not a repository; 3 the storage endpoint cannot be reached"),
    "serve": "0 stopped with Ctrl-C; 2 bad usage; 3 the server did not start",
    "smoke": "0 every check passed; 1 a check failed; 2 bad usage; 3 the server could not be reached or started",
    "lint": "0 no errors (warnings alone pass); 1 errors; 2 bad usage; 3 the --url server could not be reached",
    "check-request": "0 valid; 1 invalid (every problem listed); 2 bad usage; 3 the server could not be reached",
    "contract": "0 printed; 2 bad usage, no such model, or a contract or config that cannot be read",
    "perf-config": "0 written; 2 bad input",
    "perf": "0 measured; 1 a model answered no request; 2 bad usage; 3 the server could not be reached",
    "tune": ("0 tuned (the best settings written into the manifest unless --no-write); 1 no candidate of a model "
             "could be measured; 2 bad usage or input (nothing written); 3 the server did not start"),
    "diff": ("0 nothing breaking; 1 breaking changes; 2 bad input (not a repository or version folder, an unreadable "
             "config or contract); 3 the storage endpoint cannot be reached"),
    "report": ("0 written; 2 bad usage, no such folder, a bad URL or no such bucket, or a --smoke/--perf/--diff file "
               "that is not what those commands write (nothing written); 3 the storage endpoint cannot be reached"),
    "publish": ("0 published (or nothing changed); 1 a check failed, another publisher holds the lock, or a new "
                "version breaks clients of the served one without --allow-breaking; 2 bad usage, "
                "a repository or lock that cannot be published, a bad URL, no such bucket or folder, a symlink in "
                "the destination folder; 3 the storage endpoint "
                "cannot be reached"),
}


_PIPE = "\\|"  # a pipe inside a table cell


def _option_row(param: click.Parameter) -> str:
    names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
    if isinstance(param, click.Option):
        kind = "flag" if param.is_flag else param.make_metavar(click.Context(main)).lower()
        if isinstance(param.type, (click.IntRange, click.FloatRange)):  # the range the value is checked against
            kind = f"{kind.removesuffix(' range')} {param.type._describe_range()}"
        help_text = " ".join((param.help or "").split())
        if param.show_default and param.default is not None and not param.is_flag:
            help_text = f"{help_text} (default: {param.default})".strip()
        kind = "flag" if kind == "flag" else f"`{kind.replace('|', _PIPE)}`"
        return f"| {names} | {kind} | {help_text.replace('|', _PIPE)} |"
    return f"| {names} | argument | |"


def render() -> str:
    """The text of docs/cli.md for the commands ``gen-repo`` has now."""
    context = click.Context(main, info_name="gen-repo")
    lines = [
        "# Command reference",
        "",
        "Every `gen-repo` command with its arguments, options and exit codes, written from the commands themselves",
        "(`python -m tests.cli_docs` regenerates this file; a test fails when it is out of date). `gen-repo COMMAND",
        "--help` prints the same. Exit codes mean the same for every command: 0 success; 1 the command ran and",
        "something failed; 2 bad input or usage (nothing written, every problem as `file: /json/pointer: message`);",
        "3 the server could not be reached; 130 interrupted.",
        "",
    ]
    for name in main.list_commands(context):
        command = main.get_command(context, name)
        assert command is not None
        sub = click.Context(command, info_name=name, parent=context)
        lines += [f"## `gen-repo {name}`", "", f"`{command.get_usage(sub).removeprefix('Usage: ')}`", ""]
        lines += [inspect.cleandoc(command.help or ""), ""]
        lines += [f"Exit codes: {EXIT_CODES[name]}.", ""]
        params = [p for p in command.params if p.name != "help"]
        if params:
            lines += ["| argument or option | value | what |", "| --- | --- | --- |"]
            lines += [_option_row(p) for p in params]
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOC}\n")
