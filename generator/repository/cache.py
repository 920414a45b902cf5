"""Content-addressed build cache: an unchanged model is not exported or built again.

Entries appear by one rename, are re-hashed on every read and signed with an HMAC, so a damaged or altered entry is a
miss, never a wrong artifact (docs/security.md, "The build cache").
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import math
import os
import re
import shutil
import stat as stat_module
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from generator.atomic_write import fsync_dir, write_atomically
from generator.errors import GenRepoError, Problem
from generator.json_reader import parse_json
from generator.repository.digest import hash_bytes, hash_chunks, hash_file, read_chunks

CACHE_FORMAT = "gen-repo-cache/2"  # 2: signed manifests (entries of format 1 are misses)
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
_MAX_MANIFEST_BYTES = 64 << 20  # an entry's manifest.json: one line per artifact
#: The cache secret itself (a CI secret shared by the jobs trusted to write the cache); at least 16 bytes.
SECRET_ENV = "GEN_REPO_CACHE_SECRET"
MIN_SECRET_BYTES = 16


def copy_hashed(stream: BinaryIO, target: Path) -> tuple[str, int]:
    """Copy ``stream`` to the new file ``target`` (folders made); the sha256 and size of the very bytes copied."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:
        return hash_chunks(read_chunks(stream), out)


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


def secret_file() -> Path:
    """The per-user cache secret: ``$XDG_CONFIG_HOME/gen-repo/cache-secret``, else ``~/.config/gen-repo/...``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gen-repo" / "cache-secret"


def cache_secret(cache_root: Path) -> bytes:
    """The secret that signs cache entries: ``$GEN_REPO_CACHE_SECRET``, else the per-user :func:`secret_file`.

    The file is created on first use (32 random bytes, hex, mode 0600, by an atomic link so concurrent builds agree)
    and refused when it is not a regular file owned by this user and closed to others, or when it lies inside the
    cache folder (a secret stored with the cache protects nothing). GenRepoError (exit 2) names the file and why.
    """
    value = os.environ.get(SECRET_ENV)
    if value is not None:
        secret = value.encode("utf-8")
        if len(secret) < MIN_SECRET_BYTES:
            raise GenRepoError([Problem(SECRET_ENV, "", f"the cache secret must be at least {MIN_SECRET_BYTES} bytes "
                                        f"(it has {len(secret)}); e.g. `openssl rand -hex 32`")])
        return secret
    path = secret_file()
    root = os.path.realpath(cache_root)
    if os.path.realpath(path).startswith(root.rstrip(os.sep) + os.sep):
        raise GenRepoError([Problem(str(path), "", f"the cache secret lies inside the cache folder {root}, where "
                                    "whoever writes the cache could read it; set XDG_CONFIG_HOME or "
                                    f"{SECRET_ENV} elsewhere")])
    try:
        try:
            return _read_secret(path)
        except FileNotFoundError:
            _create_secret(path)
        return _read_secret(path)
    except OSError as error:
        raise GenRepoError([Problem(str(path), "", f"cannot read or create the cache secret file: "
                                    f"{error.strerror or error} (a symlink is refused)")]) from error


def _create_secret(path: Path) -> None:
    """Write a new random secret at ``path`` unless another process does first (an atomic link, never a replace)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):  # another process made it first: then its secret is the one
        write_atomically(path, os.urandom(32).hex() + "\n", mode=0o600, durable=True, overwrite=False)


def _read_secret(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # FileNotFoundError passes through; a symlink is ELOOP
    try:
        st = os.fstat(fd)
        why = None
        if not stat_module.S_ISREG(st.st_mode):
            why = "is not a regular file"
        elif st.st_uid != os.geteuid():
            why = f"is owned by uid {st.st_uid}, not by this user ({os.geteuid()})"
        elif st.st_mode & 0o077:
            why = f"is open to others (mode {st.st_mode & 0o777:o}); chmod 600 it"
        secret = os.read(fd, 4096).strip()
        if why is None and len(secret) < MIN_SECRET_BYTES:
            why = f"holds fewer than {MIN_SECRET_BYTES} bytes"
    finally:
        os.close(fd)
    if why is not None:
        raise GenRepoError([Problem(str(path), "", f"the cache secret file {why}")])
    return secret


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

    def __init__(self, root: Path, *, stale_after: float = STALE_AGE_SECONDS, secret: bytes | None = None) -> None:
        """``secret`` signs entries (default: :func:`cache_secret`, read when first needed)."""
        self.root = Path(root)
        self.stale_after = stale_after
        self._secret = secret

    def _mac(self, key: str, files: Any) -> str:
        """HMAC-SHA256 of an entry's manifest content (format, key, files) under the cache secret."""
        if self._secret is None:
            self._secret = cache_secret(self.root)
        body = canonical_json({"format": CACHE_FORMAT, "key": key, "files": files}).encode("ascii")
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()

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

    def copy_entry(self, key: str, destination: Path) -> bool:
        """Copy ``key``'s artifacts into the folder ``destination``, hashing the very bytes copied.

        Each file in the entry's signed manifest is copied and its copy's sha256 and size compared, so a file changed
        after :meth:`get` checked it is never staged. False when the entry is missing, unsigned or a copy differs
        (``destination`` may hold part of it: the caller discards it).
        """
        entry = self.entry_path(key)
        listed = self._signed_files(entry, key)
        if listed is None:
            return False
        destination = Path(destination)
        for name in sorted(listed):
            meta = listed[name]
            source = entry / FILES_DIR / name
            try:  # reading the cache: a file gone or not regular is a changed entry
                if not isinstance(meta, dict) or not stat_module.S_ISREG(os.lstat(source).st_mode):
                    return False
                stream = open(source, "rb")  # noqa: SIM115 (closed by the with below)
            except OSError:
                return False
            with stream:  # writing errors (a full disk) are the caller's to report
                digest, size = copy_hashed(stream, destination / name)
            if size != meta.get("size") or digest != meta.get("sha256"):
                return False
        return True

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
            table = self._write_files(tmp / FILES_DIR, files)
            manifest = {"format": CACHE_FORMAT, "key": key, "files": table, "mac": self._mac(key, table)}
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
        :func:`generator.atomic_write.write_atomically` (builds may run in parallel).
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
            with open(target, "xb") as out:
                if isinstance(source, (bytes, bytearray, memoryview)):
                    digest, size = hash_chunks([bytes(source)], out)
                else:
                    with open(source, "rb") as stream:
                        digest, size = hash_chunks(read_chunks(stream), out)
                out.flush()
                os.fsync(out.fileno())
            table[name] = {"sha256": digest, "size": size}
        for dirpath, _dirs, _files in os.walk(folder, topdown=False):
            fsync_dir(dirpath)
        return table

    def _signed_files(self, entry: Path, key: str) -> dict[str, Any] | None:
        """The ``files`` table of ``entry``'s manifest when its MAC verifies under the secret, else None."""
        try:
            with open(entry / MANIFEST_NAME, "rb") as stream:  # a manifest is small: read a bounded amount
                data = stream.read(_MAX_MANIFEST_BYTES + 1)
            if len(data) > _MAX_MANIFEST_BYTES:
                return None
            manifest = parse_json(data, str(entry / MANIFEST_NAME))
        except (OSError, ValueError, GenRepoError):
            return None
        if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
            return None
        listed, mac = manifest.get("files"), manifest.get("mac")
        if not isinstance(listed, dict) or not isinstance(mac, str):
            return None
        try:
            expected = self._mac(key, listed)
        except TypeError:  # not JSON data of the kind a manifest holds
            return None
        if not hmac.compare_digest(mac, expected):
            return None  # written without the secret, or altered
        if any(_safe_relative(name) for name in listed):
            return None
        return listed

    def _entry_ok(self, entry: Path, key: str) -> bool:
        """Whether ``entry`` is complete, its manifest signed, and every file matches the manifest exactly."""
        listed = self._signed_files(entry, key)
        if listed is None:
            return False
        try:
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
    "BuildCache",
    "cache_key",
    "cache_secret",
    "canonical_json",
    "copy_hashed",
    "default_cache_root",
    "process_alive",
    "secret_file",
]
