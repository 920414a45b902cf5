"""Files gen-repo writes beside its output: created exclusively, written whole, renamed into place.

Readers see the old file or the whole new one, and nothing is written through a planted link (docs/security.md, "Files
written beside an output"). :func:`sink_problem` is the one rule for an output a user names.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from generator.errors import EXIT_FAILED, GenRepoError, Problem

__all__ = ["SinkError", "append_text", "fsync_dir", "replacing", "sink_failed", "sink_problem", "write_atomically"]

#: Attempts at a fresh temporary name before giving up (each collides only with a file someone planted or a
#: concurrent writer's; 48 random bits make an accidental collision negligible).
_ATTEMPTS = 100
#: The part of the final name kept in the temporary one (NAME_MAX is 255 bytes on common file systems).
_NAME_KEPT = 100
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: Append, create if missing, never through a symlink, never waiting on a FIFO's reader (checked again after open).
_APPEND = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
           | getattr(os, "O_NONBLOCK", 0))
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_NOT_REGULAR = "gen-repo writes only to a regular file or a new name"
_LINKED = "it is a symlink (gen-repo appends only to the file itself, never through a link)"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def sink_problem(path: Path | str, *, append: bool = False) -> str | None:
    """Why ``path`` cannot take an output a user named (None when it can); nothing opened, so nothing blocks.

    It must be a regular file or a new name in a writable folder. A symlink there is replaced, never followed, by a
    whole-file output (:func:`write_atomically`) and refused for an ``append`` (a shared log cannot be replaced).
    """
    target = Path(path)
    try:
        mode: int | None = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        return error.strerror or str(error)
    if mode is not None and stat.S_ISLNK(mode):
        if append:
            return _LINKED
    elif mode is not None and not stat.S_ISREG(mode):
        return f"it is {_kind(mode)}; {_NOT_REGULAR}"
    elif mode is not None and append:
        return None if os.access(target, os.W_OK) else "the file is not writable"
    folder = target.parent
    if not folder.is_dir():
        return f"no folder {folder} to write it in"
    if not os.access(folder, os.W_OK | os.X_OK):  # EROFS too: access(2) reports a read-only file system
        return f"the folder {folder} is not writable"
    return None


class SinkError(GenRepoError):
    """An output the user named cannot be written: refused before the work (exit 2), or failed after it."""


def sink_failed(path: Path | str, option: str, error: OSError | str, written: Sequence[str] = ()) -> SinkError:
    """The error for output ``path`` (of ``option``) that failed, saying what the command had ``written`` before it.

    Exit 2 promises nothing was written, so it is exit 1 once anything was.
    """
    reason = error if isinstance(error, str) else error.strerror or str(error)
    what = f"written before it: {', '.join(written)}" if written else "nothing was written"
    failed = SinkError([Problem(os.fspath(path), "", f"{option}: cannot write this file: {reason}; {what}")])
    if written:
        failed.exit_code = EXIT_FAILED
    return failed


def append_text(path: Path | str, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing, never truncated, never through a symlink or into a FIFO).

    OSError when it cannot: ``ELOOP`` for a link, ``EINVAL`` for what is not a regular file (a FIFO swapped in after
    :func:`sink_problem` ran), the file system's own error (``ENOSPC``) for a failed write.
    """
    try:
        fd = os.open(path, _APPEND, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, _LINKED, str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"it is {_kind(mode)}; {_NOT_REGULAR}", str(path))
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def fsync_dir(path: Path | str | int) -> None:
    """Flush a folder's entries (new names, renames) to disk; a no-op where folders cannot be opened.

    ``path`` may be an open folder's fd (left open).
    """
    if isinstance(path, int):
        fd = path
    else:
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
        if not isinstance(path, int):
            os.close(fd)


def _temporary_name(path: Path) -> Path:
    """A fresh, unpredictable name beside ``path`` (hidden, so a folder listing does not show it as an output)."""
    return path.with_name(f".{path.name[:_NAME_KEPT]}.{os.urandom(6).hex()}.partial")


def _create_temporary(path: Path, mode: int | None) -> tuple[int, Path]:
    """Create a new, empty temporary file beside ``path`` exclusively; its descriptor and name.

    ``mode`` None: 0o666 less the umask (as ``open(path, "w")`` makes a file); else exactly ``mode``.
    """
    for _ in range(_ATTEMPTS):
        temporary = _temporary_name(path)
        try:
            fd = os.open(temporary, _FLAGS, 0o666 if mode is None else mode & 0o777)
        except FileExistsError:  # planted (a file or a symlink) or another writer's: never reused, never followed
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)  # exactly this mode, whatever the umask
            except BaseException:
                os.close(fd)
                os.unlink(temporary)
                raise
        return fd, temporary
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {path} after {_ATTEMPTS} attempts",
                          str(path))


def _commit(temporary: Path, path: Path, *, overwrite: bool, durable: bool) -> None:
    """Move ``temporary`` to ``path``: a rename (a symlink at ``path`` is replaced) or, without overwrite, a link."""
    if overwrite:
        os.replace(temporary, path)
    else:
        os.link(temporary, path, follow_symlinks=False)  # FileExistsError when ``path`` exists (a symlink included)
        os.unlink(temporary)
    if durable:
        fsync_dir(path.parent)


@contextlib.contextmanager
def replacing(path: Path | str, *, mode: int | None = None) -> Iterator[Path]:
    """Yield a new, empty temporary file beside ``path`` for a writer that needs a file name; then rename it over it.

    For libraries that write by name (``onnx.save_model``, ``shutil.copy2``). When the block raises, the temporary
    file is removed and ``path`` is left as it was. ``mode`` as for :func:`write_atomically`.
    """
    target = Path(path)
    fd, temporary = _create_temporary(target, mode)
    os.close(fd)
    try:
        yield temporary
        _commit(temporary, target, overwrite=True, durable=False)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def write_atomically(path: Path | str, data: bytes | str, *, mode: int | None = None, durable: bool = False,
                     overwrite: bool = True) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through an exclusively created temporary file; return ``path``.

    ``mode``: None gives 0o666 less the umask, a number exactly that mode. Readers see the old file or the new one; a
    symlink at ``path`` is replaced, not followed. OSError, or FileExistsError with ``overwrite=False``; ``path`` is
    then unchanged and no temporary file is left.
    """
    target = Path(path)
    content = data.encode("utf-8") if isinstance(data, str) else data
    fd, temporary = _create_temporary(target, mode)
    try:
        try:
            view = memoryview(content)
            while view:  # os.write may write less than asked (large data, signals)
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        _commit(temporary, target, overwrite=overwrite, durable=durable)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return target
