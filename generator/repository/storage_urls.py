"""Where a repository is published: ``s3://``, ``gs://`` and folder URLs, and the filesystem that reaches each.

``STORAGE_EMULATOR_HOST`` points the GCS client at an emulator (tritonserver takes ``CLOUD_STORAGE_EMULATOR_ENDPOINT``);
``s3://host:port/...`` names an S3 endpoint. A folder is reached through
:class:`generator.repository.local_store.LocalStore`.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.errors import Problem
from generator.repository.storage_errors import StorageError

__all__ = [
    "FILE_PROTOCOL",
    "GCS_EMULATOR_ENV",
    "TRITON_GCS_EMULATOR_ENV",
    "StorageURL",
    "gcs_emulator",
    "is_storage_url",
    "local_location",
    "open_filesystem",
    "parse_destination",
    "parse_url",
]

#: gen-repo's (gcsfs's, google-cloud-storage's) GCS emulator setting, and tritonserver's (google-cloud-cpp's).
GCS_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
TRITON_GCS_EMULATOR_ENV = "CLOUD_STORAGE_EMULATOR_ENDPOINT"
#: The protocol of a folder destination (``file:///path`` or a path).
FILE_PROTOCOL = "file"
INSTALL_HINT = {"s3": "pip install 'gen-repo[s3]' (s3fs)", "gs": "pip install 'gen-repo[gcs]' (gcsfs)"}

_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d{1,5}$")


def gcs_emulator() -> str | None:
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
        elif gcs_emulator() is not None:
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
        emulator = gcs_emulator()
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
        if gcs_emulator() is not None:
            from gcsfs.core import GCSFileSystem

            return GCSFileSystem(**target.storage_options())
        import gcsfs

        return gcsfs.GCSFileSystem(**target.storage_options())
    except ImportError as error:
        raise StorageError([Problem(target.url, "", f"{INSTALL_HINT[target.protocol]} is needed: {error}")]) from error
