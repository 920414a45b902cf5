"""Publishing a model repository to object storage or a shared folder with safe rolling versions.

Nothing a server may be loading is edited: new versions are uploaded and read back unseen, then made visible by a config
switch under the publishers' lock (docs/release-pipelines.md, "What a publish does").
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.contracts.diff import ContractDiff, diff_repositories
from generator.errors import GenRepoError, Problem
from generator.naming import triton_version
from generator.repository.bucket_reads import STAGING_PREFIX, list_objects, repository_objects
from generator.repository.bucket_state import (
    BucketState,
    VersionIndex,
    fingerprint_objects,
    object_problems,
    read_bucket,
)
from generator.repository.contract_sources import (
    BucketReader,
    FolderReader,
    Reader,
    load_model_contract,
    served_settings,
)
from generator.repository.digest import hash_bytes
from generator.repository.lock import LOCK_FILE_NAME, LOCK_FORMAT, read_lock, render_lock
from generator.repository.publish_files import (
    CONTRACT_KEY,
    VERSIONED_AREAS,
    LocalModel,
    local_model,
    local_versions,
    published_config,
    upload_file,
    versioned_path,
)
from generator.repository.publish_lock import (
    DEFAULT_LOCK_TTL_S,
    LOCK_OBJECT,
    PublishError,
    PublishLock,
    PublishLocked,
    release_reservation,
    reserve_versions,
    reserved_versions,
)
from generator.repository.storage_errors import storage_errors
from generator.repository.storage_urls import FILE_PROTOCOL, StorageURL, open_filesystem, parse_destination
from generator.repository.verify import verify_repository

#: Versions kept per model after a publish: the new one and the one before (a server may still be on it).
DEFAULT_KEEP_VERSIONS = 2


class ReleaseRefused(PublishError):  # noqa: N818 (a decision, not an error type name)
    """A model's new version breaks clients of the version served now, and breaking changes were not allowed."""


@dataclass(frozen=True, slots=True)
class ModelPublish:
    """What a publish did to one model: ``published`` (new version), ``unchanged`` or ``kept`` (not local).

    ``damaged_versions``: earlier versions whose objects no longer matched the remote lock file; removed, never kept
    as a fallback. ``foreign``: version folders (as named in the bucket) that no gen-repo lock file of the prefix
    lists; left alone.
    """

    name: str
    status: str
    version: int | None
    previous: int | None = None
    uploaded: int = 0
    removed_versions: tuple[int, ...] = ()
    damaged_versions: tuple[int, ...] = ()
    release: Mapping[str, Any] | None = None
    foreign: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"name": self.name, "status": self.status, "version": self.version, "previous": self.previous,
                "uploaded": self.uploaded, "removed_versions": list(self.removed_versions),
                "damaged_versions": list(self.damaged_versions), "release": self.release,
                "foreign_folders": list(self.foreign)}


@dataclass(frozen=True, slots=True)
class PublishReport:
    """Where the repository went and what happened to each model."""

    url: str
    triton_url: str
    models: tuple[ModelPublish, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"url": self.url, "triton_url": self.triton_url, "models": [m.to_dict() for m in self.models]}


#: Called with (filesystem, uploaded object paths) after the upload and before the read-back check, with no lock held
#: (tests use it to damage an object, to hold a publish open, or to run another publisher meanwhile).
UploadHook = Callable[[Any, list[str]], None]
Say = Callable[[str, str], None]


# -- Publishing ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Gate:
    """The release gate's settings: whether breaking changes may ship, and who allowed them."""

    allow_breaking: bool
    allowed_by: str


@dataclass(frozen=True, slots=True)
class _Options:
    keep_versions: int
    force: bool
    owner: str
    lock_ttl_s: float
    gate: _Gate
    after_upload: UploadHook | None
    say: Say


def publish(
    local_dir: Path | str,
    url: str,
    *,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    force: bool = False,
    owner: str | None = None,
    lock_ttl_s: float = DEFAULT_LOCK_TTL_S,
    after_upload: UploadHook | None = None,
    progress: Say | None = None,
    filesystem: Any = None,
    allow_breaking: bool = False,
    allowed_by: str | None = None,
) -> PublishReport:
    """Publish the repository at ``local_dir`` to ``url`` (see the module docstring); return what was done.

    ``url``: ``s3://``, ``gs://``, or a folder (a path or ``file:///path``). ``force`` publishes a new version even of
    an unchanged model, and over a remote lock file that is not valid. Raises GenRepoError (exit 2) for a local
    repository that does not match its lock file or is not publishable, a bad URL, a missing bucket;
    :class:`PublishLocked` when another publisher holds the lock; :class:`PublishError` when an upload does not read
    back as locked, a served version differs from the remote lock, or the served state changed meanwhile;
    :class:`ReleaseRefused` (exit 1) when a new version breaks clients and ``allow_breaking`` is false (``allowed_by``,
    default ``$USER``, is recorded when true); :class:`~generator.repository.storage_errors.StorageUnreachable` (exit
    3).
    """
    if keep_versions < 1:
        raise GenRepoError([Problem(url, "", f"keep_versions must be at least 1, got {keep_versions}")])
    local = Path(local_dir)
    problems = verify_repository(local)
    if problems:
        raise GenRepoError(problems)  # never publish a repository that differs from its own lock file
    lock = read_lock(local)
    versions = local_versions(lock, str(local / LOCK_FILE_NAME))
    models = {m: local_model(local, lock, m, v) for m, v in versions.items()}
    target = parse_destination(url)
    options = _Options(keep_versions, force, owner or f"{os.environ.get('USER', 'gen-repo')}@{socket.gethostname()}",
                       lock_ttl_s, _Gate(allow_breaking, allowed_by or os.environ.get("USER") or "unknown"),
                       after_upload, progress or (lambda model, message: None))
    with storage_errors(target, "publishing"):
        fs = filesystem if filesystem is not None else open_filesystem(target)
        list_objects(fs, target)  # the bucket exists and answers before anything is written
        return _publish(local, lock, models, target, fs, options)


def _publish(local: Path, lock: Mapping[str, Any], models: Mapping[str, LocalModel], target: StorageURL, fs: Any,
             options: _Options) -> PublishReport:
    bucket = read_bucket(fs, target, sorted(models))
    if bucket.lock_problems and not options.force:
        note = (f"the published lock file is not valid, so no published version can be checked: run `gen-repo verify "
                f"{target.url}`; `gen-repo publish --force` publishes every model anew")
        raise PublishError([*bucket.lock_problems, Problem(target.url, "", note)])
    results: dict[str, ModelPublish] = {}
    mismatched: list[Problem] = []
    changed = []
    for model in sorted(models):
        problems = _unchanged_problems(fs, target, bucket, models[model], options, results)
        if problems is None:
            changed.append(model)
        mismatched += problems or []
    if mismatched:
        note = (f"a served version does not match the lock file; nothing was changed. Run `gen-repo verify "
                f"{target.url}` to see every difference; `gen-repo publish --force` publishes a new version and "
                "removes the damaged one")
        raise PublishError([*mismatched, Problem(target.url, "", note)])
    if not changed:
        return _report(target, bucket, models, results)
    releases = _release_gate(local, target, fs, bucket, models, changed, options.gate, options.say)
    retention = {m: _retention(fs, target, bucket, m, options) for m in changed}

    with PublishLock(fs, target, options.owner, options.lock_ttl_s):  # step 5, briefly
        listing = list_objects(fs, target)
        reserved = reserved_versions(fs, target, listing)
        now = VersionIndex.of(repository_objects(listing))
        new = {m: 1 + max(_taken(now, bucket, m) | reserved.get(m, set()) | {0}) for m in changed}
        reservation = reserve_versions(fs, target, options.owner, options.lock_ttl_s, new)
    switched = False
    # A folder gets each new version under a hidden name first, renamed into place once read back.
    staging = f"{STAGING_PREFIX}{secrets.token_hex(8)}" if target.protocol == FILE_PROTOCOL else ""
    promoted: list[tuple[str, str]] = []  # (model, area) renamed into place, the only ones removed on failure
    try:
        uploaded = _upload_and_check(fs, target, local, {m: (models[m], new[m]) for m in changed}, options, staging)
        for model in changed if staging else ():
            _promote(fs, target, model, new[model], staging, promoted)
        configs = {m: models[m].config_as(new[m]) for m in changed}
        new_lock = _new_lock(lock, bucket, models, new, configs, releases, retention)
        with PublishLock(fs, target, options.owner, options.lock_ttl_s):  # step 7: the switch
            _check_served_state(fs, target, bucket)
            switched = True
            for model in changed:
                fs.pipe_file(target.join(model, "config.pbtxt"), configs[model])
                options.say(model, f"version {new[model]} is visible")
            fs.pipe_file(target.join(LOCK_FILE_NAME), render_lock(new_lock).encode("utf-8"))
            for model in changed:
                for old in retention[model][1]:
                    _remove_version(fs, target, model, old)
    except BaseException:
        if not switched and staging:
            for model in changed:
                with contextlib.suppress(Exception):
                    fs.rm(target.join(model, staging), recursive=True)
            for model, area in promoted:
                with contextlib.suppress(Exception):
                    fs.rm(target.join(model, versioned_path(area, new[model])), recursive=True)
        elif not switched:
            for model in changed:
                _remove_version(fs, target, model, new[model])
        raise
    finally:
        release_reservation(fs, target, reservation)
    for model in changed:
        _kept, removed, damaged, foreign = retention[model]
        if removed:
            options.say(model, f"removed versions {', '.join(map(str, removed))} (retention: keep "
                               f"{options.keep_versions})")
        results[model] = ModelPublish(model, "published", new[model], bucket.served(model), uploaded[model], removed,
                                      damaged, releases.get(model), foreign)
    return _report(target, bucket, models, results)


def _report(target: StorageURL, bucket: BucketState, models: Mapping[str, LocalModel],
            results: dict[str, ModelPublish]) -> PublishReport:
    for model in set(bucket.models) - set(models):  # a valid lock's model entries are objects
        results[model] = ModelPublish(model, "kept", bucket.models[model].get("version"))
    return PublishReport(target.url, target.triton_url, tuple(results[m] for m in sorted(results)))


def _unchanged_problems(fs: Any, target: StorageURL, bucket: BucketState, model: LocalModel, options: _Options,
                        results: dict[str, ModelPublish]) -> list[Problem] | None:
    """Step 3: None when ``model`` changed; else how the served version's objects differ from the lock file.

    Unchanged: the bucket's lock file lists exactly what ``model`` publishes as the version served now, and its
    objects read back so (then ``results`` gets the model's entry).
    """
    current = bucket.served(model.name)
    if options.force or current is None or bucket.lock_problems:
        return None
    expected = model.expected(current)
    config_key = f"{model.name}/config.pbtxt"
    config = model.config_as(current)
    if bucket.recorded(model.name, current) != expected or \
            bucket.artifacts.get(config_key, {}).get("sha256") != hash_bytes(config):
        return None
    expected[config_key] = (hash_bytes(config), len(config))
    problems = object_problems(fs, target, bucket.objects, bucket.listing.keys(model.name, current), expected)
    if not problems:
        results[model.name] = ModelPublish(model.name, "unchanged", current, current,
                                           foreign=_foreign(bucket, model.name))
        options.say(model.name, f"unchanged: version {current} stays (its objects read back as the lock file says)")
    return problems


def _taken(now: VersionIndex, bucket: BucketState, model: str) -> set[int]:
    """Version numbers a new version of ``model`` must not take.

    Every version folder present (``now``; also as Triton reads a name that is not exactly one), and every version the
    bucket's lock file and config name.
    """
    taken = bucket.locked.present(model) | bucket.named(model)
    for name, version in now.folders.get(model, {}).items():
        read = version if version is not None else triton_version(name.rpartition("/")[2])
        if read is not None and read > 0:
            taken.add(read)
    return taken


def _foreign(bucket: BucketState, model: str) -> tuple[str, ...]:
    """Folders of ``model`` that read as a version but no gen-repo lock file of the prefix lists."""
    listed = bucket.locked.present(model)
    return tuple(sorted(name for name, version in bucket.listing.folders.get(model, {}).items()
                        if version not in listed))


def _release_gate(local: Path, target: StorageURL, fs: Any, bucket: BucketState, models: Mapping[str, LocalModel],
                  changed: list[str], gate: _Gate, say: Say) -> dict[str, dict[str, Any]]:
    """Step 4: each changed model's contract against the served one, as ``gen-repo diff`` compares them.

    The served contract is read as ``diff`` reads it
    (:func:`generator.repository.contract_sources.load_model_contract`); a model the bucket does not serve breaks
    nothing. Raises :class:`ReleaseRefused` listing every breaking change unless ``gate.allow_breaking`` (an unreadable
    served contract refuses too); the record holds the changes and, for allowed breaking ones, who allowed them and
    when.
    """
    reader = BucketReader(fs, target, bucket.objects)
    folder = FolderReader(local)
    records: dict[str, dict[str, Any]] = {}
    refused: list[Problem] = []
    for model in changed:
        if f"{model}/config.pbtxt" not in bucket.objects and not bucket.listing.direct.get(model):
            continue
        from_version = bucket.served(model)
        record: dict[str, Any] = {"from_version": from_version}
        try:
            comparison = _release_diff(reader, folder, model, bucket.configs.get(model), models[model])
        except GenRepoError as error:
            why = "; ".join(str(p) for p in error.problems)
            if not gate.allow_breaking:
                refused.append(Problem(target.object_url(model), "", f"the contract of served version {from_version} "
                                                                     f"cannot be read, so this version cannot be "
                                                                     f"checked against it: {why}"))
                continue
            record["not_compared"] = why
            breaking: tuple[Any, ...] = ("not compared",)
        else:
            record["changes"] = [c.to_dict() for c in comparison.changes]
            if comparison.unknown:
                record["unknown"] = [u.to_dict() for u in comparison.unknown]
            breaking = tuple(c for c in comparison.changes if c.breaking)
            if breaking and not gate.allow_breaking:
                refused += [Problem(target.object_url(model), "", f"breaking ({c.kind}): {c.message}")
                            for c in breaking]
                continue
        if breaking:
            record["allowed_by"] = gate.allowed_by
            record["allowed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            say(model, f"breaking changes against version {from_version} allowed by {gate.allowed_by}")
        records[model] = record
    if refused:
        note = ("nothing was uploaded and the served versions are unchanged; `gen-repo diff` shows every change, "
                "`gen-repo publish --allow-breaking` publishes anyway (recording who allowed it)")
        raise ReleaseRefused([*refused, Problem(target.url, "", note)],
                             summary="the new versions break clients of the versions served now")
    return records


def _release_diff(served: Reader, local: Reader, model: str, served_config: Any, built: LocalModel) -> ContractDiff:
    """``gen-repo diff``'s answer for ``model``: the served version against the local one, served settings included."""
    from generator.triton.proto import parse_model_config

    local_config = parse_model_config(built.config_text, local.where(f"{model}/config.pbtxt"))
    return diff_repositories({model: load_model_contract(served, model)},
                             {model: load_model_contract(local, model, built.version)},
                             old_label=served.where(model), new_label=local.where(model),
                             old_served={model: served_settings(served_config)} if served_config is not None else {},
                             new_served={model: served_settings(local_config)})


#: Per model: (kept, removed, damaged versions, foreign folders).
_Retention = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[str, ...]]


def _retention(fs: Any, target: StorageURL, bucket: BucketState, model: str, options: _Options) -> _Retention:
    """Step 8, decided before anything changes: the versions kept, removed (damaged among them) and left alone.

    Only versions the bucket's lock file lists are candidates: newest first, up to ``keep_versions - 1`` whose
    objects read back as it says are kept; the others it lists are removed. Anything else is never removed.
    """
    candidates = bucket.locked.present(model) & bucket.listing.present(model)
    kept: list[int] = []
    damaged: list[int] = []
    for old in sorted(candidates, reverse=True):
        if len(kept) >= options.keep_versions - 1:
            break
        problems = object_problems(fs, target, bucket.objects, bucket.listing.keys(model, old),
                                   bucket.recorded(model, old))
        if problems:
            damaged.append(old)
            options.say(model, f"version {old} does not match the lock file ({problems[0].file}: "
                               f"{problems[0].message}): removed, never kept as a fallback")
        else:
            kept.append(old)
    removed = tuple(sorted(candidates - set(kept)))
    foreign = _foreign(bucket, model)
    if foreign:
        options.say(model, f"left alone: {', '.join(ascii(f) for f in foreign)} (version folders no gen-repo lock file "
                           "of this prefix lists; remove them yourself if no server needs them)")
    return tuple(sorted(kept)), removed, tuple(sorted(damaged)), foreign


def _staged(key: str, staging: str) -> str:
    """Where the repository-relative ``key`` of a new version is uploaded.

    In place, or (a folder destination) in the model's hidden ``staging`` folder (``mlp/3/model.onnx`` ->
    ``mlp/.gen-repo-publish.staging.<t>/3/model.onnx``).
    """
    if not staging:
        return key
    model, _, rest = key.partition("/")
    return f"{model}/{staging}/{rest}"


def _upload_and_check(fs: Any, target: StorageURL, local: Path, plans: Mapping[str, tuple[LocalModel, int]],
                      options: _Options, staging: str = "") -> dict[str, int]:
    """Step 6: upload each new version folder, then read every object back against the local lock's hashes.

    With ``staging`` (a folder destination) everything goes under the model's hidden staging folder, and nothing but
    what the lock lists may sit there. Returns the number of objects uploaded per model. The caller removes the new
    folders when this raises.
    """
    expected: dict[str, tuple[str, int]] = {}
    counts: dict[str, int] = {}
    for model, (built, version) in plans.items():
        options.say(model, f"uploading version {version} ({len(built.expected(version))} objects)")
        for file in built.files:
            upload_file(fs, target, local, file, _staged(f"{model}/{versioned_path(file.area, version, file.rel)}",
                                                         staging))
        contract = built.contract_as(version)
        if contract is not None:
            fs.pipe_file(target.join(_staged(f"{model}/{version}/{CONTRACT_KEY}", staging)), contract)
        counts[model] = len(built.expected(version))
        expected.update({_staged(key, staging): meta for key, meta in built.expected(version).items()})
    if options.after_upload is not None:
        options.after_upload(fs, sorted(target.join(key) for key in expected))
    listing = list_objects(fs, target)
    now = VersionIndex.of(repository_objects(listing))
    bad: list[Problem] = []
    for model, (built, version) in plans.items():
        present = [k for k in listing if k.startswith(f"{model}/{staging}/")] if staging else now.keys(model, version)
        bad += object_problems(fs, target, listing, present,
                               {_staged(key, staging): meta for key, meta in built.expected(version).items()})
    if bad:
        note = "nothing was made visible; the new version folders were removed, the served versions are unchanged"
        raise PublishError([*[Problem(p.file, p.pointer, f"uploaded object {p.message}") for p in bad],
                            Problem(target.url, "", note)])
    return counts


def _new_lock(lock: Mapping[str, Any], bucket: BucketState, models: Mapping[str, LocalModel], new: Mapping[str, int],
              configs: Mapping[str, bytes], releases: Mapping[str, Any],
              retention: Mapping[str, _Retention]) -> dict[str, Any]:
    """The bucket's lock file after the switch, derived from the local and the bucket's lock files.

    From the local lock file for what this publish uploaded (each file's lock entry under its new version; the
    rewritten contract's and config's hashes), from the bucket's lock file for the rest (models not published, and
    the versions retention keeps).
    """
    artifacts = {key: meta for key, meta in bucket.artifacts.items() if key.split("/")[0] not in new}
    entries = dict(bucket.models)
    for model, version in new.items():
        artifacts.update({key: bucket.artifacts[key] for kept in retention[model][0]
                          for key in bucket.locked.keys(model, kept)})
        artifacts.update({key: {"sha256": sha256, "size": size}
                          for key, (sha256, size) in models[model].expected(version).items()})
        artifacts[f"{model}/config.pbtxt"] = {"sha256": hash_bytes(configs[model]), "size": len(configs[model])}
        entries[model] = {**dict(lock["models"][model]), "version": version}
        entries[model].pop("release", None)  # a downloaded repository's record belongs to its own publish
        if model in releases:
            entries[model]["release"] = releases[model]
    return {"format": LOCK_FORMAT, "tool_versions": lock.get("tool_versions", {}), "models": entries,
            "artifacts": dict(sorted(artifacts.items()))}


def _check_served_state(fs: Any, target: StorageURL, bucket: BucketState) -> None:
    """Step 7's first act, under the lock: refuse when the lock file or a config changed since step 2."""
    now = fingerprint_objects(fs, target, sorted(bucket.fingerprints))
    moved = [key for key in sorted(now) if now[key] != bucket.fingerprints[key]]
    if moved:
        raise PublishError([*(Problem(target.object_url(key), "", "changed while this publish uploaded (another "
                                                                  "publisher switched versions meanwhile?)")
                              for key in moved),
                            Problem(target.url, "", "nothing was made visible and the uploaded versions were removed; "
                                                    "publish again to compare with what is served now")])


def _promote(fs: Any, target: StorageURL, model: str, version: int, staging: str,
             promoted: list[tuple[str, str]]) -> None:
    """A folder destination: rename the read-back version from the staging folder to its version folder.

    Its warmup data too; never replacing a folder (a folder planted meanwhile refuses the publish); then the emptied
    staging folder is removed. Each rename done is recorded in ``promoted``.
    """
    for area in VERSIONED_AREAS[::-1]:  # warmup data first: the version folder's arrival completes the version
        source = target.join(model, staging, versioned_path(area, version))
        if not fs.exists(source):
            continue
        try:
            fs.rename_new(source, target.join(model, versioned_path(area, version)))
        except FileExistsError as error:
            raise PublishError([Problem(target.object_url(f"{model}/{versioned_path(area, version)}"), "",
                                        "appeared while this publish uploaded (reserved for it): left as it is; "
                                        "nothing was made visible")]) from error
        promoted.append((model, area))
    fs.rm(target.join(model, staging), recursive=True)


def _remove_version(fs: Any, target: StorageURL, model: str, version: int) -> None:
    """Remove version ``version`` of ``model``: its folder and its warmup data.

    Best effort: what is left is a folder no lock lists, reported by the next publish.
    """
    for area in VERSIONED_AREAS:
        with contextlib.suppress(Exception):
            fs.rm(target.join(model, versioned_path(area, version)), recursive=True)


__all__ = [
    "DEFAULT_LOCK_TTL_S",
    "LOCK_OBJECT",
    "ModelPublish",
    "PublishError",
    "PublishLock",
    "PublishLocked",
    "PublishReport",
    "ReleaseRefused",
    "local_versions",
    "publish",
    "published_config",
]
