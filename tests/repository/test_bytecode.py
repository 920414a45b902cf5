"""``verify`` and bytecode: a ``__pycache__`` file passes only when it is what the locked source compiles to.

Issue 21: a ``model.cpython-311.pyc`` compiled with ``UNCHECKED_HASH`` from other code passed ``verify`` (local and
``s3://``) and Triton ran it instead of the locked ``model.py``; a ``.pyc`` that was a symlink to ``/etc/passwd``
passed too. The real-server test checks that the bytecode Triton's Python backend writes itself still passes.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import sys
from pathlib import Path

import pytest

from generator.bounded import limit
from generator.repository.bytecode import bytecode_problem, bytecode_source
from generator.repository.lock import build_lock
from generator.repository.staging import RepositoryWriter
from generator.repository.verify import verify_repository
from tests.object_stores import ObjectStore

TAG = sys.implementation.cache_tag
SOURCE = "import os\n\n\ndef answer():\n    return 42\n\n\nclass TritonPythonModel:\n    def execute(self, r):\n" \
         "        return [answer() for _ in r]\n"
EVIL = SOURCE.replace("return 42", "return os.system('id')")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    with RepositoryWriter(dest) as writer:
        (writer.model_dir("m", 1) / "model.py").write_text(SOURCE)
        writer.commit(build_lock(writer.root, {"gen-repo": "test"}, {"m": {"target": "python"}}))
    return dest


def _pyc(repo: Path, name: str = f"model.{TAG}.pyc") -> Path:
    folder = repo / "m" / "1" / "__pycache__"
    folder.mkdir(exist_ok=True)
    return folder / name


def _compile(source_text: str, cfile: Path, mode: py_compile.PycInvalidationMode, dfile: str | None = None,
             optimize: int = -1) -> None:
    """Compile ``source_text`` as importlib would into ``cfile`` (through a scratch source file)."""
    scratch = cfile.parent.parent.parent / "scratch-source.py"
    scratch.write_text(source_text)
    try:
        py_compile.compile(str(scratch), cfile=str(cfile), dfile=dfile, doraise=True, invalidation_mode=mode,
                           optimize=optimize)
    finally:
        scratch.unlink()


def _messages(repo: Path) -> list[str]:
    return [p.message for p in verify_repository(repo)]


@pytest.mark.parametrize("mode", list(py_compile.PycInvalidationMode), ids=lambda m: m.name)
def test_bytecode_of_the_locked_source_passes_wherever_it_was_compiled(repo: Path, mode) -> None:
    source = repo / "m" / "1" / "model.py"
    # Compiled where a container mounts the repository: only the recorded file name differs.
    py_compile.compile(str(source), cfile=str(_pyc(repo)), dfile="/models/m/1/model.py", doraise=True,
                       invalidation_mode=mode)
    py_compile.compile(str(source), cfile=str(_pyc(repo, f"model.{TAG}.opt-2.pyc")), doraise=True,
                       invalidation_mode=mode, optimize=2)
    long_name = "/" + "very-long-mount-point/" * 20 + "m/1/model.py"  # a 4-byte-length string in marshal's format
    py_compile.compile(str(source), cfile=str(_pyc(repo, f"model.{TAG}.opt-1.pyc")), dfile=long_name,
                       doraise=True, invalidation_mode=mode, optimize=1)
    assert verify_repository(repo) == []


def test_planted_unchecked_hash_bytecode_is_refused(repo: Path) -> None:
    """The issue's attack: other code, compiled so that Python never compares it with model.py."""
    _compile(EVIL, _pyc(repo), py_compile.PycInvalidationMode.UNCHECKED_HASH)
    (message,) = _messages(repo)
    assert message.startswith("refused: its header's source hash does not match the locked source"), message
    # Even with the header forged to the locked source's hash, the code itself gives it away.
    forged = bytearray(_pyc(repo).read_bytes())
    _compile(SOURCE, _pyc(repo), py_compile.PycInvalidationMode.UNCHECKED_HASH)
    expected = bytearray(_pyc(repo).read_bytes())
    _pyc(repo).write_bytes(bytes(expected[:16] + forged[16:]))
    (message,) = _messages(repo)
    assert message == ("refused: its code is not what the locked source compiles to (planted or altered bytecode) "
                       "(source 'm/1/model.py')")


def test_planted_timestamp_bytecode_with_the_sources_mtime_and_size_is_refused(repo: Path) -> None:
    evil = SOURCE.replace("return 42", "return 43")  # same size as the locked source
    _compile(evil, _pyc(repo), py_compile.PycInvalidationMode.TIMESTAMP)
    data = bytearray(_pyc(repo).read_bytes())
    source = repo / "m" / "1" / "model.py"
    data[8:16] = int(os.stat(source).st_mtime).to_bytes(4, "little") + len(SOURCE).to_bytes(4, "little")
    _pyc(repo).write_bytes(bytes(data))
    assert _messages(repo) == ["refused: its code is not what the locked source compiles to (planted or altered "
                               "bytecode) (source 'm/1/model.py')"]


def test_stale_bytecode_another_python_and_strays_are_refused(repo: Path) -> None:
    source = repo / "m" / "1" / "model.py"
    py_compile.compile(str(source), cfile=str(_pyc(repo)), doraise=True)
    os.utime(source, (1, 1))  # the source is the locked one, but the bytecode says it was compiled from another
    assert _messages(repo) == ["refused: its header's modification time and size do not match the locked source "
                               "(stale or planted bytecode) (source 'm/1/model.py')"]
    _pyc(repo).unlink()
    shutil.copyfile(repo / "m" / "1" / "model.py", _pyc(repo, "model.cpython-312.pyc"))
    (message,) = _messages(repo)
    assert message.startswith(f"refused: bytecode for cpython-312, which this Python ({TAG}) cannot reproduce")
    _pyc(repo, "model.cpython-312.pyc").unlink()
    _compile(SOURCE, _pyc(repo, f"other.{TAG}.pyc"), py_compile.PycInvalidationMode.CHECKED_HASH)
    assert _messages(repo) == ["unexpected: bytecode whose source 'm/1/other.py' is not listed in the lock file"]


def test_huge_bytecode_is_refused_unread(repo: Path) -> None:
    MAX_BYTECODE_BYTES = limit("bytecode_bytes")  # noqa: N806 - the limit's value for this run
    with open(_pyc(repo), "wb") as stream:
        stream.truncate(MAX_BYTECODE_BYTES + 1)  # sparse: no disk, and verify must not read it into memory
    (message,) = _messages(repo)
    assert message.startswith(f"refused: bytecode of {MAX_BYTECODE_BYTES + 1} bytes"), message


def test_bytecode_of_a_modified_source_is_refused(repo: Path) -> None:
    source = repo / "m" / "1" / "model.py"
    source.write_text(EVIL)
    py_compile.compile(str(source), cfile=str(_pyc(repo)), doraise=True)
    assert sorted(_messages(repo)) == sorted([
        f"modified: {len(EVIL)} bytes, the lock file says {len(SOURCE)}",
        "unexpected: bytecode of 'm/1/model.py', which does not match the lock file",
    ])


def test_symlinks_and_special_files_anywhere_are_refused(repo: Path) -> None:
    """A ``.pyc`` symlink to /etc/passwd passed verify before; so did a symlinked folder or a FIFO elsewhere."""
    _pyc(repo).symlink_to("/etc/passwd")
    (repo / "m" / "linked").symlink_to(repo / "m" / "1")
    os.mkfifo(repo / "m" / "1" / "pipe")
    (repo / ".gen-repo-output").unlink()
    (repo / ".gen-repo-output").symlink_to("/etc/hostname")
    problems = {Path(p.file).name: p.message for p in verify_repository(repo)}
    assert problems == {
        f"model.{TAG}.pyc": "refused: a symlink; a repository holds regular files only",
        "linked": "refused: a symlink; a repository holds regular files only",
        "pipe": "refused: a special file (FIFO, device or socket); a repository holds regular files only",
        ".gen-repo-output": "refused: a symlink; a repository holds regular files only",
    }


def test_a_symlinked_lock_file_is_refused(repo: Path, tmp_path: Path) -> None:
    lock = repo / "gen-repo.lock.json"
    shutil.move(lock, tmp_path / "elsewhere.json")
    lock.symlink_to(tmp_path / "elsewhere.json")
    assert _messages(repo) == ["refused: the lock file is a symlink (a repository holds regular files only)"]


def test_bytecode_source_names() -> None:
    assert bytecode_source(f"m/1/__pycache__/model.{TAG}.pyc") == "m/1/model.py"
    assert bytecode_source(f"m/1/__pycache__/model.{TAG}.opt-1.pyc") == "m/1/model.py"
    assert bytecode_source(f"__pycache__/x.{TAG}.pyc") == "x.py"
    for rel in (f"m/1/model.{TAG}.pyc", f"m/1/__pycache__/model.{TAG}.pyc.bak", "m/1/__pycache__/model.pyc",
                f"m/1/__pycache__/a.b.{TAG}.pyc", f"m/1/__pycache__/model.{TAG}.opt-3.pyc",
                f"m/1/__pycache__/model.{TAG}.pyc\n"):
        assert bytecode_source(rel) is None, rel
    assert bytecode_problem("x/model.pyc", b"", b"", 0.0) is not None


# ---- the bytecode Triton's Python backend writes itself --------------------------------------------------------
CONSTANT_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
"""
CONSTANT_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = pb_utils.Tensor("OUTPUT0", np.array([{value}], dtype=np.float32))
        return [pb_utils.InferenceResponse(output_tensors=[out]) for _ in requests]
"""


def answer(server, model: str) -> float:
    """OUTPUT0 of one inference of ``model`` on ``server`` (a real tritonclient call)."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    request = grpcclient.InferInput("INPUT0", [1], "FP32")
    request.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    return float(client.infer(model, [request]).as_numpy("OUTPUT0")[0])


@pytest.mark.triton
def test_the_bytecode_triton_writes_passes_and_a_planted_one_is_refused(tmp_path: Path, triton_server_factory) -> None:
    dest = tmp_path / "repo"
    with RepositoryWriter(dest) as writer:
        folder = writer.model_dir("constant", 1)
        (folder / "model.py").write_text(CONSTANT_MODEL.format(value=7.0))
        (folder.parent / "config.pbtxt").write_text(CONSTANT_CONFIG.format(name="constant"))
        writer.commit(build_lock(writer.root, {"gen-repo": "test"}, {"constant": {"target": "python"}}))
    server = triton_server_factory(dest)
    assert answer(server, "constant") == 7.0
    server.stop()
    written = dest / "constant" / "1" / "__pycache__" / f"model.{TAG}.pyc"
    assert written.is_file(), sorted(p.name for p in (dest / "constant" / "1").iterdir())
    assert verify_repository(dest) == []  # what the backend wrote is what the locked model.py compiles to

    # The attack: other code, compiled so that Python never checks it against model.py. Triton runs it...
    scratch = tmp_path / "planted.py"
    scratch.write_text(CONSTANT_MODEL.format(value=666.0))
    py_compile.compile(str(scratch), cfile=str(written), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert answer(triton_server_factory(dest), "constant") == 666.0
    # ... and verify refuses it.
    assert [p.message for p in verify_repository(dest)] == [
        "refused: its header's source hash does not match the locked source (stale or planted bytecode) "
        "(source 'constant/1/model.py')"]


# ---- a published repository: verify s3:// downloads it and runs the same checks -----------------------------------
@pytest.mark.slow
def test_planted_bytecode_in_a_bucket_is_refused(repo: Path, store: ObjectStore) -> None:
    from click.testing import CliRunner

    from generator.cli import main
    from generator.repository.verify import verify_location

    fs = store.fs()
    url = store.url("planted")
    py_compile.compile(str(repo / "m" / "1" / "model.py"), cfile=str(_pyc(repo)), dfile="/models/m/1/model.py",
                       doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    fs.put(str(repo), store.key("planted"), recursive=True)
    assert verify_location(url).problems == []  # bytecode of the locked source passes, as it does locally
    _compile(EVIL, _pyc(repo), py_compile.PycInvalidationMode.UNCHECKED_HASH)
    fs.put_file(str(_pyc(repo)), store.key("planted", f"m/1/__pycache__/{_pyc(repo).name}"))
    (problem,) = verify_location(url).problems
    assert problem.file == f"{url}/m/1/__pycache__/model.{TAG}.pyc"
    assert problem.message.startswith("refused: its header's source hash does not match the locked source")
    result = CliRunner().invoke(main, ["verify", url])
    assert result.exit_code == 1 and "refused: its header's source hash" in result.output, result.output
