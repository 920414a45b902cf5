"""Reading a repository in a bucket: one listing, then only the objects asked for, each within its limit.

Objects are fetched in :data:`READ_CHUNK` ranges up to their listed size, so memory stays bounded whatever a bucket
holds; the publishers' own objects (their lock, reservations, staged versions) are no part of the repository.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from generator.bounded import limit, size_problem
from generator.errors import Problem
from generator.repository.digest import hash_chunks
from generator.repository.storage_errors import StorageError
from generator.repository.storage_urls import StorageURL

__all__ = [
    "PUBLISH_LOCK_OBJECT",
    "READ_CHUNK",
    "RESERVATION_PREFIX",
    "STAGING_PREFIX",
    "list_objects",
    "object_chunks",
    "object_sha256",
    "read_object",
    "repository_objects",
]

#: The publishers' lock object at the repository root (not part of the repository; never read back).
PUBLISH_LOCK_OBJECT = ".gen-repo-publish.lock"
#: A publisher's reservation of the version numbers it uploads (``<prefix><token>`` at the repository root; Triton
#: ignores files there): not part of the repository either (generator/repository/publish_lock.py).
RESERVATION_PREFIX = ".gen-repo-publish.reserved."
#: A publish to a folder writes each new version under ``<model>/<prefix><token>/`` first and renames it into place
#: once read back (Triton skips a model's sub-folder whose name is no number): not part of the repository either.
STAGING_PREFIX = ".gen-repo-publish.staging."
#: Objects are hashed in ranges of this many bytes: an object of any size in bounded memory.
READ_CHUNK = 64 << 20


def list_objects(fs: Any, target: StorageURL) -> dict[str, int]:
    """Every object under the repository root: key relative to it -> size. StorageError when there is no bucket."""
    fs.invalidate_cache()
    try:
        found = fs.find(target.path, detail=True)
    except FileNotFoundError as error:
        message = f"no such bucket {target.bucket!r} at {target.endpoint}"
        raise StorageError([Problem(target.url, "", message)]) from error
    prefix = target.path + "/"
    return {str(path)[len(prefix):]: int(info.get("size") or 0) for path, info in found.items()
            if str(path).startswith(prefix)}


def repository_objects(objects: Mapping[str, int]) -> dict[str, int]:
    """``objects`` without the publishers' own (lock object, reservations, staged versions): the repository."""
    return {key: size for key, size in objects.items()
            if key != PUBLISH_LOCK_OBJECT and not key.startswith(RESERVATION_PREFIX)
            and not any(part.startswith(STAGING_PREFIX) for part in key.split("/")[1:2])}


def read_object(fs: Any, target: StorageURL, key: str, size: int, limit_name: str) -> bytes:
    """The bytes of the object ``key``, listed at ``size`` bytes, within the limit ``limit_name`` (generator.bounded).

    The listed size is checked before anything is fetched, and at most the limit plus one byte is fetched, so an
    object that grew since it was listed is refused too: :class:`~generator.bounded.UnreadableFileError` naming the
    object's URL. FileNotFoundError when it is gone.
    """
    where = target.object_url(key)
    refused = size_problem(where, size, limit_name)
    if refused is not None:
        raise refused
    path = target.join(key)
    try:
        data = bytes(fs.cat_file(path, start=0, end=limit(limit_name) + 1))
    except FileNotFoundError:
        raise
    except OSError:
        if int(fs.info(path).get("size") or 0) != 0:
            raise
        data = b""  # S3 answers any range of an empty object with "not satisfiable"
    refused = size_problem(where, len(data), limit_name)
    if refused is not None:
        raise refused
    return data


def object_sha256(fs: Any, target: StorageURL, key: str, size: int) -> str:
    """sha256 of the first ``size`` bytes of the object ``key``, read in :data:`READ_CHUNK` ranges (bounded memory).

    Callers compare ``size`` with the object's listed size first: the bytes past it are not read.
    """
    return hash_chunks(object_chunks(fs, target, key, size))[0]


def object_chunks(fs: Any, target: StorageURL, key: str, size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of the object ``key`` as :data:`READ_CHUNK` ranges; not a byte past ``size`` asked."""
    path = target.join(key)
    for start in range(0, size, READ_CHUNK):
        yield bytes(fs.cat_file(path, start=start, end=min(start + READ_CHUNK, size)))
