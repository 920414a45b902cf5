"""Every ``generator`` name the documentation shows is importable where it is shown.

README.md, docs/*.md and bench/README.md are read for ``from generator... import ...`` statements (in code blocks and
in ``python -c`` lines) and for dotted names (``generator.client``, ``generator.repository.lock_problems``); each is
resolved as Python would: the longest importable module prefix, then attributes. A module moved or a name renamed
without its documentation fails here. ``generator.client`` is the public API (docs/client.md); the other names are
there to explain behaviour and stay where the documentation names them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
_IMPORT = re.compile(r"\bfrom (generator(?:\.\w+)*) import (\([^)]*\)|[\w ,]+)")
_DOTTED = re.compile(r"(?<![\w./-])generator(?:\.\w+)+")


def documented_names(text: str) -> set[str]:
    """Dotted names ``text`` shows: ``module.name`` for each imported name, and every ``generator.x.y`` in it."""
    names = {f"{module}.{item.split(' as ')[0].strip()}" for module, items in _IMPORT.findall(text)
             for item in items.strip("()").split(",") if item.strip()}
    return names | {name.rstrip(".") for name in _DOTTED.findall(text)}


def resolve(dotted: str) -> object:
    """The object ``dotted`` names: its longest importable module prefix, then attributes (AttributeError if none)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name is None or not ".".join(parts[:cut]).startswith(error.name):
                raise  # the module exists but imports something missing: a real failure, not a shorter prefix
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def test_the_reader_finds_imports_and_dotted_names() -> None:
    text = ("```python\nfrom generator.client import ModelContract, RequestValidationError\nx = 1\n```\n"
            "from generator.lint import (\n    lint,\n    RULES,\n)\n"
            "`python -c 'from generator.lint.rules import rules_markdown; print()'` and "
            "(`generator.repository.lock_problems`), not generator/cli/ or docs/generator.md.")
    assert documented_names(text) == {
        "generator.client", "generator.client.ModelContract", "generator.client.RequestValidationError",
        "generator.lint.rules", "generator.lint.rules.rules_markdown", "generator.repository.lock_problems",
        "generator.lint", "generator.lint.lint", "generator.lint.RULES",
    }


def test_a_name_that_is_not_there_fails_to_resolve() -> None:
    assert resolve("generator.client.ModelContract").__name__ == "ModelContract"  # type: ignore[attr-defined]
    for missing in ("generator.client.NoSuchName", "generator.no_such_module.thing"):
        try:
            resolve(missing)
        except (AttributeError, ModuleNotFoundError):
            continue
        raise AssertionError(f"{missing} resolved")


def test_every_documented_name_resolves_where_it_is_documented() -> None:
    names = {name: document for document in DOCUMENTS
             for name in documented_names(document.read_text(encoding="utf-8"))}
    # The reader still sees the public API and the names the release docs lean on.
    assert {"generator.client.ModelContract", "generator.repository.lock_problems"} <= set(names)
    broken = []
    for name, document in sorted(names.items()):
        try:
            resolve(name)
        except (AttributeError, ModuleNotFoundError) as error:
            broken.append(f"{document.relative_to(ROOT)}: {name} ({error})")
    assert broken == []
