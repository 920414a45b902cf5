"""The documentation holds: docs/cli.md matches the commands, README's first commands match CI, and every shell
command shown in README.md and docs/*.md runs on a copy of the clone with its documented exit code.

A shell block is a fenced block whose info string starts with ``bash``. ``bash norun: <why>`` marks a block that cannot
run here (a GPU, a cluster, a bucket, a shell's own state) and must say why. A command's expected exit code is the
``exit N`` of its comment (0 without one).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_docs import DOC, render

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", *sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "docs").glob("*.md"))]

#: Commands that other tests already run on the same inputs (a build and a Triton start each): the test named runs it
#: verbatim, so this one does not run it twice.
RUN_ELSEWHERE = {
    "gen-repo build examples/gen-repo.yaml -o model_repository --target python --allow-code":
        "tests/test_wheel.py::test_readme_tour_runs_from_the_repository_root_with_the_wheel",
    "gen-repo smoke --launch --repo model_repository":
        "tests/test_wheel.py::test_readme_tour_runs_from_the_repository_root_with_the_wheel",
}


@dataclass(frozen=True)
class Command:
    document: str
    line: int
    text: str
    exit_code: int


def _shell_blocks(document: str) -> list[tuple[str, int, list[str]]]:
    """(info string, first line number, lines) of every fenced block whose info string starts with ``bash``."""
    blocks: list[tuple[str, int, list[str]]] = []
    lines = (REPO_ROOT / document).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(\s*)```(\S.*)?$", lines[index])
        if fence is None:
            index += 1
            continue
        info, start, body = (fence.group(2) or "").strip(), index + 1, []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index][len(fence.group(1)):])
            index += 1
        index += 1
        if info.split(" ", 1)[0] == "bash":
            blocks.append((info, start + 1, body))
    return blocks


def _commands(document: str, line: int, body: list[str]) -> list[Command]:
    """Each command of a block: continuation lines joined, the comment read for ``exit N`` and dropped."""
    commands: list[Command] = []
    pending, first = "", line
    for number, raw in enumerate(body, start=line):
        if not pending:
            first = number
        pending += raw.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        text, _, comment = pending.partition(" #")
        if text.strip() and not text.strip().startswith("#"):
            found = re.search(r"\bexit (\d+)\b", comment)
            commands.append(Command(document, first, " ".join(text.split()), int(found.group(1)) if found else 0))
        pending = ""
    return commands


def _documented_commands() -> tuple[list[Command], list[tuple[str, int, str]]]:
    """Every runnable command of README.md and docs/*.md, and every ``norun`` block with its reason."""
    runnable: list[Command] = []
    marked: list[tuple[str, int, str]] = []
    for document in DOCUMENTS:
        for number, (info, line, body) in enumerate(_shell_blocks(document)):
            if document == "README.md" and number == 0:
                continue  # the setup-and-run and setup-and-test lines: test_readme_starts_with_the_commands_ci_runs
            if info.startswith("bash norun"):
                marked.append((document, line, info.partition(":")[2].strip()))
            else:
                runnable.extend(_commands(document, line, body))
    return runnable, marked


def test_cli_reference_is_up_to_date() -> None:
    """docs/cli.md is what tests/cli_docs.py renders from click's command tree (`python -m tests.cli_docs`)."""
    assert DOC.read_text(encoding="utf-8") == render(), "docs/cli.md is out of date: run python -m tests.cli_docs"
    from generator.cli import main

    text = DOC.read_text(encoding="utf-8")
    for name, command in main.commands.items():  # every command and option, named where a reader looks for it
        assert f"## `gen-repo {name}`" in text
        for param in command.params:
            for option in param.opts:
                assert f"`{option}`" in text, (name, option)


def test_readme_starts_with_the_commands_ci_runs() -> None:
    """README's first block: set up and run the example, set up and run the tests; .ci/run runs that test command."""
    info, _, body = _shell_blocks("README.md")[0]
    assert info == "bash"
    commands = [line for line in body if line and not line.startswith("#")]
    assert len(commands) == 2 and all(c.startswith("./scripts/setup && ") for c in commands)
    run_example, run_tests = (c.removeprefix("./scripts/setup && ") for c in commands)
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "./scripts/setup\n" in ci and re.search(rf"^(\w+=\S+ )*{re.escape(run_tests)}$", ci, re.M)
    # The example run is the quickstart's build and smoke test, with the venv's gen-repo.
    quickstart = {c.text for c in _documented_commands()[0] if c.document == "README.md"}
    for part in run_example.split(" && "):
        assert part.removeprefix(".venv/bin/") in quickstart, part


def test_documentation_index_names_every_document() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    index = readme.split("## Documentation", 1)[1]
    for document in [*DOCUMENTS[1:], "bench/README.md", "CONTRIBUTING.md"]:
        assert f"]({document})" in index, document


def test_user_documents_name_no_internal_issue_numbers() -> None:
    for document in [*DOCUMENTS, "bench/README.md", "CONTRIBUTING.md"]:
        text = (REPO_ROOT / document).read_text(encoding="utf-8")
        assert not re.search(r"\bissues? \d+", text, re.I), document


def test_every_block_that_cannot_run_here_says_why() -> None:
    _, marked = _documented_commands()
    assert marked and all(len(reason) > 10 for _, _, reason in marked), marked


def test_commands_run_elsewhere_are_run_by_the_named_test() -> None:
    runnable, _ = _documented_commands()
    texts = {c.text for c in runnable}
    for command, test in RUN_ELSEWHERE.items():
        assert command in texts, f"{command!r} is no longer documented"
        path, name = test.split("::")
        assert f"def {name}(" in (REPO_ROOT / path).read_text(encoding="utf-8"), test


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, example_repository: Path) -> Path:
    """The tracked files a documented command may name, as on a fresh clone, with the example already built there.

    The build is the session's (``example_repository``: the quickstart's own build command, run once per session).
    """
    root = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z", "examples", "tests/data", "tests/lint_corpus"], cwd=REPO_ROOT,
                             check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / name, root / name)
    shutil.copytree(example_repository, root / "model_repository")
    return root


#: The commands this module runs: every runnable one but those another test runs (RUN_ELSEWHERE).
RUN_HERE = [c for c in _documented_commands()[0] if c.text not in RUN_ELSEWHERE]


@pytest.mark.parametrize("command", RUN_HERE, ids=[f"{c.document}:{c.line}" for c in RUN_HERE])
def test_documented_command_runs_with_its_exit_code(command: Command, clone: Path, tmp_path: Path) -> None:
    """Each command as a reader types it, in the clone's root, with its documented exit code and no traceback."""
    assert command.text.startswith(("gen-repo ", "python ")), f"{command}: not a gen-repo command; mark it norun"
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "GEN_REPO_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(command.text, shell=True, cwd=clone, capture_output=True, text=True, timeout=300, env=env)
    output = done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == command.exit_code, (command, output)
    assert "Traceback" not in done.stdout + done.stderr, (command, output)
