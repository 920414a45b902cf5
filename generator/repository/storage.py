"""Object storage (S3, GCS) and shared folders for gen-repo and for the tritonserver it launches.

Every storage client failure leaves as a :class:`StorageError` naming the URL (exit 2 for what the user must fix, 3
for an unreachable endpoint, 1 otherwise). URLs and emulators: docs/release-pipelines.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import logging
import os
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.bounded import limit, size_problem
from generator.errors import EXIT_FAILED, EXIT_UNREACHABLE, GenRepoError, Problem, one_line
from generator.repository.lock import LOCK_FILE_NAME, parse_lock
from generator.repository.verify import Listing, check_listing

__all__ = [
    "FILE_PROTOCOL",
    "GCS_EMULATOR_ENV",
    "PUBLISH_LOCK_OBJECT",
    "READ_CHUNK",
    "RESERVATION_PREFIX",
    "STAGING_PREFIX",
    "TRITON_GCS_EMULATOR_ENV",
    "StorageError",
    "StorageFailed",
    "StorageURL",
    "StorageUnreachable",
    "BucketSource",
    "Verification",
    "is_storage_url",
    "list_objects",
    "local_location",
    "locked_listing",
    "object_chunks",
    "object_sha256",
    "open_filesystem",
    "parse_destination",
    "parse_url",
    "read_object",
    "relocated",
    "repository_objects",
    "server_environment",
    "server_storage_findings",
    "storage_errors",
    "verify_published",
    "verify_url",
]

#: gen-repo's (gcsfs's, google-cloud-storage's) GCS emulator setting, and tritonserver's (google-cloud-cpp's).
GCS_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
TRITON_GCS_EMULATOR_ENV = "CLOUD_STORAGE_EMULATOR_ENDPOINT"
#: The publishers' lock object at the repository root (not part of the repository; never read back).
PUBLISH_LOCK_OBJECT = ".gen-repo-publish.lock"
#: A publisher's reservation of the version numbers it uploads (``<prefix><token>`` at the repository root; Triton
#: ignores files there): not part of the repository either (generator/repository/publish_lock.py).
RESERVATION_PREFIX = ".gen-repo-publish.reserved."
#: A publish to a folder writes each new version under ``<model>/<prefix><token>/`` first and renames it into place
#: once read back (Triton skips a model's sub-folder whose name is no number): not part of the repository either.
STAGING_PREFIX = ".gen-repo-publish.staging."
#: The protocol of a folder destination (``file:///path`` or a path).
FILE_PROTOCOL = "file"
#: Objects are hashed in ranges of this many bytes: an object of any size in bounded memory.
READ_CHUNK = 64 << 20
INSTALL_HINT = {"s3": "pip install 'gen-repo[s3]' (s3fs)", "gs": "pip install 'gen-repo[gcs]' (gcsfs)"}

_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d{1,5}$")


# --------------------------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------------------------
class StorageError(GenRepoError):
    """The store refused what gen-repo asked, for a reason the user must fix (exit 2).

    No such bucket, no access, a bucket layout that is not a repository, a bad URL.
    """


class StorageUnreachable(StorageError):  # noqa: N818 (a state, like TritonNotReady)
    """The storage endpoint could not be reached, or answered only with server errors after retries (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class StorageFailed(StorageError):  # noqa: N818
    """The store refused a request for another reason (exit 1)."""

    exit_code = EXIT_FAILED


# --------------------------------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------------------------------
def _gcs_emulator() -> str | None:
    """The GCS emulator gen-repo talks to (``STORAGE_EMULATOR_HOST``, as gcsfs reads it), or None."""
    value = os.environ.get(GCS_EMULATOR_ENV, "")
    if value in ("", "default"):
        return None
    return value if value.startswith(("http://", "https://")) else f"http://{value}"


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
        elif _gcs_emulator() is not None:
            options["token"] = "anon"  # an emulator needs no credentials: none are looked up
        return options

    def join(self, *parts: str) -> str:
        """Return the fsspec path of ``parts`` under the repository root."""
        return "/".join([self.path, *[p.strip("/") for p in parts if p]])

    def object_url(self, key: str) -> str:
        """The URL of the object ``key`` (relative to the repository root), as problems name it."""
        return f"{self.url.rstrip('/')}/{key}" if key else self.url

    @property
    def bucket(self) -> str:
        """The bucket's name (a folder destination's path)."""
        return self.path if self.protocol == FILE_PROTOCOL else self.path.split("/", 1)[0]

    @property
    def endpoint(self) -> str:
        """Where gen-repo reaches the bucket, for messages."""
        if self.protocol == "s3":
            return self.endpoint_url or "AWS S3"
        if self.protocol == FILE_PROTOCOL:
            return "the local file system"
        emulator = _gcs_emulator()
        return f"{emulator} ({GCS_EMULATOR_ENV})" if emulator else "Google Cloud Storage"

    @property
    def triton_url(self) -> str:
        """The URL to give ``tritonserver --model-repository``, in the form the user wrote it.

        Triton reads ``s3://host:port/...`` as plain HTTP, as :func:`parse_url` does, so that form is kept as is; a
        folder destination is its absolute path.
        """
        if self.protocol == FILE_PROTOCOL:
            return self.path
        if self.protocol == "s3" and self.endpoint_url:
            given_scheme = self.url.partition("://")[2].startswith(("http://", "https://"))
            endpoint = self.endpoint_url if given_scheme else self.endpoint_url.partition("://")[2]
            return f"s3://{endpoint}/{self.path}"
        return f"{self.protocol}://{self.path}"


def is_storage_url(value: str) -> bool:
    """Whether ``value`` is an object-storage URL (``s3://`` or ``gs://``) rather than a folder."""
    return value.startswith(("s3://", "gs://"))


def local_location(location: str) -> str:
    """``location`` with a ``file://`` URL turned into the folder it names (``file:///srv/repo`` -> ``/srv/repo``).

    Anything else is returned as it is. A ``file://`` URL naming another host is a StorageError (exit 2): gen-repo
    reads local folders only (mount the share).
    """
    scheme, sep, rest = location.partition("://")
    if not sep or scheme != FILE_PROTOCOL:
        return location
    host, slash, path = rest.partition("/")
    if host not in ("", "localhost") or not slash:
        raise StorageError([Problem(location, "", "a file:// URL names a folder of this machine: file:///path "
                                                  "(mount a share, then name its mount point)")])
    return "/" + path


def parse_destination(url: str) -> StorageURL:
    """A publish destination: ``s3://`` or ``gs://`` (:func:`parse_url`), else a folder (a path or ``file:///path``).

    A relative path is resolved against the current folder, and the folder itself (not what is inside it) through
    its symlinks, so that the lock file, the reservations and the renames all act on one real folder; the folder
    must exist (as a bucket must). StorageError (exit 2) naming ``url`` otherwise.
    """
    if is_storage_url(url):
        return parse_url(url)
    scheme, sep, _ = url.partition("://")
    if sep and scheme != FILE_PROTOCOL and "/" not in scheme:
        raise StorageError([Problem(url, "", f"unknown scheme {scheme!r}: publish to s3://, gs://, file:///path or a "
                                             "folder's path")])
    path = Path(local_location(url))
    if any(ord(c) < 32 or c in "\\\x7f" for c in str(path)):
        raise StorageError([Problem(url, "", "the path holds a backslash or a control character")])
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise StorageError([Problem(url, "", f"no such folder ({real}): create it first (as a bucket is created "
                                             "before a publish)")])
    return StorageURL(url, FILE_PROTOCOL, str(real))


def parse_url(url: str) -> StorageURL:
    """Parse ``s3://[http(s)://host:port/ | host:port/]bucket[/prefix]`` or ``gs://bucket[/prefix]``.

    A bad URL is a :class:`StorageError` (exit 2) naming it.
    """
    def bad(message: str) -> StorageError:
        return StorageError([Problem(url, "", message)])

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
            if not _HOST_PORT.match(host):
                raise bad(f"the endpoint {host!r} is not host:port")
            endpoint = f"{inner_scheme}://{host}"
        else:
            first, _, remainder = rest.partition("/")
            if _HOST_PORT.match(first):
                # Triton's form for a non-AWS endpoint; plain HTTP like Triton's own default for it.
                endpoint, rest = f"http://{first}", remainder
    path = rest.strip("/")
    if any(ord(c) < 32 or c in "\\\x7f" for c in path):
        raise bad("the path holds a backslash or a control character")
    if not path or path.split("/")[0] in ("", ".", ".."):
        raise bad("the URL names no bucket")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise bad("the path has an empty, '.' or '..' component")
    return StorageURL(url, scheme, path, endpoint)


def open_filesystem(target: StorageURL) -> Any:
    """Return the fsspec filesystem for ``target`` (s3fs or gcsfs; a clear error when not installed).

    With a GCS emulator configured, gcsfs's plain JSON-API client is used whatever ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT``
    says: its experimental bucket-type lookup needs Google credentials and speaks gRPC, which an emulator does not.
    """
    if target.protocol == FILE_PROTOCOL:
        from generator.repository.local_store import LocalStore

        return LocalStore(target.path)
    try:
        if target.protocol == "s3":
            import s3fs

            return s3fs.S3FileSystem(**target.storage_options())
        # gcsfs logs each exhausted retry with its traceback; the failure itself leaves as a located StorageError.
        logger = logging.getLogger("gcsfs")
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        if _gcs_emulator() is not None:
            from gcsfs.core import GCSFileSystem

            return GCSFileSystem(**target.storage_options())
        import gcsfs

        return gcsfs.GCSFileSystem(**target.storage_options())
    except ImportError as error:
        raise StorageError([Problem(target.url, "", f"{INSTALL_HINT[target.protocol]} is needed: {error}")]) from error


# --------------------------------------------------------------------------------------------------------------------
# Storage failures as located errors
# --------------------------------------------------------------------------------------------------------------------
def _types(module: str, *names: str) -> tuple[type, ...]:
    """Exception classes of an optional storage client library (none when it is not installed)."""
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return ()
    return tuple(t for name in names if isinstance(t := getattr(loaded, name, None), type))


def _unreachable_types() -> tuple[type, ...]:
    return (
        ConnectionError, TimeoutError, asyncio.TimeoutError, socket.gaierror,
        *_types("aiohttp", "ClientConnectionError", "ServerTimeoutError"),
        *_types("botocore.exceptions", "ConnectionError", "HTTPClientError"),
        *_types("requests.exceptions", "ConnectionError", "Timeout"),
    )


def _access_types() -> tuple[type, ...]:
    return (
        PermissionError,
        *_types("botocore.exceptions", "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"),
        *_types("google.auth.exceptions", "DefaultCredentialsError", "RefreshError"),
    )


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(error: BaseException) -> int | None:
    """The HTTP status a client error carries (gcsfs HttpError.code, botocore's response), if any."""
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(error, "response", None)
    if isinstance(response, Mapping):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status if isinstance(status, int) else None
    return None


def storage_problem(error: BaseException, target: StorageURL, doing: str) -> StorageError:
    """Translate what a storage client raised while ``doing`` something with ``target`` into a located error."""
    chain = list(_chain(error))
    detail = f"{one_line(error)} ({type(error).__name__})"
    where = f"{target.protocol}://{target.bucket} at {target.endpoint}"
    unreachable, access = _unreachable_types(), _access_types()
    if any(isinstance(e, unreachable) for e in chain) or any((_status(e) or 0) >= 500 for e in chain):
        message = f"storage endpoint unreachable while {doing} ({where}): {detail}"
        return StorageUnreachable([Problem(target.url, "", message)])
    forbidden = any(isinstance(e, access) or _status(e) in (401, 403) or str(e).startswith("Forbidden")
                    for e in chain)
    if forbidden:
        message = (f"access refused while {doing} ({where}): {detail}; check the credentials and the bucket's "
                   "permissions")
        return StorageError([Problem(target.url, "", message)])
    return StorageFailed([Problem(target.url, "", f"storage refused a request while {doing} ({where}): {detail}")])


#: Packages whose exceptions are storage failures (where the exception was raised decides, not its type: gcsfs raises
#: plain ValueError and OSError, and gen-repo's own bugs must still show as such).
_CLIENT_PACKAGES = frozenset({"s3fs", "gcsfs", "fsspec", "botocore", "aiobotocore", "aiohttp", "google", "requests",
                              "urllib3", "asyncio", "socket", "ssl"})


def _raised_by_storage_client(error: BaseException) -> bool:
    for link in _chain(error):
        tb = link.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        module = str(tb.tb_frame.f_globals.get("__name__", "")) if tb is not None else ""
        if module.split(".")[0] in _CLIENT_PACKAGES:
            return True
    return False


@contextlib.contextmanager
def storage_errors(target: StorageURL, doing: str) -> Iterator[None]:
    """Turn every exception a storage client raises inside into a :class:`StorageError` (GenRepoError passes)."""
    try:
        yield
    except GenRepoError:
        raise
    except Exception as error:
        if not _raised_by_storage_client(error):
            raise
        raise storage_problem(error, target, doing) from error


# --------------------------------------------------------------------------------------------------------------------
# Listing and reading a repository back
# --------------------------------------------------------------------------------------------------------------------
def list_objects(fs: Any, target: StorageURL) -> dict[str, int]:
    """Every object under the repository root: key relative to it -> size. StorageError when there is no bucket."""
    fs.invalidate_cache()
    try:
        found = fs.find(target.path, detail=True)
    except FileNotFoundError as error:
        message = f"no such bucket {target.bucket!r} at {target.endpoint}"
        raise StorageError([Problem(target.url, "", message)]) from error
    prefix = target.path + "/"
    return {str(path)[len(prefix):]: int(info.get("size") or 0) for path, info in found.items()
            if str(path).startswith(prefix)}


def repository_objects(objects: Mapping[str, int]) -> dict[str, int]:
    """``objects`` without the publishers' own (lock object, reservations, staged versions): the repository."""
    return {key: size for key, size in objects.items()
            if key != PUBLISH_LOCK_OBJECT and not key.startswith(RESERVATION_PREFIX)
            and not any(part.startswith(STAGING_PREFIX) for part in key.split("/")[1:2])}


def read_object(fs: Any, target: StorageURL, key: str, size: int, limit_name: str) -> bytes:
    """The bytes of the object ``key``, listed at ``size`` bytes, within the limit ``limit_name`` (generator.bounded).

    The listed size is checked before anything is fetched, and at most the limit plus one byte is fetched, so an
    object that grew since it was listed is refused too: :class:`~generator.bounded.UnreadableFileError` naming the
    object's URL. FileNotFoundError when it is gone.
    """
    where = target.object_url(key)
    refused = size_problem(where, size, limit_name)
    if refused is not None:
        raise refused
    path = target.join(key)
    try:
        data = bytes(fs.cat_file(path, start=0, end=limit(limit_name) + 1))
    except FileNotFoundError:
        raise
    except OSError:
        if int(fs.info(path).get("size") or 0) != 0:
            raise
        data = b""  # S3 answers any range of an empty object with "not satisfiable"
    refused = size_problem(where, len(data), limit_name)
    if refused is not None:
        raise refused
    return data


def object_sha256(fs: Any, target: StorageURL, key: str, size: int) -> str:
    """sha256 of the first ``size`` bytes of the object ``key``, read in :data:`READ_CHUNK` ranges (bounded memory).

    Callers compare ``size`` with the object's listed size first: the bytes past it are not read.
    """
    digest = hashlib.sha256()
    for chunk in object_chunks(fs, target, key, size):
        digest.update(chunk)
    return digest.hexdigest()


def object_chunks(fs: Any, target: StorageURL, key: str, size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of the object ``key`` as :data:`READ_CHUNK` ranges; not a byte past ``size`` asked."""
    path = target.join(key)
    for start in range(0, size, READ_CHUNK):
        yield bytes(fs.cat_file(path, start=start, end=min(start + READ_CHUNK, size)))


def _layout(target: StorageURL, objects: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """The repository's files and (marker-only) folders; StorageError naming every object that cannot be one.

    A zero-byte object whose name ends in ``/`` is a folder marker (as consoles create them). Refused: names that
    are not plain relative paths, a marker that holds data, and a name that is an object and also the folder of
    other objects (``mlp/1`` beside ``mlp/1/model.py``): no folder of files can hold both.
    """
    problems: list[Problem] = []
    files: list[str] = []
    folders: list[str] = []
    for key in sorted(objects):
        name = key[:-1] if key.endswith("/") else key
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts) or any(ord(c) < 32 or c in "\\\x7f" for c in key):
            problems.append(Problem(target.object_url(key), "", "object name is not a plain relative path"))
        elif key.endswith("/") and objects[key]:
            problems.append(Problem(target.object_url(key), "", f"a folder marker (name ending in '/') holding "
                                                               f"{objects[key]} bytes: not a repository's file"))
        else:
            (folders if key.endswith("/") else files).append(name)
    parents: dict[str, str] = {}  # folder -> one object inside it
    for name in [*files, *folders]:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            parents.setdefault("/".join(parts[:depth]), name)
    for name in files:
        if name in parents:
            problems.append(Problem(target.object_url(name), "", f"an object and also the folder of "
                                                                f"{target.object_url(parents[name])}: a repository's "
                                                                "file cannot be a folder too"))
    if problems:
        raise StorageError(problems, summary="the objects under this URL are not a model repository")
    return files, folders


def _listed_repository(fs: Any, target: StorageURL) -> tuple[dict[str, int], list[str], list[str]]:
    """The repository's objects (key -> listed size), files and marker folders, from one listing; nothing fetched.

    StorageError for no objects, or objects that cannot form a folder tree (:func:`_layout`).
    """
    objects = repository_objects(list_objects(fs, target))
    if not objects:
        raise StorageError([Problem(target.url, "", f"no objects under this URL (bucket {target.bucket!r} at "
                                                    f"{target.endpoint})")])
    files, folders = _layout(target, objects)
    return objects, files, folders


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``gen-repo verify`` found at a location: the problems (named as there) and the artifacts checked."""

    location: str
    problems: list[Problem]
    artifacts: int | None


def relocated(problem: Problem, local: Path, target: StorageURL) -> Problem:
    """``problem`` naming the object in the bucket instead of the temporary copy it was found in."""
    file = Path(problem.file)
    if file != local and local not in file.parents:
        return problem
    key = file.relative_to(local).as_posix()
    return Problem(target.object_url("" if key == "." else key), problem.pointer, problem.message, problem.severity)


def verify_published(url: str, filesystem: Any = None) -> Verification:
    """Check the repository at ``url`` against its lock file where it lies: listing first, then streaming reads.

    One listing of the bucket, then its lock file read within ``lock_bytes`` (refused from its listed size first),
    then :func:`generator.repository.verify.check_listing`: objects that are not locked, or listed at another size than
    the lock's, are refused from the listing without a byte of them fetched; the others are hashed in
    :data:`READ_CHUNK` ranges. Nothing is downloaded: memory and disk stay bounded whatever the bucket holds.
    Problems name the objects (``gs://bucket/prefix/mlp/1/model.onnx``).
    """
    target = parse_url(url)
    with storage_errors(target, "reading the repository"):
        fs = filesystem if filesystem is not None else open_filesystem(target)
        listed = locked_listing(fs, target)
        if isinstance(listed, list):  # over lock_bytes, or not a valid lock
            return Verification(url, listed, None)
        listing, lock, _raw = listed
        problems = check_listing(listing, lock, BucketSource(fs, target, listing.files))
    return Verification(url, problems, len(lock["artifacts"]))


def locked_listing(fs: Any, target: StorageURL) -> tuple[Listing, dict[str, Any], bytes] | list[Problem]:
    """The repository at ``target`` from one listing, its lock file (parsed and as read) within ``lock_bytes``.

    Nothing else is read. The lock's problems when it is over its limit or not a valid lock. StorageError for no
    objects, objects that cannot form a folder tree, or no lock file (not a repository published by gen-repo).
    """
    objects, files, folders = _listed_repository(fs, target)
    if LOCK_FILE_NAME not in objects:
        raise StorageError([Problem(target.object_url(LOCK_FILE_NAME), "",
                                    "missing: not a repository published by gen-repo")])
    where = target.object_url(LOCK_FILE_NAME)
    try:
        raw = read_object(fs, target, LOCK_FILE_NAME, objects[LOCK_FILE_NAME], "lock_bytes")
        lock = parse_lock(raw, where)
    except GenRepoError as error:
        return error.problems
    return Listing({key: objects[key] for key in files}, folders=_folders(files, folders)), lock, raw


def _folders(files: list[str], markers: list[str]) -> set[str]:
    """Every folder a bucket's keys name: each file's parents, each marker and its parents."""
    out = set(markers)
    for name in [*files, *markers]:
        parts = name.split("/")
        out.update("/".join(parts[:n]) for n in range(1, len(parts)))
    return out


@dataclass(frozen=True)
class BucketSource:
    """A repository in a bucket as :class:`generator.repository.verify.Source`: listed sizes, bounded reads."""

    fs: Any
    target: StorageURL
    sizes: Mapping[str, int]

    def where(self, rel: str) -> str:
        """The object's URL."""
        return self.target.object_url(rel)

    def sha256(self, rel: str, size: int) -> str:
        """sha256 of the object's first ``size`` bytes (:func:`object_sha256`)."""
        return object_sha256(self.fs, self.target, rel, size)

    def read(self, rel: str, limit_name: str) -> bytes:
        """The object within ``limit_name`` (:func:`read_object`)."""
        return read_object(self.fs, self.target, rel, self.sizes[rel], limit_name)

    def mtime(self, rel: str) -> float:
        """0: a bucket keeps no source mtime."""
        return 0.0  # a bucket keeps no source mtime Python recorded: a timestamp-based .pyc there does not match


def verify_url(url: str, filesystem: Any = None) -> list[Problem]:
    """Every way the repository at ``url`` differs from its lock file (see :func:`verify_published`)."""
    return verify_published(url, filesystem).problems


# --------------------------------------------------------------------------------------------------------------------
# The storage of a launched tritonserver
# --------------------------------------------------------------------------------------------------------------------
#: google-cloud-cpp (tritonserver's GCS client) retries a failing request for minutes without a word in the server's
#: log; with these it logs every storage call and its status there.
_GCS_SERVER_LOGGING = {"GOOGLE_CLOUD_CPP_ENABLE_CLOG": "yes", "CLOUD_STORAGE_ENABLE_TRACING": "raw-client"}
#: A google-cloud-cpp call that failed: ``GetBucketMetadata() >> status={UNAVAILABLE: ... Couldn't connect ...}``.
_GCS_FAILED_CALL = re.compile(r"(\w+)\(\) >> status=\{(?!OK\b)(.*)\}")
#: A tritonserver log line: ``E1204 16:48:54.154846 25613 server.cc:302] "message"``.
_TRITON_LINE = re.compile(r"^[EW]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] (.*)$")
_STORAGE_WORDS = re.compile(r"s3|gcs|gs://|storage|bucket|credential|curl|filesystem", re.IGNORECASE)


#: Where google-cloud-cpp looks for the GCE metadata server (its credential lookup): with an emulator, a loopback
#: port nothing answers on, so the lookup fails at once and stays on the machine (it then uses no credentials).
_NO_METADATA_SERVER = {"GCE_METADATA_ROOT": "127.0.0.1:1"}


def server_environment(repository: str) -> dict[str, str]:
    """Environment for a tritonserver launched on ``repository`` (settings already in the environment are kept).

    For ``gs://``: google-cloud-cpp's call logging, so that the log says why storage fails; with an emulator
    (``CLOUD_STORAGE_EMULATOR_ENDPOINT``), no metadata-server lookup off the machine. Nothing for folders and
    ``s3://`` (tritonserver logs S3 failures itself).
    """
    if not repository.startswith("gs://"):
        return {}
    wanted = dict(_GCS_SERVER_LOGGING)
    if os.environ.get(TRITON_GCS_EMULATOR_ENV):
        wanted.update(_NO_METADATA_SERVER)
    return {key: value for key, value in wanted.items() if key not in os.environ}


def _normalized(endpoint: str | None) -> str | None:
    if not endpoint:
        return None
    return (endpoint if endpoint.startswith(("http://", "https://")) else f"http://{endpoint}").rstrip("/")


def server_storage_findings(repository: str, log_text: str, limit: int = 6) -> list[str]:
    """Why a tritonserver launched on the remote ``repository`` could not read it.

    Its log's storage errors (the last ``limit`` distinct ones) and any mismatch between gen-repo's and the server's
    emulator settings.
    """
    found: list[str] = []
    for line in log_text.splitlines():
        call = _GCS_FAILED_CALL.search(line)
        if call:
            found.append(f"{call.group(1)}(): {call.group(2)}")
            continue
        triton = _TRITON_LINE.match(line)
        text = triton.group(1).strip().strip('"') if triton else line.strip() if line.startswith("error:") else ""
        if text and _STORAGE_WORDS.search(text):
            found.append(text)
    lines = list(dict.fromkeys(reversed(found)))[:limit][::-1]  # the last distinct ones, in log order
    if repository.startswith("gs://"):
        ours, theirs = _gcs_emulator(), _normalized(os.environ.get(TRITON_GCS_EMULATOR_ENV))
        if ours != theirs:
            mine = f"{GCS_EMULATOR_ENV}={ours}" if ours else f"{GCS_EMULATOR_ENV} unset (Google Cloud Storage)"
            server = f"{TRITON_GCS_EMULATOR_ENV}={theirs}" if theirs else (
                f"{TRITON_GCS_EMULATOR_ENV} unset (Google Cloud Storage)")
            lines.append(f"gen-repo reads {repository} through {mine}, tritonserver through {server}: point both at "
                         "the same endpoint")
    return lines
