"""The documentation holds: docs/cli.md matches the commands, README's first commands match CI, and every shell
command shown in README.md and docs/*.md runs on a copy of the clone with its documented exit code.

A shell block is a fenced block whose info string starts with ``bash``. ``bash norun: <why>`` marks a block that cannot
run here (a GPU, a cluster, a bucket, a shell's own state) and must say why. A command's expected exit code is the
``exit N`` of its comment (0 without one). An ``output`` block after a shell block shows what its commands print: it
is compared line for line with their real output, elisions marked ``...`` (:mod:`tests.docs_output`).
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
from tests.docs_output import Block, fenced_blocks, output_mismatch, quickstart_steps, shown_outputs

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
    return [(block.info, block.line, list(block.body)) for block in fenced_blocks(document)
            if block.info.split(" ", 1)[0] == "bash"]


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
    # The main job's setup, then the tests' (which CI runs): the example needs none of what the tests add.
    assert len(commands) == 2
    assert commands[0].startswith("./scripts/setup && ") and commands[1].startswith("./scripts/setup --test && ")
    run_example, run_tests = commands[0].removeprefix("./scripts/setup && "), commands[1].split(" && ", 1)[1]
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "./scripts/setup --test\n" in ci and re.search(rf"^(\w+=\S+ )*{re.escape(run_tests)}$", ci, re.M)
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


def _run_elsewhere(block: Block) -> bool:
    """Whether a shell block runs a command another test runs (that test compares its shown output)."""
    return any(" ".join(line.split("#")[0].split()) in RUN_ELSEWHERE for line in block.body)


def _env(tmp_path: Path) -> dict[str, str]:
    """A documented command's environment: this Python's gen-repo first on PATH, a build cache of its own."""
    bin_dir = Path(sys.executable).parent
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "GEN_REPO_CACHE": str(tmp_path / "cache")}


#: The commands this module runs: every runnable one but those another test runs (RUN_ELSEWHERE).
RUN_HERE = [c for c in _documented_commands()[0] if c.text not in RUN_ELSEWHERE]


@pytest.mark.parametrize("command", RUN_HERE, ids=[f"{c.document}:{c.line}" for c in RUN_HERE])
def test_documented_command_runs_with_its_exit_code(command: Command, clone: Path, tmp_path: Path) -> None:
    """Each command as a reader types it, in the clone's root, with its documented exit code and no traceback."""
    assert command.text.startswith(("gen-repo ", "python ")), f"{command}: not a gen-repo command; mark it norun"
    done = subprocess.run(command.text, shell=True, cwd=clone, capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path))
    output = done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == command.exit_code, (command, output)
    assert "Traceback" not in done.stdout + done.stderr, (command, output)


#: Every shell block that shows its output: (document, bash block, output block).
SHOWN = [(document, command, shown) for document in DOCUMENTS for command, shown in shown_outputs(document)]


def test_the_quickstart_shows_the_output_of_every_step() -> None:
    """README's quickstart: every step a reader runs (all but the activation) shows what it prints."""
    steps, shown = quickstart_steps()
    assert len(steps) == 5 and [command for command, _ in shown] == steps


def test_output_matching_takes_only_marked_elisions() -> None:
    """The comparison can fail: a changed, missing or extra line is found; ``...`` stands only where it is written."""
    printed = "a: 1\nb: 2\nc: 3 (port 4711)\n"
    assert output_mismatch(["a: 1", "b: 2", "c: 3 (port ...)"], printed) is None
    assert output_mismatch(["a: 1", "...", "c: 3 (port ...)"], printed) is None
    assert output_mismatch(["...", "c: 3 (port ...)"], printed) is None
    assert output_mismatch(["a: 1", "c: 3 (port ...)"], printed) is not None  # b elided without a mark
    assert output_mismatch(["a: 1", "b: 2"], printed) is not None  # the last line left out without a mark
    assert output_mismatch(["a: 1", "b: 20", "..."], printed) is not None
    assert output_mismatch(["a: 1", "b: 2", "c: 3 (port 4711)", "d: 4"], printed) is not None


@pytest.mark.parametrize("document,command,shown", [s for s in SHOWN if not _run_elsewhere(s[1])],
                         ids=[f"{d}:{c.line}" for d, c, _ in SHOWN if not _run_elsewhere(c)])
def test_shown_output_is_what_the_commands_print(document: str, command: Block, shown: Block, clone: Path,
                                                 tmp_path: Path) -> None:
    """A block's commands run in order in a copy of the clone; what they print together is what the block shows."""
    root = tmp_path / "clone"
    shutil.copytree(clone, root, symlinks=True)
    printed = ""
    for each in _commands(document, command.line, list(command.body)):
        done = subprocess.run(each.text, shell=True, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300, env=_env(tmp_path))
        assert done.returncode == each.exit_code, (each, done.stdout[-2000:])
        printed += done.stdout
    assert (why := output_mismatch(shown.body, printed)) is None, f"{document}:{shown.line}: {why}"
