"""Every numeric option of every command names itself and the value it refuses, before any work (exit 2)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from generator.cli import COMMANDS, main


def _numeric_options() -> list[tuple[str, click.Option]]:
    context = click.Context(main)
    commands = [(name, main.get_command(context, name)) for name in COMMANDS]
    return [(name, param) for name, command in commands if command is not None for param in command.params
            if isinstance(param, click.Option) and isinstance(param.type, (click.types.IntParamType,
                                                                           click.types.FloatParamType))]


def test_every_numeric_option_says_its_range() -> None:
    """A bare int or float option would let -1 reach the command, which then has to say which option was wrong."""
    unranged = [f"{name} {param.opts[0]}" for name, param in _numeric_options()
                if not isinstance(param.type, (click.IntRange, click.FloatRange))]
    assert unranged == []
    assert len(_numeric_options()) >= 20  # the check sees the options (tune, perf, smoke, serve, publish, build...)


@pytest.mark.parametrize(("args", "message"), [
    (["tune", "gen-repo.yaml", "--budget", "-1"], "Invalid value for '--budget': -1.0 is not in the range x>=0."),
    (["tune", "gen-repo.yaml", "--tolerance", "1.5"], "Invalid value for '--tolerance': 1.5 is not in the range 0<x<1"),
    (["tune", "gen-repo.yaml", "--window", "0"], "Invalid value for '--window': 0.0 is not in the range x>0."),
    (["tune", "gen-repo.yaml", "--concurrency", "0"], "Invalid value for '--concurrency': 0 is not in the range x>=1."),
    (["tune", "gen-repo.yaml", "--p99-ms", "-3"], "Invalid value for '--p99-ms': -3.0 is not in the range x>0."),
    (["perf", "--url", "127.0.0.1:1", "--max-requests", "0"], "Invalid value for '--max-requests': 0 is not in"),
    (["perf", "--url", "127.0.0.1:1", "--duration", "-1"], "Invalid value for '--duration': -1.0 is not in"),
    (["smoke", "--url", "127.0.0.1:1", "--burst", "0"], "Invalid value for '--burst': 0 is not in the range x>=1."),
    (["smoke", "--url", "127.0.0.1:1", "--rtol", "-0.1"], "Invalid value for '--rtol': -0.1 is not in the range"),
    (["serve", "--http-port", "70000"], "Invalid value for '--http-port': 70000 is not in the range 1<=x<=65535."),
    (["contract", ".", "mlp", "--version", "0"], "Invalid value for '--version': 0 is not in the range x>=1."),
    (["check-request", "--url", "127.0.0.1:1", "--timeout", "0", "mlp", "x.npz"], "Invalid value for '--timeout'"),
])
def test_a_value_out_of_range_names_its_option_and_value(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
