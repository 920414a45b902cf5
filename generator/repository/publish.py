"""Publishing a model repository to object storage with safe rolling versions (``gen-repo publish DIR URL``).

Object stores (S3, GCS) have no atomic rename, and Triton reads a repository from them while it runs. So a publish
never edits a version Triton may be loading. It trusts the objects in the bucket, not the bucket's lock file: a model
counts as unchanged only when the objects of its served version read back as the lock file says (otherwise the
publish is refused, naming them). Per model whose content changed (or every model, with ``force``) it

1. uploads a **new numeric version folder** completely (one past every version folder present in the bucket, also
   half-uploaded ones of a publisher that died),
2. reads every uploaded object back and checks its sha256 against the lock file (the local lock's entry; for
   ``gen_repo/contract.json``, whose ``version`` is rewritten to the published one, the new bytes' hash),
3. only then writes the model's ``config.pbtxt``, whose ``version_policy { specific { versions: [N] } }`` is what
   makes version N visible to Triton (uploaded but unlisted version folders are invisible to it), and
4. applies the retention policy: besides the new version, the newest ``keep_versions - 1`` earlier versions whose
   objects read back as the remote lock file says stay (a server still on the previous version keeps its files);
   every other version, a damaged one included, is removed. Then it writes the repository's ``gen-repo.lock.json``
   describing exactly what is there.

Before step 1 the **release gate** compares each changed model's contract with the version the bucket serves now
(:mod:`generator.contracts.diff`): a change that breaks clients (a removed input, a dtype change, a narrowed range...)
refuses the publish before anything is uploaded, unless ``allow_breaking``. What changed, and for an allowed breaking
change who allowed it and when, is recorded with the published version in the lock file
(``models/<model>/release``).

When a check fails nothing becomes visible: the new version folders are removed and the configs and lock stay as
they were. Concurrent publishers of one repository are detected with a lock object at the repository root
(``.gen-repo-publish.lock``; Triton ignores files at the root): on S3 it is created with a conditional write
(``If-None-Match: *``), so exactly one publisher wins; elsewhere it is written and read back after a pause. A lock
older than its expiry (a publisher that died) is taken over. The other publisher is refused with who holds the lock.

URLs, filesystems and storage failures: :mod:`generator.repository.storage`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.bounded import read_text
from generator.contracts.diff import diff_models
from generator.errors import EXIT_FAILED, GenRepoError, Problem, json_pointer
from generator.planning.config import WARMUP_FOLDER
from generator.planning.contract import render_contract
from generator.repository.contract_sources import VERSION_FOLDER, BucketReader, FolderReader, load_model_contract
from generator.repository.staging import (
    LOCK_FILE_NAME,
    LOCK_FORMAT,
    lock_problems,
    read_lock,
    render_lock,
    verify_repository,
)
from generator.repository.storage import (
    PUBLISH_LOCK_OBJECT,
    StorageURL,
    list_objects,
    open_filesystem,
    parse_url,
    storage_errors,
)

#: The publishers' lock object at the repository root.
LOCK_OBJECT = PUBLISH_LOCK_OBJECT
LOCK_OBJECT_FORMAT = "gen-repo-publish-lock/1"
#: Versions kept per model after a publish: the new one and the one before (a server may still be on it).
DEFAULT_KEEP_VERSIONS = 2
#: A publisher's lock older than this is considered abandoned (its publisher died) and may be taken over.
DEFAULT_LOCK_TTL_S = 3600.0
#: Without conditional writes, how long a publisher waits before reading its lock back.
SETTLE_S = 1.0
#: Objects are read back (hashed) in ranges of this many bytes: a plan of any size in bounded memory.
READ_CHUNK = 64 << 20

_VERSION = VERSION_FOLDER
#: Folders of a model with one subfolder per version: the version folder itself ("") and its warmup data
#: (``warmup/<version>/``, named by the config's ``input_data_file``).
_VERSIONED_AREAS = ("", WARMUP_FOLDER)
#: A version's file: (area, path inside the area's version folder).
FileKey = tuple[str, str]
#: What an object should be: repository-relative key -> (sha256, size).
Expected = Mapping[str, tuple[str, int]]


class PublishError(GenRepoError):
    """A publish could not complete (a check failed, storage refused): nothing new was made visible."""

    exit_code = EXIT_FAILED


class PublishLocked(PublishError):  # noqa: N818 (a state, not an error type name)
    """Another publisher holds the repository's lock object."""


class ReleaseRefused(PublishError):  # noqa: N818 (a decision, not an error type name)
    """A model's new version breaks clients of the version served now, and breaking changes were not allowed."""


# --------------------------------------------------------------------------------------------------------------------
# The publishers' lock
# --------------------------------------------------------------------------------------------------------------------
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
        try:
            data = self.fs.cat_file(self.path)
            info = self.fs.info(self.path)
        except FileNotFoundError:
            return None, None
        try:
            content = json.loads(data)
        except ValueError:
            content = {}
        return (content if isinstance(content, dict) else {}), info.get("ETag")

    def _refuse(self, holder: Mapping[str, Any]) -> PublishLocked:
        expires = holder.get("expires")
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)) if isinstance(expires, (int, float)) else "?"
        message = (
            f"another publisher holds {LOCK_OBJECT}: owner {holder.get('owner', '?')!r} on host "
            f"{holder.get('host', '?')} (pid {holder.get('pid', '?')}), lock valid until {until}; retry when it is "
            "done (a dead publisher's lock may be taken over after it expires, or removed by hand)"
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
                if holder is not None and not self._expired(holder):
                    raise self._refuse(holder) from None
                try:  # take over an expired lock only if nobody replaced it meanwhile
                    if etag is None:
                        self.fs.pipe_file(self.path, body, IfNoneMatch="*")
                    else:
                        self.fs.pipe_file(self.path, body, IfMatch=etag)
                except OSError as error:
                    again, _ = self._read()
                    raise self._refuse(again or {}) from error
        else:
            holder, _ = self._read()
            if holder is not None and not self._expired(holder):
                raise self._refuse(holder)
            self.fs.pipe_file(self.path, body)
            time.sleep(SETTLE_S)  # a racing writer's object lands meanwhile; the last one wins, the other backs off
        holder, _ = self._read()
        if holder is None or holder.get("token") != self.token:
            raise self._refuse(holder or {})
        self.held = True

    @staticmethod
    def _expired(holder: Mapping[str, Any]) -> bool:
        expires = holder.get("expires")
        return isinstance(expires, (int, float)) and expires < time.time()

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


# --------------------------------------------------------------------------------------------------------------------
# Publishing
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ModelPublish:
    """What a publish did to one model: ``published`` (new version), ``unchanged`` or ``kept`` (not local).

    ``damaged_versions``: earlier versions whose objects no longer matched the remote lock file; removed, never kept
    as a fallback.
    """

    name: str
    status: str
    version: int | None
    previous: int | None = None
    uploaded: int = 0
    removed_versions: tuple[int, ...] = ()
    damaged_versions: tuple[int, ...] = ()
    release: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"name": self.name, "status": self.status, "version": self.version, "previous": self.previous,
                "uploaded": self.uploaded, "removed_versions": list(self.removed_versions),
                "damaged_versions": list(self.damaged_versions), "release": self.release}


@dataclass(frozen=True, slots=True)
class PublishReport:
    """Where the repository went and what happened to each model."""

    url: str
    triton_url: str
    models: tuple[ModelPublish, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"url": self.url, "triton_url": self.triton_url, "models": [m.to_dict() for m in self.models]}


#: Called with (filesystem, uploaded object paths) after the upload and before the read-back check (tests use it
#: to damage an object or to hold a publish open).
UploadHook = Callable[[Any, list[str]], None]
Say = Callable[[str, str], None]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _remote_sha256(fs: Any, path: str, size: int) -> str:
    """sha256 of the object at ``path`` (``size`` bytes as listed), read in ranges."""
    if size <= READ_CHUNK:
        return _sha256(fs.cat_file(path))
    digest = hashlib.sha256()
    for start in range(0, size, READ_CHUNK):
        digest.update(fs.cat_file(path, start=start, end=min(start + READ_CHUNK, size)))
    return digest.hexdigest()


def _remote_lock(fs: Any, target: StorageURL) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The repository's lock file in the bucket (None when there is none) and how it is not a valid lock."""
    where = target.object_url(LOCK_FILE_NAME)
    try:
        data = fs.cat_file(target.join(LOCK_FILE_NAME))
    except FileNotFoundError:
        return None, []
    try:
        lock = json.loads(data)
    except ValueError as error:
        return None, [Problem(where, "", f"corrupt: not valid JSON ({error})")]
    problems = lock_problems(lock, where)
    return (None, problems) if problems else (lock, [])


def _versioned_path(area: str, version: int, rel: str = "") -> str:
    """Model-relative path of ``rel`` in version ``version`` of ``area`` (``3/model.onnx``, ``warmup/3/x``)."""
    return "/".join(p for p in (area, str(version), rel) if p)


def _version_of(key: str, model: str) -> int | None:
    """The version a repository-relative object belongs to (its version folder or its warmup folder), or None."""
    parts = key.split("/")
    if len(parts) > 2 and parts[0] == model and _VERSION.match(parts[1]):
        return int(parts[1])
    if len(parts) > 3 and parts[0] == model and parts[1] == WARMUP_FOLDER and _VERSION.match(parts[2]):
        return int(parts[2])
    return None


def _versions_present(keys: Iterable[str], model: str) -> set[int]:
    return {v for key in keys if (v := _version_of(key, model)) is not None}


def _served_versions(fs: Any, target: StorageURL, model: str) -> set[int]:
    """Versions the model's current remote config names (kept even when the remote lock file is stale or missing)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        text = fs.cat_file(target.join(model, "config.pbtxt")).decode("utf-8")
        config = model_config_pb2.ModelConfig()
        text_format.Parse(text, config)
    except (FileNotFoundError, UnicodeDecodeError, text_format.ParseError):
        return set()
    return {int(v) for v in config.version_policy.specific.versions}


def published_config(config_text: str, version: int, local_version: int | None = None) -> str:
    """The model's config with ``version_policy`` pinned to ``version`` (what makes that version visible).

    Warmup data files of ``local_version`` (``<local_version>/<input>``) are renamed to ``version``'s, where the
    publish uploads them.
    """
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = model_config_pb2.ModelConfig()
    text_format.Parse(config_text, config)
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
        found = sorted(_versions_present(artifacts, model))
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
        if rel != f"{model}/config.pbtxt" and (model not in lock["models"] or _version_of(rel, model) is None):
            problems.append(Problem(lock_file, json_pointer(["artifacts", rel]), "outside every model's config.pbtxt, "
                                                                                 "version folder and warmup data: "
                                                                                 "publish would leave it behind"))
    if problems:
        raise GenRepoError(problems, summary="the repository's lock file does not describe a publishable repository")
    return versions


def _version_files(local_dir: Path, lock: Mapping[str, Any], model: str, version: int) -> dict[FileKey, bytes]:
    """One model version's files from the local repository: its version folder and its warmup data."""
    out = {}
    for area in _VERSIONED_AREAS:
        prefix = f"{model}/{_versioned_path(area, version)}/"
        out.update({(area, rel[len(prefix):]): (local_dir / rel).read_bytes() for rel in sorted(lock["artifacts"])
                    if rel.startswith(prefix)})
    return out


def _with_version(files: dict[FileKey, bytes], version: int) -> dict[FileKey, bytes]:
    """The files as published as ``version``: the contract names the version it sits in."""
    out = dict(files)
    key = ("", "gen_repo/contract.json")
    if key in out:
        contract = json.loads(out[key])
        if isinstance(contract, dict) and "version" in contract:
            contract["version"] = version
            out[key] = render_contract(contract).encode("utf-8")
    return out


def _expected_objects(model: str, version: int, files: Mapping[FileKey, bytes]) -> dict[str, tuple[str, int]]:
    """What the objects of ``version`` hold when ``files`` are published as it."""
    return {f"{model}/{_versioned_path(area, version, rel)}": (_sha256(data), len(data)) for (area, rel), data in
            _with_version(dict(files), version).items()}


def _locked_objects(remote_artifacts: Mapping[str, Any], model: str, version: int) -> dict[str, tuple[str, int]]:
    """What the remote lock file says the objects of ``version`` hold."""
    return {rel: (meta["sha256"], meta["size"]) for rel, meta in remote_artifacts.items()
            if _version_of(rel, model) == version}


def _object_problems(fs: Any, target: StorageURL, objects: Mapping[str, int], model: str, version: int | None,
                     expected: Expected) -> list[Problem]:
    """How the bucket's objects differ from ``expected``: changed, missing, and (for ``version``) unexpected ones."""
    problems = []
    if version is not None:
        present = {k for k in objects if not k.endswith("/") and _version_of(k, model) == version}
        problems += [Problem(target.object_url(k), "", f"unexpected: in version {version} of {model} but not in "
                                                       "the lock file") for k in sorted(present - set(expected))]
    for key, (sha256, size) in sorted(expected.items()):
        if key not in objects:
            problems.append(Problem(target.object_url(key), "", "missing: listed in the lock file but not present"))
        elif objects[key] != size:
            problems.append(Problem(target.object_url(key), "", f"modified: {objects[key]} bytes, the lock file says "
                                                                f"{size}"))
        elif (actual := _remote_sha256(fs, target.join(key), size)) != sha256:
            problems.append(Problem(target.object_url(key), "", f"modified: sha256 {actual}, the lock file says "
                                                                f"{sha256}"))
    return problems


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

    ``force`` publishes a new version even of a model whose files and config are unchanged, and publishes over a
    remote lock file that is not valid. Raises GenRepoError (exit 2) for a local repository that does not match its
    lock file or whose lock does not describe a publishable repository, a bad URL, a missing bucket;
    :class:`PublishLocked` when another publisher holds the lock; :class:`PublishError` when an uploaded object does
    not read back as the lock file says, or when a served version's objects do not match the remote lock file;
    :class:`ReleaseRefused` (exit 1) when a model's new version breaks clients of its served version and
    ``allow_breaking`` is false (``allowed_by``, default ``$USER``, is recorded when it is true);
    :class:`~generator.repository.storage.StorageUnreachable` (exit 3) when the storage endpoint cannot be reached.
    """
    if keep_versions < 1:
        raise GenRepoError([Problem(url, "", f"keep_versions must be at least 1, got {keep_versions}")])
    say = progress or (lambda model, message: None)
    local = Path(local_dir)
    problems = verify_repository(local)
    if problems:
        raise GenRepoError(problems)  # never publish a repository that differs from its own lock file
    lock = read_lock(local)
    versions = local_versions(lock, str(local / LOCK_FILE_NAME))
    target = parse_url(url)
    owner = owner or f"{os.environ.get('USER', 'gen-repo')}@{socket.gethostname()}"
    with storage_errors(target, "publishing"):
        fs = filesystem if filesystem is not None else open_filesystem(target)
        list_objects(fs, target)  # the bucket exists and answers before anything is written
        with PublishLock(fs, target, owner, lock_ttl_s):
            gate = _Gate(allow_breaking, allowed_by or os.environ.get("USER") or "unknown")
            return _publish_locked(local, lock, versions, target, fs, keep_versions, force, after_upload, say, gate)


def _publish_locked(
    local: Path,
    lock: Mapping[str, Any],
    local_version: Mapping[str, int],
    target: StorageURL,
    fs: Any,
    keep_versions: int,
    force: bool,
    after_upload: UploadHook | None,
    say: Say,
    gate: _Gate,
) -> PublishReport:
    objects = list_objects(fs, target)
    keys = set(objects)
    remote, remote_problems = _remote_lock(fs, target)
    if remote_problems and not force:
        note = (f"the published lock file is not valid, so no published version can be checked: run `gen-repo verify "
                f"{target.url}`; `gen-repo publish --force` publishes every model anew")
        raise PublishError([*remote_problems, Problem(target.url, "", note)])
    remote = remote or {"models": {}, "artifacts": {}}
    remote_models: dict[str, Any] = dict(remote.get("models") or {})
    remote_artifacts: dict[str, Any] = dict(remote.get("artifacts") or {})

    plans: dict[str, tuple[int, dict[FileKey, bytes], bytes]] = {}  # model -> (new version, files, config)
    results: dict[str, ModelPublish] = {}
    damaged: list[Problem] = []
    for model in sorted(lock["models"]):
        files = _version_files(local, lock, model, local_version[model])
        config_text = read_text(local / model / "config.pbtxt", "config_bytes")
        current = remote_models.get(model, {}).get("version")
        if not force and isinstance(current, int) and _unchanged(files, config_text, local_version[model], current,
                                                                 remote_artifacts, model):
            # The remote lock says so; the objects must say so too before nothing is done.
            expected = _expected_objects(model, current, files)
            expected[f"{model}/config.pbtxt"] = (remote_artifacts[f"{model}/config.pbtxt"]["sha256"],
                                                 remote_artifacts[f"{model}/config.pbtxt"]["size"])
            problems = _object_problems(fs, target, objects, model, current, expected)
            damaged += problems
            if not problems:
                results[model] = ModelPublish(model, "unchanged", current, current)
                say(model, f"unchanged: version {current} stays (its objects read back as the lock file says)")
            continue
        version = max(_versions_present(keys, model) | {current if isinstance(current, int) else 0, 0}) + 1
        published = _with_version(files, version)
        config = published_config(config_text, version, local_version[model]).encode("utf-8")
        plans[model] = (version, published, config)
    if damaged:
        note = (f"a served version does not match the lock file; nothing was changed. Run `gen-repo verify "
                f"{target.url}` to see every difference; `gen-repo publish --force` publishes a new version and "
                "removes the damaged one")
        raise PublishError([*damaged, Problem(target.url, "", note)])

    # What each config names now (read before step 3 rewrites it): never mistaken for a half-uploaded folder.
    served = {model: _served_versions(fs, target, model) for model in plans}
    releases = _release_gate(local, local_version, target, fs, objects, remote_models, served, list(plans), gate, say)

    _upload_and_check(fs, target, plans, after_upload, say)

    # 3. Make each new version visible: its config names it.
    for model, (version, _files, config) in plans.items():
        fs.pipe_file(target.join(model, "config.pbtxt"), config)
        say(model, f"version {version} is visible")

    # 4. Retention, then the lock file describing exactly what is there.
    new_artifacts = {rel: meta for rel, meta in remote_artifacts.items() if rel.split("/")[0] not in plans}
    for model, (version, files, config) in plans.items():
        # Half-uploaded folders of a publisher that died are never in the remote lock: they go too.
        listed = _versions_present(remote_artifacts, model) | served[model]
        kept, bad = _fallbacks(fs, target, objects, remote_artifacts, model, version, listed, keep_versions, say)
        removed = tuple(sorted((_versions_present(keys, model) | {version}) - {version, *kept}))
        for old in removed:
            _remove_version(fs, target, model, old)
        for rel, meta in remote_artifacts.items():
            if _version_of(rel, model) in kept:
                new_artifacts[rel] = meta
        for (area, rel), data in files.items():
            new_artifacts[f"{model}/{_versioned_path(area, version, rel)}"] = {"sha256": _sha256(data),
                                                                              "size": len(data)}
        new_artifacts[f"{model}/config.pbtxt"] = {"sha256": _sha256(config), "size": len(config)}
        previous = remote_models.get(model, {}).get("version")
        results[model] = ModelPublish(model, "published", version, previous if isinstance(previous, int) else None,
                                      len(files), removed, bad, releases.get(model))
        if removed:
            say(model, f"removed versions {', '.join(map(str, removed))} (retention: keep {keep_versions})")
    models = dict(remote_models)
    for model in plans:
        models[model] = {**dict(lock["models"][model]), "version": plans[model][0]}
        models[model].pop("release", None)  # a downloaded repository's record belongs to its own publish
        if model in releases:
            models[model]["release"] = releases[model]
    for model in set(remote_models) - set(lock["models"]):
        results[model] = ModelPublish(model, "kept", remote_models[model].get("version"))
    new_lock = {"format": LOCK_FORMAT, "tool_versions": lock.get("tool_versions", {}), "models": models,
                "artifacts": dict(sorted(new_artifacts.items()))}
    if plans or remote.get("artifacts") is None:
        fs.pipe_file(target.join(LOCK_FILE_NAME), render_lock(new_lock).encode("utf-8"))
    return PublishReport(target.url, target.triton_url, tuple(results[m] for m in sorted(results)))


@dataclass(frozen=True, slots=True)
class _Gate:
    """The release gate's settings: whether breaking changes may ship, and who allowed them."""

    allow_breaking: bool
    allowed_by: str


def _release_gate(local: Path, local_version: Mapping[str, int], target: StorageURL, fs: Any,
                  objects: Mapping[str, int], remote_models: Mapping[str, Any], served: Mapping[str, set[int]],
                  models: list[str], gate: _Gate, say: Say) -> dict[str, dict[str, Any]]:
    """Compare each model's new contract with its served version's; the record per model kept in the lock file.

    The served version is the highest one the bucket's config names (else the remote lock's). A model served by
    nobody yet has nothing to break. Raises :class:`ReleaseRefused` listing every breaking change (of every model)
    unless ``gate.allow_breaking``; a served contract that cannot be read refuses the same way, as nothing can
    then be said about the new version. The record holds the changes, and for allowed breaking changes who allowed
    them and when (the one part that differs between two identical publishes).
    """
    bucket = BucketReader(fs, target, objects)
    folder = FolderReader(local)
    records: dict[str, dict[str, Any]] = {}
    refused: list[Problem] = []
    for model in models:
        current = remote_models.get(model, {}).get("version")
        from_version = max(served[model]) if served[model] else current if isinstance(current, int) else None
        if from_version is None:
            continue
        record: dict[str, Any] = {"from_version": from_version}
        try:
            comparison = diff_models(load_model_contract(bucket, model, from_version),
                                     load_model_contract(folder, model, local_version[model]))
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
            breaking = comparison.breaking
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


def _upload_and_check(fs: Any, target: StorageURL, plans: Mapping[str, tuple[int, dict[FileKey, bytes], bytes]],
                      after_upload: UploadHook | None, say: Say) -> None:
    """Steps 1 and 2: upload the new version folders, then read every object back; on failure remove them.

    Nothing references a new folder yet, so nothing became visible when this raises.
    """
    uploaded: dict[str, tuple[str, int]] = {}  # object path -> expected (sha256, size)
    try:
        for model, (version, files, _config) in plans.items():
            say(model, f"uploading version {version} ({len(files)} objects)")
            for (area, rel), data in sorted(files.items()):
                path = target.join(model, _versioned_path(area, version, rel))
                fs.pipe_file(path, data)
                uploaded[path] = (_sha256(data), len(data))
        if after_upload is not None:
            after_upload(fs, sorted(uploaded))
        fs.invalidate_cache()
        bad = []
        for path, (expected, size) in sorted(uploaded.items()):
            try:
                actual = _remote_sha256(fs, path, size)
            except FileNotFoundError:
                actual = "missing"
            if actual != expected:
                bad.append(Problem(f"{target.protocol}://{path}", "",
                                   f"uploaded object reads back as sha256 {actual}, the lock file says {expected}"))
        if bad:
            note = "nothing was made visible; the new version folders were removed, the served versions are unchanged"
            raise PublishError([*bad, Problem(target.url, "", note)])
    except BaseException:
        for model, (version, _files, _config) in plans.items():
            _remove_version(fs, target, model, version)
        raise


def _fallbacks(fs: Any, target: StorageURL, objects: Mapping[str, int], remote_artifacts: Mapping[str, Any],
               model: str, version: int, listed: set[int], keep_versions: int,
               say: Say) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The earlier versions retention keeps beside ``version`` and those found damaged.

    Newest first, up to ``keep_versions - 1`` listed versions whose objects read back as the remote lock file says; a
    version the config serves but the lock does not describe (its publisher died before writing the lock) is kept
    unchecked, as there is nothing to check it against.
    """
    kept: list[int] = []
    bad: list[int] = []
    for old in sorted(_versions_present(objects, model) - {version}, reverse=True):
        if len(kept) >= keep_versions - 1:
            break
        if old not in listed:
            continue
        expected = _locked_objects(remote_artifacts, model, old)
        problems = _object_problems(fs, target, objects, model, old, expected) if expected else []
        if problems:
            bad.append(old)
            say(model, f"version {old} does not match the lock file ({problems[0].file}: {problems[0].message}): "
                       "removed, never kept as a fallback")
        else:
            kept.append(old)
    return tuple(sorted(kept)), tuple(sorted(bad))


def _remove_version(fs: Any, target: StorageURL, model: str, version: int) -> None:
    """Remove version ``version`` of ``model``: its folder and its warmup data.

    Best effort: a version no lock file lists is removed by the next publish anyway.
    """
    for area in _VERSIONED_AREAS:
        with contextlib.suppress(Exception):
            fs.rm(target.join(model, _versioned_path(area, version)), recursive=True)


def _unchanged(
    files: Mapping[FileKey, bytes],
    config_text: str,
    local_version: int,
    version: int,
    remote_artifacts: Mapping[str, Any],
    model: str,
) -> bool:
    """Whether the served version already holds exactly these files and this config (per the remote lock)."""
    expected = {key: sha256 for key, (sha256, _size) in _expected_objects(model, version, files).items()}
    remote = {rel: meta.get("sha256") for rel, meta in remote_artifacts.items() if _version_of(rel, model) == version}
    if remote != expected:
        return False
    config = published_config(config_text, version, local_version).encode("utf-8")
    return bool(remote_artifacts.get(f"{model}/config.pbtxt", {}).get("sha256") == _sha256(config))


__all__ = [
    "DEFAULT_KEEP_VERSIONS",
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
