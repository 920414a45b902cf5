"""Repositories and bucket states a publish meets in the wild, built from a built repository
(the publish, staging and verify tests).

A bucket state is written object by object, as a sync tool (``aws s3 sync``, ``gsutil rsync``) or a half-finished
publish leaves it: the files of a build, its configs as built or pinned to version 1 as ``publish`` pins them, a lock
file whole, without ``version``, partial or missing, and folders gen-repo did not make.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.publish import published_config
from tests.object_stores import Store

#: How a bucket's lock file can be: as publish writes it, missing, without ``version``, or without one model.
LOCK_STATES = ("published", "missing", "no version", "partial")


def read_lock_file(repo: Path) -> dict[str, Any]:
    """The lock file of the repository folder ``repo``."""
    return dict(json.loads((repo / LOCK_FILE_NAME).read_text(encoding="utf-8")))


def with_version_folder(source: Path, destination: Path, model: str, name: str) -> Path:
    """A copy of the built repository ``source`` whose ``model`` has its version folder 1 (and ``warmup/1``) named
    ``name``, the lock file's keys renamed with it and the model's ``version`` entry dropped (a valid lock without
    it names the one version folder): what a hand-edited or hostile repository looks like."""
    shutil.copytree(source, destination)
    for area in (destination / model, destination / model / "warmup"):
        if (area / "1").is_dir():
            (area / "1").rename(area / name)
    lock = read_lock_file(destination)
    renamed = {}
    for key, meta in lock["artifacts"].items():
        for prefix in (f"{model}/1/", f"{model}/warmup/1/"):
            if key.startswith(prefix):
                key = prefix[:-2] + name + "/" + key[len(prefix):]
                break
        renamed[key] = meta
    lock["artifacts"] = renamed
    lock["models"][model].pop("version", None)
    (destination / LOCK_FILE_NAME).write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return destination


def published_lock(repo: Path, lock_state: str, configs: Mapping[str, bytes]) -> dict[str, Any] | None:
    """The bucket lock file of ``repo`` published as version 1 (``configs``: the configs in the bucket), in
    ``lock_state`` (:data:`LOCK_STATES`): None when missing."""
    if lock_state == "missing":
        return None
    lock = copy.deepcopy(read_lock_file(repo))
    for model, config in configs.items():
        lock["artifacts"][f"{model}/config.pbtxt"] = {"sha256": _sha256(config), "size": len(config)}
        lock["models"][model]["version"] = 1
    if lock_state == "no version":
        for entry in lock["models"].values():
            entry.pop("version", None)
    elif lock_state == "partial":
        dropped = sorted(lock["models"])[-1]
        lock["models"].pop(dropped)
        lock["artifacts"] = {k: v for k, v in lock["artifacts"].items() if k.split("/")[0] != dropped}
    return lock


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def sync(store: Store, prefix: str, repo: Path, *, pinned: bool = True,
         lock_state: str = "published", foreign: Mapping[str, bytes] | None = None) -> None:
    """Write the built repository ``repo`` (every model at version 1) into ``prefix`` object by object.

    ``pinned``: configs as ``publish`` writes them (``version_policy`` pinned to 1), else as built (no policy:
    Triton serves the highest version folder). ``lock_state``: see :func:`published_lock`. ``foreign``: more objects
    (repository-relative key -> bytes), folders gen-repo did not make.
    """
    configs = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if not path.is_file() or rel.startswith(".") or rel == LOCK_FILE_NAME or "__pycache__" in rel:
            continue
        data = path.read_bytes()
        if path.name == "config.pbtxt" and pinned:
            data = published_config(data.decode("utf-8"), 1, 1).encode("utf-8")
        if path.name == "config.pbtxt":
            configs[path.parent.name] = data
        store.put(prefix, rel, data)
    lock = published_lock(repo, lock_state, configs)
    if lock is not None:
        store.put(prefix, LOCK_FILE_NAME, (json.dumps(lock, indent=2, sort_keys=True) + "\n").encode())
    for key, data in (foreign or {}).items():
        store.put(prefix, key, data)
