"""Content-addressed build cache: an unchanged model is not exported or built again.

Layout under the cache root (its own folder, never inside a model repository)::

    <root>/<key[:2]>/<key>/manifest.json     # {"format", "key", "files": {relative path: {"sha256", "size"}}}
    <root>/<key[:2]>/<key>/files/...         # the artifacts, exactly as put
    <root>/<key[:2]>/.tmp-<pid>-<random>     # an entry being written (renamed into place when complete)
    <root>/<key[:2]>/.trash-<pid>-<random>   # an entry being deleted
    <root>/tensorrt/<version>-<device>.cache # TensorRT timing caches (see BuildCache.timing_cache_path)

An entry becomes visible only by one ``rename`` of a complete, fsynced folder, so a reader never sees half an entry;
``get`` still re-hashes every file against the manifest and treats any difference as a miss (and deletes the entry),
so a damaged cache can cost a rebuild but never a wrong artifact.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from generator.errors import GenRepoError, Problem

CACHE_FORMAT = "gen-repo-cache/1"
MANIFEST_NAME = "manifest.json"
FILES_DIR = "files"

#: The parts a build passes to :meth:`BuildCache.key` (any JSON data; names are free, these are the convention):
#:
#: - ``spec``: the GraphSpec document (dict) the model is built from,
#: - ``source``: the source model's identity, e.g. ``{"kind": "onnx", "sha256": hash_file(path)}``; never a path,
#: - ``samples``: the sample inputs' identity (file content or factory code), like ``source``,
#: - ``options``: every build option that changes an artifact (target, precision, workspace, optimization level,
#:   max_batch_size overrides, ...),
#: - ``tools``: versions of the tools that produce artifacts (gen-repo, torch, onnx, onnxruntime, tensorrt),
#: - ``target``: where the artifact runs: target kind plus, for TensorRT plans, the GPU name and compute capability.
#:
#: Paths are refused (a key must not depend on where a checkout lives), so are NaN, sets and non-string dict keys.
KEY_PARTS = ("spec", "source", "samples", "options", "tools", "target")

#: A leftover ``.tmp-``/``.trash-`` folder whose owner cannot be checked (another host) is removed after this long.
STALE_AGE_SECONDS = 24 * 3600

_KEY = re.compile(r"^[0-9a-f]{64}$")
#: Folders a process owns while it works: entry temp/trash folders in a shard, and the build's work and scratch
#: folders in the root (``.build-<pid>-...``, ``.scratch-<pid>-...``, named by tempfile with the pid in the prefix).
_LEFTOVER = re.compile(r"^\.(tmp|trash|build|scratch)-(\d+)-[0-9A-Za-z_]+$")
_CHUNK = 1 << 20


def hash_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def hash_file(path: Path | str, chunk_size: int = _CHUNK) -> str:
    """Hex sha256 of a file's content, read in chunks (plans can be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def _canonical(value: Any, where: str) -> Any:
    """``value`` as plain JSON data, refusing what would make a key ambiguous or path-dependent."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"cache key part {where} is {value!r}; only finite numbers are allowed")
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"cache key part {where} has a non-string key {k!r}")
            out[k] = _canonical(v, f"{where}/{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(v, f"{where}/{i}") for i, v in enumerate(value)]
    if isinstance(value, os.PathLike):
        raise TypeError(f"cache key part {where} is a path; pass its sha256 instead (keys must not depend on paths)")
    raise TypeError(f"cache key part {where} has type {type(value).__name__}, which is not JSON data")


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, ASCII only; identical data gives identical text."""
    return json.dumps(_canonical(value, ""), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def cache_key(**parts: Any) -> str:
    """sha256 over the canonical JSON of ``parts`` (see :data:`KEY_PARTS`) and the cache format."""
    if not parts:
        raise ValueError("a cache key needs at least one part")
    return hash_bytes(canonical_json({"format": CACHE_FORMAT, "parts": parts}).encode("ascii"))


def default_cache_root() -> Path:
    """``$GEN_REPO_CACHE``, else ``$XDG_CACHE_HOME/gen-repo``, else ``~/.cache/gen-repo``."""
    if os.environ.get("GEN_REPO_CACHE"):
        return Path(os.environ["GEN_REPO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gen-repo"


def fsync_dir(path: Path | str) -> None:
    """Flush a folder's entries (new names, renames) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as error:
        # Some file systems refuse fsync on a folder; that is not a failed write.
        if error.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new content, never a mix.

    Writes a temp file beside ``path`` (same file system), fsyncs it, renames it over ``path`` and fsyncs the folder.
    Used for TensorRT's timing cache, which several builds may save at the same time.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        with open(tmp, "xb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a zombie counts as gone). Errs on the side of alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    fields = stat.rsplit(")", 1)[-1].split()
    return not (fields and fields[0] in ("Z", "X"))


def _safe_relative(name: str) -> str | None:
    """Why ``name`` cannot be a relative artifact path inside an entry; None when it can."""
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if "\x00" in name or "\\" in name:
        return "contains NUL or a backslash"
    if name.startswith("/"):
        return "is absolute"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    return None


class BuildCache:
    """Content-addressed store of build artifacts: ``key(**parts)``, ``get(key)``, ``put(key, files)``."""

    def __init__(self, root: Path, *, stale_after: float = STALE_AGE_SECONDS) -> None:
        self.root = Path(root)
        self.stale_after = stale_after

    def key(self, **parts: Any) -> str:
        """Return the key for a build: sha256 over canonical JSON of ``parts`` (see :data:`KEY_PARTS`)."""
        return cache_key(**parts)

    def entry_path(self, key: str) -> Path:
        """Where the entry for ``key`` lives (``<root>/<key[:2]>/<key>``), whether or not it exists."""
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"not a cache key (64 lowercase hex digits): {key!r}")
        return self.root / key[:2] / key

    def files_path(self, key: str) -> Path:
        """The artifacts folder of ``key``'s entry, without re-hashing it.

        For an entry this build has just checked (:meth:`get`) or stored (:meth:`put`).
        """
        return self.entry_path(key) / FILES_DIR

    def failed_path(self, model: str) -> Path:
        """Where a failed build of ``model`` keeps what it made for inspection: ``<root>/failed/<model>/``.

        The next failure of that model replaces it.
        """
        return self.root / "failed" / model

    def get(self, key: str) -> Path | None:
        """Return the folder of artifacts stored under ``key``, or None on a miss.

        Every file is re-hashed against the entry's manifest; an entry that does not match exactly (a file changed,
        missing or added, a damaged manifest) is a miss and is deleted, so the next build stores a good one.
        """
        entry = self.entry_path(key)
        if not entry.is_dir():
            return None
        if self._entry_ok(entry, key):
            return entry / FILES_DIR
        self._discard(entry)
        return None

    def put(self, key: str, files: Mapping[str, Path | bytes]) -> Path:
        """Store ``files`` (relative posix path -> source file or content) under ``key``; return the artifacts folder.

        The entry is written into a temp folder beside its final place and renamed in when complete. When another
        process stores the same key first, its entry is kept (the first complete entry wins) and this one dropped.
        """
        entry = self.entry_path(key)
        problems = [Problem(name, "", f"cache artifact name {why}") for name in files if (why := _safe_relative(name))]
        names = set(files)
        problems += [
            Problem(name, "", "cache artifact name is both a file and a folder")
            for name in files
            if any(str(parent) in names for parent in PurePosixPath(name).parents if str(parent) != ".")
        ]
        if problems:
            raise GenRepoError(problems)
        shard = entry.parent
        shard.mkdir(parents=True, exist_ok=True)
        self._clean_leftovers(shard)
        if entry.is_dir():
            if self._entry_ok(entry, key):
                return entry / FILES_DIR
            self._discard(entry)

        tmp = shard / f".tmp-{os.getpid()}-{os.urandom(6).hex()}"
        try:
            os.mkdir(tmp)
            manifest = {"format": CACHE_FORMAT, "key": key, "files": self._write_files(tmp / FILES_DIR, files)}
            manifest_path = tmp / MANIFEST_NAME
            with open(manifest_path, "x", encoding="utf-8") as stream:
                stream.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            fsync_dir(tmp)
            for _attempt in range(3):
                try:
                    os.rename(tmp, entry)
                except OSError as error:
                    if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                    # Another process stored this key meanwhile: keep its entry when it is good.
                    if self._entry_ok(entry, key):
                        self._discard(tmp)
                        return entry / FILES_DIR
                    self._discard(entry)
                    continue
                fsync_dir(shard)
                return entry / FILES_DIR
            raise GenRepoError([Problem(str(entry), "", "could not store the cache entry: it keeps being replaced")])
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def timing_cache_path(self, tensorrt_version: str = "", device: str = "") -> Path:
        """Where TensorRT's timing cache for this TensorRT version and GPU lives (its folder is created).

        TensorRT rejects or ignores a timing cache from another version or GPU, so each pair gets its own file.
        Load it with ``config.create_timing_cache(path.read_bytes())`` when it exists, and save it back with
        :func:`atomic_write_bytes` (builds may run in parallel).
        """
        slug = "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", part) for part in (tensorrt_version, device) if part)
        path = self.root / "tensorrt" / f"{slug or 'timing'}.cache"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    # -- internals -----------------------------------------------------------------------------------------------

    @staticmethod
    def _write_files(folder: Path, files: Mapping[str, Path | bytes]) -> dict[str, dict[str, Any]]:
        """Write every artifact under ``folder``, fsynced; return the manifest's ``files`` table."""
        table: dict[str, dict[str, Any]] = {}
        os.mkdir(folder)
        for name in sorted(files):
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            source = files[name]
            digest = hashlib.sha256()
            size = 0
            with open(target, "xb") as out:
                if isinstance(source, (bytes, bytearray, memoryview)):
                    data = bytes(source)
                    out.write(data)
                    digest.update(data)
                    size = len(data)
                else:
                    with open(source, "rb") as stream:
                        while chunk := stream.read(_CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            table[name] = {"sha256": digest.hexdigest(), "size": size}
        for dirpath, _dirs, _files in os.walk(folder, topdown=False):
            fsync_dir(dirpath)
        return table

    @staticmethod
    def _entry_ok(entry: Path, key: str) -> bool:
        """Whether ``entry`` is complete and every file matches its manifest exactly."""
        try:
            manifest = json.loads((entry / MANIFEST_NAME).read_text(encoding="utf-8"))
            if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
                return False
            listed = manifest.get("files")
            if not isinstance(listed, dict):
                return False
            folder = entry / FILES_DIR
            found: set[str] = set()
            for dirpath, dirnames, filenames in os.walk(folder):
                if any(os.path.islink(os.path.join(dirpath, d)) for d in dirnames):
                    return False
                for filename in filenames:
                    found.add(Path(dirpath, filename).relative_to(folder).as_posix())
            if found != set(listed) or not folder.is_dir():
                return False
            for name, meta in listed.items():
                path = folder / name
                st = os.lstat(path)
                if not isinstance(meta, dict) or not os.path.isfile(path) or os.path.islink(path):
                    return False
                if st.st_size != meta.get("size") or hash_file(path) != meta.get("sha256"):
                    return False
        except (OSError, ValueError):
            return False
        return True

    @staticmethod
    def _discard(path: Path) -> None:
        """Remove a folder so that nobody sees it half-deleted: rename it to a trash name first."""
        trash = path.parent / f".trash-{os.getpid()}-{os.urandom(6).hex()}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return  # someone else removed it first
        shutil.rmtree(trash, ignore_errors=True)

    def clean_leftovers(self) -> None:
        """Remove the work and scratch folders of builds that were killed (their process is gone)."""
        self._clean_leftovers(self.root)

    def _clean_leftovers(self, shard: Path) -> None:
        """Remove ``.tmp-``/``.trash-`` (and root ``.build-``/``.scratch-``) folders of processes that died."""
        try:
            names = os.listdir(shard)
        except OSError:
            return
        now = time.time()
        for name in names:
            match = _LEFTOVER.match(name)
            if not match:
                continue
            path = shard / name
            try:
                age = now - os.lstat(path).st_mtime
            except OSError:
                continue
            if not process_alive(int(match.group(2))) or age > self.stale_after:
                shutil.rmtree(path, ignore_errors=True)


__all__ = [
    "CACHE_FORMAT",
    "KEY_PARTS",
    "BuildCache",
    "atomic_write_bytes",
    "cache_key",
    "canonical_json",
    "default_cache_root",
    "fsync_dir",
    "hash_bytes",
    "hash_file",
    "process_alive",
]
