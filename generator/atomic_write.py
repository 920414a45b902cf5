"""Files gen-repo writes beside its output: created exclusively, written whole, renamed into place.

A reader sees the old file or the new one, never half of one, and nothing is written through a link someone planted
(docs/security.md, "Files written beside an output"). Folders gen-repo made fresh are written directly.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fsync_dir", "replacing", "write_atomically"]

#: Attempts at a fresh temporary name before giving up (each collides only with a file someone planted or a
#: concurrent writer's; 48 random bits make an accidental collision negligible).
_ATTEMPTS = 100
#: The part of the final name kept in the temporary one (NAME_MAX is 255 bytes on common file systems).
_NAME_KEPT = 100
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


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

    ``mode``: None gives 0o666 less the umask (as ``open(path, "w")`` does), a number exactly that mode. Readers
    see the previous file or the whole new one. A symlink at ``path`` is replaced, not followed; a symlink or file
    planted at a temporary name is never written through. OSError when the folder cannot be written, and
    FileExistsError with ``overwrite=False`` when ``path`` exists; ``path`` is then unchanged and no temporary file
    is left behind.
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
