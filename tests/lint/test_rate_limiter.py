"""The rate limiter's resource rules (generator/lint/rate_limiter.py) beyond their cases in tests/lint_cases.py: what
the server's options change, devices, and the CLI's spelling of tritonserver's options."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.lint import Environment, lint
from generator.lint.environment import RateLimitResource, parse_rate_limit_resource
from tests.lint_cases import IO, B, Case, Model, rate_limited, write_side


def _repository(tmp_path: Path, **models: str) -> Path:
    write_side(Case("rl", {key: Model(config) for key, config in models.items()}, {}), "bad",
               [tmp_path / "repo", tmp_path / "r1", tmp_path / "r2"])
    return tmp_path / "repo"


def _found(repo: Path, environment: Environment) -> list[tuple[str, int | None, str]]:
    return [(f.file.split("/")[0], f.line, f.message) for f in lint([repo], environment=environment).findings]


def test_resources_count_only_when_the_server_rate_limits(tmp_path: Path) -> None:
    """--rate-limit=off, Triton's default, ignores every resource: the scope clash and the counts say nothing."""
    repo = _repository(tmp_path, m=rate_limited(("r", False, 5)), g=rate_limited(("r", True, 1)))
    assert _found(repo, Environment(rate_limit_resources=(RateLimitResource("r", 1),))) == []
    found = _found(repo, Environment(rate_limit="execution_count"))
    assert [(model, line) for model, line, _ in found] == [("rl-bad-g", 4), ("rl-bad-m", 4)]
    assert "device-specific in model 'rl-bad-m' instance_group #0" in found[0][2]


def test_a_resource_the_list_does_not_name_has_none(tmp_path: Path) -> None:
    """ParseAndValidateExplicitResources: once any --rate-limit-resource is given, an unnamed resource counts 0; a
    global one takes the largest count given on any device; a device-specific count applies to its device only."""
    repo = _repository(tmp_path, a=rate_limited(("other", False, 1)), g=rate_limited(("shared", True, 4)),
                       gpu=B + 'instance_group [ { kind: KIND_GPU gpus: [ 1 ] rate_limiter { resources [ { name: '
                           '"dev" count: 2 } ] } } ]\n' + IO)
    given = (RateLimitResource("shared", 2), RateLimitResource("shared", 4, 1), RateLimitResource("dev", 9, 0),
             RateLimitResource("dev", 1))
    found = _found(repo, Environment(gpus=2, rate_limit="execution_count", rate_limit_resources=given))
    assert [(model, message.split(" (")[0]) for model, _, message in found] == [
        ("rl-bad-a", "model 'rl-bad-a' instance_group #0 needs 1 of resource 'other', but the server is given 0 on "
                     "device 0"),
        ("rl-bad-gpu", "model 'rl-bad-gpu' instance_group #0 needs 2 of resource 'dev', but the server is given 1 on "
                       "device 1"),
    ]
    # KIND_GPU without gpus on a machine of unknown GPU count: the device-specific 'dev' count is undecided.
    unknown = _repository(tmp_path / "u", gpu=B + 'instance_group [ { kind: KIND_GPU rate_limiter { resources [ { '
                                                  'name: "dev" count: 2 } ] } } ]\n' + IO)
    assert _found(unknown, Environment(rate_limit="execution_count", rate_limit_resources=given)) == []


def test_cli_takes_tritonservers_spelling(tmp_path: Path) -> None:
    repo = _repository(tmp_path, m=rate_limited(("r", False, 5)), g=rate_limited(("r", True, 1)))
    runner = CliRunner()
    assert runner.invoke(main, ["lint", str(repo)]).exit_code == 0
    limited = runner.invoke(main, ["lint", "--rate-limit", "execution_count", str(repo)])
    assert limited.exit_code == 1 and limited.output.count("[rate-limiter-resource]") == 2, limited.output
    counted = runner.invoke(main, ["lint", "--rate-limit", "execution_count", "--rate-limit-resource", "r:3",
                                   str(repo)])
    assert "needs 5 of resource 'r', but the server is given 3" in counted.output
    bad = runner.invoke(main, ["lint", "--rate-limit-resource", "r", str(repo)])
    assert bad.exit_code == 2 and "'r' is not NAME:COUNT or NAME:COUNT:DEVICE" in bad.output


@pytest.mark.parametrize(("text", "parsed"), [("R1:10", RateLimitResource("R1", 10)),
                                              ("r:3:1", RateLimitResource("r", 3, 1))])
def test_resources_parse_as_tritonserver_reads_them(text: str, parsed: RateLimitResource) -> None:
    assert parse_rate_limit_resource(text) == parsed
    assert str(parsed) == text
    assert Environment(rate_limit="execution_count", rate_limit_resources=(parsed,)).tritonserver_args() == [
        "--rate-limit=execution_count", f"--rate-limit-resource={text}"]


@pytest.mark.parametrize("text", ["r", ":1", "r:x", "r:1:2:3", "r:-1"])
def test_malformed_resources_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"NAME:COUNT|integers|>= 0"):
        parse_rate_limit_resource(text)
