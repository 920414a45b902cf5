"""No import cycle among gen-repo's modules, function-level (lazy) imports included.

A lazy import hides a cycle from Python until the function runs; it is still a cycle in the design (two modules that
each need the other). The graph is read with ``ast`` from the source files, so nothing is imported. Imports inside
``if TYPE_CHECKING:`` are left out: they never run. The finder itself is tested on planted packages, so the first test
cannot pass merely because the finder sees nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth (functions, methods, try blocks) outside ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:  # an ``else:`` branch does run
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at any depth), for every ``.py`` under ``root/package``."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        files[name] = (path, is_package)
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, (path, is_package) in files.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module itself.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            for target in targets:
                while target and target not in files:  # ``import a.b.c`` of a non-module: its closest module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (sorted), each a cycle or several (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# --------------------------------------------------------------------------------------------------------------------
# The project
# --------------------------------------------------------------------------------------------------------------------
def test_generator_has_no_import_cycle() -> None:
    graph = import_graph(REPO_ROOT, "generator")
    assert "generator.triton.connection" in graph and "generator.cli.perf" in graph  # the graph covers the package
    assert "generator.triton.connection" in graph["generator.client"]  # and sees imports
    assert find_cycles(graph) == [], "import cycles (function-level imports count): " + "; ".join(
        " <-> ".join(cycle) for cycle in find_cycles(graph)
    )


# --------------------------------------------------------------------------------------------------------------------
# The finder, on planted packages
# --------------------------------------------------------------------------------------------------------------------
def test_a_lazy_import_cycle_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper():\n    from pkg import a  # lazy: Python would not notice\n    return a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    assert find_cycles(import_graph(root, "pkg")) == [["pkg.a", "pkg.b"]]


def test_relative_imports_and_subpackages_count(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from .deep import thing\n",
        "pkg/sub/deep.py": "class Thing:\n    def use(self):\n        from ..top import value\n        return value\n"
                           "thing = Thing()\n",
        "pkg/top.py": "from pkg.sub import thing\nvalue = 1\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.deep"}
    assert graph["pkg.sub.deep"] == {"pkg.top"}
    assert graph["pkg.top"] == {"pkg.sub"}
    assert find_cycles(graph) == [["pkg.sub", "pkg.sub.deep", "pkg.top"]]


def test_type_checking_imports_and_outside_modules_are_not_edges(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from typing import TYPE_CHECKING\nimport json\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "pkg/b.py": "import pkg.a\nclass B: ...\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.a"] == set() and graph["pkg.b"] == {"pkg.a"}
    assert find_cycles(graph) == []


def test_cycle_finder_on_a_small_graph() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert find_cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_readme_module_map_lists_every_module() -> None:
    """CONTRIBUTING.md's module map names every module of the package (the click commands as ``cli/``)."""
    readme = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = readme.index("generator/            the package")
    block = readme[start:readme.index("```", start)]
    package = REPO_ROOT / "generator"
    modules = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                     if p.name != "__init__.py" and p.parent.name != "cli" and "__pycache__" not in p.parts)
    assert [m for m in modules if not re.search(rf"(^|\s){re.escape(m)}(\s|$)", block, re.M)] == []
    assert re.search(r"^\s+cli/\s", block, re.M)
