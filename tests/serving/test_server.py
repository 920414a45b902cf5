"""generator.serving.server: a real tritonserver (nvidia-pytriton) launched on loopback, and its failure modes."""

from __future__ import annotations

import os
import socket
import stat
import textwrap
from pathlib import Path

import numpy as np
import pytest

from generator.errors import GenRepoError
from generator.serving.server import (
    TritonNotFoundError,
    TritonServer,
    TritonStartError,
    find_tritonserver,
    free_port,
    launch,
)
from tests.requirements import missing

TRIVIAL_CONFIG = """\
name: "double"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

TRIVIAL_MODEL = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def _group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group ``pgid``, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def _trivial_repo(root: Path) -> Path:
    version = root / "double" / "1"
    version.mkdir(parents=True)
    (root / "double" / "config.pbtxt").write_text(TRIVIAL_CONFIG)
    (version / "model.py").write_text(TRIVIAL_MODEL)
    return root


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_find_tritonserver_default_has_python_stub() -> None:
    try:
        binary = find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", str(exc)) from exc
    assert binary.path.is_file()
    if binary.source == "nvidia-pytriton":
        assert binary.backend_directory is not None
        assert (binary.backend_directory / "python" / "triton_python_backend_stub").is_file()
        assert binary.ld_library_path and binary.ld_library_path[0].is_dir()
        # Idempotent: a second lookup gives the same answer and leaves the stub in place.
        assert find_tritonserver() == binary


@pytest.mark.parametrize("bad", ["/nonexistent/tritonserver", "."])
def test_bad_binary_path_is_clear(bad: str) -> None:
    with pytest.raises(TritonNotFoundError) as info:
        TritonServer(tritonserver=bad)
    assert isinstance(info.value, GenRepoError)
    assert "tritonserver binary" in str(info.value)
    assert str(Path(bad)) in str(info.value)


def test_not_executable_binary(tmp_path: Path) -> None:
    fake = tmp_path / "tritonserver"
    fake.write_text("#!/bin/sh\n")
    with pytest.raises(TritonNotFoundError, match="not executable"):
        find_tritonserver(fake)


def test_missing_repository_is_clear(tmp_path: Path) -> None:
    fake = tmp_path / "tritonserver"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(TritonStartError, match="model repository folder does not exist"):
        TritonServer(tritonserver=fake).start(tmp_path / "nope")


def test_early_exit_reports_log(tmp_path: Path) -> None:
    """A 'server' that dies at once is reported fast with its own output, not after the readiness timeout."""
    fake = tmp_path / "tritonserver"
    fake.write_text("#!/bin/sh\necho 'boom: cannot start, args:' \"$@\"\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "repo").mkdir()
    server = TritonServer(tritonserver=fake).start(tmp_path / "repo")
    try:
        with pytest.raises(TritonStartError) as info:
            server.wait_ready(timeout=60)
    finally:
        server.stop()
    message = str(info.value)
    assert "exited with code 3" in message
    assert "boom: cannot start" in message
    assert "--http-address=127.0.0.1" in message  # loopback only
    assert server.log_text().startswith("boom")  # log kept after stop


@pytest.mark.triton
def test_empty_repository_ready_and_stop_leaves_nothing(tmp_path: Path, triton_server_factory) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    (tmp_path / "repo").mkdir()
    server = triton_server_factory(tmp_path / "repo", ready_timeout=60)
    assert server.running
    pid = server.pid
    assert pid is not None
    assert grpcclient.InferenceServerClient(server.grpc_url).is_server_live(client_timeout=5)
    assert httpclient.InferenceServerClient(server.http_url, connection_timeout=5).is_server_ready()
    server.stop(timeout=20)
    assert not server.running
    assert _group_members(pid) == []
    assert "Waiting for in-flight requests" in server.log_text()
    assert server.stop() == server.returncode  # idempotent


@pytest.mark.triton
def test_python_model_served_and_stub_stopped(tmp_path: Path, triton_server_factory) -> None:
    import tritonclient.grpc as grpcclient

    repo = _trivial_repo(tmp_path / "repo")
    server = triton_server_factory(repo, ready_timeout=120, disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert client.is_model_ready("double", client_timeout=5)
    x = np.arange(5, dtype=np.float32)
    request = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    request.set_data_from_numpy(x)
    result = client.infer("double", [request], client_timeout=30)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x * 2)
    client.close()
    pid = server.pid
    assert pid is not None
    assert len(_group_members(pid)) >= 2, "the Python backend stub runs in the server's process group"
    server.stop(timeout=30)
    assert _group_members(pid) == []


@pytest.mark.triton
def test_model_that_fails_to_load_exits_early_with_log(tmp_path: Path, triton_server_factory) -> None:
    repo = _trivial_repo(tmp_path / "repo")
    (repo / "double" / "1" / "model.py").write_text("raise RuntimeError('model.py is broken on purpose')\n")
    with pytest.raises(TritonStartError) as info:
        triton_server_factory(repo, ready_timeout=120)
    assert "exited with code" in str(info.value)
    assert "double" in str(info.value)


@pytest.mark.triton
def test_port_in_use_is_reported(tmp_path: Path, triton_server_factory) -> None:
    (tmp_path / "repo").mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TritonStartError, match="already in use"):
            triton_server_factory(tmp_path / "repo", grpc_port=port, http_port=free_port(), metrics_port=free_port())


@pytest.mark.triton
def test_launch_stops_server_on_keyboard_interrupt(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    try:
        find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", str(exc)) from exc
    pids: list[int] = []
    with pytest.raises(KeyboardInterrupt), launch(tmp_path / "repo", ready_timeout=60) as server:
        assert server.pid is not None
        pids.append(server.pid)
        raise KeyboardInterrupt
    assert pids and _group_members(pids[0]) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)


def test_log_file_option_keeps_file(tmp_path: Path) -> None:
    fake = tmp_path / "tritonserver"
    fake.write_text(textwrap.dedent("""\
        #!/bin/sh
        echo started
        exec sleep 30
        """))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "repo").mkdir()
    log = tmp_path / "server.log"
    with TritonServer(tritonserver=fake).start(tmp_path / "repo", log_file=log) as server:
        pid = server.pid
        assert pid is not None
        with pytest.raises(GenRepoError, match="not ready within"):
            server.wait_ready(timeout=1.5)
    assert not server.running
    assert _group_members(pid) == []
    assert log.read_text().startswith("started")
