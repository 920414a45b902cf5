"""Publishing a model repository to object storage with safe rolling versions (``gen-repo publish DIR URL``).

Object stores (S3, GCS) have no atomic rename, and Triton reads a repository from them while it runs. So a publish
never edits a version Triton may be loading; per model whose content changed it

1. uploads a **new numeric version folder** completely (one past every version folder present in the bucket, also
   half-uploaded ones of a publisher that died),
2. reads every uploaded object back and checks its sha256 against the lock file (the local lock's entry; for
   ``gen_repo/contract.json``, whose ``version`` is rewritten to the published one, the new bytes' hash),
3. only then writes the model's ``config.pbtxt``, whose ``version_policy { specific { versions: [N] } }`` is what
   makes version N visible to Triton (uploaded but unlisted version folders are invisible to it), and
4. removes versions beyond the retention policy (``keep_versions`` newest stay, so a server still on the previous
   version keeps its files), then writes the repository's ``gen-repo.lock.json`` describing exactly what is there.

When a check fails nothing becomes visible: the new version folders are removed and the configs and lock stay as
they were. Concurrent publishers of one repository are detected with a lock object at the repository root
(``.gen-repo-publish.lock``; Triton ignores files at the root): on S3 it is created with a conditional write
(``If-None-Match: *``), so exactly one publisher wins; elsewhere it is written and read back after a pause. A lock
older than its expiry (a publisher that died) is taken over. The other publisher is refused with who holds the lock.

URLs: ``s3://bucket/prefix`` (AWS, credentials from the usual environment), Triton's forms for other S3 endpoints
``s3://host:port/bucket/prefix`` (plain HTTP) and ``s3://http://host:port/...`` / ``s3://https://host:port/...``,
and ``gs://bucket/prefix``. Storage is reached through fsspec (s3fs, gcsfs), imported only here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.bounded import read_text
from generator.config import WARMUP_FOLDER
from generator.contract import render_contract
from generator.errors import EXIT_FAILED, GenRepoError, Problem
from generator.repository import LOCK_FILE_NAME, LOCK_FORMAT, read_lock, render_lock, verify_repository

#: The publishers' lock object at the repository root.
LOCK_OBJECT = ".gen-repo-publish.lock"
LOCK_OBJECT_FORMAT = "gen-repo-publish-lock/1"
#: Versions kept per model after a publish: the new one and the one before (a server may still be on it).
DEFAULT_KEEP_VERSIONS = 2
#: A publisher's lock older than this is considered abandoned (its publisher died) and may be taken over.
DEFAULT_LOCK_TTL_S = 3600.0
#: Without conditional writes, how long a publisher waits before reading its lock back.
SETTLE_S = 1.0
INSTALL_HINT = {"s3": "pip install 'gen-repo[s3]' (s3fs)", "gs": "pip install 'gen-repo[gcs]' (gcsfs)"}

_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d{1,5}$")
_VERSION = re.compile(r"^[1-9][0-9]*$")
#: Folders of a model with one subfolder per version: the version folder itself ("") and its warmup data
#: (``warmup/<version>/``, named by the config's ``input_data_file``).
_VERSIONED_AREAS = ("", WARMUP_FOLDER)
#: A version's file: (area, path inside the area's version folder).
FileKey = tuple[str, str]


class PublishError(GenRepoError):
    """A publish could not complete (a check failed, storage refused): nothing new was made visible."""

    exit_code = EXIT_FAILED


class PublishLocked(PublishError):  # noqa: N818 (a state, not an error type name)
    """Another publisher holds the repository's lock object."""


# --------------------------------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StorageURL:
    """A parsed repository URL: fsspec protocol, ``bucket/prefix`` path and (non-AWS S3) endpoint."""

    url: str
    protocol: str
    path: str
    endpoint_url: str | None = None

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for the fsspec filesystem (listing caches off: other writers change the bucket)."""
        options: dict[str, Any] = {"skip_instance_cache": True}
        if self.protocol == "s3":
            options["use_listings_cache"] = False
            if self.endpoint_url:
                options["endpoint_url"] = self.endpoint_url
        return options

    def join(self, *parts: str) -> str:
        """Return the fsspec path of ``parts`` under the repository root."""
        return "/".join([self.path, *[p.strip("/") for p in parts if p]])

    @property
    def triton_url(self) -> str:
        """The URL to give ``tritonserver --model-repository``."""
        if self.protocol == "s3" and self.endpoint_url:
            return f"s3://{self.endpoint_url}/{self.path}"
        return f"{self.protocol}://{self.path}"


def is_storage_url(value: str) -> bool:
    """Whether ``value`` is an object-storage URL (``s3://`` or ``gs://``) rather than a folder."""
    return value.startswith(("s3://", "gs://"))


def parse_url(url: str) -> StorageURL:
    """Parse ``s3://[http(s)://host:port/ | host:port/]bucket[/prefix]`` or ``gs://bucket[/prefix]``."""
    def bad(message: str) -> GenRepoError:
        return GenRepoError([Problem(url, "", message)])

    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("s3", "gs"):
        raise bad("not an object-storage URL: expected s3://bucket/prefix, s3://host:port/bucket/prefix or "
                  "gs://bucket/prefix")
    endpoint = None
    if scheme == "s3":
        inner_scheme, inner_sep, inner_rest = rest.partition("://")
        if inner_sep:
            if inner_scheme not in ("http", "https"):
                raise bad(f"unknown endpoint scheme {inner_scheme!r}: use http:// or https://")
            host, _, rest = inner_rest.partition("/")
            endpoint = f"{inner_scheme}://{host}"
        else:
            first, _, remainder = rest.partition("/")
            if _HOST_PORT.match(first):
                # Triton's form for a non-AWS endpoint; plain HTTP like Triton's own default for it.
                endpoint, rest = f"http://{first}", remainder
    path = rest.strip("/")
    if not path or path.split("/")[0] in ("", ".", ".."):
        raise bad("the URL names no bucket")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise bad("the path has an empty, '.' or '..' component")
    return StorageURL(url, scheme, path, endpoint)


def open_filesystem(target: StorageURL) -> Any:
    """Return the fsspec filesystem for ``target`` (s3fs or gcsfs; a clear error when not installed)."""
    try:
        if target.protocol == "s3":
            import s3fs

            return s3fs.S3FileSystem(**target.storage_options())
        import gcsfs

        return gcsfs.GCSFileSystem(**target.storage_options())
    except ImportError as error:
        raise GenRepoError([Problem(target.url, "", f"{INSTALL_HINT[target.protocol]} is needed: {error}")]) from error


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
        with contextlib.suppress(OSError):
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
    """What a publish did to one model: ``published`` (new version), ``unchanged`` or ``kept`` (not local)."""

    name: str
    status: str
    version: int | None
    previous: int | None = None
    uploaded: int = 0
    removed_versions: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"name": self.name, "status": self.status, "version": self.version, "previous": self.previous,
                "uploaded": self.uploaded, "removed_versions": list(self.removed_versions)}


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


def _remote_keys(fs: Any, target: StorageURL) -> set[str]:
    """Every object under the repository root, relative to it."""
    fs.invalidate_cache()
    try:
        found = fs.find(target.path)
    except FileNotFoundError:
        return set()
    prefix = target.path + "/"
    return {str(p)[len(prefix):] for p in found if str(p).startswith(prefix)}


def _remote_lock(fs: Any, target: StorageURL) -> dict[str, Any] | None:
    try:
        data = fs.cat_file(target.join(LOCK_FILE_NAME))
    except FileNotFoundError:
        return None
    try:
        lock = json.loads(data)
    except ValueError:
        return None
    return lock if isinstance(lock, dict) and lock.get("format") == LOCK_FORMAT else None


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
) -> PublishReport:
    """Publish the repository at ``local_dir`` to ``url`` (see the module docstring); return what was done.

    ``force`` publishes a new version even of a model whose files and config are unchanged. Raises GenRepoError
    for a local repository that does not match its lock file, :class:`PublishLocked` when another publisher holds
    the lock and :class:`PublishError` when an uploaded object does not read back as the lock file says.
    """
    if keep_versions < 1:
        raise GenRepoError([Problem(url, "", f"keep_versions must be at least 1, got {keep_versions}")])
    say = progress or (lambda model, message: None)
    local = Path(local_dir)
    problems = verify_repository(local)
    if problems:
        raise GenRepoError(problems)  # never publish a repository that differs from its own lock file
    lock = read_lock(local)
    target = parse_url(url)
    fs = filesystem if filesystem is not None else open_filesystem(target)
    owner = owner or f"{os.environ.get('USER', 'gen-repo')}@{socket.gethostname()}"
    with PublishLock(fs, target, owner, lock_ttl_s):
        return _publish_locked(local, lock, target, fs, keep_versions, force, after_upload, say)


def _publish_locked(
    local: Path,
    lock: Mapping[str, Any],
    target: StorageURL,
    fs: Any,
    keep_versions: int,
    force: bool,
    after_upload: UploadHook | None,
    say: Say,
) -> PublishReport:
    keys = _remote_keys(fs, target)
    remote = _remote_lock(fs, target) or {"models": {}, "artifacts": {}}
    remote_models: dict[str, Any] = dict(remote.get("models") or {})
    remote_artifacts: dict[str, Any] = dict(remote.get("artifacts") or {})

    plans: dict[str, tuple[int, dict[FileKey, bytes], bytes]] = {}  # model -> (new version, files, config)
    results: dict[str, ModelPublish] = {}
    for model, entry in sorted(lock["models"].items()):
        local_version = int(entry["version"])
        files = _version_files(local, lock, model, local_version)
        config_text = read_text(local / model / "config.pbtxt", "config_bytes")
        current = remote_models.get(model, {}).get("version")
        if not force and isinstance(current, int) and _unchanged(files, config_text, local_version, current,
                                                                 remote_artifacts, model):
            results[model] = ModelPublish(model, "unchanged", current, current)
            say(model, f"unchanged: version {current} stays")
            continue
        version = max(_versions_present(keys, model) | {current if isinstance(current, int) else 0, 0}) + 1
        published = _with_version(files, version)
        config = published_config(config_text, version, local_version).encode("utf-8")
        plans[model] = (version, published, config)

    # What each config names now (read before step 3 rewrites it): never mistaken for a half-uploaded folder.
    served = {model: _served_versions(fs, target, model) for model in plans}

    # 1. Upload every new version folder completely; nothing references it yet.
    uploaded: dict[str, str] = {}  # object path -> expected sha256
    try:
        for model, (version, files, _config) in plans.items():
            say(model, f"uploading version {version} ({len(files)} objects)")
            for (area, rel), data in sorted(files.items()):
                path = target.join(model, _versioned_path(area, version, rel))
                fs.pipe_file(path, data)
                uploaded[path] = _sha256(data)
        if after_upload is not None:
            after_upload(fs, sorted(uploaded))
        # 2. Read every object back and check it against the lock file.
        fs.invalidate_cache()
        bad = []
        for path, expected in sorted(uploaded.items()):
            try:
                actual = _sha256(fs.cat_file(path))
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
            _remove_version(fs, target, model, version, OSError)
        raise

    # 3. Make each new version visible: its config names it.
    for model, (version, _files, config) in plans.items():
        fs.pipe_file(target.join(model, "config.pbtxt"), config)
        say(model, f"version {version} is visible")

    # 4. Retention, then the lock file describing exactly what is there.
    new_artifacts = {rel: meta for rel, meta in remote_artifacts.items() if rel.split("/")[0] not in plans}
    for model, (version, files, config) in plans.items():
        present = (_versions_present(keys, model) | {version})
        kept = sorted(present)[-keep_versions:]
        # Half-uploaded folders of a publisher that died are never in the remote lock: they go too.
        listed = _versions_present(remote_artifacts, model) | served[model] | {version}
        removed = tuple(v for v in sorted(present) if v not in kept or v not in listed)
        for old in removed:
            _remove_version(fs, target, model, old, FileNotFoundError)
        for rel, meta in remote_artifacts.items():
            if _version_of(rel, model) in kept:
                new_artifacts[rel] = meta
        for (area, rel), data in files.items():
            new_artifacts[f"{model}/{_versioned_path(area, version, rel)}"] = {"sha256": _sha256(data),
                                                                              "size": len(data)}
        new_artifacts[f"{model}/config.pbtxt"] = {"sha256": _sha256(config), "size": len(config)}
        previous = remote_models.get(model, {}).get("version")
        results[model] = ModelPublish(model, "published", version, previous if isinstance(previous, int) else None,
                                      len(files), removed)
        if removed:
            say(model, f"removed versions {', '.join(map(str, removed))} (retention: keep {keep_versions})")
    models = dict(remote_models)
    for model in plans:
        models[model] = {**dict(lock["models"][model]), "version": plans[model][0]}
    for model in set(remote_models) - set(lock["models"]):
        results[model] = ModelPublish(model, "kept", remote_models[model].get("version"))
    new_lock = {"format": LOCK_FORMAT, "tool_versions": lock.get("tool_versions", {}), "models": models,
                "artifacts": dict(sorted(new_artifacts.items()))}
    if plans or remote.get("artifacts") is None:
        fs.pipe_file(target.join(LOCK_FILE_NAME), render_lock(new_lock).encode("utf-8"))
    return PublishReport(target.url, target.triton_url, tuple(results[m] for m in sorted(results)))


def _remove_version(fs: Any, target: StorageURL, model: str, version: int, ignored: type[OSError]) -> None:
    """Remove version ``version`` of ``model``: its folder and its warmup data."""
    for area in _VERSIONED_AREAS:
        with contextlib.suppress(ignored):
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
    published = _with_version(dict(files), version)
    expected = {f"{model}/{_versioned_path(area, version, rel)}": _sha256(data) for (area, rel), data in
                published.items()}
    remote = {rel: meta.get("sha256") for rel, meta in remote_artifacts.items() if _version_of(rel, model) == version}
    if remote != expected:
        return False
    config = published_config(config_text, version, local_version).encode("utf-8")
    return bool(remote_artifacts.get(f"{model}/config.pbtxt", {}).get("sha256") == _sha256(config))


# --------------------------------------------------------------------------------------------------------------------
# Reading a published repository back
# --------------------------------------------------------------------------------------------------------------------
def download_repository(url: str, destination: Path | str, filesystem: Any = None) -> Path:
    """Copy the repository at ``url`` into ``destination`` (a new folder); the publishers' lock is left out."""
    target = parse_url(url)
    fs = filesystem if filesystem is not None else open_filesystem(target)
    dest = Path(destination)
    dest.mkdir(parents=True, exist_ok=False)
    keys = sorted(k for k in _remote_keys(fs, target) if k != LOCK_OBJECT)
    if not keys:
        raise GenRepoError([Problem(url, "", "no objects under this URL")])
    for key in keys:
        parts = key.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise GenRepoError([Problem(f"{url}/{key}", "", "object name is not a plain relative path")])
        out = dest.joinpath(*parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(fs.cat_file(target.join(key)))
    return dest


def verify_url(url: str, filesystem: Any = None) -> list[Problem]:
    """Download the repository at ``url`` to a temporary folder and check it against its lock file."""
    with tempfile.TemporaryDirectory(prefix="gen-repo-verify-") as tmp:
        local = download_repository(url, Path(tmp) / "repo", filesystem)
        problems = verify_repository(local)
        prefix = str(local)
        return [Problem(p.file.replace(prefix, url.rstrip("/"), 1), p.pointer, p.message) for p in problems]


__all__ = [
    "DEFAULT_KEEP_VERSIONS",
    "DEFAULT_LOCK_TTL_S",
    "LOCK_OBJECT",
    "ModelPublish",
    "PublishError",
    "PublishLock",
    "PublishLocked",
    "PublishReport",
    "StorageURL",
    "download_repository",
    "is_storage_url",
    "open_filesystem",
    "parse_url",
    "publish",
    "published_config",
    "verify_url",
]
