"""The publishers' lock object and their version reservations, for ``gen-repo publish``.

A conditional write on S3, an exclusive create in a folder, a write read back on GCS; it expires with its lease
(docs/release-pipelines.md). Every object is read within ``publish_object_bytes``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from generator.errors import EXIT_FAILED, GenRepoError, Problem
from generator.json_reader import parse_json
from generator.naming import MAX_VERSION
from generator.repository.bucket_reads import PUBLISH_LOCK_OBJECT, RESERVATION_PREFIX, read_object
from generator.repository.storage_urls import FILE_PROTOCOL, StorageURL

__all__ = [
    "DEFAULT_LOCK_TTL_S",
    "LOCK_OBJECT",
    "PublishError",
    "PublishLock",
    "PublishLocked",
    "release_reservation",
    "reserve_versions",
    "reserved_versions",
]

#: The publishers' lock object at the repository root.
LOCK_OBJECT = PUBLISH_LOCK_OBJECT
LOCK_OBJECT_FORMAT = "gen-repo-publish-lock/1"
RESERVATION_FORMAT = "gen-repo-publish-reservation/1"
#: A publisher's lock (and reservation) older than this is considered abandoned (its publisher died).
DEFAULT_LOCK_TTL_S = 3600.0
#: Without conditional writes, how long a publisher waits before reading its lock back.
SETTLE_S = 1.0
_LIMIT = "publish_object_bytes"


class PublishError(GenRepoError):
    """A publish could not complete (a check failed, storage refused): nothing new was made visible."""

    exit_code = EXIT_FAILED


class PublishLocked(PublishError):  # noqa: N818 (a state, not an error type name)
    """Another publisher holds the repository's lock object."""


def _read_json(fs: Any, target: StorageURL, key: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object at ``key`` ({} when it is not one) and its ETag; (None, None) when there is no such object.

    Read within the ``publish_object_bytes`` limit: a larger object is refused (UnreadableFileError, located).
    """
    path = target.join(key)
    try:
        info = fs.info(path)
        data = read_object(fs, target, key, int(info.get("size") or 0), _LIMIT)
    except FileNotFoundError:
        return None, None
    try:
        content = parse_json(data, target.object_url(key))
    except GenRepoError:
        content = {}
    return (content if isinstance(content, dict) else {}), info.get("ETag")


def _expired(holder: Mapping[str, Any]) -> bool:
    expires = holder.get("expires")
    return isinstance(expires, (int, float)) and expires < time.time()


@dataclass(slots=True)
class PublishLock:
    """The repository's lock object; a context manager that acquires it or raises :class:`PublishLocked`."""

    fs: Any
    target: StorageURL
    owner: str
    ttl_s: float = DEFAULT_LOCK_TTL_S
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    held: bool = False

    @property
    def path(self) -> str:
        """Where the lock object lives."""
        return self.target.join(LOCK_OBJECT)

    def _body(self) -> bytes:
        now = time.time()
        body = {"format": LOCK_OBJECT_FORMAT, "owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                "token": self.token, "acquired": now, "expires": now + self.ttl_s}
        return (json.dumps(body, sort_keys=True) + "\n").encode("utf-8")

    def _read(self) -> tuple[dict[str, Any] | None, str | None]:
        """The current lock object's content and ETag (None, None when there is none)."""
        return _read_json(self.fs, self.target, LOCK_OBJECT)

    def _refuse(self, holder: Mapping[str, Any]) -> PublishLocked:
        expires = holder.get("expires")
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)) if isinstance(expires, (int, float)) else "?"
        message = (
            f"another publisher holds {LOCK_OBJECT}: owner {holder.get('owner', '?')!a} on host "
            f"{holder.get('host', '?')!a} (pid {holder.get('pid', '?')!a}), lock valid until {until}; retry "
            "in a moment (a publisher holds it only to reserve versions and to switch to them; a dead publisher's "
            "lock may be taken over after it expires, or removed by hand)"
        )
        return PublishLocked([Problem(self.target.url, "", message)])

    def acquire(self) -> None:
        """Create the lock object (conditional write on S3); take over an expired one; else PublishLocked."""
        self.fs.invalidate_cache()
        body = self._body()
        if self.target.protocol == "s3":
            try:
                self.fs.pipe_file(self.path, body, IfNoneMatch="*")
            except FileExistsError:
                holder, etag = self._read()
                if holder is not None and not _expired(holder):
                    raise self._refuse(holder) from None
                try:  # take over an expired lock only if nobody replaced it meanwhile
                    if etag is None:
                        self.fs.pipe_file(self.path, body, IfNoneMatch="*")
                    else:
                        self.fs.pipe_file(self.path, body, IfMatch=etag)
                except OSError as error:
                    again, _ = self._read()
                    raise self._refuse(again or {}) from error
        elif self.target.protocol == FILE_PROTOCOL:
            try:
                self.fs.create_exclusive(self.path, body)
            except FileExistsError:
                holder, _ = self._read()
                if holder is not None and not _expired(holder):
                    raise self._refuse(holder) from None
                if not self.fs.take_over(self.path, (holder or {}).get("token"), body):
                    again, _ = self._read()
                    raise self._refuse(again or {}) from None
        else:
            holder, _ = self._read()
            if holder is not None and not _expired(holder):
                raise self._refuse(holder)
            self.fs.pipe_file(self.path, body)
            time.sleep(SETTLE_S)  # a racing writer's object lands meanwhile; the last one wins, the other backs off
        holder, _ = self._read()
        if holder is None or holder.get("token") != self.token:
            raise self._refuse(holder or {})
        self.held = True

    def release(self) -> None:
        """Remove the lock object if it is still ours."""
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(Exception):  # best effort: a lock left behind expires after its ttl
            holder, _ = self._read()
            if holder is not None and holder.get("token") == self.token:
                self.fs.rm_file(self.path)

    def __enter__(self) -> PublishLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


# -- Reservations ----------------------------------------------------------------------------------------------------
def reserved_versions(fs: Any, target: StorageURL, objects: Mapping[str, int]) -> dict[str, set[int]]:
    """The versions live reservations (other publishers in flight) hold, per model; expired ones are ignored.

    ``objects``: the repository's listing (reservations are found by name; each is read within its limit). A
    reservation that cannot be read as one reserves nothing: it is not a publisher's.
    """
    held: dict[str, set[int]] = {}
    for key in sorted(k for k in objects if k.startswith(RESERVATION_PREFIX)):
        try:
            content = parse_json(read_object(fs, target, key, objects[key], _LIMIT), key)
        except (FileNotFoundError, ValueError, GenRepoError):
            continue
        if not isinstance(content, dict) or content.get("format") != RESERVATION_FORMAT or _expired(content) \
                or not isinstance(content.get("versions"), dict):
            continue
        for model, version in content["versions"].items():
            if isinstance(version, int) and not isinstance(version, bool) and 0 < version <= MAX_VERSION:
                held.setdefault(str(model), set()).add(version)
    return held


def reserve_versions(fs: Any, target: StorageURL, owner: str, ttl_s: float, versions: Mapping[str, int]) -> str:
    """Write a reservation of ``versions`` (model -> version); return its key. Call it holding the lock."""
    token = secrets.token_hex(16)
    key = f"{RESERVATION_PREFIX}{token}"
    body = {"format": RESERVATION_FORMAT, "owner": owner, "host": socket.gethostname(), "token": token,
            "expires": time.time() + ttl_s, "versions": dict(versions)}
    fs.pipe_file(target.join(key), (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))
    return key


def release_reservation(fs: Any, target: StorageURL, key: str) -> None:
    """Remove the reservation ``key`` (best effort: one left behind expires)."""
    with contextlib.suppress(Exception):
        fs.rm_file(target.join(key))
