"""Every failure of the storage clients (s3fs/botocore, gcsfs/aiohttp/google-auth) as a located error, not a traceback.

A :class:`StorageError` naming the URL: exit 2 for what the user must fix, 3 when the endpoint cannot be reached or
answers only with server errors, 1 for anything else the store refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
from collections.abc import Iterator, Mapping
from typing import Protocol

from generator.errors import EXIT_FAILED, EXIT_UNREACHABLE, GenRepoError, Problem, one_line

__all__ = ["StorageError", "StorageFailed", "StorageUnreachable", "storage_errors"]


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


class _Target(Protocol):
    """What an error says of the store (:class:`generator.repository.storage_urls.StorageURL`)."""

    @property
    def url(self) -> str: ...

    @property
    def protocol(self) -> str: ...

    @property
    def bucket(self) -> str: ...

    @property
    def endpoint(self) -> str: ...


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


def _storage_problem(error: BaseException, target: _Target, doing: str) -> StorageError:
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
def storage_errors(target: _Target, doing: str) -> Iterator[None]:
    """Turn every exception a storage client raises inside into a :class:`StorageError` (GenRepoError passes)."""
    try:
        yield
    except GenRepoError:
        raise
    except Exception as error:
        if not _raised_by_storage_client(error):
            raise
        raise _storage_problem(error, target, doing) from error
