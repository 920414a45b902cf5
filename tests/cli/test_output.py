"""generator/cli/_output.py: the one printer. Repository text never acts on a terminal; pipes never wrap mid-word.

Issue 37 (terminal output): hypothesis plants control and escape sequences (OSC ended by BEL or ST, CSI, DCS, a C1
CSI, bidirectional overrides and isolates, any single C0/C1 control) in model folder names, config names, file
names, tensor names and spec graph names of a real built repository, runs the commands that print them through the
real CLI, and finds no control character in stdout, stderr or the --summary-md file, and the name shown in its
escaped form. Bidirectional overrides count: they make a path read as another. Issue 44 item 7: every command that
prints a repository, model or graph name (one hostile-named repository, one Triton server) shows it escaped.

Issue 38 item 1: each command's output through a pipe (a subprocess, stdout and stderr PIPEs), from a folder whose
path is about 150 characters long, keeps every path and model name it prints whole on one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from generator.cli import main
from generator.serving.server import free_port
from generator.terminal_text import CONTROL_CHARACTERS, visible

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "specs" / "mlp.graphspec.json"

_PRINTABLE = st.text(alphabet="abcXYZ019;:=?", max_size=6)
#: Escape sequences and controls as an attacker writes them into a name or a message.
_SEQUENCES = st.one_of(
    st.builds(lambda body, end: f"\x1b]0;{body}{end}", _PRINTABLE, st.sampled_from(["\x07", "\x1b\\"])),  # OSC
    st.builds(lambda body: f"\x1b]8;;http://x/{body}\x1b\\link\x1b]8;;\x1b\\", _PRINTABLE),  # OSC 8 hyperlink
    st.builds(lambda params, final: f"\x1b[{params}{final}", st.text("0123456789;?", max_size=6),
              st.sampled_from("mHJKABCDsuhl")),  # CSI
    st.builds(lambda body: f"\x1bP{body}\x1b\\", _PRINTABLE),  # DCS
    st.builds(lambda params, final: f"\x9b{params}{final}", st.text("0123456789;", max_size=4),
              st.sampled_from("mJH")),  # C1 CSI
    st.sampled_from(["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f", "\u061c",
                     "\r", "\b", "\x7f", "\x85", "\u2028"]),
    st.from_regex(CONTROL_CHARACTERS, fullmatch=True).filter(lambda c: not "\ud800" <= c <= "\udfff"),
)


@st.composite
def _hostile(draw: st.DrawFn) -> str:
    """A short name with one to three sequences planted at random places; no NUL or slash (a file name's)."""
    parts = [draw(_PRINTABLE)]
    for _ in range(draw(st.integers(1, 3))):
        parts += [draw(_SEQUENCES), draw(_PRINTABLE)]
    return "".join(parts).replace("\x00", "").replace("/", "")


def _clean(*texts: str) -> None:
    for text in texts:
        found = CONTROL_CHARACTERS.search(text)
        assert found is None, (found, text[max(0, found.start() - 80):found.end() + 80] if found else "")


def _shown(name: str, text: str) -> bool:
    """The planted name is printed, not dropped: as the one printer escapes it (visible), or as a message quoting
    it with repr does (the same escapes, a backslash doubled)."""
    return visible(name) in text or repr(name)[1:-1] in text


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def _planted_repository(source: Path, folder: Path, name: str) -> Path:
    """A copy of ``source`` whose mlp folder is named ``mlp<name>`` and whose text config's name is ``text<name>``."""
    copy = folder / "model_repository"
    shutil.copytree(source, copy)
    (copy / "mlp").rename(copy / f"mlp{name}")
    config_path = copy / "text" / "config.pbtxt"
    config = text_format.Parse(config_path.read_text(), model_config_pb2.ModelConfig())
    config.name = f"text{name}"
    config_path.write_text(text_format.MessageToString(config))
    return copy


def _run_lint(repo: Path, name: str, scratch: Path) -> list[str]:
    summary = scratch / "summary.md"
    _code, out, err = _invoke("lint", str(repo), "--summary-md", str(summary))
    return [out, err, summary.read_text()]


def _run_verify(repo: Path, name: str, scratch: Path) -> list[str]:
    summary = scratch / "summary.md"
    _code, out, err = _invoke("verify", str(repo), "--summary-md", str(summary))
    return [out, err, summary.read_text()]


def _run_diff(repo: Path, name: str, scratch: Path) -> list[str]:
    other = scratch / "other"
    shutil.copytree(repo, other)
    (other / f"mlp{name}").rename(other / "mlp")  # the one with the planted name is on the old side only
    summary = scratch / "summary.md"
    _code, out, err = _invoke("diff", str(repo), str(other), "--summary-md", str(summary))
    return [out, err, summary.read_text()]


def _run_report(repo: Path, name: str, scratch: Path) -> list[str]:
    _code, out, err = _invoke("report", str(repo), "-o", "-")
    return [out, err]


def _run_check_request(repo: Path, name: str, scratch: Path) -> list[str]:
    request = scratch / "request.npz"
    np.savez(request, **{f"input_x{name}": np.zeros((1, 16), np.float32)})
    _code, out, err = _invoke("check-request", "--repo", str(repo), "text", str(request))
    return [out, err]


def _run_plan(repo: Path, name: str, scratch: Path) -> list[str]:
    manifest = scratch / "manifest.json"
    manifest.write_text(json.dumps({"models": [
        {"name": f"m{name}", "spec": str(SPEC), "target": "python"},
        {"name": "n", "spec": str(scratch / f"spec{name}.json"), "target": "python"},
    ]}))
    _code, out, err = _invoke("plan", "--allow-outside", str(manifest))
    return [out, err]


def _run_validate(repo: Path, name: str, scratch: Path) -> list[str]:
    spec = scratch / f"spec{name}.json"
    document = json.loads(SPEC.read_text())
    document["name"] = f"graph{name}"
    spec.write_text(json.dumps(document))
    broken = scratch / f"broken{name}.json"
    broken.write_text(json.dumps({"name": f"g{name}", "input_spec": {f"x{name}": 1}}))
    outputs = []
    for args in ((str(spec),), (str(spec), str(broken))):
        _code, out, err = _invoke("validate", *args)
        outputs += [out, err]
    return outputs


def _run_smoke(repo: Path, name: str, scratch: Path) -> list[str]:
    summary = scratch / "summary.md"
    _code, out, err = _invoke("smoke", "--url", f"127.0.0.1:{free_port()}", "--repo", str(repo), "--timeout", "2",
                              "--summary-md", str(summary))
    return [out, err, summary.read_text()]


COMMANDS = {"smoke": _run_smoke, "lint": _run_lint, "verify": _run_verify, "diff": _run_diff, "report": _run_report,
            "check-request": _run_check_request, "plan": _run_plan, "validate": _run_validate}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_planted_escape_sequences_never_reach_the_terminal(command: str, example_repository: Path,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(name=_hostile())
    def check(name: str) -> None:
        scratch = tmp_path_factory.mktemp("hostile")
        repo = _planted_repository(example_repository, scratch, name)
        outputs = COMMANDS[command](repo, name, scratch)
        _clean(*outputs)
        assert _shown(name, "".join(outputs)), (visible(name), outputs)

    check()


# ---------------------------------------------------------------------------- every command (issue 44 item 7)
#: One of each class _SEQUENCES draws: OSC ended by BEL, an OSC 8 hyperlink, CSI, DCS, C1 CSI, bidirectional override
#: and isolate, CR, BS, DEL, NEL. No slash (a file name's) and no backslash, so no ST: a manifest refuses a backslash as
#: a path separator before it reads the name, and without one visible() and repr() escape the name alike.
HOSTILE = ("a\x1b]0;t\x07b\x1b]8;;https:x.example\x07l\x1b]8;;\x07c\x1b[31md\x1bP1\x07e\x9b1mf\u202eg\u2066h"
           "\ri\bj\x7fk\x85")


@pytest.fixture(scope="module")
def hostile_repository(example_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _planted_repository(example_repository, tmp_path_factory.mktemp("hostile"), HOSTILE)


@pytest.fixture(scope="module")
def plain_server_url(example_repository: Path) -> Iterator[str]:
    """One Triton server serving the example repository as built (the hostile copy's folders are not on it)."""
    from generator.serving.server import TritonNotFoundError, TritonServer, find_tritonserver
    from tests.requirements import missing

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc
    server = TritonServer(binary)
    try:
        server.start(example_repository)
        server.wait_ready(120)
        yield server.grpc_url
    finally:
        server.stop()


def _manifest(scratch: Path, name: str) -> Path:
    manifest = scratch / "manifest.json"
    manifest.write_text(json.dumps({"models": [{"name": f"m{name}", "spec": str(SPEC), "target": "python"}]}))
    return manifest


def _outputs(*args: str) -> list[str]:
    _code, out, err = _invoke(*args)
    return [out, err]


#: Each command that prints a repository, model or graph name: (hostile repository, name, scratch folder, the
#: server's address) -> what it printed. smoke and perf ask the server about the repository's models.
EVERY_COMMAND: dict[str, Callable[[Path, str, Path, str], list[str]]] = {
    "validate": lambda repo, name, scratch, url: _run_validate(repo, name, scratch),
    "plan": lambda repo, name, scratch, url: _outputs("plan", "--allow-outside", str(_manifest(scratch, name))),
    "config": lambda repo, name, scratch, url: _outputs("config", "--allow-outside", str(_manifest(scratch, name)),
                                                        "-o", str(scratch / "configs")),
    "build": lambda repo, name, scratch, url: _outputs("build", "--allow-outside", str(_manifest(scratch, name)),
                                                       "-o", str(scratch / "built"), "--target", "python"),
    "lint": lambda repo, name, scratch, url: _run_lint(repo, name, scratch),
    "verify": lambda repo, name, scratch, url: _run_verify(repo, name, scratch),
    "diff": lambda repo, name, scratch, url: _run_diff(repo, name, scratch),
    "report": lambda repo, name, scratch, url: _run_report(repo, name, scratch),
    "check-request": lambda repo, name, scratch, url: _run_check_request(repo, name, scratch),
    "contract": lambda repo, name, scratch, url: _outputs("contract", str(repo), f"mlp{name}"),
    "perf-config": lambda repo, name, scratch, url: _outputs("perf-config", "--repo", str(repo), "--model",
                                                             f"mlp{name}", "-o", str(scratch / "perf")),
    "publish": lambda repo, name, scratch, url: _outputs("publish", str(repo), str(scratch / "bucket")),
    "tune": lambda repo, name, scratch, url: _outputs("tune", str(repo), "--model", f"mlp{name}", "--budget", "2",
                                                      "--window", "0.2", "--settle", "0.5", "--engine", "loop"),
    "smoke": lambda repo, name, scratch, url: _outputs("smoke", "--url", url, "--repo", str(repo), "--timeout", "5",
                                                       "--burst", "4", "--concurrency", "2"),
    "perf": lambda repo, name, scratch, url: _outputs("perf", "--url", url, "--repo", str(repo), "--model",
                                                      f"mlp{name}", "--duration", "0.2", "--engine", "loop"),
}
#: Commands that print no name a repository or a spec chose: init writes a starter manifest, serve hands over to
#: tritonserver.
NAMELESS = {"init", "serve"}


def test_every_command_is_covered() -> None:
    from generator.cli import COMMANDS

    assert set(EVERY_COMMAND) | NAMELESS == set(COMMANDS)


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.triton) if c in ("smoke", "perf", "tune")
                                     else c for c in EVERY_COMMAND])
def test_every_command_shows_a_hostile_name_escaped(command: str, hostile_repository: Path,
                                                    request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    assert visible(HOSTILE) == repr(HOSTILE)[1:-1] and CONTROL_CHARACTERS.search(HOSTILE)
    url = request.getfixturevalue("plain_server_url") if command in ("smoke", "perf") else ""
    outputs = EVERY_COMMAND[command](hostile_repository, HOSTILE, tmp_path, url)
    _clean(*outputs)
    assert visible(HOSTILE) in "".join(outputs), outputs


def test_visible_escapes_exactly_the_control_characters() -> None:
    assert visible("a\x1b]0;t\x07b\x9b1m\u202e\r\n\tc") == "a\\x1b]0;t\\x07b\\x9b1m\\u202e\\r\n\tc"
    text = "plain text, ünïcode, 数字 and emoji 🙂 stay"
    assert visible(text) is text


# ------------------------------------------------------------------------------------------- pipes (issue 38 item 1)
def _long_folder(base: Path) -> Path:
    folder = base
    while len(str(folder)) < 150:
        folder = folder / "a-rather-long-folder-name-for-ci"
    folder.mkdir(parents=True)
    return folder


def _piped(*args: str, cwd: Path, force_color: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if force_color:  # as many CI runners set it: rich then colours the log, and must still not wrap it
        env["FORCE_COLOR"] = "1"
    done = subprocess.run([sys.executable, "-m", "generator.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300,
                          check=False)
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # rich's own colours, with FORCE_COLOR


def test_piped_output_never_splits_a_path_or_a_name(example_repository: Path, tmp_path: Path) -> None:
    folder = _long_folder(tmp_path)
    repo, other = folder / "model_repository", folder / "other_repository"
    shutil.copytree(example_repository, repo)
    shutil.copytree(example_repository, other)
    contract = other / "mlp" / "1" / "gen_repo" / "contract.json"
    document = json.loads(contract.read_text())
    document["inputs"][0]["max_shape"][0] = 8  # a breaking change: a row in diff's table
    contract.write_text(json.dumps(document))
    spec = folder / "mlp.graphspec.json"
    shutil.copy(SPEC, spec)
    manifest = folder / "gen-repo.yaml"
    manifest.write_text(f"output: {folder / 'planned_repository'}\nmodels:\n  - name: mlp\n    spec: mlp.graphspec.json"
                        "\n    target: python\n")
    request = folder / "request.npz"
    np.savez(request, input_x=np.zeros((1, 17), np.float32))
    project = folder / "project"
    shutil.copytree(ROOT / "examples", project, ignore=shutil.ignore_patterns("__pycache__"))
    runs = [("build", str(project / "gen-repo.yaml"), "--allow-code", "--target", "python", "-o",
             str(folder / "built"), "--cache-dir", str(folder / "cache")),
            ("validate", str(spec)), ("plan", str(manifest)), ("lint", str(repo)), ("verify", str(repo)),
            ("diff", str(repo), str(other)), ("check-request", "--repo", str(repo), "mlp", str(request)),
            ("report", str(repo), "-o", str(folder / "report.html"))]
    paths = (spec, manifest, repo, other, folder / "planned_repository", request, folder / "report.html")
    words = [str(p) for p in (*paths, folder / "built", folder / "cache")] + [
        "max_batch_size", "input_x", "unchanged", "breaking", "artifact(s)", "input_input_ids", "module.embed.weight"]
    for args, force_color in [*((args, False) for args in runs), (runs[1], True), (runs[5], True)]:
        output = _piped(*args, cwd=folder, force_color=force_color)
        lines = output.splitlines()
        joined = "".join(lines)
        printed = [word for word in words if word in joined]
        assert printed, (args, output)
        for word in printed:
            assert any(word in line for line in lines), (args, word, output)


def test_every_command_prints_through_the_one_printer() -> None:
    """A command module that calls click.echo or builds a rich Console itself bypasses visible() (as `contract` once
    did): only generator/cli/_output.py may."""
    import ast

    cli = Path(__file__).resolve().parents[2] / "generator" / "cli"
    bypasses = []
    for module in sorted(cli.glob("*.py")):
        if module.name == "_output.py":
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (node.attr in ("echo", "secho") and
                                                     isinstance(node.value, ast.Name) and node.value.id == "click"):
                bypasses.append(f"{module.name}:{node.lineno}: click.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module in ("rich.console", "click"):
                names = {a.name for a in node.names}
                if names & {"Console", "echo", "secho"}:
                    bypasses.append(f"{module.name}:{node.lineno}: imports {sorted(names)} from {node.module}")
    assert not bypasses, bypasses
