"""Arrays from ``.npz`` and ``.safetensors`` files, within bounds: every header is checked before any array exists.

Declared dtypes and shapes are checked against :data:`generator.bounded.LIMITS` and against the file itself before
anything is allocated; nothing is unpickled and deflate bombs are refused (docs/security.md, "Bounded input").
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from generator.bounded import limit, open_regular, size_problem
from generator.dtypes import SAFETENSORS_TO_NUMPY
from generator.errors import GenRepoError, Problem, json_pointer
from generator.number_limits import INT64_MAX, element_count, shape_text

__all__ = ["ArrayFile", "ArrayHeader", "INFLATE_CHECK_BYTES", "array_file_kind", "open_array_file", "read_arrays"]

#: Members inflating to at least this many bytes must keep within the ``array_inflate_ratio`` limit (small members
#: may compress as well as they like: an all-ones mask is legitimately 1000:1, and a few MiB harm nobody).
INFLATE_CHECK_BYTES = 64 << 20
_NPY_MAGIC = b"\x93NUMPY"
_KINDS = {".npz": "npz", ".safetensors": "safetensors"}


@dataclass(frozen=True, slots=True)
class ArrayHeader:
    """One array as its file declares it, before it is read: ``name`` (the key ``numpy.load`` gives), dtype, shape."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of elements; past int64 (a hostile header), one more than int64 holds, never computed whole."""
        count = element_count(self.shape)
        return INT64_MAX + 1 if count is None else count

    @property
    def nbytes(self) -> int:
        """Bytes the array takes once read."""
        return self.size * self.dtype.itemsize

    def describe(self) -> str:
        """``shape [2, 3] float32`` for messages (a very high rank abbreviated)."""
        return f"shape {shape_text(self.shape)} {self.dtype}"

    def counted(self) -> str:
        """``6 elements (24 bytes)`` for messages; ``more than int64 elements`` past the limit."""
        if self.size > INT64_MAX:
            return f"more than {INT64_MAX} elements"
        return f"{self.size} elements ({self.nbytes} bytes)"


def array_file_kind(path: os.PathLike[str] | str) -> str:
    """``npz`` or ``safetensors`` from the file name (anything else is read as an ``.npz``)."""
    return _KINDS.get(os.path.splitext(str(path))[1].lower(), "npz")


class ArrayFile:
    """An array file opened and checked: :attr:`headers` of every array; :meth:`read` reads one of them.

    Use as a context manager (or call :meth:`close`); made by :func:`open_array_file`.
    """

    def __init__(self, path: str, kind: str, stream: IO[bytes], headers: dict[str, ArrayHeader],
                 where: dict[str, Any]) -> None:
        self.path = path
        self.kind = kind
        self.headers = headers
        self._stream = stream
        self._where = where  # npz: name -> (ZipFile, ZipInfo); safetensors: name -> absolute offset
        self._zip: zipfile.ZipFile | None = None

    def __enter__(self) -> ArrayFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        if self._zip is not None:
            self._zip.close()
        self._stream.close()

    def read(self, name: str) -> np.ndarray[Any, Any]:
        """Array ``name`` (its header was checked when the file was opened); GenRepoError when its data is bad."""
        header = self.headers[name]
        pointer = json_pointer([name])
        try:
            if self.kind == "safetensors":
                data = os.pread(self._stream.fileno(), header.nbytes, self._where[name])
                if len(data) != header.nbytes:
                    raise ValueError(f"the file ends {header.nbytes - len(data)} bytes before the array does")
                return np.frombuffer(bytearray(data), dtype=header.dtype).reshape(header.shape)
            assert self._zip is not None
            with self._zip.open(self._where[name]) as member:
                array = np.lib.format.read_array(member, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as error:
            raise GenRepoError([Problem(self.path, pointer, f"cannot read array {name!r}: {error}")]) from None
        if array.dtype != header.dtype or array.shape != header.shape:  # a member that changed since its header
            raise GenRepoError([Problem(self.path, pointer, f"array {name!r} is not what its header declared")])
        return array


@contextmanager
def _refusing(path: str) -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as error:
        raise GenRepoError([Problem(path, "", f"cannot read as .npz: {type(error).__name__}: {error}")]) from None


def open_array_file(path: os.PathLike[str] | str, kind: str | None = None) -> ArrayFile:
    """Open an ``.npz`` or ``.safetensors`` file and check every array's header; nothing is allocated yet.

    ``kind`` ("npz" or "safetensors") defaults to the file's suffix. Raises GenRepoError with every problem, each
    at ``/<array name>`` where it is one array's.
    """
    name = str(path)
    kind = kind or array_file_kind(name)
    fd = open_regular(name)
    stream = os.fdopen(fd, "rb")
    try:
        size = os.fstat(fd).st_size
        if (too_large := size_problem(name, size, "array_file_bytes")) is not None:
            raise too_large
        if kind == "safetensors":
            headers, where = _safetensors_headers(name, fd, size)
            return ArrayFile(name, kind, stream, headers, where)
        with _refusing(name):
            archive = zipfile.ZipFile(stream)
        try:
            headers, where = _npz_headers(name, archive, size)
        except BaseException:
            archive.close()
            raise
        result = ArrayFile(name, kind, stream, headers, where)
        result._zip = archive
        return result
    except BaseException:
        stream.close()
        raise


def read_arrays(
    path: os.PathLike[str] | str, kind: str | None = None,
    accept: Callable[[ArrayHeader], str | None] | None = None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Every array of the file, in its order; ``accept(header)`` may refuse one (a message) before it is read.

    Raises GenRepoError with every problem at once: the file's, the headers' and those ``accept`` gives.
    """
    with open_array_file(path, kind) as arrays:
        refused = [(header.name, message) for header in arrays.headers.values()
                   if accept is not None and (message := accept(header))]
        if refused:
            raise GenRepoError([Problem(arrays.path, json_pointer([n]), m) for n, m in refused])
        return {name: arrays.read(name) for name in arrays.headers}


def _check_counts(path: str, count: int) -> None:
    members = limit("array_members")
    if count > members:
        raise GenRepoError([Problem(path, "", f"the file holds {count} arrays; at most {members} are accepted "
                                              "(limit array_members; GEN_REPO_MAX_ARRAY_MEMBERS changes it)")])


def _header_problem(header: ArrayHeader) -> str | None:
    """Why an array declared so must not be read (None when it may)."""
    if header.dtype.hasobject:
        return f"array {header.name!r} holds Python objects (dtype {header.dtype}), which need pickles; never read"
    elements = limit("array_elements")
    if header.size > elements:
        return (f"array {header.name!r} declares {header.describe()}: {header.counted()}; at most {elements} "
                f"elements are accepted (limit array_elements; "
                "GEN_REPO_MAX_ARRAY_ELEMENTS changes it)")
    return None


def _total_problem(path: str, total: int) -> GenRepoError | None:
    problem = size_problem(path, total, "array_file_bytes")
    if problem is None:
        return None
    bound = limit("array_file_bytes")
    return GenRepoError([Problem(path, "", f"its arrays declare {total} bytes together; at most {bound} are "
                                           "accepted (limit array_file_bytes; GEN_REPO_MAX_ARRAY_FILE_BYTES "
                                           "changes it)")])


def _npz_headers(path: str, archive: zipfile.ZipFile, file_size: int) -> tuple[dict[str, ArrayHeader], dict[str, Any]]:
    infos = archive.infolist()
    _check_counts(path, len(infos))
    ratio = limit("array_inflate_ratio")
    headers: dict[str, ArrayHeader] = {}
    where: dict[str, Any] = {}
    problems: list[Problem] = []
    total = 0
    for info in infos:
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        pointer = json_pointer([key])
        total += info.file_size
        if info.file_size >= INFLATE_CHECK_BYTES and info.file_size > ratio * max(info.compress_size, 1):
            problems.append(Problem(path, pointer, f"member {info.filename!r} inflates from {info.compress_size} to "
                                                   f"{info.file_size} bytes, more than {ratio} times (a deflate "
                                                   "bomb?); limit array_inflate_ratio, GEN_REPO_MAX_ARRAY_INFLATE_"
                                                   "RATIO changes it"))
            continue
        try:
            with archive.open(info) as member:
                header, offset = _npy_header(key, member)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as error:
            problems.append(Problem(path, pointer, f"member {info.filename!r} is not a readable .npy array: "
                                                   f"{type(error).__name__}: {error}"))
            continue
        message = _header_problem(header)
        if message is None and info.file_size != offset + header.nbytes:
            message = (f"member {info.filename!r} holds {info.file_size} bytes but its header declares "
                       f"{header.describe()} ({offset + header.nbytes} bytes with the header)")
        if message is not None:
            problems.append(Problem(path, pointer, message))
            continue
        headers[key] = header
        where[key] = info
    if problems:
        raise GenRepoError(problems)
    if (too_large := _total_problem(path, total)) is not None:
        raise too_large
    return headers, where


def _npy_header(key: str, member: IO[bytes]) -> tuple[ArrayHeader, int]:
    """The ``.npy`` header at the start of ``member`` and the offset of its data (only the header is read)."""
    start = member.read(len(_NPY_MAGIC))
    if start != _NPY_MAGIC:
        raise ValueError("it does not start with the .npy magic")
    version = tuple(member.read(2))
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ValueError(f".npy format version {version} is not supported (1.0 and 2.0 are)")
    del fortran  # either order is fine: read_array handles it
    return ArrayHeader(key, np.dtype(dtype), tuple(int(d) for d in shape)), member.tell()


def _safetensors_headers(path: str, fd: int, file_size: int) -> tuple[dict[str, ArrayHeader], dict[str, Any]]:
    from generator.json_reader import parse_json

    prefix = os.pread(fd, 8, 0)
    if len(prefix) != 8:
        raise GenRepoError([Problem(path, "", "not a .safetensors file: shorter than its 8-byte header length")])
    length = int.from_bytes(prefix, "little")
    bound = min(limit("document_bytes"), file_size - 8)
    if length > bound:
        raise GenRepoError([Problem(path, "", f"not a .safetensors file within limits: its header claims {length} "
                                              f"bytes; at most {bound} are accepted (the file's size, and the "
                                              "document_bytes limit)")])
    try:
        document = parse_json(os.pread(fd, length, 8), path)
    except GenRepoError as error:
        raise GenRepoError([Problem(p.file, p.pointer, f"not a .safetensors file: its header: {p.message}")
                            for p in error.problems]) from None
    if not isinstance(document, dict):
        raise GenRepoError([Problem(path, "", "not a .safetensors file: its header is not a JSON object")])
    entries = {k: v for k, v in document.items() if k != "__metadata__"}
    _check_counts(path, len(entries))
    data_start, data_size = 8 + length, file_size - 8 - length
    headers: dict[str, ArrayHeader] = {}
    where: dict[str, Any] = {}
    problems: list[Problem] = []
    total = 0
    for key, entry in entries.items():
        pointer = json_pointer([key])
        header, message = _safetensors_entry(key, entry)
        if header is not None:
            message = _header_problem(header)
            if message is None:
                begin, end = entry["data_offsets"]
                if not 0 <= begin <= end <= data_size or end - begin != header.nbytes:
                    message = (f"array {key!r} declares {header.describe()} ({header.nbytes} bytes) at bytes "
                               f"{begin}..{end} of the {data_size} bytes of data the file holds")
        if message is not None or header is None:
            problems.append(Problem(path, pointer, message or "invalid entry"))
            continue
        total += header.nbytes
        headers[key] = header
        where[key] = data_start + entry["data_offsets"][0]
    if problems:
        raise GenRepoError(problems)
    if (too_large := _total_problem(path, total)) is not None:
        raise too_large
    return dict(sorted(headers.items())), where


def _safetensors_entry(key: str, entry: Any) -> tuple[ArrayHeader | None, str | None]:
    if not isinstance(entry, dict):
        return None, f"entry {key!r} is not an object"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in SAFETENSORS_TO_NUMPY:
        return None, (f"array {key!r} has dtype {dtype!r}; gen-repo reads {', '.join(SAFETENSORS_TO_NUMPY)} (numpy "
                      "has no BF16 or FP8)")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return None, f"array {key!r} has shape {shape!r}, not a list of sizes"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
        return None, f"array {key!r} has data_offsets {offsets!r}, not [begin, end]"
    return ArrayHeader(key, np.dtype(SAFETENSORS_TO_NUMPY[dtype]).newbyteorder("<"), tuple(shape)), None
