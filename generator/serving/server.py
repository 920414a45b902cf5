"""Start and stop a local ``tritonserver`` on loopback: for ``gen-repo smoke --launch``, ``gen-repo serve`` and tests.

The binary comes from a path, ``PATH`` or the ``nvidia-pytriton`` wheel. The server binds 127.0.0.1, writes nothing of
the user's (docs/guarantees.md) and is always stopped; every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from generator.atomic_write import replacing
from generator.confinement import refuse_symlinks
from generator.errors import EXIT_UNREACHABLE, GenRepoError, Problem
from generator.gpu import detect_gpus
from generator.triton.connection import Connection

__all__ = [
    "TritonBinary",
    "TritonNotFoundError",
    "TritonNotReadyError",
    "TritonServer",
    "TritonServerError",
    "TritonStartError",
    "find_tritonserver",
    "free_port",
    "launch",
    "read_log",
]

ModelControl = Literal["none", "explicit", "poll"]

#: How many lines of the server's log an error message carries.
LOG_TAIL_LINES = 40
#: Longest wait of one readiness call while polling (shorter near the deadline).
_READY_CALL_S = 2.0


# -- Errors ----------------------------------------------------------------------------------------------------------
class TritonServerError(GenRepoError):
    """A local tritonserver could not be found, started or made ready."""


class TritonNotFoundError(TritonServerError):
    """No usable tritonserver binary (bad explicit path, none on PATH, no nvidia-pytriton)."""


class TritonStartError(TritonServerError):
    """The server process could not be started or exited before it became ready."""

    exit_code = EXIT_UNREACHABLE


class TritonNotReadyError(TritonServerError):
    """The server kept running but did not report ready within the timeout."""

    exit_code = EXIT_UNREACHABLE


def _error(cls: type[TritonServerError], where: str, message: str) -> TritonServerError:
    return cls([Problem(where, "", message)])


# -- Finding the binary ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TritonBinary:
    """A tritonserver executable and what it needs to run.

    ``backend_directory`` is None when the server's own default (``/opt/tritonserver/backends``) applies;
    ``ld_library_path`` lists folders to prepend to ``LD_LIBRARY_PATH``; ``source`` says where it was found
    ("explicit", "PATH" or "nvidia-pytriton").
    """

    path: Path
    backend_directory: Path | None = None
    ld_library_path: tuple[Path, ...] = ()
    source: str = "explicit"

    def describe(self) -> str:
        """One line for logs: path and origin."""
        return f"{self.path} (from {self.source})"


def _pytriton_root() -> Path | None:
    """``<site-packages>/pytriton/tritonserver`` if nvidia-pytriton is installed (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location) / "tritonserver"
        if (root / "bin" / "tritonserver").is_file():
            return root
    return None


def _is_pytriton_layout(binary: Path) -> Path | None:
    """Return the ``tritonserver`` folder of the nvidia-pytriton install ``binary`` belongs to, else None."""
    root = binary.resolve().parent.parent
    if (root / "python_backend_stubs").is_dir() and (root / "backends" / "python").is_dir():
        return root
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gen-repo"


def _atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` via a temporary file and rename, so concurrent launches never see half a file."""
    with replacing(target) as temporary:
        shutil.copy2(source, temporary)


def _same_file_content(a: Path, b: Path) -> bool:
    if not b.is_file() or a.stat().st_size != b.stat().st_size:
        return False
    return hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def _prepare_pytriton_backends(root: Path, python_version: str) -> Path:
    """Return a backends folder whose ``python/`` holds the stub for ``python_version``.

    Idempotent. Writes into the package when it is writable, else into a cache copy of the backends folder.
    """
    stub = root / "python_backend_stubs" / python_version / "triton_python_backend_stub"
    if not stub.is_file():
        available = sorted(p.name for p in (root / "python_backend_stubs").iterdir() if p.is_dir())
        raise _error(
            TritonNotFoundError,
            str(root),
            f"nvidia-pytriton ships no Python backend stub for Python {python_version} (has: {', '.join(available)})",
        )
    backends = root / "backends"
    if os.access(backends / "python", os.W_OK):
        target = backends / "python" / "triton_python_backend_stub"
        if not _same_file_content(stub, target):
            _atomic_copy(stub, target)
        return backends
    # Read-only install: mirror the backends folder into a cache folder keyed by the install and Python version.
    key = hashlib.sha256(f"{root.resolve()}|{python_version}".encode()).hexdigest()[:16]
    cached = _cache_root() / "triton-backends" / key
    marker = cached / ".complete"
    if not marker.is_file():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=_ensure_dir(cached.parent)))
        try:
            shutil.copytree(backends, staging / "backends", symlinks=True)
            shutil.copy2(stub, staging / "backends" / "python" / "triton_python_backend_stub")
            (staging / "backends" / ".complete").write_text("ok\n")
            with contextlib.suppress(OSError):  # another launch finished first: use its copy
                os.replace(staging / "backends", cached)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return cached


def _ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _binary_for(path: Path, source: str) -> TritonBinary:
    root = _is_pytriton_layout(path)
    if root is None:
        # A container or system install: Triton's default backend directory applies unless given explicitly.
        sibling = path.resolve().parent.parent / "backends"
        return TritonBinary(path, sibling if sibling.is_dir() else None, (), source)
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    backends = _prepare_pytriton_backends(root, python_version)
    libs = root.parent.parent / "nvidia_pytriton.libs"
    return TritonBinary(path, backends, (libs,) if libs.is_dir() else (), source)


def find_tritonserver(explicit: Path | str | None = None) -> TritonBinary:
    """Locate tritonserver: ``explicit`` if given, else ``PATH``, else the nvidia-pytriton wheel's.

    Raises :class:`TritonNotFoundError` naming what was tried when none is usable.
    """
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.exists():
            raise _error(TritonNotFoundError, str(path), "tritonserver binary not found: no such file")
        if not path.is_file():
            raise _error(TritonNotFoundError, str(path), "tritonserver binary is not a file")
        if not os.access(path, os.X_OK):
            raise _error(TritonNotFoundError, str(path), "tritonserver binary is not executable")
        return _binary_for(path.absolute(), "explicit")
    on_path = shutil.which("tritonserver")
    if on_path:
        return _binary_for(Path(on_path), "PATH")
    root = _pytriton_root()
    if root is not None:
        return _binary_for(root / "bin" / "tritonserver", "nvidia-pytriton")
    raise _error(
        TritonNotFoundError,
        "<tritonserver>",
        "no tritonserver found: pass --tritonserver PATH, put it on PATH, or pip install 'gen-repo[serve]' "
        "(nvidia-pytriton ships one that runs on CPU)",
    )


# -- Ports -----------------------------------------------------------------------------------------------------------
def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (a race remains; ``wait_ready`` retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- The server ------------------------------------------------------------------------------------------------------
def _kill_group(pid: int) -> None:
    """SIGKILL a process group we created (safety net at garbage collection / interpreter exit)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@dataclass(slots=True)
class _Launch:
    """What one start() was asked for, kept to restart on a port collision."""

    model_repository: str
    args: list[str]
    env: dict[str, str]
    auto_ports: bool
    ports: dict[str, int] = field(default_factory=dict)


class TritonServer:
    """One local tritonserver process; a context manager that always stops it.

    >>> with TritonServer().start(repo) as server:   # doctest: +SKIP
    ...     server.wait_ready(60)
    ...     client = tritonclient.grpc.InferenceServerClient(server.grpc_url)
    """

    def __init__(self, binary: TritonBinary | None = None, *, tritonserver: Path | str | None = None) -> None:
        self.binary = binary if binary is not None else find_tritonserver(tritonserver)
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        self._log_path: Path | None = None
        self._own_log = False
        self._log_cache: str | None = None
        self._launch: _Launch | None = None
        self._cache_home: Path | None = None
        self._cache_home_finalizer: weakref.finalize | None = None
        self.http_port = 0
        self.grpc_port = 0
        self.metrics_port = 0

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(
        self,
        model_repository: Path | str,
        *,
        http_port: int | None = None,
        grpc_port: int | None = None,
        metrics_port: int | None = None,
        model_control: ModelControl = "none",
        load_models: Sequence[str] = (),
        disable_auto_complete_config: bool = False,
        exit_timeout_s: int = 10,
        log_verbose: int = 0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_file: Path | str | None = None,
        allow_symlinks: bool = False,
    ) -> TritonServer:
        """Start the server on 127.0.0.1 (free ports picked where not given); returns self without waiting.

        ``model_repository``: a folder (must exist) or a URL (``s3://...``); ``load_models``: ``--load-model`` (explicit
        control); ``env`` overrides the environment; the log goes to ``log_file`` or a temporary file
        (:meth:`log_text`). A folder holding a symlink is refused unless ``allow_symlinks`` (lint's real-Triton cases).
        """
        if self._process is not None:
            raise _error(TritonStartError, "<tritonserver>", "this TritonServer was already started")
        repo = str(model_repository)
        if "://" not in repo:
            repo_path = Path(repo).absolute()
            if not repo_path.is_dir():
                raise _error(TritonStartError, str(repo_path), "model repository folder does not exist")
            if not allow_symlinks:
                refuse_symlinks(repo_path)  # Triton follows a link wherever it leads: none is served (exit 2)
            repo = str(repo_path)
        args = [
            f"--model-repository={repo}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--model-control-mode={model_control}",
            f"--exit-timeout-secs={int(exit_timeout_s)}",
            f"--log-verbose={int(log_verbose)}",
        ]
        if self.binary.backend_directory is not None:
            args.append(f"--backend-directory={self.binary.backend_directory}")
        args += [f"--load-model={name}" for name in load_models]
        if disable_auto_complete_config:
            args.append("--disable-auto-complete-config")
        if not detect_gpus():
            # Without a GPU the metrics are useless, and Triton would still start DCGM's embedded host engine, which
            # appends to /var/log/nv-hostengine.log. Before extra_args, so a caller's own setting wins.
            args.append("--allow-gpu-metrics=false")
        args += list(extra_args)
        auto_ports = http_port is None and grpc_port is None and metrics_port is None
        self._cache_home = Path(tempfile.mkdtemp(prefix="tritonserver-cache-"))
        self._cache_home_finalizer = weakref.finalize(self, shutil.rmtree, self._cache_home, True)
        self._launch = _Launch(repo, args, self._environment(env), auto_ports)
        self._launch.ports = {
            "http": http_port or free_port(),
            "grpc": grpc_port or free_port(),
            "metrics": metrics_port or free_port(),
        }
        if log_file is not None:
            self._log_path, self._own_log = Path(log_file).absolute(), False
        else:
            fd, name = tempfile.mkstemp(prefix="tritonserver-", suffix=".log")
            os.close(fd)
            self._log_path, self._own_log = Path(name), True
        self._spawn()
        return self

    def _environment(self, overrides: Mapping[str, str] | None) -> dict[str, str]:
        environment = dict(os.environ)
        # The Python backend stub imports model.py's packages through the first python3 on PATH: ours.
        interpreter_bin = str(Path(sys.executable).parent)
        path_entries = [interpreter_bin, *(p for p in environment.get("PATH", "").split(os.pathsep) if p)]
        environment["PATH"] = os.pathsep.join(dict.fromkeys(path_entries))
        if self.binary.ld_library_path:
            libs = [str(p) for p in self.binary.ld_library_path]
            existing = [p for p in environment.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
            environment["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys([*libs, *existing]))
        # Serving must not change the repository: the Python backend would write __pycache__ next to model.py.
        environment.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        if self._cache_home is not None:
            # What the server's libraries cache per user (onnxruntime's device database, in ~/.cache) goes into this
            # server's own folder, removed at stop. HOME itself stays: Triton reads cloud credentials from it
            # (~/.aws, ~/.config/gcloud) for s3:// and gs:// repositories, and Python its user site-packages.
            environment["XDG_CACHE_HOME"] = str(self._cache_home)
        if overrides:
            environment.update(overrides)
        return environment

    def _spawn(self) -> None:
        assert self._launch is not None and self._log_path is not None
        ports = self._launch.ports
        self.http_port, self.grpc_port, self.metrics_port = ports["http"], ports["grpc"], ports["metrics"]
        command = [
            str(self.binary.path),
            *self._launch.args,
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
        ]
        self._log_cache = None
        with open(self._log_path, "ab") as log:
            try:
                # Own session: Ctrl-C at a terminal reaches us, not the server, so stop() shuts it down in order;
                # and the group id lets stop() reach the Python backend stubs too.
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self._launch.env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise _error(TritonStartError, str(self.binary.path), f"cannot start tritonserver: {exc}") from exc
        self._finalizer = weakref.finalize(self, _kill_group, self._process.pid)

    def wait_ready(self, timeout: float = 60.0, *, poll_interval: float = 0.25) -> None:
        """Block until the server reports ready over gRPC, at most ``timeout`` seconds.

        Raises :class:`TritonStartError` with the log tail as soon as the process exits, and
        :class:`TritonNotReadyError` with the log tail at the deadline. With automatically picked ports, a launch
        that lost a port race (another process took the port) is retried on new ports, up to twice.
        """
        from tritonclient.utils import InferenceServerException

        process = self._require_process()
        deadline = time.monotonic() + timeout
        retries = 2
        client = Connection(self.grpc_url, "grpc", _READY_CALL_S)
        try:
            while True:
                code = process.poll()
                if code is not None:
                    if retries and self._lost_port_race():
                        retries -= 1
                        client.close()
                        self._respawn_on_new_ports()
                        process = self._require_process()
                        client = Connection(self.grpc_url, "grpc", _READY_CALL_S)
                        continue
                    raise _error(
                        TritonStartError,
                        str(self.binary.path),
                        f"tritonserver exited with code {code} before it was ready; log tail:\n{self.log_tail()}",
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _error(
                        TritonNotReadyError,
                        self.grpc_url,
                        f"tritonserver was not ready within {timeout:g} s; log tail:\n{self.log_tail()}",
                    )
                with contextlib.suppress(InferenceServerException):
                    if client.ready(timeout=max(0.1, min(_READY_CALL_S, remaining))):
                        return
                time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        finally:
            client.close()

    def _lost_port_race(self) -> bool:
        if self._launch is None or not self._launch.auto_ports:
            return False
        # Triton: "failed to start GRPC service: Unavailable - Socket '127.0.0.1:N' already in use".
        text = self.log_text().lower()
        return "already in use" in text or "failed to bind" in text

    def _respawn_on_new_ports(self) -> None:
        assert self._launch is not None
        self._reap()
        self._launch.ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
        self._spawn()

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the server: SIGTERM, wait up to ``timeout`` s, then SIGKILL its process group. Idempotent.

        Returns the server's exit code (None if it was never started). Leftover processes of its group (Python
        backend stubs) are killed too. Interrupting the wait (Ctrl-C) still kills the server before re-raising.
        """
        process = self._process
        if process is None:
            self._remove_cache_home()
            return None
        try:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=timeout)
        finally:
            self._reap()
            self._finish_log()
            self._remove_cache_home()
        return process.returncode

    def _remove_cache_home(self) -> None:
        """Delete the server's private XDG_CACHE_HOME (the finalizer runs once: here, or at garbage collection)."""
        if self._cache_home_finalizer is not None:
            self._cache_home_finalizer()

    def _reap(self) -> None:
        """Kill whatever is left of the process group and collect the exit status (never blocks for long)."""
        process = self._process
        if process is None:
            return
        _kill_group(process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        if self._finalizer is not None:
            self._finalizer.detach()

    def _finish_log(self) -> None:
        if self._own_log and self._log_path is not None:
            self._log_cache = self._read_log()
            with contextlib.suppress(FileNotFoundError):
                self._log_path.unlink()
            self._log_path = None

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- state and addresses --------------------------------------------------------------------------------------
    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise _error(TritonStartError, "<tritonserver>", "the server was not started")
        return self._process

    @property
    def pid(self) -> int | None:
        """The server process id (also its process group id), None before start."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """Exit code once the process has ended."""
        return None if self._process is None else self._process.poll()

    @property
    def grpc_url(self) -> str:
        """``127.0.0.1:PORT`` for ``tritonclient.grpc``."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """``127.0.0.1:PORT`` for ``tritonclient.http``."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        """Prometheus metrics endpoint."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    # -- log ------------------------------------------------------------------------------------------------------
    def _read_log(self) -> str:
        return read_log(self._log_path) if self._log_path is not None else ""

    def log_text(self) -> str:
        """Everything the server printed so far (kept after stop)."""
        if self._log_cache is not None:
            return self._log_cache
        return self._read_log()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """Return the last ``lines`` lines of the log, for error messages."""
        text = self.log_text().rstrip("\n")
        return "\n".join(text.splitlines()[-lines:]) if text else "(empty log)"


def read_log(path: Path) -> str:
    """A tritonserver log file written by :meth:`TritonServer.start` (``log_file``), "" when there is none."""
    if not path.is_file():
        return ""
    return path.read_text(errors="replace")


@contextlib.contextmanager
def launch(
    model_repository: Path | str,
    *,
    tritonserver: Path | str | None = None,
    ready_timeout: float = 120.0,
    stop_timeout: float = 15.0,
    **start_options: object,
) -> Iterator[TritonServer]:
    """Start a server, wait until ready, yield it, and always stop it (also on errors and Ctrl-C).

    ``start_options`` are :meth:`TritonServer.start`'s keyword arguments.
    """
    server = TritonServer(tritonserver=tritonserver)
    try:
        server.start(model_repository, **start_options)  # type: ignore[arg-type]
        server.wait_ready(ready_timeout)
        yield server
    finally:
        server.stop(stop_timeout)
