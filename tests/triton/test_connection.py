"""A server that accepts connections and never answers cannot hang gen-repo: every network call has a deadline.

The "server" is a deliberate bare socket on 127.0.0.1 (a free port) that accepts every connection and never reads or
writes: the worst case for a client, which gets a TCP connection and then nothing. Each command and the client library
must come back with the documented "unreachable" result (exit code 3, :class:`ServerUnreachableError`). The bounds are
generous (a hang is unbounded, slowness is not the question): the CLI runs in a subprocess killed after
``_HANG_S``, the library call in a thread joined for as long; pytest-timeout is the backstop for both.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from generator.client import ModelContract
from generator.errors import EXIT_UNREACHABLE
from generator.triton.connection import ServerUnreachableError

#: The deadline each command gets (its --timeout): short, so the tests stay quick.
_DEADLINE_S = "1"
#: Far more than any deadline above plus a Python start: past this the command hangs.
_HANG_S = 60.0

PROTOCOLS = ["grpc", "http"]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a listener that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed: the test is over
                return
            accepted.append(conn)  # kept open, never read: the client waits for an answer that never comes

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        for conn in accepted:
            conn.close()


def _gen_repo(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``gen-repo ARGS`` in a fresh interpreter; fail the test (not hang it) when it does not return."""
    command = [sys.executable, "-c", "from generator.cli import main; main()", *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=_HANG_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gen-repo {' '.join(args)} hung against a server that never answers (killed after {_HANG_S} s)")


@pytest.mark.timeout(2 * _HANG_S)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_perf_returns_unreachable(silent_server: str, protocol: str) -> None:
    # No --repo: the model list comes from the server's repository index (the call that had no deadline).
    done = _gen_repo("perf", "--url", silent_server, "-i", protocol, "--engine", "loop", "--timeout", _DEADLINE_S,
                     "--duration", "1", "--concurrency", "1")
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert silent_server in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(2 * _HANG_S)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_smoke_returns_unreachable(silent_server: str, protocol: str) -> None:
    done = _gen_repo("smoke", "--url", silent_server, "--protocol", protocol, "--timeout", _DEADLINE_S)
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert "server unreachable" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.timeout(2 * _HANG_S)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_check_request_returns_unreachable(silent_server: str, protocol: str, tmp_path: Path) -> None:
    request = tmp_path / "request.npz"
    np.savez(request, INPUT0=np.zeros((1, 4), dtype=np.float32))
    done = _gen_repo("check-request", "--url", silent_server, "--protocol", protocol, "--timeout", _DEADLINE_S,
                     "mlp", str(request))
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert "get_model_config('mlp') failed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(2 * _HANG_S)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_library_raises_unreachable(silent_server: str, protocol: str) -> None:
    outcome: list[BaseException | ModelContract] = []

    def ask() -> None:
        try:
            outcome.append(ModelContract.from_server(silent_server, "mlp", protocol=protocol, timeout=1.0))
        except BaseException as exc:  # whatever it raises is the result under test
            outcome.append(exc)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(_HANG_S)
    assert not thread.is_alive(), f"ModelContract.from_server hung against a server that never answers ({protocol})"
    (error,) = outcome
    assert isinstance(error, ServerUnreachableError), repr(error)
    assert error.exit_code == EXIT_UNREACHABLE
    assert isinstance(error, ConnectionError)  # callers that caught the HTTP client's OSError still catch it
    assert error.problems[0].file == silent_server


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nothing_listening_is_unreachable_too(protocol: str) -> None:
    from generator.serving.server import free_port

    with pytest.raises(ServerUnreachableError):
        ModelContract.from_server(f"127.0.0.1:{free_port()}", "mlp", protocol=protocol, timeout=5.0)
