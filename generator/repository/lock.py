"""A repository's lock file (``gen-repo.lock.json``): made from a staged tree, rendered, read and validated.

No absolute paths and no timestamps, so the same inputs give the same bytes anywhere. :func:`lock_problems` is the one
definition of a valid lock that ``verify`` and ``publish`` share.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from generator.bounded import read_bytes
from generator.confinement import name_problem, relative_path_problem
from generator.errors import GenRepoError, Problem, json_pointer
from generator.json_reader import parse_json
from generator.naming import version_folder_problem, versioned_folder
from generator.repository.digest import hash_file
from generator.repository.files import walk_files

__all__ = [
    "LOCK_FILE_NAME",
    "LOCK_FORMAT",
    "OUTPUT_MARKER",
    "STAGING_MARKER",
    "artifact_problems",
    "build_lock",
    "lock_problems",
    "parse_lock",
    "read_lock",
    "render_lock",
]

LOCK_FILE_NAME = "gen-repo.lock.json"
LOCK_FORMAT = "gen-repo-lock/1"
#: Inside a staging folder only: who owns it (removed before the swap, never part of a repository).
STAGING_MARKER = ".gen-repo-staging.json"
#: At the root of every output folder gen-repo makes (build and config): the evidence that it may replace it.
OUTPUT_MARKER = ".gen-repo-output"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WINDOWS_ABSOLUTE = re.compile(r"^[A-Za-z]:[\\/]")


def _absolute_paths(value: Any, pointer: list[str | int]) -> Iterator[str]:
    """JSON pointers of strings in ``value`` that look like absolute paths (they would break determinism)."""
    if isinstance(value, str):
        if value.startswith("/") or value.startswith("\\\\") or _WINDOWS_ABSOLUTE.match(value):
            yield json_pointer(pointer)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _absolute_paths(item, [*pointer, str(key)])
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _absolute_paths(item, [*pointer, index])


def build_lock(repo_dir: Path, tool_versions: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]) -> dict:
    """Build the lock file for the repository at ``repo_dir``: every artifact's sha256 and size, tool versions, models.

    ``models`` maps each model to what identifies its build (``spec_sha256``, ``cache_key``, ``target``, ...). No
    absolute paths, no timestamps. GenRepoError for a symlink or special file, a top-level folder that is not a listed
    model (or the reverse), or an absolute path in the metadata.
    """
    repo_dir = Path(repo_dir)
    lock_file = str(repo_dir / LOCK_FILE_NAME)
    problems: list[Problem] = []
    artifacts: dict[str, dict[str, Any]] = {}
    for rel, st in walk_files(repo_dir):
        if rel in (LOCK_FILE_NAME, STAGING_MARKER, OUTPUT_MARKER):
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(str(repo_dir / rel), "", "not a regular file (symlinks and devices are refused)"))
            continue
        artifacts[rel] = {"sha256": hash_file(repo_dir / rel), "size": st.st_size}

    folders = {entry.name for entry in repo_dir.iterdir() if entry.is_dir() and not entry.is_symlink()}
    problems += [
        Problem(str(repo_dir / name), "", "folder at the repository root is not a model listed in the lock file")
        for name in sorted(folders - set(models))
    ]
    problems += [
        Problem(lock_file, json_pointer(["models", name]), "model has no folder in the repository")
        for name in sorted(set(models) - folders)
    ]
    for name, entry in models.items():
        if not isinstance(entry, Mapping):
            problems.append(Problem(lock_file, json_pointer(["models", name]), "model entry must be an object"))
    problems += [
        Problem(lock_file, pointer, "absolute path in the lock file (it must not depend on where it was built)")
        for pointer in [
            *_absolute_paths(dict(tool_versions), ["tool_versions"]),
            *_absolute_paths(dict(models), ["models"]),
        ]
    ]
    if problems:
        raise GenRepoError(problems)
    lock = {
        "format": LOCK_FORMAT,
        "tool_versions": dict(tool_versions),
        "models": {name: dict(entry) for name, entry in models.items()},
        "artifacts": dict(sorted(artifacts.items())),
    }
    try:
        # A round trip checks that it is JSON data and detaches it from the caller's objects.
        return dict(parse_json(render_lock(lock), lock_file))
    except (TypeError, ValueError) as error:
        raise GenRepoError([Problem(lock_file, "", f"lock file content is not JSON data: {error}")]) from error


def render_lock(lock: Mapping[str, Any]) -> str:
    """Render the lock file's text: sorted keys, 2-space indent, trailing newline (identical data, identical bytes)."""
    return json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def artifact_problems(lock_file: str, artifacts: Any) -> list[Problem]:
    """``artifacts``: relative path -> {sha256, size}, each path plain and its version folder exactly a version."""
    if not isinstance(artifacts, dict):
        return [Problem(lock_file, "/artifacts", "must be an object of relative path -> {sha256, size}")]
    problems = []
    for rel, entry in artifacts.items():
        pointer = json_pointer(["artifacts", rel])
        # The one rule for paths a repository file names (generator.confinement), plus no "" or "." component: a
        # lock lists each file by exactly one name. A version folder's name is told first (its own message).
        plain = relative_path_problem(rel) or next(
            ("has an empty or '.' component" for part in rel.split("/") if part in ("", ".")), None)
        if (held := versioned_folder(rel)) is not None and (why := version_folder_problem(held[1])) is not None:
            problems.append(Problem(lock_file, pointer, why))
        elif plain is not None:
            problems.append(Problem(lock_file, pointer, f"artifact path is not a plain relative path: it {plain}"))
        elif (
            not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
            or not _SHA256.match(entry["sha256"])
            or not isinstance(entry.get("size"), int)
            or isinstance(entry.get("size"), bool)
            or entry["size"] < 0
        ):
            problems.append(Problem(lock_file, pointer, "artifact entry must be {sha256: 64 hex digits, size: int}"))
    return problems


def _model_problems(lock_file: str, models: Any, artifacts: Any) -> list[Problem]:
    """``models``: name -> object, ``version`` (where given) a positive integer; artifacts inside listed models."""
    if not isinstance(models, dict):
        return [Problem(lock_file, "/models", "must be an object of model name -> {version, ...}")]
    problems = []
    for name, entry in models.items():
        pointer = json_pointer(["models", name])
        version = entry.get("version") if isinstance(entry, dict) else None
        if not name or (why := name_problem(name)) is not None:
            problems.append(Problem(lock_file, pointer, "model name is not a plain folder name"
                                    + (f": it {why}" if name else "")))
        elif not isinstance(entry, dict):
            problems.append(Problem(lock_file, pointer, "model entry must be an object"))
        elif "version" in entry and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            problems.append(Problem(lock_file, f"{pointer}/version", f"must be a positive integer, not {version!r}"))
    if isinstance(artifacts, dict):
        problems += [
            Problem(lock_file, json_pointer(["artifacts", rel]), "artifact is in a folder that is not a model listed "
                                                                 "under /models")
            for rel in artifacts if "/" in rel and rel.split("/")[0] not in models
        ]
    return problems


def lock_problems(lock: Any, lock_file: str) -> list[Problem]:
    """Every way ``lock`` (parsed JSON) is not a valid lock file: the one definition verify and publish share."""
    if not isinstance(lock, dict):
        return [Problem(lock_file, "", "corrupt: the lock file must be a JSON object")]
    problems = []
    if lock.get("format") != LOCK_FORMAT:
        problems.append(Problem(lock_file, "/format", f"corrupt: expected {LOCK_FORMAT!r}, got {lock.get('format')!r}"))
    problems += artifact_problems(lock_file, lock.get("artifacts"))
    problems += _model_problems(lock_file, lock.get("models"), lock.get("artifacts"))
    return problems


def read_lock(repo_dir: Path) -> dict:
    """Read the lock file of the repository at ``repo_dir``; GenRepoError (naming the file) when missing or corrupt."""
    lock_path = Path(repo_dir) / LOCK_FILE_NAME
    lock_file = str(lock_path)
    try:
        raw = read_bytes(lock_path, "lock_bytes")
    except FileNotFoundError as error:
        raise GenRepoError([Problem(lock_file, "", "missing: not a repository written by gen-repo")]) from error
    except (OSError, UnicodeDecodeError) as error:
        raise GenRepoError([Problem(lock_file, "", f"cannot read the lock file: {error}")]) from error
    return parse_lock(raw, lock_file)


def parse_lock(text: str | bytes, lock_file: str) -> dict:
    """A lock file's text (read within ``lock_bytes``) as a valid lock; GenRepoError naming ``lock_file`` otherwise.

    The one parser of lock files, on disk (:func:`read_lock`) and in a bucket (``verify s3://...``).
    """
    try:  # deep nesting, duplicate keys (one file listed twice), not JSON: refused, located
        lock = parse_json(text, lock_file)
    except GenRepoError as error:
        raise GenRepoError([Problem(p.file, p.pointer, f"corrupt: {p.message}") for p in error.problems]) from None
    problems = lock_problems(lock, lock_file)
    if problems:
        raise GenRepoError(problems)
    return dict(lock)
