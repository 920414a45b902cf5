"""Writing a model repository atomically: staging beside the destination, one swap, leftovers of dead writers.

The destination is swapped with a complete, fsynced staging folder in one step, signals deferred; a failed or killed
writer leaves it untouched, and the next writer removes its leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from generator.atomic_write import fsync_dir
from generator.errors import GenRepoError, Problem, json_pointer
from generator.json_reader import read_json
from generator.naming import model_name_problems
from generator.repository.cache import copy_hashed, process_alive
from generator.repository.files import (
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    boot_id,
    deferred_signals,
    fsync_tree,
    host,
    no_space,
    no_space_error,
    parent_lock,
    process_start_time,
    remove_tree,
    renameat2,
    walk_files,
)
from generator.repository.lock import (
    LOCK_FILE_NAME,
    LOCK_FORMAT,
    OUTPUT_MARKER,
    STAGING_MARKER,
    artifact_problems,
    read_lock,
    render_lock,
)

__all__ = ["STALE_AGE_SECONDS", "ConfigStaging", "RepositoryWriter", "config_staging", "output_refusal",
           "write_output_marker"]

#: Staging folders whose owner cannot be checked (written from another host) are stale after this long.
STALE_AGE_SECONDS = 24 * 3600


# -- output folders gen-repo made ---------------------------------------------------------------------------------
#: The marker's content: the same bytes in every output (builds stay byte-identical).
_OUTPUT_MARKER_TEXT = json.dumps({"format": "gen-repo-output/1", "note": "made by gen-repo, which replaces this folder "
                                  "whole on each build; keep nothing else here"}, sort_keys=True) + "\n"


def write_output_marker(folder: Path) -> None:
    """Mark ``folder`` (a staging folder about to become an output) as made by gen-repo: :data:`OUTPUT_MARKER`."""
    (Path(folder) / OUTPUT_MARKER).write_text(_OUTPUT_MARKER_TEXT, encoding="utf-8")


def output_refusal(destination: Path) -> str | None:
    """Why gen-repo may not replace or write into ``destination``; None when it may.

    It may when ``destination`` does not exist, is an empty folder, or is a folder gen-repo made: one holding
    :data:`OUTPUT_MARKER` (a regular file), or, made by a gen-repo from before the marker, a valid
    ``gen-repo.lock.json``. Anything else (a symlink, a file, a folder of other things) is refused, never deleted.
    """
    dest = Path(destination)
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot inspect the output folder: {error}"
    if stat.S_ISLNK(st.st_mode):
        return "the output folder is a symlink; give the folder it points to instead"
    if not stat.S_ISDIR(st.st_mode):
        return "the output path exists and is not a folder"
    try:
        names = os.listdir(dest)
    except OSError as error:
        return f"cannot list the output folder: {error}"
    if not names:
        return None
    if OUTPUT_MARKER in names and stat.S_ISREG(os.lstat(dest / OUTPUT_MARKER).st_mode):
        return None
    if LOCK_FILE_NAME in names and stat.S_ISREG(os.lstat(dest / LOCK_FILE_NAME).st_mode):
        try:
            read_lock(dest)
            return None
        except GenRepoError:
            pass
    return (f"the output folder exists and was not made by gen-repo (it holds neither {OUTPUT_MARKER} nor a "
            f"{LOCK_FILE_NAME}): gen-repo replaces only folders it made, so it is left as it is; remove it yourself "
            "or choose another folder")


# -- the writer --------------------------------------------------------------------------------------------------


class RepositoryWriter:
    """Context manager that builds a repository in staging and swaps it into ``destination`` on :meth:`commit`.

    ::

        with RepositoryWriter(Path("model_repository")) as writer:
            folder = writer.model_dir("mlp", 1)        # write artifacts here
            writer.adopt_previous("other")             # --keep-going: keep a failed model's previous build
            writer.commit(build_lock(writer.root, tool_versions, models))

    Leaving the ``with`` without ``commit`` (or through an exception / Ctrl-C) discards the staging folder.
    """

    def __init__(self, destination: Path, *, stale_after: float = STALE_AGE_SECONDS) -> None:
        self.destination = Path(os.path.abspath(destination))
        self.stale_after = stale_after
        self._staging: Path | None = None
        self._committed = False
        self._old_tree: Path | None = None
        self._models: dict[str, str] = {}  # casefolded -> name, to refuse names equal on case-insensitive systems

    # -- naming ----------------------------------------------------------------------------------------------------

    @property
    def parent(self) -> Path:
        """The folder that holds the destination and, while writing, the staging folder."""
        return self.destination.parent

    def _sibling(self, kind: str) -> Path:
        return self.parent / f".{self.destination.name}.{kind}-{os.getpid()}-{os.urandom(6).hex()}"

    def _leftover_pattern(self) -> re.Pattern[str]:
        return re.compile(rf"^\.{re.escape(self.destination.name)}\.(staging|old|trash)-(\d+)-[0-9a-f]+$")

    @property
    def root(self) -> Path:
        """The staging folder (the future repository root) while the writer is open."""
        if self._staging is None:
            raise RuntimeError("RepositoryWriter is not open; use it in a with statement")
        return self._staging

    # -- context manager -------------------------------------------------------------------------------------------

    def __enter__(self) -> RepositoryWriter:
        if self._staging is not None:
            raise RuntimeError("RepositoryWriter is already open")
        dest = self.destination
        if dest.name in ("", ".", ".."):
            raise GenRepoError([Problem(str(dest), "", "the destination must name a folder")])
        if (why := output_refusal(dest)) is not None:
            raise GenRepoError([Problem(str(dest), "", why)])
        staging = self._sibling("staging")
        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            with parent_lock(self.parent):
                self._recover()
        except OSError as error:
            raise GenRepoError([Problem(str(dest), "", f"cannot prepare the destination's folder: {error}")]) from error
        try:
            os.mkdir(staging)
            self._staging = staging
            marker = {
                "pid": os.getpid(),
                "host": host(),
                "boot_id": boot_id(),
                "start_time": process_start_time(os.getpid()),
            }
            (staging / STAGING_MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")
            write_output_marker(staging)
        except BaseException as error:
            remove_tree(staging)
            self._staging = None
            if (full := no_space(error)) is not None:
                raise no_space_error(dest, full) from error
            if isinstance(error, OSError):
                raise GenRepoError(
                    [Problem(str(dest), "", f"cannot create the staging folder beside the destination: {error}")]
                ) from error
            raise
        self._committed = False
        self._old_tree = None
        self._models = {}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        staging, self._staging = self._staging, None
        if staging is not None:
            # Not committed: staging holds the unfinished build. Committed by exchange: it holds the old tree.
            remove_tree(staging)
        if self._committed and self._old_tree is not None:
            self._discard(self._old_tree)
        self._old_tree = None
        if (full := no_space(exc)) is not None:
            raise no_space_error(self.destination, full) from exc

    # -- building --------------------------------------------------------------------------------------------------

    def _check_model_name(self, name: str) -> None:
        problems = model_name_problems(name)  # the lock file's name and gen-repo's other names included
        if not problems:
            other = self._models.get(name.casefold())
            if other is not None and other != name:
                problems = [f"model name {name!r} differs from {other!r} only by case"]
        if problems:
            raise GenRepoError([Problem(str(self.destination), json_pointer([str(name)]), p) for p in problems])

    def _inside_staging(self, path: Path) -> Path:
        """``path`` if it resolves inside staging (no symlink leads out of it), else GenRepoError."""
        root = self.root.resolve()
        resolved = path.resolve()
        if resolved != root and root not in resolved.parents:
            raise GenRepoError([Problem(str(path), "", "path resolves outside the repository being written")])
        return path

    def model_dir(self, name: str, version: int) -> Path:
        """Create and return ``<staging>/<name>/<version>`` for a model's artifacts (``config.pbtxt`` goes one up)."""
        self._check_model_name(name)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise GenRepoError(
                [Problem(str(self.destination), json_pointer([name]), f"version must be an int >= 1: {version!r}")]
            )
        model = self._inside_staging(self.root / name)
        folder = self._inside_staging(model / str(version))
        folder.mkdir(parents=True, exist_ok=True)
        self._inside_staging(folder)  # again: nothing may have raced a symlink in
        self._models[name.casefold()] = name
        return folder

    def adopt_previous(self, name: str) -> Path | None:
        """Copy model ``name`` unchanged from the current destination into staging; None when there is none.

        For ``--keep-going``: a failed model keeps its previous build, replacing anything staged for it. Only files the
        previous lock lists are copied, each checked against its sha256 and size; links and special files are refused,
        and a previous build that no longer matches its lock is not adopted (None).
        """
        self._check_model_name(name)
        source = self.destination / name
        if source.is_symlink() or not source.is_dir():
            return None
        bad = [rel for rel, st in walk_files(source) if not stat.S_ISREG(st.st_mode)]
        if bad:
            raise GenRepoError(
                [Problem(str(source / rel), "", "not a regular file; cannot adopt the previous build") for rel in bad]
            )
        listed = {rel: entry for rel, entry in ((self.previous_lock() or {}).get("artifacts") or {}).items()
                  if rel.startswith(name + "/")}
        if not listed:
            return None
        target = self._inside_staging(self.root / name)
        remove_tree(target)
        target.mkdir()
        for rel, entry in sorted(listed.items()):
            try:
                stream = open(self.destination / rel, "rb")  # noqa: SIM115 (closed by the with below)
            except OSError:
                stream = None
            if stream is None or not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                remove_tree(target)
                return None
            with stream:
                digest, size = copy_hashed(stream, self.root / rel)
            if (digest, size) != (entry["sha256"], entry["size"]):
                remove_tree(target)
                return None
        self._models[name.casefold()] = name
        return target

    def previous_lock(self) -> dict | None:
        """Read the current destination's lock file (to carry adopted models forward); None if absent/corrupt."""
        try:
            return read_lock(self.destination)
        except GenRepoError:
            return None

    # -- commit ----------------------------------------------------------------------------------------------------

    def commit(self, lock: Mapping[str, Any]) -> None:
        """Write ``lock`` as the lock file, fsync everything and swap staging into the destination atomically.

        ``lock`` comes from :func:`~generator.repository.lock.build_lock` over :attr:`root`; the staged files must
        still be the ones it lists (same paths and sizes), else GenRepoError and nothing is swapped.
        """
        staging = self.root
        if self._committed:
            raise RuntimeError("RepositoryWriter.commit was already called")
        lock_file = str(staging / LOCK_FILE_NAME)
        if not isinstance(lock, Mapping) or lock.get("format") != LOCK_FORMAT:
            raise GenRepoError([Problem(lock_file, "/format", f"not a lock from build_lock (format {LOCK_FORMAT})")])
        problems = artifact_problems(lock_file, lock.get("artifacts"))
        if problems:
            raise GenRepoError(problems)
        text = render_lock(lock)
        step = "the staging folder"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staging / STAGING_MARKER)
            self._check_staged_files(lock["artifacts"])
            step = f"the lock file {staging / LOCK_FILE_NAME}"
            with open(staging / LOCK_FILE_NAME, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            step = "the staging folder (fsync)"
            fsync_tree(staging)
        except OSError as error:
            if no_space(error) is not None:
                raise no_space_error(self.destination, error, step) from error
            raise
        try:
            with parent_lock(self.parent), deferred_signals():
                self._swap()
        except OSError as error:
            if error.errno in (errno.EXDEV, errno.EBUSY):
                raise GenRepoError(
                    [
                        Problem(
                            str(self.destination),
                            "",
                            f"cannot swap the new repository in ({error.strerror}): is the destination a mount point? "
                            "Write to a folder inside it instead; the previous repository is unchanged",
                        )
                    ]
                ) from error
            raise
        fsync_dir(self.parent)
        if self._old_tree is not None:
            self._discard(self._old_tree)
            self._old_tree = None

    def _check_staged_files(self, artifacts: Mapping[str, Mapping[str, Any]]) -> None:
        staging = self.root
        found = {rel: st for rel, st in walk_files(staging) if rel not in (LOCK_FILE_NAME, OUTPUT_MARKER)}
        lock_file = str(staging / LOCK_FILE_NAME)
        problems = [
            Problem(lock_file, json_pointer(["artifacts", rel]), "listed in the lock but not staged")
            for rel in sorted(set(artifacts) - set(found))
        ]
        problems += [
            Problem(str(staging / rel), "", "staged but not listed in the lock (written after build_lock?)")
            for rel in sorted(set(found) - set(artifacts))
        ]
        problems += [
            Problem(str(staging / rel), "", "size differs from the lock (changed after build_lock?)")
            for rel in sorted(set(found) & set(artifacts))
            if found[rel].st_size != artifacts[rel]["size"] or not stat.S_ISREG(found[rel].st_mode)
        ]
        if problems:
            raise GenRepoError(problems)

    def _swap(self) -> None:
        """Put staging in place of the destination (caller holds the parent lock and defers signals)."""
        staging, dest = self.root, self.destination
        if os.path.lexists(dest):
            if renameat2(staging, dest, RENAME_EXCHANGE):
                # One atomic step; the previous tree now sits at the staging path.
                self._committed = True
                self._old_tree = staging
                self._staging = None
                return
            aside = self._sibling("old")
            os.rename(dest, aside)
            try:
                os.rename(staging, dest)
            except BaseException:
                os.rename(aside, dest)  # put the previous repository back
                raise
            self._committed = True
            self._old_tree = aside
            self._staging = None
            return
        try:
            done = renameat2(staging, dest, RENAME_NOREPLACE)
        except FileExistsError as error:
            raise GenRepoError([Problem(str(dest), "", "the destination appeared while committing")]) from error
        if not done:
            os.rename(staging, dest)
        self._committed = True
        self._staging = None

    def _discard(self, path: Path) -> None:
        """Delete a tree that is garbage, renaming it to a trash name first (a ``.old`` aside is never half-gone)."""
        trash = self._sibling("trash")
        try:
            try:
                os.rename(path, trash)
            except FileNotFoundError:
                return
            except OSError:
                trash = path
            remove_tree(trash)
        except BaseException:
            # Ctrl-C mid-delete (or right after the rename): finish the cleanup, then let it propagate.
            remove_tree(trash)
            remove_tree(path)
            raise

    # -- crash recovery --------------------------------------------------------------------------------------------

    def _owner_gone(self, path: Path, pid: int) -> bool:
        """Whether the process that made ``path`` (a staging/old/trash sibling) is gone, so it is a leftover."""
        try:
            age = time.time() - os.lstat(path).st_mtime
        except OSError:
            return False
        marker: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError, GenRepoError):
            loaded = read_json(path / STAGING_MARKER)
            if isinstance(loaded, dict):
                marker = loaded
        if marker.get("host") not in (None, host()):
            return age > self.stale_after  # another machine's writer: its pid means nothing here
        if marker.get("boot_id") and boot_id() and marker["boot_id"] != boot_id():
            return True  # written before a reboot
        if not process_alive(pid):
            return True
        if marker.get("start_time") and marker["start_time"] != process_start_time(pid):
            return True  # the pid now belongs to another process
        return pid != os.getpid() and not marker and age > self.stale_after

    def _recover(self) -> None:
        """Clean up after writers that died: restore a complete aside if the destination is missing, delete the rest.

        Runs under the parent lock, so no live writer is between its two fallback renames.
        """
        pattern = self._leftover_pattern()
        try:
            names = sorted(os.listdir(self.parent))
        except OSError:
            return
        leftovers: dict[str, list[Path]] = {"staging": [], "old": [], "trash": []}
        for name in names:
            match = pattern.match(name)
            if match and self._owner_gone(self.parent / name, int(match.group(2))):
                leftovers[match.group(1)].append(self.parent / name)
        olds = leftovers["old"]
        if olds and not os.path.lexists(self.destination):
            # Killed between "destination -> aside" and "staging -> destination": the aside is the last complete
            # repository (an aside is renamed to trash before it is deleted, so it is never partial).
            newest = max(olds, key=lambda p: os.lstat(p).st_ctime)
            os.rename(newest, self.destination)
            fsync_dir(self.parent)
            olds.remove(newest)
        for path in olds + leftovers["staging"] + leftovers["trash"]:
            self._discard(path)


@contextlib.contextmanager
def config_staging(out_dir: Path) -> Iterator[ConfigStaging]:
    """A staging folder next to ``out_dir`` for ``gen-repo config``, removed on leaving whatever happens.

    Write model folders into :attr:`ConfigStaging.folder`, then :meth:`ConfigStaging.commit` swaps them in; leaving
    without a commit leaves ``out_dir`` as it was. Not :class:`RepositoryWriter`: configs alone have no lock file, and
    each model folder is replaced whole by one rename.
    """
    if (why := output_refusal(out_dir)) is not None:  # the caller says where it came from; this guards the rest
        raise GenRepoError([Problem(str(out_dir), "", why)])
    made = next((p for p in reversed(out_dir.parents) if not p.exists()), None)  # the first folder this makes
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=out_dir.parent))
    os.chmod(staging, 0o755)  # mkdtemp makes it private; the repository is meant to be read by a server
    write_output_marker(staging)
    try:
        yield ConfigStaging(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if made is not None and not out_dir.exists():  # no commit: the folders made for the staging go too
            shutil.rmtree(made, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class ConfigStaging:
    """Where ``gen-repo config`` writes (``folder``) before its model folders are swapped into ``out_dir``."""

    folder: Path
    out_dir: Path

    def commit(self, models: Sequence[str]) -> None:
        """Swap each of ``models`` (folders in :attr:`folder`) into ``out_dir``; other files there are left alone.

        A missing ``out_dir`` becomes the staging folder itself, by one rename (its :data:`OUTPUT_MARKER` with
        it); an existing one (empty, or made by gen-repo: see :func:`output_refusal`) gets the marker if it lacks it.
        """
        if not self.out_dir.exists():
            os.rename(self.folder, self.out_dir)
            return
        if not os.path.lexists(self.out_dir / OUTPUT_MARKER):
            os.rename(self.folder / OUTPUT_MARKER, self.out_dir / OUTPUT_MARKER)
        for model in models:
            old = self.out_dir / model
            trash = self.folder / f".old-{model}"
            if old.exists() or old.is_symlink():
                os.rename(old, trash)
            os.rename(self.folder / model, old)

