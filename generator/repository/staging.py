"""Writing a model repository atomically, its lock file, and checking a repository against its lock file.

A build writes into a staging folder beside the destination (``<parent>/.<name>.staging-<pid>-<random>``, the same
file system, so renames are atomic) and swaps it in only in :meth:`RepositoryWriter.commit`:

- destination exists, Linux: ``renameat2(staging, destination, RENAME_EXCHANGE)`` swaps the two folders in one
  atomic step; there is no instant where ``destination`` is missing or half-written. The previous tree, now at the
  staging path, is then deleted.
- ``renameat2`` unavailable (old kernel/libc, a file system without RENAME_EXCHANGE): ``destination`` is renamed
  aside to ``.<name>.old-<pid>-<random>``, staging renamed to ``destination``, the aside deleted. A process killed
  between the two renames leaves ``destination`` missing and a complete aside; the next writer puts it back.
- no destination yet: one rename (``RENAME_NOREPLACE`` where available, so an existing folder is never clobbered).

Before the swap every file and folder in staging is fsynced; after it the parent folder is. The swap itself runs
with SIGINT/SIGTERM deferred (main thread), so Ctrl-C lands before or after it, never in between. Anything that goes
wrong inside the ``with`` (an exception, Ctrl-C, leaving it without ``commit``) removes the staging folder and
leaves the destination untouched; a SIGKILLed writer's leftovers are removed by the next writer (see ``_recover``).
Nothing is written outside ``destination.parent``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from generator.atomic_write import fsync_dir
from generator.bounded import read_text
from generator.confinement import confined_file, name_problem, relative_path_problem
from generator.errors import GenRepoError, Problem, json_pointer
from generator.naming import WARMUP_FOLDER, model_name_problems, version_folder_problem, versioned_folder
from generator.repository.cache import copy_hashed, hash_file, process_alive

LOCK_FILE_NAME = "gen-repo.lock.json"
LOCK_FORMAT = "gen-repo-lock/1"
#: Inside a staging folder only: who owns it (removed before the swap, never part of a repository).
STAGING_MARKER = ".gen-repo-staging.json"
#: ``verify`` reads bytecode up to this size to compare it with its source; larger files are refused unread.
MAX_BYTECODE_BYTES = 64 << 20
#: At the root of every output folder gen-repo makes (build and config): the evidence that it may replace it.
OUTPUT_MARKER = ".gen-repo-output"
#: Staging folders whose owner cannot be checked (written from another host) are stale after this long.
STALE_AGE_SECONDS = 24 * 3600

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WINDOWS_ABSOLUTE = re.compile(r"^[A-Za-z]:[\\/]")
_NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


# -- small system helpers ----------------------------------------------------------------------------------------
def _host() -> str:
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


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(source, target, flags)``: True when done, False when unsupported here; OSError otherwise."""
    function = _libc_renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
        return False  # kernel or file system without this flag: use the portable path
    raise OSError(code, os.strerror(code), str(source), None, str(target))


@contextlib.contextmanager
def _parent_lock(parent: Path) -> Iterator[None]:
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
def _deferred_signals() -> Iterator[None]:
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


def _process_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat); tells a reused pid apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _no_space(error: BaseException | None) -> OSError | None:
    """``error`` when it is a full disk (ENOSPC) or an exceeded quota (EDQUOT), else None."""
    return error if isinstance(error, OSError) and error.errno in _NO_SPACE else None


def _no_space_error(destination: Path, error: OSError, what: str | None = None) -> GenRepoError:
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


def copy_tree(source: Path, target: Path) -> None:
    """Copy a folder's files (sorted, regular files only), raising the first OSError as is.

    Not ``shutil.copytree``: it gathers failures into one ``shutil.Error`` without an errno, so a full disk would
    not be recognised as ENOSPC (tests/test_faults.py::test_full_disk_*).
    """
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Write ``files`` (root-relative POSIX path -> text or bytes) under the folder ``root``, creating folders.

    Paths are taken as given (callers pass validated, relative names). Written with ``os`` calls relative to an open
    descriptor of ``root`` and each folder made once: about half the cost of ``Path.mkdir(parents=True)`` plus
    ``write_text`` per file, which counts when a repository has thousands of models (bench/bench_config_gen.py).
    Files are created with mode 0o666 minus the umask and replaced if present; text is written as UTF-8.
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


def _remove_tree(path: Path) -> None:
    """Remove a file or folder, ignoring what is already gone."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _fsync_tree(root: Path) -> None:
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


def _walk_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(relative posix path, lstat) of everything under ``root`` that is not a folder; symlinked folders included."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + linked):
            path = os.path.join(dirpath, name)
            yield Path(path).relative_to(root).as_posix(), os.lstat(path)
        dirnames[:] = [d for d in dirnames if d not in linked]


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


# -- lock file ---------------------------------------------------------------------------------------------------


def _absolute_paths(value: Any, pointer: list[str | int]) -> Iterator[str]:
    """JSON pointers of strings in ``value`` that look like absolute paths (they would break determinism)."""
    if isinstance(value, str):
        if value.startswith("/") or value.startswith("\\\\") or _WINDOWS_ABSOLUTE.match(value):
            yield json_pointer(pointer)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _absolute_paths(item, [*pointer, str(key)])
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _absolute_paths(item, [*pointer, index])


def build_lock(repo_dir: Path, tool_versions: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]) -> dict:
    """Build the lock file for the repository at ``repo_dir``: every artifact's sha256 and size, tool versions, models.

    ``models`` maps each model name to what identifies its build (``spec_sha256``, ``cache_key``, ``target``, ...).
    The result has no absolute paths and no timestamps, so the same inputs give the same lock file wherever they
    are built. Raises GenRepoError when the tree holds a symlink or special file, a top-level folder that is not a
    listed model (or the reverse), or when the metadata holds an absolute path.
    """
    repo_dir = Path(repo_dir)
    lock_file = str(repo_dir / LOCK_FILE_NAME)
    problems: list[Problem] = []
    artifacts: dict[str, dict[str, Any]] = {}
    for rel, st in _walk_files(repo_dir):
        if rel in (LOCK_FILE_NAME, STAGING_MARKER, OUTPUT_MARKER):
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(str(repo_dir / rel), "", "not a regular file (symlinks and devices are refused)"))
            continue
        artifacts[rel] = {"sha256": hash_file(repo_dir / rel), "size": st.st_size}

    folders = {entry.name for entry in repo_dir.iterdir() if entry.is_dir() and not entry.is_symlink()}
    problems += [
        Problem(str(repo_dir / name), "", "folder at the repository root is not a model listed in the lock file")
        for name in sorted(folders - set(models))
    ]
    problems += [
        Problem(lock_file, json_pointer(["models", name]), "model has no folder in the repository")
        for name in sorted(set(models) - folders)
    ]
    for name, entry in models.items():
        if not isinstance(entry, Mapping):
            problems.append(Problem(lock_file, json_pointer(["models", name]), "model entry must be an object"))
    problems += [
        Problem(lock_file, pointer, "absolute path in the lock file (it must not depend on where it was built)")
        for pointer in [
            *_absolute_paths(dict(tool_versions), ["tool_versions"]),
            *_absolute_paths(dict(models), ["models"]),
        ]
    ]
    if problems:
        raise GenRepoError(problems)
    lock = {
        "format": LOCK_FORMAT,
        "tool_versions": dict(tool_versions),
        "models": {name: dict(entry) for name, entry in models.items()},
        "artifacts": dict(sorted(artifacts.items())),
    }
    try:
        # A round trip checks that it is JSON data and detaches it from the caller's objects.
        return dict(json.loads(render_lock(lock)))
    except (TypeError, ValueError) as error:
        raise GenRepoError([Problem(lock_file, "", f"lock file content is not JSON data: {error}")]) from error


def render_lock(lock: Mapping[str, Any]) -> str:
    """Render the lock file's text: sorted keys, 2-space indent, trailing newline (identical data, identical bytes)."""
    return json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _artifact_problems(lock_file: str, artifacts: Any) -> list[Problem]:
    if not isinstance(artifacts, dict):
        return [Problem(lock_file, "/artifacts", "must be an object of relative path -> {sha256, size}")]
    problems = []
    for rel, entry in artifacts.items():
        pointer = json_pointer(["artifacts", rel])
        # The one rule for paths a repository file names (generator.confinement), plus no "" or "." component: a
        # lock lists each file by exactly one name. A version folder's name is told first (its own message).
        plain = relative_path_problem(rel) or next(
            ("has an empty or '.' component" for part in rel.split("/") if part in ("", ".")), None)
        if (held := versioned_folder(rel)) is not None and (why := version_folder_problem(held[1])) is not None:
            problems.append(Problem(lock_file, pointer, why))
        elif plain is not None:
            problems.append(Problem(lock_file, pointer, f"artifact path is not a plain relative path: it {plain}"))
        elif (
            not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
            or not _SHA256.match(entry["sha256"])
            or not isinstance(entry.get("size"), int)
            or isinstance(entry.get("size"), bool)
            or entry["size"] < 0
        ):
            problems.append(Problem(lock_file, pointer, "artifact entry must be {sha256: 64 hex digits, size: int}"))
    return problems


def _model_problems(lock_file: str, models: Any, artifacts: Any) -> list[Problem]:
    """``models``: name -> object, ``version`` (where given) a positive integer; artifacts inside listed models."""
    if not isinstance(models, dict):
        return [Problem(lock_file, "/models", "must be an object of model name -> {version, ...}")]
    problems = []
    for name, entry in models.items():
        pointer = json_pointer(["models", name])
        version = entry.get("version") if isinstance(entry, dict) else None
        if not name or (why := name_problem(name)) is not None:
            problems.append(Problem(lock_file, pointer, "model name is not a plain folder name"
                                    + (f": it {why}" if name else "")))
        elif not isinstance(entry, dict):
            problems.append(Problem(lock_file, pointer, "model entry must be an object"))
        elif "version" in entry and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            problems.append(Problem(lock_file, f"{pointer}/version", f"must be a positive integer, not {version!r}"))
    if isinstance(artifacts, dict):
        problems += [
            Problem(lock_file, json_pointer(["artifacts", rel]), "artifact is in a folder that is not a model listed "
                                                                 "under /models")
            for rel in artifacts if "/" in rel and rel.split("/")[0] not in models
        ]
    return problems


def lock_problems(lock: Any, lock_file: str) -> list[Problem]:
    """Every way ``lock`` (parsed JSON) is not a valid lock file: the one definition verify and publish share."""
    if not isinstance(lock, dict):
        return [Problem(lock_file, "", "corrupt: the lock file must be a JSON object")]
    problems = []
    if lock.get("format") != LOCK_FORMAT:
        problems.append(Problem(lock_file, "/format", f"corrupt: expected {LOCK_FORMAT!r}, got {lock.get('format')!r}"))
    problems += _artifact_problems(lock_file, lock.get("artifacts"))
    problems += _model_problems(lock_file, lock.get("models"), lock.get("artifacts"))
    return problems


def read_lock(repo_dir: Path) -> dict:
    """Read the lock file of the repository at ``repo_dir``; GenRepoError (naming the file) when missing or corrupt."""
    lock_path = Path(repo_dir) / LOCK_FILE_NAME
    lock_file = str(lock_path)
    try:
        text = read_text(lock_path, "lock_bytes")
    except FileNotFoundError as error:
        raise GenRepoError([Problem(lock_file, "", "missing: not a repository written by gen-repo")]) from error
    except (OSError, UnicodeDecodeError) as error:
        raise GenRepoError([Problem(lock_file, "", f"cannot read the lock file: {error}")]) from error
    try:
        lock = json.loads(text)
    except ValueError as error:
        raise GenRepoError([Problem(lock_file, "", f"corrupt: not valid JSON ({error})")]) from error
    problems = lock_problems(lock, lock_file)
    if problems:
        raise GenRepoError(problems)
    return dict(lock)


def verify_repository(path: Path) -> list[Problem]:
    """Every way the repository at ``path`` differs from its lock file; empty when it matches exactly.

    Reports, each naming the file: a missing or corrupt lock file; artifacts modified (size or sha256 differs),
    missing, or not regular files; files present but not listed (unexpected); symlinks and special files anywhere
    (refused: a repository holds regular files only). The one thing passed without a lock entry is bytecode in a
    ``__pycache__`` folder that is exactly what a locked, unmodified ``.py`` compiles to under this Python
    (:mod:`generator.repository.bytecode`): what Triton's Python backend writes when it loads ``model.py``.
    """
    repo = Path(path)
    if not repo.is_dir():
        return [Problem(str(repo), "", "not a directory")]
    lock_path = repo / LOCK_FILE_NAME
    if lock_path.is_symlink():
        return [Problem(str(lock_path), "", "refused: the lock file is a symlink (a repository holds regular files "
                        "only)")]
    try:
        lock = read_lock(repo)
    except GenRepoError as error:
        return error.problems
    artifacts: dict[str, dict[str, Any]] = lock["artifacts"]
    problems = []
    intact: set[str] = set()  # artifacts that match the lock exactly
    for rel in sorted(artifacts):
        expected = artifacts[rel]
        pointer = json_pointer(["artifacts", rel])
        try:  # nothing is read through a folder that leads out of the repository
            file = confined_file(repo, rel)
        except ValueError as error:
            problems.append(Problem(str(repo / rel), pointer, f"refused: {error}"))
            continue
        try:
            st = os.lstat(file)
        except FileNotFoundError:
            problems.append(Problem(str(file), pointer, "missing: listed in the lock file but not present"))
            continue
        except OSError as error:
            problems.append(Problem(str(file), pointer, f"cannot read: {error}"))
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(str(file), pointer, "modified: no longer a regular file"))
        elif st.st_size != expected["size"]:
            problems.append(
                Problem(str(file), pointer, f"modified: {st.st_size} bytes, the lock file says {expected['size']}")
            )
        elif (actual := hash_file(file)) != expected["sha256"]:
            problems.append(
                Problem(str(file), pointer, f"modified: sha256 {actual}, the lock file says {expected['sha256']}")
            )
        else:
            intact.add(rel)
    for rel, st in _walk_files(repo):
        if rel in artifacts or rel == LOCK_FILE_NAME:
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "a special file (FIFO, device or socket)"
            problems.append(Problem(str(repo / rel), "", f"refused: {kind}; a repository holds regular files only"))
        elif rel == OUTPUT_MARKER:
            continue
        elif (why := _unlisted_problem(repo, rel, st, artifacts, intact)) is not None:
            problems.append(Problem(str(repo / rel), "", why))
    return problems + _version_folder_problems(repo, lock["models"])


def _version_folder_problems(repo: Path, models: Mapping[str, Any]) -> list[Problem]:
    """Folders of the listed models and of their warmup data that are not exactly the version they read as.

    :func:`generator.naming.version_folder_problem`; empty folders included: Triton and gen-repo would read them as
    different versions.
    """
    problems = []
    for model in sorted(models):
        for folder in (repo / model, repo / model / WARMUP_FOLDER):
            try:
                with os.scandir(folder) as entries:
                    names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue  # no such folder (a missing model is reported above)
            problems += [Problem(str(folder / name), "", why) for name in names
                         if (why := version_folder_problem(name)) is not None]
    return problems


def _unlisted_problem(repo: Path, rel: str, st: os.stat_result, artifacts: Mapping[str, Any],
                      intact: set[str]) -> str | None:
    """Why the unlisted regular file ``rel`` is refused; None for bytecode its intact, locked source compiles to."""
    from generator.repository.bytecode import bytecode_problem, bytecode_source

    source = bytecode_source(rel)
    if source is None:
        return "unexpected: not listed in the lock file"
    if source not in artifacts:
        return f"unexpected: bytecode whose source {source!r} is not listed in the lock file"
    if source not in intact:
        return f"unexpected: bytecode of {source!r}, which does not match the lock file"
    if st.st_size > MAX_BYTECODE_BYTES:  # read nothing that large into memory: no model.py compiles to it
        return f"refused: bytecode of {st.st_size} bytes (more than {MAX_BYTECODE_BYTES}) (source {source!r})"
    try:
        source_path = repo / source
        with open(repo / rel, "rb") as stream:
            pyc = stream.read(MAX_BYTECODE_BYTES + 1)
        why = bytecode_problem(rel, pyc, source_path.read_bytes(), os.stat(source_path).st_mtime)
    except OSError as error:
        return f"cannot read: {error}"
    return None if why is None else f"refused: {why} (source {source!r})"


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
            with _parent_lock(self.parent):
                self._recover()
        except OSError as error:
            raise GenRepoError([Problem(str(dest), "", f"cannot prepare the destination's folder: {error}")]) from error
        try:
            os.mkdir(staging)
            self._staging = staging
            marker = {
                "pid": os.getpid(),
                "host": _host(),
                "boot_id": _boot_id(),
                "start_time": _process_start_time(os.getpid()),
            }
            (staging / STAGING_MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")
            write_output_marker(staging)
        except BaseException as error:
            _remove_tree(staging)
            self._staging = None
            if (full := _no_space(error)) is not None:
                raise _no_space_error(dest, full) from error
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
            _remove_tree(staging)
        if self._committed and self._old_tree is not None:
            self._discard(self._old_tree)
        self._old_tree = None
        if (full := _no_space(exc)) is not None:
            raise _no_space_error(self.destination, full) from exc

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

        For ``--keep-going``: a model that failed to build keeps its previous build. Anything already staged for
        that model (a partial build) is replaced. Symlinks and special files in the previous model are refused.
        Only the files the previous lock lists are copied, each checked against its sha256 and size as it is
        copied: bytecode a server wrote and anything planted since are left behind, and a previous build that no
        longer matches its lock is not adopted (None), so the new lock never vouches for bytes nobody checked.
        """
        self._check_model_name(name)
        source = self.destination / name
        if source.is_symlink() or not source.is_dir():
            return None
        bad = [rel for rel, st in _walk_files(source) if not stat.S_ISREG(st.st_mode)]
        if bad:
            raise GenRepoError(
                [Problem(str(source / rel), "", "not a regular file; cannot adopt the previous build") for rel in bad]
            )
        listed = {rel: entry for rel, entry in ((self.previous_lock() or {}).get("artifacts") or {}).items()
                  if rel.startswith(name + "/")}
        if not listed:
            return None
        target = self._inside_staging(self.root / name)
        _remove_tree(target)
        target.mkdir()
        for rel, entry in sorted(listed.items()):
            try:
                stream = open(self.destination / rel, "rb")  # noqa: SIM115 (closed by the with below)
            except OSError:
                stream = None
            if stream is None or not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                _remove_tree(target)
                return None
            with stream:
                digest, size = copy_hashed(stream, self.root / rel)
            if (digest, size) != (entry["sha256"], entry["size"]):
                _remove_tree(target)
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

        ``lock`` comes from :func:`build_lock` over :attr:`root`; the staged files must still be the ones it lists
        (same paths and sizes), else GenRepoError and nothing is swapped.
        """
        staging = self.root
        if self._committed:
            raise RuntimeError("RepositoryWriter.commit was already called")
        lock_file = str(staging / LOCK_FILE_NAME)
        if not isinstance(lock, Mapping) or lock.get("format") != LOCK_FORMAT:
            raise GenRepoError([Problem(lock_file, "/format", f"not a lock from build_lock (format {LOCK_FORMAT})")])
        problems = _artifact_problems(lock_file, lock.get("artifacts"))
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
            _fsync_tree(staging)
        except OSError as error:
            if _no_space(error) is not None:
                raise _no_space_error(self.destination, error, step) from error
            raise
        try:
            with _parent_lock(self.parent), _deferred_signals():
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
        found = {rel: st for rel, st in _walk_files(staging) if rel not in (LOCK_FILE_NAME, OUTPUT_MARKER)}
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
            if _renameat2(staging, dest, _RENAME_EXCHANGE):
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
            done = _renameat2(staging, dest, _RENAME_NOREPLACE)
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
            _remove_tree(trash)
        except BaseException:
            # Ctrl-C mid-delete (or right after the rename): finish the cleanup, then let it propagate.
            _remove_tree(trash)
            _remove_tree(path)
            raise

    # -- crash recovery --------------------------------------------------------------------------------------------

    def _owner_gone(self, path: Path, pid: int) -> bool:
        """Whether the process that made ``path`` (a staging/old/trash sibling) is gone, so it is a leftover."""
        try:
            age = time.time() - os.lstat(path).st_mtime
        except OSError:
            return False
        marker: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(read_text(path / STAGING_MARKER))
            if isinstance(loaded, dict):
                marker = loaded
        if marker.get("host") not in (None, _host()):
            return age > self.stale_after  # another machine's writer: its pid means nothing here
        if marker.get("boot_id") and _boot_id() and marker["boot_id"] != _boot_id():
            return True  # written before a reboot
        if not process_alive(pid):
            return True
        if marker.get("start_time") and marker["start_time"] != _process_start_time(pid):
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

    Write the model folders into :attr:`ConfigStaging.folder` (any process may), then :meth:`ConfigStaging.commit`
    swaps them in. Leaving without a commit (a problem, an interrupt) leaves ``out_dir`` as it was. Not
    :class:`RepositoryWriter`: a folder of configs alone has no lock file to commit, and each model folder is
    replaced whole by one rename.
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


__all__ = [
    "LOCK_FILE_NAME",
    "LOCK_FORMAT",
    "OUTPUT_MARKER",
    "ConfigStaging",
    "RepositoryWriter",
    "build_lock",
    "lock_problems",
    "config_staging",
    "output_refusal",
    "read_lock",
    "render_lock",
    "verify_repository",
    "write_files",
    "write_output_marker",
]
