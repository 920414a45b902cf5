"""A folder as a publish destination: the operations ``gen-repo publish`` uses on S3 and GCS, on a local file system.

Nothing in a shared folder is trusted: no link followed, files renamed into place, version folders made by one
no-clobber rename (docs/release-pipelines.md, "Publishing to a shared folder").
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
from collections.abc import Iterator
from typing import Any

from generator.atomic_write import fsync_dir
from generator.errors import EXIT_FAILED, GenRepoError, Problem
from generator.json_reader import parse_json
from generator.repository.bytecode import PYCACHE, bytecode_problem, bytecode_source
from generator.repository.files import RENAME_NOREPLACE, renameat2

__all__ = ["LocalStore", "LocalStoreFailed"]

_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Bytecode larger than this is listed, never read to be compared (no model.py compiles to it).
_MAX_BYTECODE = 64 << 20


class LocalStoreFailed(GenRepoError):  # noqa: N818 (a state, like StorageFailed)
    """The file system refused an operation for a reason other than the user's setup (exit 1)."""

    exit_code = EXIT_FAILED


class _DurableFile(io.FileIO):
    """A new file that is fsynced when it is closed (an uploaded artifact survives a crash whole or is re-uploaded)."""

    def close(self) -> None:
        if not self.closed:
            try:
                os.fsync(self.fileno())
            finally:
                super().close()


class LocalStore:
    """The fsspec operations a publish uses (``find``, ``info``, ``cat_file``, ``pipe_file``, ``open``, ``rm``...).

    Confined to the folder ``root`` (absolute and real: :func:`generator.repository.storage_urls.parse_destination`).
    """

    def __init__(self, root: str) -> None:
        self.root = root

    # -- paths ----------------------------------------------------------------------------------------------------
    def _parts(self, path: str) -> list[str]:
        """``path`` (absolute, under the root) as its parts below the root; GenRepoError for anything else."""
        path = str(path).rstrip("/")
        if path == self.root:
            return []
        if not path.startswith(self.root + "/"):
            raise GenRepoError([Problem(path, "", f"outside the destination {self.root}")])
        parts = path[len(self.root) + 1:].split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise GenRepoError([Problem(path, "", "not a plain path below the destination")])
        return parts

    @contextlib.contextmanager
    def _located(self, path: str) -> Iterator[None]:
        """OSErrors as located errors; FileNotFoundError and FileExistsError pass (callers rely on them)."""
        try:
            yield
        except (FileNotFoundError, FileExistsError):
            raise
        except OSError as error:
            why = os.strerror(error.errno) if error.errno else str(error)
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise GenRepoError([Problem(path, "", "refused: a symlink or a file where gen-repo expects a folder "
                                                      "or a file of its own; nothing is written or read through it "
                                                      f"({why})")]) from error
            if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise GenRepoError([Problem(path, "", f"access refused: {why}")]) from error
            raise LocalStoreFailed([Problem(path, "", f"the file system refused: {why}")]) from error

    def _dir(self, parts: list[str], *, create: bool = False) -> int:
        """An fd of the folder ``parts`` below the root, opened one part at a time without following symlinks."""
        fd = os.open(self.root, _DIR_OPEN & ~os.O_NOFOLLOW)  # the root was resolved by parse_destination
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR_OPEN, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _parent(self, path: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(fd of the folder holding ``path``, its name), the fd closed afterwards."""
        parts = self._parts(path)
        if not parts:
            raise GenRepoError([Problem(path, "", "the destination itself is no file")])
        with self._located(path):
            fd = self._dir(parts[:-1], create=create)
            try:
                yield fd, parts[-1]
            finally:
                os.close(fd)

    # -- reading --------------------------------------------------------------------------------------------------
    def invalidate_cache(self) -> None:
        """Nothing is cached (the fsspec filesystems' listing cache)."""

    def find(self, path: str, detail: bool = True) -> dict[str, dict[str, Any]]:
        """Every file below ``path`` (and every empty folder, as ``<folder>/``): path -> {size, type}.

        GenRepoError naming every symlink and special file found: the destination is refused as a whole.
        FileNotFoundError when ``path`` is not there.
        """
        found: dict[str, dict[str, Any]] = {}
        refused: list[Problem] = []
        base = str(path).rstrip("/")
        with self._located(base):
            top = self._dir(self._parts(base))
            try:
                for folder, dirs, files, fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                    rel = folder[2:] if folder.startswith("./") else ""
                    where = f"{base}/{rel}" if rel else base
                    if rel and not dirs and not files:
                        found[where + "/"] = {"size": 0, "type": "directory"}
                    # fwalk lists a symlink to a folder among the folders (without entering it): checked too.
                    for name in sorted({*files, *dirs}):
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if stat.S_ISDIR(st.st_mode):
                            continue
                        if not stat.S_ISREG(st.st_mode):
                            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "a special file"
                            refused.append(Problem(f"{where}/{name}", "", f"refused: {kind} in the destination; "
                                                                          "gen-repo follows none and removes nothing "
                                                                          "it did not create: remove it yourself"))
                        elif not self._derived_bytecode(f"{rel}/{name}" if rel else name, fd, name, st):
                            found[f"{where}/{name}"] = {"size": st.st_size, "type": "file"}
            finally:
                os.close(top)
        if refused:
            raise GenRepoError(refused, summary=f"the destination {self.root} holds what a publish cannot trust")
        return found

    def _derived_bytecode(self, rel: str, fd: int, name: str, st: os.stat_result) -> bool:
        """Whether ``rel`` is ``__pycache__`` bytecode exactly as its sibling source compiles (Triton wrote it)."""
        source = bytecode_source(rel)
        if source is None or st.st_size > _MAX_BYTECODE:
            return False
        try:
            pyc = _read_fd(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd), _MAX_BYTECODE)
            source_name = source.rpartition("/")[2]
            parent = os.open("..", _DIR_OPEN, dir_fd=fd)
            try:
                source_stat = os.stat(source_name, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISREG(source_stat.st_mode):
                    return False
                code = _read_fd(os.open(source_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent),
                                _MAX_BYTECODE)
            finally:
                os.close(parent)
        except OSError:
            return False
        return os.path.basename(os.path.dirname(rel)) == PYCACHE and \
            bytecode_problem(rel, pyc, code, source_stat.st_mtime) is None

    def info(self, path: str) -> dict[str, Any]:
        """{size, type ("file", "directory" or "other")} of ``path``, its last part not followed."""
        parts = self._parts(path)
        with self._located(path):
            if not parts:
                st = os.stat(self.root)
            else:
                fd = self._dir(parts[:-1])
                try:
                    st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
                finally:
                    os.close(fd)
        kind = "file" if stat.S_ISREG(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "other"
        return {"name": path, "size": st.st_size, "type": kind}

    def exists(self, path: str) -> bool:
        """Whether ``path`` is there (a symlink counts, unfollowed)."""
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def cat_file(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive; None: the end of the file) of the regular file ``path``."""
        with self._parent(path) as (fd, name), self._located(path):
            file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                if not stat.S_ISREG(os.fstat(file).st_mode):
                    raise GenRepoError([Problem(path, "", "refused: not a regular file")])
                chunks, offset = [], start
                while end is None or offset < end:
                    chunk = os.pread(file, (1 << 24) if end is None else min(1 << 24, end - offset), offset)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    offset += len(chunk)
                return b"".join(chunks)
            finally:
                os.close(file)

    # -- writing --------------------------------------------------------------------------------------------------
    def pipe_file(self, path: str, data: bytes, **_conditions: Any) -> None:
        """Replace ``path`` with ``data`` atomically: a fresh hidden file, fsynced, renamed over it, folder fsynced."""
        with self._parent(path, create=True) as (fd, name), self._located(path):
            for _ in range(100):
                temporary = f".{name[:100]}.{os.urandom(6).hex()}.partial"
                try:
                    file = os.open(temporary, _NEW_FILE_FLAGS, 0o666, dir_fd=fd)
                    break
                except FileExistsError:
                    continue
            else:
                raise LocalStoreFailed([Problem(path, "", "no fresh temporary name beside it")])
            try:
                with _DurableFile(file, "wb") as out:
                    out.write(data)
                os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=fd)
                raise
            fsync_dir(fd)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Create ``path`` holding ``data``; FileExistsError when anything is there (the publishers' lock)."""
        with self._parent(path, create=True) as (fd, name), self._located(path):
            file = os.open(name, _NEW_FILE_FLAGS, 0o666, dir_fd=fd)
            try:
                with _DurableFile(file, "wb") as out:
                    out.write(data)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
                raise
            fsync_dir(fd)

    def take_over(self, path: str, holder_token: object, data: bytes) -> bool:
        """Replace the expired lock file ``path`` whose token was ``holder_token`` by ``data``; False if it changed.

        The old file is renamed aside (of two publishers taking over, one gets it) and read there: if it is not the
        expired one, it is linked back and this returns False. Then the lock is created exclusively, as a free one is.
        """
        with self._parent(path) as (fd, name), self._located(path):
            aside = f"{name}.expired.{os.urandom(6).hex()}"
            try:
                os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
            except FileNotFoundError:
                aside = ""
            if aside:
                try:
                    moved = parse_json(_read_fd(os.open(aside, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                                        dir_fd=fd), 1 << 20), aside)
                except (OSError, GenRepoError):
                    moved = {}
                if not isinstance(moved, dict) or moved.get("token") != holder_token:
                    with contextlib.suppress(OSError):
                        os.link(aside, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                    os.unlink(aside, dir_fd=fd)
                    return False
                os.unlink(aside, dir_fd=fd)
        try:
            self.create_exclusive(path, data)
        except FileExistsError:
            return False
        return True

    def open(self, path: str, mode: str = "wb") -> io.FileIO:
        """A new file at ``path`` to write (created exclusively, fsynced on close): how artifacts are uploaded."""
        if mode != "wb":
            raise ValueError(f"LocalStore.open writes new files only (mode 'wb'), not {mode!r}")
        with self._parent(path, create=True) as (fd, name), self._located(path):
            return _DurableFile(os.open(name, _NEW_FILE_FLAGS, 0o666, dir_fd=fd), "wb")

    def rename_new(self, source: str, target: str) -> None:
        """Rename the folder ``source`` to ``target``, which must not exist (never replaced); fsync both folders.

        Where ``renameat2(RENAME_NOREPLACE)`` is missing, ``target`` is checked absent first, then renamed (a folder
        created in between is replaced only if empty: ``rename(2)`` refuses a non-empty one).
        """
        with self._parent(source) as (source_fd, source_name), \
                self._parent(target, create=True) as (target_fd, target_name), self._located(target):
            if not renameat2(source_name, target_name, RENAME_NOREPLACE, source_dir_fd=source_fd,
                             target_dir_fd=target_fd):
                try:
                    os.stat(target_name, dir_fd=target_fd, follow_symlinks=False)
                except FileNotFoundError:
                    os.rename(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                else:
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
            fsync_dir(target_fd)
            fsync_dir(source_fd)

    def rm_file(self, path: str) -> None:
        """Remove the file ``path`` (a symlink there is removed, never followed)."""
        with self._parent(path) as (fd, name), self._located(path):
            os.unlink(name, dir_fd=fd)
            fsync_dir(fd)

    def rm(self, path: str, recursive: bool = False) -> None:
        """Remove ``path``: a file, or with ``recursive`` a folder and all inside it.

        Symlinks inside are removed, never followed (``shutil.rmtree`` on a folder fd).
        """
        with self._parent(path) as (fd, name), self._located(path):
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and recursive:
                shutil.rmtree(name, dir_fd=fd)
            elif stat.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
            fsync_dir(fd)


def _read_fd(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open file ``fd`` (closed afterwards); OSError when it is not a regular file."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return stream.read(limit)
    finally:
        os.close(fd)

