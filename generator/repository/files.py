"""Durable file operations for repository folders: atomic renames, fsyncs, bulk writes, walks and removals.

What :class:`~generator.repository.staging.RepositoryWriter` and ``gen-repo config`` build on.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import shutil
import signal
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from generator.atomic_write import fsync_dir
from generator.confinement import walk_tree
from generator.errors import GenRepoError, Problem

__all__ = [
    "RENAME_EXCHANGE",
    "RENAME_NOREPLACE",
    "boot_id",
    "deferred_signals",
    "fsync_tree",
    "host",
    "no_space",
    "no_space_error",
    "parent_lock",
    "process_start_time",
    "remove_tree",
    "renameat2",
    "walk_files",
    "write_files",
]

_AT_FDCWD = -100
#: ``renameat2`` flags (linux/fs.h).
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def host() -> str:
    """The host name (what ``socket.gethostname`` returns, without importing the socket stack)."""
    return os.uname().nodename


@functools.lru_cache(maxsize=1)
def _libc_renameat2() -> Any:
    """Return libc's ``renameat2`` (glibc >= 2.28), or None where the C library lacks it."""
    import ctypes.util  # here, not at the top: it costs `gen-repo config` (which never swaps) a tenth of its start

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def renameat2(source: Path | str, target: Path | str, flags: int, *, source_dir_fd: int = _AT_FDCWD,
              target_dir_fd: int = _AT_FDCWD) -> bool:
    """``renameat2(source, target, flags)``: True when done, False when unsupported here; OSError otherwise.

    ``source_dir_fd``/``target_dir_fd``: folders the names are relative to (as ``os.rename``'s ``*_dir_fd``).
    """
    function = _libc_renameat2()
    if function is None:
        return False
    if function(source_dir_fd, os.fsencode(source), target_dir_fd, os.fsencode(target), flags) == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
        return False  # kernel or file system without this flag: use the portable path
    raise OSError(code, os.strerror(code), str(source), None, str(target))


@contextlib.contextmanager
def parent_lock(parent: Path) -> Iterator[None]:
    """Serialise recovery and swaps of writers sharing ``parent``: ``flock`` on the folder itself (writes nothing)."""
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):  # a file system without flock: proceed unlocked
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends, then deliver them through the original handlers.

    Only the main thread can change handlers; elsewhere the block runs unprotected (SIGKILL is not catchable anyway,
    which is why the swap is also crash-safe on its own).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous: dict[int, Any] = {}
    for deferred in (signal.SIGINT, signal.SIGTERM):
        previous[deferred] = signal.signal(deferred, record)
    try:
        yield
    finally:
        # SIGINT last: once its handler is back a Ctrl-C may raise here, and every other handler must be restored.
        for restored in (signal.SIGTERM, signal.SIGINT):
            signal.signal(restored, previous[restored])
        for pending in dict.fromkeys(received):
            signal.raise_signal(pending)


def process_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat); tells a reused pid apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def boot_id() -> str | None:
    """The machine's boot id (a writer's pid means nothing after a reboot); None where /proc does not tell."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def no_space(error: BaseException | None) -> OSError | None:
    """``error`` when it is a full disk (ENOSPC) or an exceeded quota (EDQUOT), else None."""
    return error if isinstance(error, OSError) and error.errno in _NO_SPACE else None


def no_space_error(destination: Path, error: OSError, what: str | None = None) -> GenRepoError:
    """The located error for a full disk while writing ``what`` (default: the error's file) into ``destination``."""
    where = what or error.filename or "the staging folder"
    return GenRepoError(
        [
            Problem(
                str(destination),
                "",
                f"no space left on device (ENOSPC) while writing {where}; the staging folder was removed and the "
                "previous repository (if any) is unchanged",
            )
        ]
    )


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Write ``files`` (root-relative POSIX path -> text or bytes) under the folder ``root``, creating folders.

    Paths are taken as given (validated by callers). ``os`` calls relative to an open descriptor of ``root``, each
    folder made once: about half the cost of ``mkdir`` plus ``write_text`` per file (bench/bench_config_gen.py). Mode
    0o666 minus the umask, replaced if present, text as UTF-8.
    """
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        made: set[str] = set()
        for relative, content in files.items():
            folder = relative.rpartition("/")[0]
            if folder and folder not in made:
                _make_folder(folder, root_fd, made)
            data = content.encode("utf-8") if isinstance(content, str) else content
            fd = os.open(relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666, dir_fd=root_fd)
            try:
                written = os.write(fd, data)
                if written < len(data):  # a short write (large data, signals): write the rest
                    view = memoryview(data)[written:]
                    while view:
                        view = view[os.write(fd, view):]
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)


def _make_folder(folder: str, root_fd: int, made: set[str]) -> None:
    """Create ``folder`` (relative to ``root_fd``) and any missing parents; record each in ``made``."""
    try:
        os.mkdir(folder, dir_fd=root_fd)
    except FileNotFoundError:  # a parent is missing: make it first (rare; most callers write <model>/<file>)
        parent = folder.rpartition("/")[0]
        if not parent:
            raise
        _make_folder(parent, root_fd, made)
        os.mkdir(folder, dir_fd=root_fd)
    except FileExistsError:
        pass
    made.add(folder)


def remove_tree(path: Path) -> None:
    """Remove a file or folder, ignoring what is already gone."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def fsync_tree(root: Path) -> None:
    """Flush every regular file and folder under ``root`` (folders after their contents)."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for filename in filenames:
            path = os.path.join(dirpath, filename)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def walk_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(relative posix path, lstat) of everything under ``root`` that is not a folder; symlinked folders included.

    :func:`generator.confinement.walk_tree` without the folders: a link at any depth is listed, never entered.
    """
    return ((rel, st) for rel, st in walk_tree(root) if not stat.S_ISDIR(st.st_mode))
