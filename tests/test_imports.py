"""gen-repo's layers and no import cycle, held by import-linter's contracts in pyproject.toml; the package map.

``lint-imports`` reads the import graph with grimp from the source files (nothing is imported), function-level
imports and imports under ``if TYPE_CHECKING:`` included. The contracts are checked on the project and, so that the
first test cannot pass merely because the linter sees nothing, on planted packages that break each kind of contract
with an import Python itself would not notice until a function runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
_LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(root: Path, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on the packages under ``root`` (its pyproject.toml, or ``config``)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-c", _LINT_IMPORTS, "--no-cache", "--no-logo", *([str(config)] if config else [])]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# --------------------------------------------------------------------------------------------------------------------
# The project
# --------------------------------------------------------------------------------------------------------------------
def test_generator_keeps_its_layers_and_has_no_import_cycle() -> None:
    contracts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert {c["type"] for c in contracts} == {"layers", "acyclic_siblings"}
    assert not any("ignore_imports" in c for c in contracts)  # no exceptions list that grows
    done = lint_imports(REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout


def test_every_module_of_the_package_map_exists_and_every_module_is_in_it() -> None:
    """CONTRIBUTING.md's package map lists each package, then its modules (the click commands as ``cli/``)."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index("generator/                 the package")
    block = text[start:text.index("```", start)].splitlines()
    listed: set[str] = set()
    folders: list[tuple[int, str]] = [(-1, "")]  # (indent, path) of the enclosing package lines
    for line in block[1:]:
        indent = len(line) - len(line.lstrip())
        if line.strip() and indent == 0:
            break  # schemas/, templates/, examples/...: outside the package
        words = line.strip().split("   ")[0].split()  # names come first, the description after a wide gap
        if not words or not all(w.endswith((".py", "/")) for w in words):
            continue  # a continued description
        while folders[-1][0] >= indent:
            folders.pop()
        for word in words:
            if word.endswith("/"):
                folders.append((indent, folders[-1][1] + word))
                listed.add(folders[-1][1])
            else:
                listed.add(folders[-1][1] + word)
    package = REPO_ROOT / "generator"
    actual = {p.relative_to(package).as_posix() for p in package.rglob("*.py")
              if p.name != "__init__.py" and "__pycache__" not in p.parts and p.parent.name != "cli"}
    actual |= {p.relative_to(package).as_posix() + "/" for p in package.rglob("__init__.py")
               for p in [p.parent] if p != package}
    assert sorted(actual - listed) == [], "modules missing from the package map"
    assert sorted(listed - actual) == [], "the package map names modules that do not exist"


# --------------------------------------------------------------------------------------------------------------------
# The contracts, on planted packages
# --------------------------------------------------------------------------------------------------------------------
_CONTRACTS = """
[tool.importlinter]
root_package = "pkg"

[[tool.importlinter.contracts]]
id = "layers"
name = "layers"
type = "layers"
containers = ["pkg"]
layers = ["high", "low"]

[[tool.importlinter.contracts]]
id = "acyclic"
name = "acyclic"
type = "acyclic_siblings"
ancestors = ["pkg"]
"""


def test_a_planted_package_that_keeps_the_contracts_passes(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "pyproject.toml": _CONTRACTS,
        "pkg/__init__.py": "",
        "pkg/high/__init__.py": "",
        "pkg/high/a.py": "from pkg.low.b import helper\n",
        "pkg/low/__init__.py": "",
        "pkg/low/b.py": "def helper():\n    return 1\n",
    })
    done = lint_imports(root)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_lazy_import_cycle_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "pyproject.toml": _CONTRACTS,
        "pkg/__init__.py": "",
        "pkg/high/__init__.py": "",
        "pkg/high/a.py": "from pkg.high.b import helper\n",
        "pkg/high/b.py": "def helper():\n    from pkg.high import a  # lazy: Python would not notice\n    return a\n",
        "pkg/low/__init__.py": "",
    })
    done = lint_imports(root)
    assert done.returncode == 1
    assert re.search(r"acyclic BROKEN", done.stdout) and "pkg.high" in done.stdout, done.stdout


def test_a_lazy_or_type_only_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    for low in ("def helper():\n    from pkg.high.a import thing\n    return thing\n",
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.a import Thing\n"):
        root = _package(tmp_path / str(abs(hash(low))), {
            "pyproject.toml": _CONTRACTS,
            "pkg/__init__.py": "",
            "pkg/high/__init__.py": "",
            "pkg/high/a.py": "thing = Thing = 1\n",
            "pkg/low/__init__.py": "",
            "pkg/low/b.py": low,
        })
        done = lint_imports(root)
        assert done.returncode == 1
        assert "layers BROKEN" in done.stdout and "pkg.low.b -> pkg.high.a" in done.stdout, done.stdout
