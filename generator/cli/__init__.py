"""``gen-repo`` command line: click group whose sub-commands live one per module in this package.

Sub-commands load lazily so that ``gen-repo validate`` never imports torch, onnx or tritonclient's gRPC stack.
A command ``foo-bar`` lives in ``generator/cli/foo_bar.py`` as a ``click.Command`` named ``command``.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from generator import __version__

#: Every sub-command, in help order. A command whose module is not present is not listed.
COMMANDS = (
    "init",
    "validate",
    "plan",
    "config",
    "build",
    "verify",
    "serve",
    "smoke",
    "lint",
    "check-request",
    "contract",
    "perf-config",
    "perf",
    "tune",
    "diff",
    "report",
    "publish",
)


def _module_name(command: str) -> str:
    return f"generator.cli.{command.replace('-', '_')}"


class LazyGroup(click.Group):
    """A click group that imports a sub-command's module only when that command runs (or help lists it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Commands whose module is present, in help order."""
        return [c for c in COMMANDS if importlib.util.find_spec(_module_name(c)) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import the command's module on first use."""
        if cmd_name not in COMMANDS or importlib.util.find_spec(_module_name(cmd_name)) is None:
            return None
        command = importlib.import_module(_module_name(cmd_name)).command
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gen-repo")
def main() -> None:
    """Turn AITune GraphSpecs into ready-to-serve Triton model repositories."""


if __name__ == "__main__":  # pragma: no cover
    main()
