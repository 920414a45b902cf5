"""``scripts/setup`` (the main job's environment) and ``scripts/setup --test`` (the tests'): the one line of its own
says what it installed and what to run next; README's Install names the apt step of ``--test``.

The script runs for real in a copy of the repository's ``scripts/`` whose ``.venv/bin/python`` records the pip
commands instead of running them (a real install takes minutes and the network or a wheel cache; ``.ci/run`` runs the
real one on every CI run) and answers everything else with this environment's Python, so the version it reports is
the installed gen-repo's. The line is checked against the pip commands the script actually ran.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.docs_output import quickstart_steps

REPO_ROOT = Path(__file__).resolve().parent.parent
SETUP = REPO_ROOT / "scripts" / "setup"


def _setup(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``scripts/setup ARGS`` run in a copy of the repository layout; its result and the pip commands it ran."""
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(SETUP, root / "scripts" / "setup")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    log = tmp_path / "pip.log"
    python.write_text("#!/usr/bin/env bash\n"
                      f'if [ "$1 $2" = "-m pip" ]; then echo "$*" >> {log}; exit 0; fi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    env = {key: value for key, value in os.environ.items() if key != "GEN_REPO_VENV"}
    done = subprocess.run(["bash", str(root / "scripts" / "setup"), *args], capture_output=True, text=True,
                          timeout=120, env=env)
    return done, log.read_text().splitlines() if log.exists() else []


def test_setup_installs_the_main_job_only(tmp_path: Path) -> None:
    """README's first command: the `main` extra (torch, onnx, onnxruntime, the CPU Triton), nothing the tests need."""
    done, pip = _setup(tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    version = importlib.metadata.version("gen-repo")
    first_step = next(line.strip() for line in quickstart_steps()[0][0].body if line.strip())
    assert line == (f"setup: .venv has gen-repo {version} (editable, extras main). Next: . .venv/bin/activate && "
                    f"{first_step} (README's Quickstart)")
    assert [c for c in pip if "install -q -e" in c or "--no-deps" in c] == ["-m pip install -q -e .[main]"], pip
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["main"] == ["gen-repo[export,serve]"]  # export: torch, onnx, onnxruntime; serve: the CPU Triton
    assert {"torch==2.13.0", "onnx>=1.16", "onnxruntime>=1.18"} <= set(extras["export"])
    assert extras["serve"] == ["nvidia-pytriton==0.7.0"]


def test_setup_refuses_an_unknown_argument(tmp_path: Path) -> None:
    done, pip = _setup(tmp_path, "--tests")
    assert done.returncode == 2 and "usage: scripts/setup [--test]" in done.stderr and pip == []


@pytest.mark.requires("chromium")  # without it, as root, the script would really apt-get install it
def test_setup_for_the_tests_ends_with_what_it_installed_and_the_next_command(tmp_path: Path) -> None:
    done, pip = _setup(tmp_path, "--test")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # pip runs quietly: this line is setup's only output on success
    line = lines[-1]
    version = importlib.metadata.version("gen-repo")
    match = re.fullmatch(r"setup: \.venv has gen-repo (\S+) \(editable, extras (\S+)\) and triton-model-navigator "
                         r"(\S+); (chromium [^.]+?)\. Next: (.+) \(README's second command\)", line)
    assert match, line
    assert match.group(1) == version
    # What the line says was installed is what pip was asked for.
    assert f"-m pip install -q -e .[{match.group(2)}]" in pip, pip
    assert f"-m pip install -q --no-deps triton-model-navigator=={match.group(3)}" in pip, pip
    assert match.group(4) == "chromium present"
    # The next command: README's test command, verbatim.
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert f"./scripts/setup --test && {match.group(5)}\n" in readme


def test_readme_install_names_the_apt_step_the_script_takes() -> None:
    script = SETUP.read_text(encoding="utf-8")
    install = (REPO_ROOT / "README.md").read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    apt = re.search(r"apt-get install -y -qq (\w+)", script)
    assert apt is not None and '[ "$(id -u)" = 0 ]' in script  # as root only
    assert f"`apt-get install {apt.group(1)}`" in install and "as root" in install.replace("\n", " ")
    # The comment right above the chromium step names what it is for; README's Install says the same.
    above = script.split("\nif [ -x /usr/bin/chromium ]", 1)[0].splitlines()
    comment = " ".join(line for line in above[len(above) - next(i for i, line in enumerate(reversed(above))
                                                                if not line.startswith("#")):])
    tests_using_it = re.findall(r"tests/\S+\.py", comment)
    assert tests_using_it and all(f"`{name}`" in install for name in tests_using_it), comment
