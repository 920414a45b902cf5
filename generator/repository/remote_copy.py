"""A published repository copied from its bucket to a folder (``smoke --repo``, ``report``), listing first.

The same check as ``verify``: what the lock does not list, or lists at another size, is refused without a byte of it
fetched, and each locked object is hashed as it is written, so disk and memory stay bounded by the lock's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.confinement import confined_path
from generator.errors import Problem
from generator.repository.bucket_reads import object_chunks
from generator.repository.digest import hash_chunks
from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.storage_errors import StorageError, storage_errors
from generator.repository.storage_urls import open_filesystem, parse_url
from generator.repository.verify import BucketSource, check_listing, locked_listing

__all__ = ["RemoteCopy", "download_repository"]


@dataclass(frozen=True, slots=True)
class RemoteCopy:
    """A bucket's repository copied to ``folder``; ``problems``: verify's answer for the bucket (objects not copied)."""

    folder: Path
    problems: list[Problem]
    artifacts: int


@dataclass(frozen=True)
class _CopyingSource(BucketSource):
    """A bucket as :class:`generator.repository.verify.Source` whose hashing also writes each object into ``dest``."""

    dest: Path = Path()
    #: repository-relative path -> sha256 of what was written there
    written: dict[str, str] = field(default_factory=dict)

    def sha256(self, rel: str, size: int) -> str:
        out = confined_path(self.dest, *rel.split("/"))
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(out, "xb") as file:  # a fresh folder gen-repo made: nothing there to write through
                self.written[rel] = hash_chunks(object_chunks(self.fs, self.target, rel, size), file)[0]
        except BaseException:
            out.unlink(missing_ok=True)  # a partial object is no part of the copy
            raise
        return self.written[rel]


def download_repository(url: str, destination: Path | str, filesystem: Any = None) -> RemoteCopy:
    """Copy the repository at ``url`` into ``destination`` (a new folder): its lock file and the objects matching it.

    StorageError (located) for a bad URL, a missing bucket, an unreachable endpoint, no objects, or a lock file that is
    missing, too large or not valid. Objects the lock does not list (or at another size) are never fetched; a locked
    object whose bytes differ is removed: each is one of :attr:`RemoteCopy.problems`, as ``verify`` names it.
    """
    target = parse_url(url)
    dest = Path(destination)
    with storage_errors(target, "reading the repository"):
        fs = filesystem if filesystem is not None else open_filesystem(target)
        listed = locked_listing(fs, target)
        if isinstance(listed, list):
            raise StorageError(listed, summary="the bucket's lock file cannot be read: nothing was copied")
        listing, lock, raw = listed
        dest.mkdir(parents=True, exist_ok=False)
        (dest / LOCK_FILE_NAME).write_bytes(raw)
        source = _CopyingSource(fs, target, listing.files, dest)
        problems = check_listing(listing, lock, source)
    for rel, digest in source.written.items():
        if digest != lock["artifacts"][rel]["sha256"]:  # fetched within its locked size, but not the locked bytes
            confined_path(dest, *rel.split("/")).unlink()
    return RemoteCopy(dest, problems, len(lock["artifacts"]))
