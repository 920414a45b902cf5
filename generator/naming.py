"""Triton model names and tensor names, with the safety checks a file-system path and Triton need."""

from __future__ import annotations

import functools
import re
from typing import Literal

SemanticPath = str | int | tuple[str | int, ...]

_NON_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")
#: Triton uses the model name as a folder name and in URLs; keep to a portable, unambiguous alphabet (matched whole:
#: ``fullmatch``, since ``$`` would also match before a final newline).
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_MODEL_NAME_LENGTH = 128
#: Names gen-repo itself uses beside the model folders of a repository (compared case-insensitively): the lock file,
#: the staging marker, the publish lock object and the metadata folder of every version (``gen_repo/``). A model of
#: such a name would clash with, or be mistaken for, gen-repo's own file. tests/test_naming.py keeps this set equal
#: to the constants the writers use.
RESERVED_NAMES = frozenset({"gen-repo.lock.json", ".gen-repo-staging.json", ".gen-repo-publish.lock", "gen_repo"})


def format_tensor_name(path: SemanticPath, prefix: Literal["input", "output"]) -> str:
    """AITune's tensor name for a semantic path (``aitune.torch.utils.tensor.format_tensor_name``).

    ``repr(path)`` with every run of characters outside ``[A-Za-z0-9_]`` replaced by ``_`` and stripped of
    leading/trailing ``_``; the empty path gives just the prefix. Same names keep plans built by AITune and by
    gen-repo interchangeable.
    """
    if path == ():
        return prefix
    return f"{prefix}_{_readable(repr(path))}"


@functools.lru_cache(maxsize=8192)  # asked ten times per graph by validate and plan; reprs repeat across specs
def _readable(text: str) -> str:
    return _NON_NAME_CHARS.sub("_", text).strip("_")


def model_name_problems(name: object) -> list[str]:
    """Why ``name`` cannot be a Triton model (folder) name; empty when it can."""
    if not isinstance(name, str) or not name:
        return ["model name must be a non-empty string"]
    problems = []
    if len(name) > MAX_MODEL_NAME_LENGTH:
        problems.append(f"model name is {len(name)} characters long; at most {MAX_MODEL_NAME_LENGTH} are allowed")
    if name in {".", ".."} or "/" in name or "\\" in name or "\x00" in name:
        problems.append(f"model name {name!r} contains a path separator, NUL or is '.'/'..'")
    elif name.startswith("."):
        problems.append(f"model name {name!r} starts with '.', which Triton skips as a hidden folder")
    elif not _MODEL_NAME.fullmatch(name):
        problems.append(f"model name {name!r} may only use letters, digits, '_', '-' and '.' (not first)")
    elif name.casefold() in {reserved.casefold() for reserved in RESERVED_NAMES}:
        problems.append(f"model name {name!r} is reserved: gen-repo writes a file or folder of that name")
    return problems


def model_name_from_graph(graph_name: str, module_name: str | None = None) -> str:
    """A safe default Triton model name for a graph (AITune names graphs "0", "1", ... per module)."""
    raw = f"{module_name}_{graph_name}" if module_name else graph_name
    name = _NON_NAME_CHARS.sub("_", raw).strip("_") or "model"
    return name[:MAX_MODEL_NAME_LENGTH]


def case_collisions(names: list[str]) -> list[tuple[str, str]]:
    """Pairs of distinct names that are equal on a case-insensitive file system."""
    seen: dict[str, str] = {}
    pairs = []
    for name in names:
        key = name.casefold()
        if key in seen and seen[key] != name:
            pairs.append((seen[key], name))
        seen.setdefault(key, name)
    return pairs
