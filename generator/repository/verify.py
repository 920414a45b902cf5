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
from generator.repository.bucket_reads import list_objects, object_sha256, read_object, repository_objects
from generator.repository.digest import hash_file
from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER, parse_lock, read_lock
from generator.repository.storage_errors import StorageError, storage_errors
from generator.repository.storage_urls import StorageURL, is_storage_url, local_location, open_filesystem, parse_url

__all__ = [
    "BucketSource",
    "Listing",
    "Source",
    "Verification",
    "check_listing",
    "locked_listing",
    "verify_location",
    "verify_published",
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

    A missing or corrupt lock file; artifacts modified, missing or not regular files; files not listed; symlinks and
    special files anywhere, and locked files behind a linked folder. Passed without a lock entry: only ``__pycache__``
    bytecode that is exactly what a locked ``.py`` compiles to here (:mod:`generator.repository.bytecode`).
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


# -- A repository in a bucket: one listing, its lock file, then the same check ---------------------------------------
def verify_location(location: str, filesystem: Any = None) -> Verification:
    """``gen-repo verify``'s answer for a folder, ``file://``, ``s3://`` or ``gs://`` location.

    GenRepoError (exit 2) for a folder that is not one or has no lock file; see :func:`verify_published` for buckets.
    """
    if is_storage_url(location):
        return verify_published(location, filesystem)
    directory = Path(local_location(location))  # file:///path: the folder it names
    if not directory.is_dir():
        raise GenRepoError([Problem(str(directory), "", (
            "not a folder: give the repository's folder, the one holding " + LOCK_FILE_NAME if directory.exists()
            else f"no such folder: check the path, or build the repository there first (gen-repo build MANIFEST "
                 f"-o {directory})"))])
    if not (directory / LOCK_FILE_NAME).is_file():
        raise GenRepoError([Problem(str(directory), "", f"not a gen-repo repository: it has no {LOCK_FILE_NAME}")])
    problems = verify_repository(directory)
    try:
        checked: int | None = len(read_lock(directory)["artifacts"])
    except GenRepoError:
        checked = None  # a corrupt lock file; verify_repository reported it
    return Verification(str(directory), problems, checked)


def _layout(target: StorageURL, objects: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """The repository's files and (marker-only) folders; StorageError naming every object that cannot be one.

    A zero-byte object whose name ends in ``/`` is a folder marker (as consoles create them). Refused: names that
    are not plain relative paths, a marker that holds data, and a name that is an object and also the folder of
    other objects (``mlp/1`` beside ``mlp/1/model.py``): no folder of files can hold both.
    """
    problems: list[Problem] = []
    files: list[str] = []
    folders: list[str] = []
    for key in sorted(objects):
        name = key[:-1] if key.endswith("/") else key
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts) or any(ord(c) < 32 or c in "\\\x7f" for c in key):
            problems.append(Problem(target.object_url(key), "", "object name is not a plain relative path"))
        elif key.endswith("/") and objects[key]:
            problems.append(Problem(target.object_url(key), "", f"a folder marker (name ending in '/') holding "
                                                               f"{objects[key]} bytes: not a repository's file"))
        else:
            (folders if key.endswith("/") else files).append(name)
    parents: dict[str, str] = {}  # folder -> one object inside it
    for name in [*files, *folders]:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            parents.setdefault("/".join(parts[:depth]), name)
    for name in files:
        if name in parents:
            problems.append(Problem(target.object_url(name), "", f"an object and also the folder of "
                                                                f"{target.object_url(parents[name])}: a repository's "
                                                                "file cannot be a folder too"))
    if problems:
        raise StorageError(problems, summary="the objects under this URL are not a model repository")
    return files, folders


def _listed_repository(fs: Any, target: StorageURL) -> tuple[dict[str, int], list[str], list[str]]:
    """The repository's objects (key -> listed size), files and marker folders, from one listing; nothing fetched.

    StorageError for no objects, or objects that cannot form a folder tree (:func:`_layout`).
    """
    objects = repository_objects(list_objects(fs, target))
    if not objects:
        raise StorageError([Problem(target.url, "", f"no objects under this URL (bucket {target.bucket!r} at "
                                                    f"{target.endpoint})")])
    files, folders = _layout(target, objects)
    return objects, files, folders


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``gen-repo verify`` found at a location: the problems (named as there) and the artifacts checked."""

    location: str
    problems: list[Problem]
    artifacts: int | None


def verify_published(url: str, filesystem: Any = None) -> Verification:
    """Check the repository at ``url`` against its lock file where it lies: listing first, then streaming reads.

    One listing of the bucket, then its lock file read within ``lock_bytes`` (refused from its listed size first),
    then :func:`generator.repository.verify.check_listing`: objects that are not locked, or listed at another size than
    the lock's, are refused from the listing without a byte of them fetched; the others are hashed in
    :data:`READ_CHUNK` ranges. Nothing is downloaded: memory and disk stay bounded whatever the bucket holds.
    Problems name the objects (``gs://bucket/prefix/mlp/1/model.onnx``).
    """
    target = parse_url(url)
    with storage_errors(target, "reading the repository"):
        fs = filesystem if filesystem is not None else open_filesystem(target)
        listed = locked_listing(fs, target)
        if isinstance(listed, list):  # over lock_bytes, or not a valid lock
            return Verification(url, listed, None)
        listing, lock, _raw = listed
        problems = check_listing(listing, lock, BucketSource(fs, target, listing.files))
    return Verification(url, problems, len(lock["artifacts"]))


def locked_listing(fs: Any, target: StorageURL) -> tuple[Listing, dict[str, Any], bytes] | list[Problem]:
    """The repository at ``target`` from one listing, its lock file (parsed and as read) within ``lock_bytes``.

    Nothing else is read. The lock's problems when it is over its limit or not a valid lock. StorageError for no
    objects, objects that cannot form a folder tree, or no lock file (not a repository published by gen-repo).
    """
    objects, files, folders = _listed_repository(fs, target)
    if LOCK_FILE_NAME not in objects:
        raise StorageError([Problem(target.object_url(LOCK_FILE_NAME), "",
                                    "missing: not a repository published by gen-repo")])
    where = target.object_url(LOCK_FILE_NAME)
    try:
        raw = read_object(fs, target, LOCK_FILE_NAME, objects[LOCK_FILE_NAME], "lock_bytes")
        lock = parse_lock(raw, where)
    except GenRepoError as error:
        return error.problems
    return Listing({key: objects[key] for key in files}, folders=_folders(files, folders)), lock, raw


def _folders(files: list[str], markers: list[str]) -> set[str]:
    """Every folder a bucket's keys name: each file's parents, each marker and its parents."""
    out = set(markers)
    for name in [*files, *markers]:
        parts = name.split("/")
        out.update("/".join(parts[:n]) for n in range(1, len(parts)))
    return out


@dataclass(frozen=True)
class BucketSource:
    """A repository in a bucket as :class:`generator.repository.verify.Source`: listed sizes, bounded reads."""

    fs: Any
    target: StorageURL
    sizes: Mapping[str, int]

    def where(self, rel: str) -> str:
        """The object's URL."""
        return self.target.object_url(rel)

    def sha256(self, rel: str, size: int) -> str:
        """sha256 of the object's first ``size`` bytes (:func:`object_sha256`)."""
        return object_sha256(self.fs, self.target, rel, size)

    def read(self, rel: str, limit_name: str) -> bytes:
        """The object within ``limit_name`` (:func:`read_object`)."""
        return read_object(self.fs, self.target, rel, self.sizes[rel], limit_name)

    def mtime(self, rel: str) -> float:
        """0: a bucket keeps no source mtime."""
        return 0.0  # a bucket keeps no source mtime Python recorded: a timestamp-based .pyc there does not match
