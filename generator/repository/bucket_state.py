"""What a publish reads from the bucket before it changes anything: the served state.

The bucket's objects by model and version folder, its lock file and configs (bounded), and a fingerprint of them
that the switch compares again before it writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from generator.errors import GenRepoError, Problem
from generator.naming import WARMUP_FOLDER, version_folder, version_folder_problem, versioned_folder
from generator.repository.bucket_reads import list_objects, object_sha256, read_object, repository_objects
from generator.repository.contract_sources import served_version
from generator.repository.lock import LOCK_FILE_NAME, parse_lock
from generator.repository.storage_urls import StorageURL
from generator.repository.verify import BucketSource, Listing, check_listing

__all__ = ["BucketState", "Expected", "VersionIndex", "fingerprint_objects", "object_problems", "read_bucket"]

#: What an object should be: repository-relative key -> (sha256, size).
Expected = Mapping[str, tuple[str, int]]


@dataclass(frozen=True, slots=True)
class VersionIndex:
    """Keys (of a listing, or of a lock file's artifacts) by model and version folder, each found once.

    ``versions``: model -> exact version -> its keys (version folder and warmup data); ``direct``: model -> the exact
    versions directly under it (the folders Triton reads); ``folders``: model -> every folder name in its version
    areas that reads as a number (``warmup/<name>`` for warmup data) -> its exact version, or None.
    """

    versions: dict[str, dict[int, list[str]]]
    direct: dict[str, set[int]]
    folders: dict[str, dict[str, int | None]]

    @classmethod
    def of(cls, keys: Iterable[str]) -> VersionIndex:
        """Index ``keys`` (repository-relative)."""
        index = cls({}, {}, {})
        for key in keys:
            held = versioned_folder(key)
            if held is None:
                continue
            model, name = held
            version = version_folder(name)
            warmup = key.split("/")[1] == WARMUP_FOLDER
            if version is not None and not key.endswith("/"):  # a folder marker is no file of the version
                index.versions.setdefault(model, {}).setdefault(version, []).append(key)
            if version is not None and not warmup:
                index.direct.setdefault(model, set()).add(version)
            if version is not None or version_folder_problem(name) is not None:
                index.folders.setdefault(model, {})[f"{WARMUP_FOLDER}/{name}" if warmup else name] = version
        return index

    def keys(self, model: str, version: int) -> list[str]:
        """The keys in ``version`` of ``model``."""
        return self.versions.get(model, {}).get(version, [])

    def present(self, model: str) -> set[int]:
        """The exact versions ``model`` has keys in."""
        return set(self.versions.get(model, {}))


@dataclass(slots=True)
class BucketState:
    """What a publish read from the bucket before changing anything (step 2)."""

    objects: dict[str, int]
    listing: VersionIndex
    fingerprints: dict[str, tuple[int, str] | None]
    lock: dict[str, Any]
    locked: VersionIndex  #: the lock file's artifacts
    lock_problems: list[Problem]
    configs: dict[str, Any] = field(default_factory=dict)  #: model -> parsed config (missing: none or unreadable)

    @property
    def artifacts(self) -> Mapping[str, Any]:
        """The bucket's lock file's artifacts (empty without a valid lock)."""
        return self.lock.get("artifacts") or {}

    @property
    def models(self) -> Mapping[str, Any]:
        """The bucket's lock file's models (empty without a valid lock)."""
        return self.lock.get("models") or {}

    def served(self, model: str) -> int | None:
        """The version Triton serves (contract_sources.served_version: the config's policy, else the highest)."""
        return served_version(self.configs.get(model), self.listing.direct.get(model, set()))

    def named(self, model: str) -> set[int]:
        """Versions the model's config names (``specific``)."""
        config = self.configs.get(model)
        return {int(v) for v in config.version_policy.specific.versions} if config is not None else set()

    def recorded(self, model: str, version: int) -> dict[str, tuple[str, int]]:
        """What the bucket's lock file says the objects of ``version`` hold."""
        return {key: (self.artifacts[key]["sha256"], self.artifacts[key]["size"])
                for key in self.locked.keys(model, version)}


def fingerprint_objects(fs: Any, target: StorageURL, keys: list[str]) -> dict[str, tuple[int, str] | None]:
    """(size, sha256) of each object in ``keys`` (None where there is none), hashed in ranges."""
    fs.invalidate_cache()
    out: dict[str, tuple[int, str] | None] = {}
    for key in keys:
        try:
            info = fs.info(target.join(key))
        except FileNotFoundError:
            info = {}
        if info.get("type") != "file":
            out[key] = None
            continue
        size = int(info.get("size") or 0)
        out[key] = (size, object_sha256(fs, target, key, size))
    return out


def read_bucket(fs: Any, target: StorageURL, models: list[str]) -> BucketState:
    """Step 2: fingerprint the served state, then list the bucket and read its lock file and the models' configs."""
    from generator.triton.proto import parse_model_config

    fingerprints = fingerprint_objects(fs, target, [LOCK_FILE_NAME, *(f"{m}/config.pbtxt" for m in models)])
    objects = repository_objects(list_objects(fs, target))
    lock: dict[str, Any] = {}
    problems: list[Problem] = []
    where = target.object_url(LOCK_FILE_NAME)
    if LOCK_FILE_NAME in objects:
        try:
            lock = parse_lock(read_object(fs, target, LOCK_FILE_NAME, objects[LOCK_FILE_NAME], "lock_bytes"), where)
        except FileNotFoundError:
            pass
        except GenRepoError as error:  # over lock_bytes, not JSON, not a valid lock: refused, located
            problems = error.problems
    locked = VersionIndex.of(lock.get("artifacts") or {})
    bucket = BucketState(objects, VersionIndex.of(objects), fingerprints, lock, locked, problems)
    for model in models:
        key = f"{model}/config.pbtxt"
        with contextlib.suppress(FileNotFoundError, GenRepoError):
            if key in objects:
                data = read_object(fs, target, key, objects[key], "config_bytes")
                bucket.configs[model] = parse_model_config(data, target.object_url(key))
    return bucket


def object_problems(fs: Any, target: StorageURL, objects: Mapping[str, int], present: Iterable[str],
                    expected: Expected) -> list[Problem]:
    """How the objects ``present`` (and those ``expected``) differ from ``expected``, as ``verify`` says it."""
    lock = {"artifacts": {key: {"sha256": sha256, "size": size} for key, (sha256, size) in expected.items()},
            "models": {}}
    listing = Listing({key: objects[key] for key in {*present, *expected} if key in objects})
    return [Problem(p.file, "", p.message) for p in check_listing(listing, lock, BucketSource(fs, target, objects))]
