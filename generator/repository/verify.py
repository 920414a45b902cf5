"""``gen-repo verify``: a repository checked against its lock file, file by file.

Every listed artifact must be there, a regular file with the lock's size and sha256, read through no folder that
leads out of the repository; nothing unlisted may be there but the bytecode Triton's Python backend writes for a
locked, intact ``model.py`` (:mod:`generator.repository.bytecode`); no symlink or special file anywhere; every folder
of a listed model that reads as a version is exactly one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generator.confinement import confined_file
from generator.errors import GenRepoError, Problem, json_pointer
from generator.naming import WARMUP_FOLDER, version_folder_problem
from generator.repository.cache import hash_file
from generator.repository.files import walk_files
from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER, read_lock

__all__ = [
    "MAX_BYTECODE_BYTES",
    "verify_repository",
]

#: ``verify`` reads bytecode up to this size to compare it with its source; larger files are refused unread.
MAX_BYTECODE_BYTES = 64 << 20


def verify_repository(path: Path) -> list[Problem]:
    """Every way the repository at ``path`` differs from its lock file; empty when it matches exactly.

    Reports, each naming the file: a missing or corrupt lock file; artifacts modified (size or sha256 differs),
    missing, or not regular files; files present but not listed (unexpected); symlinks and special files anywhere
    (refused: a repository holds regular files only). The one thing passed without a lock entry is bytecode in a
    ``__pycache__`` folder that is exactly what a locked, unmodified ``.py`` compiles to under this Python
    (:mod:`generator.repository.bytecode`): what Triton's Python backend writes when it loads ``model.py``.
    """
    repo = Path(path)
    if not repo.is_dir():
        return [Problem(str(repo), "", "not a directory")]
    lock_path = repo / LOCK_FILE_NAME
    if lock_path.is_symlink():
        return [Problem(str(lock_path), "", "refused: the lock file is a symlink (a repository holds regular files "
                        "only)")]
    try:
        lock = read_lock(repo)
    except GenRepoError as error:
        return error.problems
    artifacts: dict[str, dict[str, Any]] = lock["artifacts"]
    problems = []
    intact: set[str] = set()  # artifacts that match the lock exactly
    for rel in sorted(artifacts):
        expected = artifacts[rel]
        pointer = json_pointer(["artifacts", rel])
        try:  # nothing is read through a folder that leads out of the repository
            file = confined_file(repo, rel)
        except ValueError as error:
            problems.append(Problem(str(repo / rel), pointer, f"refused: {error}"))
            continue
        try:
            st = os.lstat(file)
        except FileNotFoundError:
            problems.append(Problem(str(file), pointer, "missing: listed in the lock file but not present"))
            continue
        except OSError as error:
            problems.append(Problem(str(file), pointer, f"cannot read: {error}"))
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(str(file), pointer, "modified: no longer a regular file"))
        elif st.st_size != expected["size"]:
            problems.append(
                Problem(str(file), pointer, f"modified: {st.st_size} bytes, the lock file says {expected['size']}")
            )
        elif (actual := hash_file(file)) != expected["sha256"]:
            problems.append(
                Problem(str(file), pointer, f"modified: sha256 {actual}, the lock file says {expected['sha256']}")
            )
        else:
            intact.add(rel)
    for rel, st in walk_files(repo):
        if rel in artifacts or rel == LOCK_FILE_NAME:
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "a special file (FIFO, device or socket)"
            problems.append(Problem(str(repo / rel), "", f"refused: {kind}; a repository holds regular files only"))
        elif rel == OUTPUT_MARKER:
            continue
        elif (why := _unlisted_problem(repo, rel, st, artifacts, intact)) is not None:
            problems.append(Problem(str(repo / rel), "", why))
    return problems + _version_folder_problems(repo, lock["models"])


def _version_folder_problems(repo: Path, models: Mapping[str, Any]) -> list[Problem]:
    """Folders of the listed models and of their warmup data that are not exactly the version they read as.

    :func:`generator.naming.version_folder_problem`; empty folders included: Triton and gen-repo would read them as
    different versions.
    """
    problems = []
    for model in sorted(models):
        for folder in (repo / model, repo / model / WARMUP_FOLDER):
            try:
                with os.scandir(folder) as entries:
                    names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue  # no such folder (a missing model is reported above)
            problems += [Problem(str(folder / name), "", why) for name in names
                         if (why := version_folder_problem(name)) is not None]
    return problems


def _unlisted_problem(repo: Path, rel: str, st: os.stat_result, artifacts: Mapping[str, Any],
                      intact: set[str]) -> str | None:
    """Why the unlisted regular file ``rel`` is refused; None for bytecode its intact, locked source compiles to."""
    from generator.repository.bytecode import bytecode_problem, bytecode_source

    source = bytecode_source(rel)
    if source is None:
        return "unexpected: not listed in the lock file"
    if source not in artifacts:
        return f"unexpected: bytecode whose source {source!r} is not listed in the lock file"
    if source not in intact:
        return f"unexpected: bytecode of {source!r}, which does not match the lock file"
    if st.st_size > MAX_BYTECODE_BYTES:  # read nothing that large into memory: no model.py compiles to it
        return f"refused: bytecode of {st.st_size} bytes (more than {MAX_BYTECODE_BYTES}) (source {source!r})"
    try:
        source_path = repo / source
        with open(repo / rel, "rb") as stream:
            pyc = stream.read(MAX_BYTECODE_BYTES + 1)
        why = bytecode_problem(rel, pyc, source_path.read_bytes(), os.stat(source_path).st_mtime)
    except OSError as error:
        return f"cannot read: {error}"
    return None if why is None else f"refused: {why} (source {source!r})"
