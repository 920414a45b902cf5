"""``gen-repo verify``: a repository checked against its lock file, from its listing first, then file by file.

One check for a folder and a bucket (:func:`check_listing`): the listing alone refuses unlisted or mis-sized files and
links, then the rest is hashed in chunks. docs/security.md says what ``verify`` accepts.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from generator.bounded import limit, read_bytes
from generator.confinement import confined_file, walk_tree
from generator.errors import GenRepoError, Problem, json_pointer
from generator.naming import WARMUP_FOLDER, version_folder_problem
from generator.repository.cache import hash_file
from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER, read_lock

__all__ = [
    "Listing",
    "Source",
    "check_listing",
    "list_folder",
    "verify_repository",
]

_SYMLINK = "refused: a symlink; a repository holds regular files only"
_SPECIAL = "refused: a special file (FIFO, device or socket); a repository holds regular files only"


@dataclass
class Listing:
    """What a repository holds as listed, before anything is read.

    ``files``: regular files (a bucket's objects) -> size; ``refused``: entries refused by their kind alone (a
    symlink, a special file) -> why; ``folders``: every folder (a bucket's: the folders its keys and markers name).
    """

    files: dict[str, int] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)


class Source(Protocol):
    """How :func:`check_listing` reads the files a listing names (a folder's files, a bucket's objects)."""

    def where(self, rel: str) -> str:
        """How problems name the file."""

    def sha256(self, rel: str, size: int) -> str:
        """sha256 of the file's first ``size`` bytes, read in chunks; OSError or ValueError when it cannot be read."""

    def read(self, rel: str, limit_name: str) -> bytes:
        """The file's bytes within the limit ``limit_name`` (generator.bounded); OSError beyond it or unreadable."""

    def mtime(self, rel: str) -> float:
        """The file's modification time (a timestamp-based ``.pyc`` records its source's)."""


@dataclass(frozen=True)
class _Folder:
    """A repository folder as a :class:`Source`: every file opened only at a path whose folders stay inside it."""

    root: Path

    def where(self, rel: str) -> str:
        return str(self.root / rel)

    def sha256(self, rel: str, size: int) -> str:
        return hash_file(confined_file(self.root, rel))

    def read(self, rel: str, limit_name: str) -> bytes:
        return read_bytes(confined_file(self.root, rel), limit_name)

    def mtime(self, rel: str) -> float:
        return os.stat(confined_file(self.root, rel)).st_mtime


def list_folder(root: Path) -> Listing:
    """The repository folder ``root`` listed by :func:`generator.confinement.walk_tree` (links listed, not entered)."""
    listing = Listing()
    for rel, st in walk_tree(root):
        if stat.S_ISDIR(st.st_mode):
            listing.folders.add(rel)
        elif stat.S_ISREG(st.st_mode):
            listing.files[rel] = st.st_size
        else:
            listing.refused[rel] = _SYMLINK if stat.S_ISLNK(st.st_mode) else _SPECIAL
    return listing


def verify_repository(path: Path) -> list[Problem]:
    """Every way the repository at ``path`` differs from its lock file; empty when it matches exactly.

    Reports, each naming the file: a missing or corrupt lock file; artifacts modified (size or sha256 differs),
    missing, or not regular files; files present but not listed (unexpected); symlinks and special files anywhere
    (refused: a repository holds regular files only), and locked files behind a linked folder (not read through it).
    The one thing passed without a lock entry is bytecode in a ``__pycache__`` folder that is exactly what a locked,
    unmodified ``.py`` compiles to under this Python (:mod:`generator.repository.bytecode`): what Triton's Python
    backend writes when it loads ``model.py``.
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
    return check_listing(list_folder(repo), lock, _Folder(repo))


def check_listing(listing: Listing, lock: Mapping[str, Any], source: Source) -> list[Problem]:
    """Every way the repository ``listing`` describes differs from ``lock`` (valid); files read through ``source``.

    The listing is checked first: a file is hashed only when it is locked, listed as a regular file and listed at the
    lock's size, so an unlisted or oversized file is refused unread.
    """
    artifacts: Mapping[str, Mapping[str, Any]] = lock["artifacts"]
    problems = []
    intact: set[str] = set()  # artifacts that match the lock exactly
    for rel in sorted(artifacts):
        expected = artifacts[rel]
        pointer = json_pointer(["artifacts", rel])
        parts = rel.split("/")
        link = next((a for a in ("/".join(parts[:n]) for n in range(1, len(parts))) if a in listing.refused), None)
        if rel in listing.refused:
            continue  # refused below by what it is
        if link is not None:
            problems.append(Problem(source.where(rel), pointer, f"refused: not read through {link!r}, which is not a "
                                                                "folder (a symlink or a special file)"))
        elif rel not in listing.files:
            problems.append(Problem(source.where(rel), pointer, "missing: listed in the lock file but not present"))
        elif (size := listing.files[rel]) != expected["size"]:
            problems.append(Problem(source.where(rel), pointer,
                                    f"modified: {size} bytes, the lock file says {expected['size']}"))
        else:
            try:
                actual = source.sha256(rel, size)
            except (OSError, ValueError) as error:
                problems.append(Problem(source.where(rel), pointer, f"cannot read: {error}"))
                continue
            if actual != expected["sha256"]:
                problems.append(Problem(source.where(rel), pointer,
                                        f"modified: sha256 {actual}, the lock file says {expected['sha256']}"))
            else:
                intact.add(rel)
    problems += [Problem(source.where(rel), "", why) for rel, why in sorted(listing.refused.items())
                 if rel != LOCK_FILE_NAME]
    for rel, size in sorted(listing.files.items()):
        if rel in artifacts or rel in (LOCK_FILE_NAME, OUTPUT_MARKER):
            continue
        if (why := _unlisted_problem(source, rel, size, artifacts, intact)) is not None:
            problems.append(Problem(source.where(rel), "", why))
    return problems + _version_folder_problems(listing, lock["models"], source)


def _version_folder_problems(listing: Listing, models: Mapping[str, Any], source: Source) -> list[Problem]:
    """Folders of the listed models and of their warmup data that are not exactly the version they read as.

    :func:`generator.naming.version_folder_problem`; empty folders included: Triton and gen-repo would read them as
    different versions.
    """
    problems = []
    for rel in sorted(listing.folders):
        parent, _, name = rel.rpartition("/")
        model = parent.removesuffix(f"/{WARMUP_FOLDER}")
        if model in models and (why := version_folder_problem(name)) is not None:
            problems.append(Problem(source.where(rel), "", why))
    return problems


def _unlisted_problem(source: Source, rel: str, size: int, artifacts: Mapping[str, Any],
                      intact: set[str]) -> str | None:
    """Why the unlisted regular file ``rel`` is refused; None for bytecode its intact, locked source compiles to."""
    from generator.repository.bytecode import bytecode_problem, bytecode_source

    source_rel = bytecode_source(rel)
    if source_rel is None:
        return "unexpected: not listed in the lock file"
    if source_rel not in artifacts:
        return f"unexpected: bytecode whose source {source_rel!r} is not listed in the lock file"
    if source_rel not in intact:
        return f"unexpected: bytecode of {source_rel!r}, which does not match the lock file"
    bound = limit("bytecode_bytes")
    if size > bound:  # read nothing that large into memory: no model.py compiles to it
        return f"refused: bytecode of {size} bytes (more than {bound}) (source {source_rel!r})"
    try:
        pyc = source.read(rel, "bytecode_bytes")
        why = bytecode_problem(rel, pyc, source.read(source_rel, "bytecode_bytes"), source.mtime(source_rel))
    except (OSError, ValueError) as error:
        return f"cannot read: {error}"
    return None if why is None else f"refused: {why} (source {source_rel!r})"
