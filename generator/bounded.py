"""Bounded input: the one table of limits on what gen-repo reads, and the reader every file goes through.

Only regular files are read, never past their limit (``st_size`` is not trusted); a refusal is a located
:class:`UnreadableFileError` (exit 2, an ``OSError``). docs/security.md lists the limits.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from generator.errors import GenRepoError, Problem

__all__ = [
    "LIMITS",
    "Limit",
    "UnreadableFileError",
    "limit",
    "open_regular",
    "read_bytes",
    "read_text",
    "size_problem",
]

_KIB, _MIB, _GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True, slots=True)
class Limit:
    """One bound on input: its name, default, unit, and what it bounds (one line for the docs)."""

    name: str
    default: int
    unit: str
    bounds: str

    @property
    def variable(self) -> str:
        """The environment variable that overrides the default (``GEN_REPO_MAX_<NAME>``)."""
        return f"GEN_REPO_MAX_{self.name.upper()}"


#: Every limit on input, by name. The defaults are far above what real inputs need (a GraphSpec is a few KB, a
#: config.pbtxt a few KB, a lock file about 1 KB per model) and low enough that a hostile file is refused in well
#: under a second and a few times its limit in memory.
LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit("document_bytes", 16 * _MIB, "bytes",
              "a spec, manifest, tune report, contract.json, reference.json or other JSON/YAML document"),
        Limit("config_bytes", 4 * _MIB, "bytes", "a config.pbtxt (lint, smoke, check-request, perf, publish)"),
        Limit("lock_bytes", 64 * _MIB, "bytes", "a repository's gen-repo.lock.json (verify, publish)"),
        Limit("bytecode_bytes", 64 * _MIB, "bytes",
              "a .pyc bytecode file and the locked .py it is compared with (verify)"),
        Limit("publish_object_bytes", 64 * _KIB, "bytes",
              "the publishers' lock object or a version reservation in a bucket (publish)"),
        Limit("onnx_bytes", 2 * _GIB, "bytes", "an ONNX model read whole (lint, build; protobuf's own limit)"),
        Limit("array_file_bytes", 4 * _GIB, "bytes",
              "an .npz or .safetensors file: its size, and the bytes its arrays take once read (all together)"),
        Limit("array_elements", 1 << 30, "elements", "one array of an .npz or .safetensors file"),
        Limit("array_members", 65_536, "arrays", "the arrays of one .npz or .safetensors file"),
        Limit("array_inflate_ratio", 100, "times",
              "how much one .npz member may inflate (deflate bombs), for members of 64 MiB or more"),
        Limit("request_check_bytes", 64 * _MIB, "bytes",
              "an array check-request reads to judge its values though its shape or dtype is refused"),
        Limit("yaml_aliases", 100, "aliases", "YAML aliases in one document (alias bombs use thousands)"),
        Limit("nesting", 64, "levels", "containers nested in one document (a GraphSpec nests about 8)"),
        Limit("document_values", 1_000_000, "values",
              "values in one document, counted as often as YAML aliases repeat them"),
    )
}

class UnreadableFileError(GenRepoError, OSError):
    """A file refused or unreadable: not a regular file, over its limit, not UTF-8, or an I/O error."""

    def __init__(self, file: str, message: str) -> None:
        super().__init__([Problem(file, "", message)])


_UNITS = {"": 1, "k": _KIB, "kib": _KIB, "m": _MIB, "mib": _MIB, "g": _GIB, "gib": _GIB}
_VALUE = re.compile(r"([0-9][0-9_]*)\s*([A-Za-z]*)")


def limit(name: str) -> int:
    """The limit ``name`` for this run: its environment variable when set, else the default.

    The variable takes a positive integer, optionally with a binary unit (``8MiB``, ``512k``, ``2G``). A value that
    is not one raises GenRepoError naming the variable: a typo must not silently lift or keep a bound.
    """
    entry = LIMITS[name]
    raw = os.environ.get(entry.variable)
    if raw is None or not raw.strip():
        return entry.default
    match = _VALUE.fullmatch(raw.strip())
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS or int(match.group(1)) < 1:
        raise GenRepoError([Problem(entry.variable, "", f"{raw[:50]!r} is not a positive whole number (optionally "
                                                        "with k/KiB, M/MiB or G/GiB); it sets the limit on "
                                                        f"{entry.bounds}")])
    return int(match.group(1)) * _UNITS[unit]


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _not_regular(name: str, mode: int) -> UnreadableFileError:
    return UnreadableFileError(name, f"{_kind(mode)}, not a regular file; gen-repo reads regular files only")


def _too_large(name: str, entry: Limit, bound: int, size: int | None) -> UnreadableFileError:
    held = f"is {size} bytes" if size is not None else f"holds more than {bound} bytes"
    return UnreadableFileError(name, f"file {held}; at most {bound} are accepted (limit {entry.name}; {entry.variable} "
                                "changes it)")


def _unreadable(name: str, error: OSError) -> UnreadableFileError:
    return UnreadableFileError(name, f"cannot read file: {error.strerror or error}")


def size_problem(name: str, size: int, limit_name: str) -> UnreadableFileError | None:
    """The error for ``size`` bytes above the limit ``limit_name`` (None within it); for callers that stream."""
    bound = limit(limit_name)
    return _too_large(name, LIMITS[limit_name], bound, size) if size > bound else None


def _open(name: str) -> tuple[int, os.stat_result]:
    """Open the regular file ``name`` non-blocking: its descriptor and ``fstat`` (see :func:`open_regular`)."""
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as error:  # ValueError: a NUL in the name
        raise UnreadableFileError(name, f"cannot read file: {getattr(error, 'strerror', None) or error}") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(name, mode)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as error:
        raise _unreadable(name, error) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(name, status.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def open_regular(path: Path | str) -> int:
    """Open ``path`` for reading and return the descriptor, refusing anything but a regular file.

    ``os.stat`` refuses FIFOs and devices before the open; ``O_NONBLOCK`` keeps the open from waiting if a FIFO took the
    file's place since, and ``fstat`` refuses it then (the descriptor is left blocking). Raises
    :class:`UnreadableFileError` naming the file, or ``FileNotFoundError``.
    """
    fd, _ = _open(str(path))
    try:
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path | str, limit_name: str = "document_bytes") -> bytes:
    """The bytes of the regular file ``path``, at most the limit ``limit_name``; :class:`UnreadableFileError` otherwise.

    A file whose ``st_size`` is above the limit is refused without reading; otherwise at most ``limit + 1`` bytes
    are read, whatever ``st_size`` says. The file is opened as :func:`open_regular` opens it.
    """
    name = str(path)
    entry = LIMITS[limit_name]
    bound = limit(limit_name)
    fd, status = _open(name)  # O_NONBLOCK stays: a regular file's reads never block on it
    try:
        size = status.st_size
        if size > bound:
            raise _too_large(name, entry, bound, size)
        parts: list[bytes] = []
        total = 0
        want = size + 1  # one byte past st_size proves the end (or that st_size was wrong)
        while total <= bound:
            try:
                chunk = os.read(fd, min(want, bound + 1 - total))
            except InterruptedError:
                continue
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            want = _MIB
        if total > bound:
            raise _too_large(name, entry, bound, None)
        return b"".join(parts)
    except UnreadableFileError:
        raise
    except OSError as error:
        if error.errno == errno.EISDIR:
            raise _not_regular(name, stat.S_IFDIR) from None
        raise _unreadable(name, error) from None
    finally:
        os.close(fd)


def read_text(path: Path | str, limit_name: str = "document_bytes") -> str:
    """:func:`read_bytes` decoded as UTF-8; :class:`UnreadableFileError` naming the first byte that is not."""
    raw = read_bytes(path, limit_name)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableFileError(str(path), f"not UTF-8 text (byte {error.start})") from None
