"""sha256 as the lock file and the build cache record it: one streaming loop for files, streams and bucket objects."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["CHUNK", "hash_bytes", "hash_chunks", "hash_file", "read_chunks"]

#: Bytes read at a time from a local file: any size hashed in bounded memory (plans can be gigabytes).
CHUNK = 1 << 20


def hash_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def read_chunks(stream: BinaryIO, limit: int | None = None, chunk_size: int = CHUNK) -> Iterator[bytes]:
    """``stream``'s bytes in chunks, at most ``limit`` of them (all without one)."""
    left = limit
    while left is None or left > 0:
        chunk = stream.read(chunk_size if left is None else min(chunk_size, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        yield chunk


def hash_chunks(chunks: Iterable[bytes], out: BinaryIO | None = None) -> tuple[str, int]:
    """Hex sha256 and size of ``chunks``; each chunk also written to ``out`` (when given) as it is hashed."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
        if out is not None:
            out.write(chunk)
    return digest.hexdigest(), size


def hash_file(path: Path | str, chunk_size: int = CHUNK) -> str:
    """Hex sha256 of a file's content, read in chunks."""
    with open(path, "rb") as stream:
        return hash_chunks(read_chunks(stream, chunk_size=chunk_size))[0]
