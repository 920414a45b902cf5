"""What ``gen-repo publish`` uploads: the files the local lock file lists, read only as checked against it.

Every byte is checked against the local lock's sha256 and size where it is read, so a file changed since ``verify``
is refused (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.bounded import open_regular, read_bytes
from generator.confinement import confined_path
from generator.errors import GenRepoError, Problem, json_pointer
from generator.json_reader import parse_json
from generator.naming import WARMUP_FOLDER, version_folder, versioned_folder
from generator.planning.contract import render_contract
from generator.repository.bucket_reads import READ_CHUNK
from generator.repository.digest import hash_bytes, hash_chunks, read_chunks
from generator.repository.storage_urls import StorageURL

__all__ = [
    "CONTRACT_KEY",
    "VERSIONED_AREAS",
    "LocalFile",
    "LocalModel",
    "local_model",
    "local_versions",
    "published_config",
    "upload_file",
    "versioned_path",
]

#: Folders of a model with one subfolder per version: the version folder itself ("") and its warmup data
#: (``warmup/<version>/``, named by the config's ``input_data_file``).
VERSIONED_AREAS = ("", WARMUP_FOLDER)
#: A version's contract, whose ``version`` names the folder it sits in.
CONTRACT_KEY = "gen_repo/contract.json"


def versioned_path(area: str, version: int, rel: str = "") -> str:
    """Model-relative path of ``rel`` in version ``version`` of ``area`` (``3/model.onnx``, ``warmup/3/x``)."""
    return "/".join(p for p in (area, str(version), rel) if p)


def version_of(key: str, model: str) -> int | None:
    """The version a repository-relative key of ``model`` belongs to (its version or warmup folder), or None."""
    held = versioned_folder(key)
    return version_folder(held[1]) if held is not None and held[0] == model else None


def versions_present(keys: Any, model: str) -> set[int]:
    """The versions of ``model`` that repository-relative ``keys`` lie in."""
    return {v for key in keys if (v := version_of(key, model)) is not None}


def published_config(config_text: str, version: int, local_version: int | None = None) -> str:
    """The model's config with ``version_policy`` pinned to ``version`` (what makes that version visible).

    Warmup data files of ``local_version`` (``<local_version>/<input>``) are renamed to ``version``'s, where the
    publish uploads them.
    """
    from google.protobuf import text_format

    from generator.triton.proto import parse_model_config

    config = parse_model_config(config_text, "config.pbtxt")
    config.version_policy.Clear()
    config.version_policy.specific.versions.append(version)
    prefix = f"{local_version}/"
    for warmup in config.model_warmup:
        for entry in warmup.inputs.values():
            if local_version is not None and entry.input_data_file.startswith(prefix):
                entry.input_data_file = f"{version}/{entry.input_data_file[len(prefix):]}"
    return str(text_format.MessageToString(config))


def local_versions(lock: Mapping[str, Any], lock_file: str) -> dict[str, int]:
    """The version folder each model of a (valid) lock publishes; GenRepoError naming every lock entry it cannot.

    Publish uploads a model's ``config.pbtxt``, one version folder and that version's warmup data, as a build writes
    them: the version is the one folder the model's artifacts are in, and the model's ``version``, where the lock
    gives it, must name it. Refused: a model with no or several version folders (a published repository's lock has
    several), without a config, and an artifact outside those (publish would leave it behind).
    """
    artifacts: Mapping[str, Any] = lock["artifacts"]
    problems: list[Problem] = []
    versions: dict[str, int] = {}
    for model, entry in sorted(lock["models"].items()):
        pointer = json_pointer(["models", model])
        found = sorted(versions_present(artifacts, model))
        declared = entry.get("version")
        if len(found) == 1 and declared not in (None, found[0]):
            problems.append(Problem(lock_file, f"{pointer}/version", f"version {declared}, but the model's artifacts "
                                                                     f"are in version folder {found[0]}"))
        elif len(found) == 1:
            versions[model] = found[0]
        elif not found:
            problems.append(Problem(lock_file, pointer, "no version folder among the model's artifacts: nothing to "
                                                        "publish"))
        else:
            problems.append(Problem(lock_file, pointer, f"artifacts in version folders {found} (with warmup/<version>"
                                                        "/): a publish uploads one version per model"))
        if f"{model}/config.pbtxt" not in artifacts:
            problems.append(Problem(lock_file, pointer, "the model's config.pbtxt is not in the lock file"))
    for rel in sorted(artifacts):
        model = rel.split("/")[0]
        if rel != f"{model}/config.pbtxt" and (model not in lock["models"] or version_of(rel, model) is None):
            problems.append(Problem(lock_file, json_pointer(["artifacts", rel]), "outside every model's config.pbtxt, "
                                                                                 "version folder and warmup data: "
                                                                                 "publish would leave it behind"))
    if problems:
        raise GenRepoError(problems, summary="the repository's lock file does not describe a publishable repository")
    return versions


# -- The local side: what the local lock file says is published, read only as checked against it ---------------------
@dataclass(frozen=True, slots=True)
class LocalFile:
    """One file of the version a model publishes: where it goes (area, path inside the version) and its lock entry."""

    area: str
    rel: str
    key: str  #: repository-relative path, the lock's artifact key
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One model as the local lock file describes it, its config and contract bytes checked against the lock."""

    name: str
    version: int
    files: tuple[LocalFile, ...]
    config_text: str
    contract: bytes | None

    def contract_as(self, version: int) -> bytes | None:
        """``contract.json`` as published as ``version``: its ``version`` field names the folder it sits in."""
        if self.contract is None:
            return None
        document = parse_json(self.contract, f"{self.name}/{CONTRACT_KEY}")
        if not isinstance(document, dict) or "version" not in document:
            return self.contract
        return render_contract({**document, "version": version}).encode("utf-8")

    def expected(self, version: int) -> dict[str, tuple[str, int]]:
        """What the objects of ``version`` hold when this model is published as it (the lock's hashes)."""
        out = {f"{self.name}/{versioned_path(f.area, version, f.rel)}": (f.sha256, f.size) for f in self.files}
        contract = self.contract_as(version)
        if contract is not None:
            out[f"{self.name}/{version}/{CONTRACT_KEY}"] = (hash_bytes(contract), len(contract))
        return out

    def config_as(self, version: int) -> bytes:
        """The config that makes ``version`` visible."""
        return published_config(self.config_text, version, self.version).encode("utf-8")


def _locked_bytes(local: Path, lock: Mapping[str, Any], key: str, limit_name: str) -> bytes:
    """The bytes of ``key`` (bounded), refused unless they are the ones the lock file lists (sha256 and size)."""
    entry = lock["artifacts"][key]
    try:
        data = read_bytes(confined_path(local, *key.split("/")), limit_name)
    except (OSError, ValueError) as error:
        raise _unreadable(local, key, error) from error
    if (hash_bytes(data), len(data)) != (entry["sha256"], entry["size"]):
        raise _changed(local, key, hash_bytes(data), len(data), entry)
    return data


def _unreadable(local: Path, key: str, error: OSError | ValueError) -> GenRepoError:
    why = error.problems[0].message if isinstance(error, GenRepoError) else str(error)
    return GenRepoError([Problem(str(local / key), json_pointer(["artifacts", key]), f"cannot read: {why}")])


def _changed(local: Path, key: str, sha256: str, size: int, entry: Mapping[str, Any]) -> GenRepoError:
    return GenRepoError([Problem(str(local / key), json_pointer(["artifacts", key]),
                                 f"changed since it was verified: {size} bytes, sha256 {sha256}; the lock file says "
                                 f"{entry['size']} bytes, sha256 {entry['sha256']}. Nothing was made visible")])


def local_model(local: Path, lock: Mapping[str, Any], model: str, version: int) -> LocalModel:
    """What ``model`` publishes: every file the lock lists in its version folder and warmup data, and its config.

    ``version`` comes from :func:`local_versions`, which refuses a lock listing any other file of the model (and
    :func:`generator.repository.lock_problems` a folder that is not exactly a version): so these are all the files the
    lock lists for the model, at least one, and the publish uploads each or fails.
    """
    artifacts: Mapping[str, Any] = lock["artifacts"]
    files = []
    for area in VERSIONED_AREAS:
        prefix = f"{model}/{versioned_path(area, version)}/"
        files += [LocalFile(area, key[len(prefix):], key, entry["sha256"], entry["size"])
                  for key, entry in sorted(artifacts.items()) if key.startswith(prefix)]
    config = _locked_bytes(local, lock, f"{model}/config.pbtxt", "config_bytes")
    contract_key = f"{model}/{version}/{CONTRACT_KEY}"
    contract = _locked_bytes(local, lock, contract_key, "document_bytes") if contract_key in artifacts else None
    try:
        built = LocalModel(model, version, tuple(f for f in files if f.key != contract_key), config.decode("utf-8"),
                            contract)
        built.config_as(version)  # parses
        built.contract_as(version)
    except ValueError as error:  # not UTF-8, not a config, not JSON (json and protobuf errors are ValueErrors)
        raise GenRepoError([Problem(str(local / model), "", f"cannot be published: {error}")]) from error
    return built


def upload_file(fs: Any, target: StorageURL, local: Path, file: LocalFile, dest: str) -> None:
    """Stream ``file`` to ``dest``, hashing every byte sent; GenRepoError unless they are the lock file's bytes."""
    try:
        fd = open_regular(confined_path(local, *file.key.split("/")))
    except (OSError, ValueError) as error:
        raise _unreadable(local, file.key, error) from error
    with os.fdopen(fd, "rb") as stream, fs.open(target.join(dest), "wb") as out:
        digest, sent = hash_chunks(read_chunks(stream, file.size + 1, READ_CHUNK), out)  # a grown file: one byte over
    if (digest, sent) != (file.sha256, file.size):
        raise _changed(local, file.key, digest, sent, {"sha256": file.sha256, "size": file.size})
