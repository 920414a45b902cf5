"""Triton model names, version folder names and tensor names, with the checks a file-system path and Triton need."""

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
#: such a name would clash with, or be mistaken for, gen-repo's own file. Kept equal to the constants the writers use.
RESERVED_NAMES = frozenset({"gen-repo.lock.json", ".gen-repo-staging.json", ".gen-repo-publish.lock", "gen_repo"})
#: Triton core ``constants.h`` kWarmupDataFolder: a model's warmup data (``input_data_file`` is relative to it).
#: gen-repo keeps each version's data in ``warmup/<version>/``, so this folder holds version folders too.
WARMUP_FOLDER = "warmup"
#: The largest version Triton can hold: versions are int64 (``std::stoll``).
MAX_VERSION = 2**63 - 1
#: A version folder's exact name: ASCII digits, no leading zero but "0" itself (``fullmatch``: ``$`` would also match
#: before a final newline, and ``\d`` would match any Unicode digit).
_VERSION_NAME = re.compile(r"0|[1-9][0-9]*", re.ASCII)
#: What ``std::stoll`` reads: leading C-locale whitespace, a sign, ASCII digits; whatever follows is ignored.
_STOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
#: A name that reads as a number to Triton or to Python (``int()`` takes Unicode digits, whitespace and a sign).
_NUMBER_LIKE = re.compile(r"\s*[+-]?\d")


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


# -- version folders ---------------------------------------------------------------------------------------------
def version_folder(name: str) -> int | None:
    r"""The version the folder ``name`` is, when it is exactly a Triton version folder; None otherwise.

    Exactly: ASCII decimal digits only, no leading zero except ``0`` itself, at most int64. Triton's
    ``model_lifecycle.cc`` ``VersionsToLoad`` skips names with leading zeros, ``warmup`` and ``initial_state``, and
    hands the rest to ``std::stoll``, which takes whitespace, a sign and trailing junk (``"3\n"``, ``" 3"``, ``"+3"``
    and ``"3abc"`` are all version 3 to Triton). Only exact names are versions to gen-repo: verify, publish, diff,
    report, lint and smoke all ask here.
    """
    if not _VERSION_NAME.fullmatch(name):
        return None
    version = int(name)
    return version if version <= MAX_VERSION else None


def triton_version(name: str) -> int | None:
    """The version Triton's ``VersionsToLoad`` reads folder ``name`` as; None when it skips the folder.

    See :func:`version_folder`: leading zeros are skipped, otherwise ``std::stoll`` of the name.
    """
    if len(name) > 1 and name.startswith("0"):
        return None
    match = _STOLL.match(name)
    if match is None:
        return None
    version = int(match.group(1))
    return version if -MAX_VERSION - 1 <= version <= MAX_VERSION else None


def version_folder_problem(name: str) -> str | None:
    r"""Why the folder ``name``, which reads as a number, is not exactly a version folder (None when it is one).

    None too for a name that reads as no number at all (``gen_repo``, ``warmup``, ``notes``). A flagged folder is one
    Triton and a Python tool (``int()``) read differently: ``"3\n"`` is version 3 to both but is not the folder
    ``3`` Triton loads it from; ``"03"`` and ``"\u0663"`` are version 3 to ``int()`` and no version to Triton.
    """
    if version_folder(name) is not None or not _NUMBER_LIKE.match(name):
        return None
    shown = ascii(name)  # whitespace, control and non-ASCII characters visible, nothing reaches a terminal raw
    read = triton_version(name)
    if read is not None:
        return (f"folder {shown} is not exactly a version folder: Triton reads it as version {read} (std::stoll "
                f"skips whitespace, takes a sign and the leading digits) and loads that version from folder '{read}'")
    if len(name) > 1 and name.startswith("0"):
        return f"folder {shown} starts with 0: Triton skips it (leading zeros), so it is no version"
    if _STOLL.match(name):
        return f"folder {shown} is a number past int64: Triton cannot read it as a version (std::stoll out_of_range)"
    return f"folder {shown} is no ASCII number: Triton skips it, so it is no version"


def versioned_folder(key: str) -> tuple[str, str] | None:
    """(model, version folder name) of a repository-relative path inside a version folder, else None.

    ``mlp/3/model.onnx`` and gen-repo's warmup data ``mlp/warmup/3/x`` are both in version folder ``3`` of ``mlp``;
    the name is returned as it stands (check it with :func:`version_folder`).
    """
    parts = key.split("/")
    if len(parts) > 3 and parts[1] == WARMUP_FOLDER:
        return parts[0], parts[2]
    if len(parts) > 2 and parts[1] != WARMUP_FOLDER:
        return parts[0], parts[1]
    return None
