"""Every test that README.md and docs/*.md name exists: a guarantee cannot point at a test that was renamed or never
written (the guarantee table may live in README.md or docs/guarantees.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: ``tests/test_x.py``, ``tests/test_x.py::test_name`` and, after one of those, a bare ``::test_name`` for that file.
REFERENCE = re.compile(r"(?P<file>tests/[\w/*]+\.py)(?:::(?P<test>\w+))?|(?<![\w/.])::(?P<bare>\w+)")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def references(text: str) -> list[tuple[str, str | None]]:
    """``(file, test or None)`` for each test reference in ``text``, in order."""
    found: list[tuple[str, str | None]] = []
    current: str | None = None
    for match in REFERENCE.finditer(text):
        if match["file"]:
            current = match["file"]
            found.append((current, match["test"]))
        elif current is not None:
            found.append((current, match["bare"]))
    return found


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_reference_parser_reads_files_tests_and_continuations() -> None:
    text = "`tests/test_a.py::test_one`, `::test_two`, `tests/test_b.py` and `tests/test_cli_*.py`; a ::x before"
    assert references("::early " + text) == [
        ("tests/test_a.py", "test_one"), ("tests/test_a.py", "test_two"), ("tests/test_b.py", None),
        ("tests/test_cli_*.py", None), ("tests/test_cli_*.py", "x"),
    ]


def test_every_test_the_documentation_names_exists() -> None:
    missing = []
    count = 0
    for document in _documents():
        for file, test in references(document.read_text(encoding="utf-8")):
            count += 1
            where = f"{document.relative_to(ROOT)}: {file}" + (f"::{test}" if test else "")
            paths = sorted(ROOT.glob(file))
            if not paths:
                missing.append(f"{where} (no such file)")
            elif test is not None and not any(test in _tests_in(path) for path in paths):
                missing.append(f"{where} (no such test)")
    assert count > 20  # the parser still finds the references
    assert missing == []
